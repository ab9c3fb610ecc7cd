#!/usr/bin/env bash
# Runs tjit's Triton-sensitive tests against one Triton release, using the build that
# `./run.sh test` left in ./build (nothing is rebuilt) and leaving the Python environment as it is:
#
#   tests/compat/triton_compat.sh 3.4.0
#
# The release is installed once into build/compat/triton-VERSION (pip --target, no dependencies)
# and put first on PYTHONPATH, which the embedded interpreter of the C++ tests inherits too. Then:
#   1. the Triton that Python imports, and the one a pure C++ process compiles with, must be the
#      requested release (otherwise the PYTHONPATH trick failed and the rest would prove nothing);
#   2. ctest: the compile-to-cubin tests (Compile.*), the comparison with Triton's own
#      specialisation (SpecializationTest.*), tensor descriptors (TensorDescriptorTest.*: their
#      launch layout differs between releases; Devices/DescriptorLaunchTest.* through the
#      interpreter) and @triton.autotune / @triton.heuristics through run() on CPU
#      (Devices/Autotune.*, which read the decorators' attributes);
#   3. pytest: every operator test function that runs on CPU, through Triton's interpreter, with
#      about one in TJIT_COMPAT_SAMPLE (default 2) of its parametrized cases (--tjit-sample,
#      tests/python/conftest.py; 1 runs every case).
# Prints one summary line last; exits non-zero on any failure. Logs: build/compat/logs-VERSION/.
# PYTHON selects the interpreter (default python3), as for run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=${1:-}
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*$ ]]; then
  echo "usage: $0 TRITON_VERSION (e.g. 3.4.0)" >&2
  exit 2
fi
PY=${PYTHON:-python3}
root=$PWD/build/compat
triton_dir=$root/triton-$version
logs=$root/logs-$version
start=$SECONDS

log() { printf '[triton_compat %s] %s\n' "$version" "$*" >&2; }
# shellcheck source=tests/pytest_workers.sh
source tests/pytest_workers.sh
fail() {
  log "$*"
  echo "triton_compat $version: FAILED ($*)"
  exit 1
}

[[ -f build/CTestTestfile.cmake && -x build/bin/tjit_store_probe ]] ||
  fail "no tjit build with tests in ./build: run ./run.sh test first"

if [[ ! -f $triton_dir/triton/__init__.py ]]; then
  log "installing triton==$version into ${triton_dir#"$PWD"/}"
  # Into a scratch folder first, so an interrupted install is never mistaken for a complete one.
  rm -rf "$triton_dir.partial"
  "$PY" -m pip install --quiet --no-deps --target "$triton_dir.partial" "triton==$version" ||
    fail "pip could not install triton==$version"
  mv "$triton_dir.partial" "$triton_dir"
fi

export PYTHONPATH=$triton_dir${PYTHONPATH:+:$PYTHONPATH}
# The Triton version tjit's kernel store checks its entries against (import tjit would find the same
# through PYTHONPATH; a pure C++ process would otherwise use the Triton it was built with).
export TJIT_TRITON_DIR=$triton_dir/triton
# A kernel store and a Triton cache of this pass's own, empty, so every kernel is compiled by this
# release and nothing is written to the user's or the main test run's stores. (ctest's tests pin
# their own TJIT_CACHE_DIR, and the pytest session makes its own: see steps 2 and 3.)
export TJIT_CACHE_DIR=$root/store-$version
export TRITON_CACHE_DIR=$root/triton-cache-$version
rm -rf "$TJIT_CACHE_DIR" "$TRITON_CACHE_DIR" "$logs"
mkdir -p "$TJIT_CACHE_DIR" "$TRITON_CACHE_DIR" "$logs"

# 1. Which Triton is used: Python's import, and a pure C++ process's embedded interpreter (the
#    store entry it writes records the version its compile imported).
imported=$("$PY" -c 'import os, triton; print(triton.__version__, os.path.dirname(triton.__file__))') ||
  fail "python cannot import triton"
read -r imported_version imported_dir <<<"$imported"
[[ $imported_version == "$version" && $(realpath "$imported_dir") == $(realpath "$triton_dir/triton") ]] ||
  fail "python imports triton $imported_version from $imported_dir, not $version from $triton_dir"
TJIT_LOG_COMPILES=0 build/bin/tjit_store_probe "$PWD/tests/cpp/kernels/runtime_test_kernels.py" scale_kernel \
  cuda:90 64 >"$logs/store_probe.log" 2>&1 || fail "tjit_store_probe failed: $(tail -n 5 "$logs/store_probe.log")"
cpp_version=$("$PY" -c 'import sys, tjit.kernel_store as s; print(*sorted({e.triton for e in s.read(sys.argv[1])}))' \
  "$TJIT_CACHE_DIR") || fail "cannot read the probe's kernel store"
[[ $cpp_version == "$version" ]] || fail "a C++ process compiled with triton '$cpp_version', not $version"
log "python and C++ both use triton $imported_version from ${imported_dir#"$PWD"/}"

status=0
# 2. C++. Their CMake test properties pin TJIT_CACHE_DIR to the main build's test store, where a
#    warm entry would skip the compile under test: the store is off for them instead.
log "C++ tests (ctest -R Compile/SpecializationTest/TensorDescriptorTest/Devices/Autotune/Devices/DescriptorLaunchTest)"
TJIT_CACHE=0 ctest --test-dir build -R '^(Compile|SpecializationTest|TensorDescriptorTest|Devices/Autotune|Devices/DescriptorLaunchTest)\.' \
  --output-on-failure \
  --output-junit "$logs/ctest.xml" 2>&1 | tee "$logs/ctest.log" | grep -vE '^\s+Start ' || status=1

# 3. Python: each operator's tests (tests/python/operators/test_<op>.py for every operator folder
#    of ops/csrc/ops) take a `device` fixture (tests/python/conftest.py), so `-k cpu` keeps exactly
#    their CPU cases (the Meta-only tests need no Triton).
operator_tests=()
for folder in ops/csrc/ops/*/; do
  test_file=tests/python/operators/test_$(basename "$folder").py
  [[ -f $test_file ]] && operator_tests+=("$test_file")
done
workers=$(pytest_workers "$PY")
log "operator tests on CPU (pytest -k cpu${workers:+ $workers}: ${operator_tests[*]})"
# shellcheck disable=SC2086  # $workers is pytest's options, as words
"$PY" -m pytest "${operator_tests[@]}" -k cpu -q -p no:cacheprovider --tjit-sample "${TJIT_COMPAT_SAMPLE:-2}" \
  $workers --junitxml="$logs/pytest.xml" 2>&1 |
  tee "$logs/pytest.log" || status=1

{ read -r cpp_passed cpp_failed cpp_skipped; read -r py_passed py_failed py_skipped; } \
  < <("$PY" tests/junit_counts.py "$logs/ctest.xml" "$logs/pytest.xml")
failed=$((cpp_failed + py_failed))
counts="$((cpp_passed + py_passed)) passed, $failed failed, $((cpp_skipped + py_skipped)) skipped \
(C++ $cpp_passed/$((cpp_passed + cpp_failed + cpp_skipped)), Python CPU $py_passed/$((py_passed + py_failed + py_skipped)))"
# A filter that matches nothing must not pass for a green run. (Skips are counted, not failed: one
# CPU case skips by design, operators/test_layer_norm.py's CUDA-sized backward plan.)
if ((cpp_passed == 0 || py_passed == 0 || failed > 0)); then
  status=1
fi
elapsed=$((SECONDS - start))
if ((status == 0)); then
  echo "triton_compat $version: $counts; imported triton $imported_version from ${imported_dir#"$PWD"/}; ${elapsed} s"
else
  echo "triton_compat $version: FAILED: $counts; imported triton $imported_version; ${elapsed} s (logs: ${logs#"$PWD"/})"
fi
exit $status
