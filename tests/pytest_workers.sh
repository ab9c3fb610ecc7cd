# Sourced by run.sh, tests/packaging.sh and tests/compat/triton_compat.sh: how many processes
# pytest spreads the tests over.
#
# pytest_workers PY: prints pytest-xdist's options for PY's pytest: `-n N`, N = TJIT_TEST_WORKERS,
# else the cores up to 6 (a GPU machine's tests share one GPU's memory); nothing where PY has no
# pytest-xdist or N is 1, and pytest runs in one process. Every test makes its own tensors and the
# session its own kernel store, so they run in any order, in any process; the ones that must have
# the GPU to themselves (SOLO_TESTS) run after the others, in one process.
SOLO_TESTS=(tests/python/test_shared_gpu.py)

pytest_workers() {
  local py=$1 workers=${TJIT_TEST_WORKERS:-}
  if [[ -z $workers ]]; then
    workers=$(nproc)
    ((workers <= 6)) || workers=6
  fi
  if ((workers > 1)) && "$py" -c "import xdist" 2>/dev/null; then
    echo "-n $workers"
  fi
}
