#!/usr/bin/env bash
# Installs and uses tjit the ways its users do, from the build that `./run.sh test` left in ./build:
#   1. wheel:        `pip wheel --no-build-isolation` installed into a fresh virtual environment,
#                    and the pytest suite run against it from outside the checkout (but for the
#                    tests of the checkout's benchmarks and kernel sources: CHECKOUT_ONLY_TESTS),
#                    every test function with about one in TJIT_PACKAGING_SAMPLE (default 3) of its
#                    parametrized cases (tests/python/conftest.py: --tjit-sample): `./run.sh test`
#                    ran them all against the same code, this run checks what the wheel installs;
#   2. consumers:    tests/consumer (a program with its own kernel plus tjit's operators) built
#                    with find_package(tjit) from an installed prefix, with find_package(tjit)
#                    from the wheel's tjit.cmake_prefix_path, and with FetchContent; each is run;
#   3. the template operator library (examples/operator_library) built, installed and tested
#                    (C++ program, pytest) the same three ways (tests/operator_library.sh).
# CI runs it after `./run.sh test`. FetchContent fetches the committed HEAD of this checkout.
#
# Environment: PYTHON (default python3: the Python of the build); TJIT_PACKAGING_DIR (default
# build/packaging); TJIT_PACKAGING_VENV_FLAGS (e.g. --system-site-packages where no package index
# is reachable: the venv then takes torch and triton from PYTHON's environment).
set -euo pipefail
SCRIPT=$(realpath "$0")
cd "$(dirname "$SCRIPT")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
WORK=${TJIT_PACKAGING_DIR:-$ROOT/build/packaging}
VENV=$WORK/venv
FAILED=()
RESULTS=()

log() { printf '[packaging] %s\n' "$*" >&2; }
# shellcheck source=tests/pytest_workers.sh
source "$ROOT/tests/pytest_workers.sh"

# step NAME LOG FUNCTION: runs FUNCTION in a fresh shell (this script with --run), output in
# $WORK/LOG, and records the result and its time. A fresh shell, because bash ignores `set -e` in a
# function called where its status is tested: a failing command inside would not fail the step.
step() {
  local name=$1 logfile=$WORK/$2 start=$SECONDS
  log "$name"
  if "$SCRIPT" --run "$3" >"$logfile" 2>&1; then
    RESULTS+=("$name: ok ($((SECONDS - start)) s)")
    return 0
  fi
  tail -n 40 "$logfile" >&2
  log "$name FAILED (log: $logfile)"
  RESULTS+=("$name: FAILED")
  FAILED+=("$name")
  return 1
}


build_wheel() {
  "$PY" -m pip wheel --no-build-isolation --no-deps -w "$WORK/dist" .
}

make_venv() {
  # The same torch and triton as the build's (the wheel's libraries are built for that torch).
  local torch_version triton_version
  torch_version=$("$PY" -c "import re, torch; print(re.match(r'[0-9]+(\.[0-9]+)*', torch.__version__).group(0))")
  triton_version=$("$PY" -c "import triton; print(triton.__version__)")
  # shellcheck disable=SC2086  # flags are words
  "$PY" -m venv ${TJIT_PACKAGING_VENV_FLAGS:-} "$VENV"
  "$VENV/bin/python" -m pip install --quiet "torch==$torch_version" "triton==$triton_version" numpy pytest expecttest
  "$VENV/bin/python" -m pip install --quiet "pytest-xdist==3.8.0" ||
    echo "pytest-xdist could not be installed: the wheel's pytest runs in one process"
  "$VENV/bin/python" -m pip install --quiet "$WORK"/dist/tjit-*.whl
  # The package must come from the wheel, not from this checkout.
  (cd "$WORK" && "$VENV/bin/python" -c "
import sys, tjit
assert tjit.__file__.startswith(sys.prefix), f'tjit imported from {tjit.__file__}, not the venv {sys.prefix}'
print('tjit from', tjit.__file__)")
}

# Tests of the checkout rather than of the package are left to `./run.sh test`: the kernel sources
# run alone under the interpreter (no tjit library loaded), a large part of pytest's time on 2 cores.
CHECKOUT_ONLY_TESTS=(test_row_sharing_interpreter.py)

pytest_against_wheel() {
  local workers ignore=() solo=()
  workers=$(pytest_workers "$VENV/bin/python")
  ignore=("${CHECKOUT_ONLY_TESTS[@]/#/--ignore=$ROOT/tests/python/}")
  [[ -z $workers ]] || solo=("${SOLO_TESTS[@]/#/$ROOT/}")
  # shellcheck disable=SC2086  # $workers is pytest's options, as words
  (cd "$WORK" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/python" "${ignore[@]}" \
    "${solo[@]/#/--ignore=}" --tjit-sample "${TJIT_PACKAGING_SAMPLE:-3}" $workers)
  if ((${#solo[@]})); then
    (cd "$WORK" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${solo[@]}")
  fi
}

# run_consumer BUILD_DIR PYTHON CMAKE_ARGS...: configures, builds and runs tests/consumer.
run_consumer() {
  local dir=$1 python=$2
  shift 2
  cmake -S tests/consumer -B "$dir" -G Ninja -DPython3_EXECUTABLE="$python" "$@"
  cmake --build "$dir"
  # A store of its own, so the run compiles and shows which Python it started for that.
  TJIT_CACHE_DIR=$dir/kernel-store "$dir/tjit_consumer" 2>"$dir/stderr.log"
  cat "$dir/stderr.log"
}

consumer_installed_prefix() {
  cmake --install build --prefix "$WORK/prefix"
  run_consumer "$WORK/consumer-prefix" "$PY" -DCMAKE_PREFIX_PATH="$WORK/prefix"
}

consumer_wheel_prefix() {
  local prefix
  prefix=$(cd "$WORK" && "$VENV/bin/python" -c "import tjit; print(tjit.cmake_prefix_path)")
  run_consumer "$WORK/consumer-wheel" "$VENV/bin/python" -DCMAKE_PREFIX_PATH="$prefix"
  # A C++ program using the wheel compiles with the Python of the environment the wheel is in.
  grep -F "starting Python $VENV/bin/" "$WORK/consumer-wheel/stderr.log"
}

# FetchContent clones the committed HEAD of this checkout, as a project would clone tjit's
# repository; with uncommitted changes (or no git), FETCHCONTENT_SOURCE_DIR_TJIT points it at the
# working tree instead, CMake's own way of overriding a declared content's source. Sets FETCH_SOURCE.
fetch_source() {
  FETCH_SOURCE=(-DTJIT_GIT_REPOSITORY="$ROOT" -DTJIT_GIT_TAG=none)
  if git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null &&
      [[ -z $(git -C "$ROOT" status --porcelain --untracked-files=no) ]]; then
    FETCH_SOURCE=(-DTJIT_GIT_REPOSITORY="$ROOT" -DTJIT_GIT_TAG="$(git -C "$ROOT" rev-parse HEAD)")
    echo "FetchContent: git clone of $ROOT at $(git -C "$ROOT" rev-parse --short HEAD)"
  else
    FETCH_SOURCE+=(-DFETCHCONTENT_SOURCE_DIR_TJIT="$ROOT")
    echo "FetchContent: the working tree $ROOT (uncommitted changes)"
  fi
}

consumer_fetch_content() {
  fetch_source
  run_consumer "$WORK/consumer-fetch" "$PY" -DTJIT_CONSUMER_FETCH=ON "${FETCH_SOURCE[@]}"
}

# The template operator library (examples/operator_library, tests/operator_library.sh) the same
# three ways; the installed prefix's also embeds the manifest its test run recorded.
template_installed_prefix() {
  [[ -d $WORK/prefix ]] || cmake --install build --prefix "$WORK/prefix"
  tests/operator_library.sh "$WORK/template-prefix" "$PY" --bundle -DCMAKE_PREFIX_PATH="$WORK/prefix"
}

template_wheel_prefix() {
  local prefix
  prefix=$(cd "$WORK" && "$VENV/bin/python" -c "import tjit; print(tjit.cmake_prefix_path)")
  tests/operator_library.sh "$WORK/template-wheel" "$VENV/bin/python" -DCMAKE_PREFIX_PATH="$prefix"
}

template_fetch_content() {
  fetch_source
  tests/operator_library.sh "$WORK/template-fetch" "$PY" -DMYOPS_FETCH_TJIT=ON "${FETCH_SOURCE[@]}"
}

if [[ ${1:-} == --run ]]; then
  "$2"
  exit
fi

[[ -f build/CMakeCache.txt ]] || { log "no ./build: run ./run.sh test first"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK"

step "wheel build" wheel.log build_wheel &&
  step "wheel in a fresh venv" venv.log make_venv &&
  { step "pytest against the wheel" pytest.log pytest_against_wheel || true
    step "consumer: wheel's CMake prefix" consumer-wheel.log consumer_wheel_prefix || true
    step "operator library: wheel's CMake prefix" template-wheel.log template_wheel_prefix || true; }
step "consumer: installed prefix" consumer-prefix.log consumer_installed_prefix || true
step "operator library: installed prefix" template-prefix.log template_installed_prefix || true
step "consumer: FetchContent" consumer-fetch.log consumer_fetch_content || true
step "operator library: FetchContent" template-fetch.log template_fetch_content || true

# pytest's closing lines (one a run: the tests spread over the cores, then SOLO_TESTS alone).
summary=$(grep -E '[0-9]+ (passed|failed|skipped).* in [0-9.]+s' "$WORK/pytest.log" 2>/dev/null | paste -sd ';' || true)
printf '%s\n' "${RESULTS[@]}"
[[ -n $summary ]] && echo "pytest against the wheel: $summary"
if ((${#FAILED[@]})); then
  echo "packaging: ${#FAILED[@]} failed: ${FAILED[*]}"
  exit 1
fi
echo "packaging: all passed"
