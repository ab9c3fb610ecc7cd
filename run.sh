#!/usr/bin/env bash
# tjit's one entry point for people and CI.
#
#   ./run.sh demo                 build (if needed), then run the demo (tjit/demo.py): every operator
#                                 against aten, host time per call from Python and C++, bandwidth on
#                                 a GPU, a fresh process's first call with an empty and a warm kernel
#                                 store (CPU interpreter at small sizes when there is no GPU)
#   ./run.sh test [--log-dir D]   build, then run every test: GoogleTest through ctest, and pytest
#                                 over the cores (pytest-xdist; tests/pytest_workers.sh says how);
#                                 prints a one-line summary last; full logs and JUnit files in D
#       [--part P]                only one part, for a GPU machine whose calls are too short for the
#                                 whole suite: ctest, pytest-ops (the operator tests), pytest-rest
#
# On a fresh machine it installs what is missing first: Python packages with pip (torch pinned to
# the CPU build 2.13.0, triton to 3.6.0; nothing is installed where a package is already present,
# so a CUDA torch is never replaced; pytest-xdist optional), and GoogleTest/ninja with apt-get when
# run as root.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
LOG_DIR=""
PART=all
# The operator tests (one file per operator, and those running every operator): about half of
# pytest's time on a GPU (the --part split).
OPERATOR_TESTS=tests/python/operators

log() { printf '[run.sh] %s\n' "$*" >&2; }
# shellcheck source=tests/pytest_workers.sh
source tests/pytest_workers.sh

ensure_python_packages() {
  local missing=()
  "$PY" -c "import torch" 2>/dev/null || missing+=("torch==2.13.0")
  "$PY" -c "import triton" 2>/dev/null || missing+=("triton==3.6.0")
  "$PY" -c "import pytest" 2>/dev/null || missing+=("pytest")
  "$PY" -c "import expecttest" 2>/dev/null || missing+=("expecttest")  # torch.library.opcheck needs it
  "$PY" -c "import numpy" 2>/dev/null || missing+=("numpy")          # Triton's interpreter needs it
  # nlohmann/json (the kernel store's metadata): a system package, else the PyPI one.
  [[ -e /usr/include/nlohmann/json.hpp ]] ||
    "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('nlohmann_json') is None)" ||
    missing+=("nlohmann-json==3.12.0")
  command -v cmake >/dev/null || missing+=("cmake")
  command -v ninja >/dev/null || missing+=("ninja")
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    "$PY" -m pip install --quiet "${missing[@]}"
  fi
  # pytest-xdist spreads pytest over the cores; without it (no package index) pytest runs in one process.
  "$PY" -c "import xdist" 2>/dev/null || "$PY" -m pip install --quiet "pytest-xdist==3.8.0" ||
    log "pytest-xdist could not be installed: pytest runs in one process"
}

ensure_googletest() {
  if [[ -e /usr/src/googletest/CMakeLists.txt || -e /usr/include/gtest/gtest.h ]]; then
    return
  fi
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing GoogleTest (libgtest-dev)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev ccache >/dev/null
  else
    log "GoogleTest is missing: install libgtest-dev (or GTest for CMake) to build tests/cpp"
    exit 1
  fi
}

build() {
  ensure_python_packages
  ensure_googletest
  local dir=${LOG_DIR:-build/test-logs}
  mkdir -p "$dir"
  local installed
  installed=$("$PY" -c 'import importlib.util as u; s = u.find_spec("tjit"); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else "")' 2>/dev/null || true)
  if [[ -n $installed && $(realpath "$installed") != $(realpath ops) ]]; then
    log "note: $PY has tjit from $installed; this build replaces it with this checkout (editable; set PYTHON= to use another Python)"
  fi
  log "building (CMake via setup.py, into ./build, for $("$PY" -c 'import sys; print(sys.executable)'); log: $dir/build.log)"
  # Editable install: `import tjit` uses ops/ in this checkout, with the libraries built here.
  # setuptools silences a failing build in editable mode: check that this build wrote the library.
  local stamp
  stamp=$(mktemp)
  if ! CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
      "$PY" -m pip install -v --no-build-isolation --no-deps -e . >"$dir/build.log" 2>&1 ||
      [[ ! ops/lib/liboperators.so -nt $stamp ]]; then
    rm -f "$stamp"
    # The first errors say why (CMake's and the compiler's); the log's end is pip's boilerplate.
    if grep -qE 'CMake Error|error:|Error:|FAILED:' "$dir/build.log"; then
      grep -nE -m 20 -A 6 'CMake Error|error:|Error:|FAILED:' "$dir/build.log" >&2
    else
      tail -n 60 "$dir/build.log" >&2
    fi
    log "build failed (full log: $dir/build.log)"
    exit 1
  fi
  rm -f "$stamp"
}

run_tests() {
  local dir=${LOG_DIR:-build/test-logs}
  mkdir -p "$dir"
  local status=0
  local reports=()
  local label=""
  [[ $PART == all ]] || label=" ($PART)"
  rm -f "$dir/ctest.xml" "$dir/pytest.xml" "$dir/pytest-solo.xml"
  if [[ $PART == all || $PART == ctest ]]; then
    log "C++ tests (ctest)"
    ctest --test-dir build -j "$(nproc)" --output-on-failure --output-junit "$(realpath "$dir")/ctest.xml" 2>&1 |
      tee "$dir/ctest.log" | grep -vE '^\s+Start ' || status=1
    reports+=("$dir/ctest.xml")
  fi
  local selection=()
  case $PART in
    all) selection=(tests/python) ;;
    pytest-ops) selection=("$OPERATOR_TESTS") ;;
    pytest-rest) selection=(tests/python "--ignore=$OPERATOR_TESTS") ;;
  esac
  if ((${#selection[@]})); then
    local workers solo=()
    workers=$(pytest_workers "$PY")
    [[ -z $workers || $PART == pytest-ops ]] || solo=("${SOLO_TESTS[@]}")
    log "Python tests (pytest${label}${workers:+, ${workers#-n } processes})"
    # shellcheck disable=SC2086  # $workers is pytest's options, as words
    "$PY" -m pytest "${selection[@]}" "${solo[@]/#/--ignore=}" $workers -ra -q --junitxml="$dir/pytest.xml" 2>&1 |
      tee "$dir/pytest.log" || status=1
    reports+=("$dir/pytest.xml")
    if ((${#solo[@]})); then
      log "Python tests that need the GPU to themselves (pytest, one process)"
      "$PY" -m pytest "${solo[@]}" -ra -q --junitxml="$dir/pytest-solo.xml" 2>&1 | tee -a "$dir/pytest.log" || status=1
      reports+=("$dir/pytest-solo.xml")
    fi
  fi
  local passed=0 failed=0 skipped=0 p f s
  while read -r p f s; do
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  done < <("$PY" tests/junit_counts.py "${reports[@]}")
  echo "tests${label}: $passed passed, $failed failed, $skipped skipped"
  return $status
}

cmd=${1:-}
shift || true
while (($#)); do
  case $1 in
    --log-dir) LOG_DIR=$2; shift 2 ;;
    --part)
      PART=$2
      [[ $PART =~ ^(all|ctest|pytest-ops|pytest-rest)$ ]] || { log "--part takes ctest, pytest-ops or pytest-rest"; exit 2; }
      shift 2 ;;
    *) log "unknown option $1"; exit 2 ;;
  esac
done
case $cmd in
  demo) build; "$PY" -m tjit.demo ;;
  test) build; run_tests ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
