#!/usr/bin/env bash
# Builds and tests the template operator library (examples/operator_library) as a user would:
#   tests/operator_library.sh WORK PYTHON [--bundle] CMAKE_ARGS...
# CMAKE_ARGS say where tjit comes from (-DCMAKE_PREFIX_PATH=<prefix or wheel>, or
# -DMYOPS_FETCH_TJIT=ON ...). Then:
#   1. configure, build; run the C++ program (myops_main) from the build folder;
#   2. install into WORK/install; check the library's run path and its kernel files beside it;
#   3. pytest (opcheck, gradcheck, ...) against the installed library, in a process that never
#      imports tjit, recording the manifest of the run (TJIT_RECORD): it must name the installed
#      kernel file;
#   4. with --bundle: that manifest embedded into the library for cuda:90 (BUNDLE), and the program
#      checks the bundle is there; on a GPU it runs with TJIT_JIT=0 and no kernel store, so every
#      launch comes from the bundle.
# Used by tests/packaging.sh (CPU); on a GPU the same runs every kernel on CUDA.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
ROOT=$PWD
WORK=$1
PY=$2
shift 2
BUNDLE=0
if [[ ${1:-} == --bundle ]]; then
  BUNDLE=1
  shift
fi
TEMPLATE=$ROOT/examples/operator_library
log() { printf '[operator-library] %s\n' "$*" >&2; }
rm -rf "$WORK"
mkdir -p "$WORK"

GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)

log "1. build (${*})"
cmake -S "$TEMPLATE" -B "$WORK/build" "${GENERATOR[@]}" -DPython3_EXECUTABLE="$PY" "$@"
cmake --build "$WORK/build"
TJIT_CACHE_DIR="$WORK/kernel-store" "$WORK/build/myops_main" | tee "$WORK/main.log"
grep -q "^main passed" "$WORK/main.log"

log "2. install"
cmake --install "$WORK/build" --prefix "$WORK/install"
LIB=$(find "$WORK/install" -name libmyops.so | head -n 1)
[[ -f $(dirname "$LIB")/myops_kernels/scaled_silu.py ]] || { log "no kernels beside $LIB"; exit 1; }
runpath=$(readelf -d "$LIB" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
log "   $LIB RUNPATH: $runpath"
[[ $runpath == *'$ORIGIN'* ]] || { log "the installed library has no \$ORIGIN run path"; exit 1; }
# A libstdc++ linked in statically (some toolchains' default) stays private to the library.
if nm -D --defined-only "$LIB" | grep -q -w -E "__cxa_throw|__gxx_personality_v0"; then
  log "$LIB exports the C++ runtime (__cxa_throw): torch's calls into libstdc++ would bind to its copy"; exit 1
fi

log "3. pytest against the installed library (recording its launches)"
(cd "$WORK" && TJIT_RECORD="$WORK/myops.manifest.json" TJIT_CACHE_DIR="$WORK/kernel-store" MYOPS_LIBRARY="$LIB" \
  "$PY" -m pytest -q -p no:cacheprovider "$TEMPLATE/tests")
"$PY" - "$WORK/myops.manifest.json" "$(dirname "$(realpath "$LIB")")/myops_kernels/scaled_silu.py" <<'PY'
import json, os, sys
folder = os.path.dirname(sys.argv[1])  # files inside the manifest's folder are written relative to it
files = {os.path.normpath(os.path.join(folder, e["file"])) for e in json.load(open(sys.argv[1]))["entries"]}
assert files == {sys.argv[2]}, f"the manifest names {files}, not the installed kernel {sys.argv[2]}"
print(f"[operator-library]    manifest: {len(json.load(open(sys.argv[1]))['entries'])} entries of {sys.argv[2]}",
      file=sys.stderr)
PY

if ((BUNDLE)); then
  log "4. the recorded manifest embedded (cuda:90)"
  cmake -S "$TEMPLATE" -B "$WORK/build" -DMYOPS_BUNDLE_MANIFEST="$WORK/myops.manifest.json" -DMYOPS_BUNDLE_TARGETS=cuda:90
  cmake --build "$WORK/build"
  if "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
    # On a GPU every launch of the program must come from the bundle: no compiles, no store.
    TJIT_JIT=0 TJIT_CACHE=0 "$WORK/build/myops_main" --expect-bundle | tee "$WORK/main-bundle.log"
  else
    TJIT_CACHE_DIR="$WORK/kernel-store" "$WORK/build/myops_main" --expect-bundle | tee "$WORK/main-bundle.log"
  fi
  grep -q "^main passed" "$WORK/main-bundle.log"
fi
log "passed"
