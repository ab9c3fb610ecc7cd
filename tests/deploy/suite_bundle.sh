#!/usr/bin/env bash
# The operators' kernels as the test suite launched them, compiled ahead of time (no GPU needed):
#   tests/deploy/suite_bundle.sh MANIFEST
# MANIFEST is what a run of the suite recorded (TJIT_RECORD=MANIFEST ./run.sh test; .ci/run does
# this on the CPU). Keeps its entries of tjit's operator kernels (ops/kernels_py; the tests' own
# temporary kernels are gone by now): every kernel function's first entry, and of the rest about one
# in TJIT_SUITE_BUNDLE_SAMPLE (default 4; 1 keeps all), chosen by a hash of the entry, the same in
# every run (the suite records ~1600 specialisations, and each compiles twice: ~20 minutes on 2 cores
# for all of them). Builds a bundle of those for cuda:80 and cuda:90 with
# `python -m tjit aot build` (timed), checks its entries and metadata (`aot list --json`), looks
# every entry up through the C++ runtime's loader (tjit_bundle_tests --check-bundle), and checks
# that a copy with one flipped byte is rejected with a clear error.
# Environment: PYTHON (default python3), TJIT_SUITE_BUNDLE_DIR (default build/suite-bundle),
# TJIT_SUITE_BUNDLE_SAMPLE (default 4).
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
PY=${PYTHON:-python3}
MANIFEST=$(realpath "$1")
WORK=${TJIT_SUITE_BUNDLE_DIR:-$PWD/build/suite-bundle}
PROBE=build/bin/tjit_bundle_tests
log() { printf '[suite-bundle] %s\n' "$*" >&2; }
rm -rf "$WORK"
mkdir -p "$WORK"

"$PY" - "$MANIFEST" "$WORK/operators.manifest.json" "$PWD/ops/kernels_py" "${TJIT_SUITE_BUNDLE_SAMPLE:-4}" <<'PY'
import json, os, sys, zlib
source, target, kernels, sample = sys.argv[1:]
folder = os.path.dirname(source)
entries = [e for e in json.load(open(source))["entries"]
           if os.path.normpath(os.path.join(folder, e["file"])).startswith(kernels + os.sep)]
for e in entries:
    e["file"] = os.path.normpath(os.path.join(folder, e["file"]))
assert entries, f"{source} has no entry of tjit's operator kernels ({kernels})"
functions, kept = set(), []
for e in entries:
    function = (os.path.relpath(e["file"], kernels), e["function"])
    text = json.dumps(dict(e, file=function[0]), sort_keys=True)  # the same choice in any checkout
    if function not in functions or zlib.crc32(text.encode()) % int(sample) == 0:
        kept.append(e)
    functions.add(function)
json.dump({"tjit_manifest": 1, "entries": kept}, open(target, "w"), indent=1)
print(f"[suite-bundle] {len(kept)} of the {len(entries)} operator specialisations in {source} "
      f"({len(functions)} kernel functions, each at least once)", file=sys.stderr)
PY

start=$SECONDS
# A fresh Triton cache: the time is what a build from scratch takes.
TRITON_CACHE_DIR="$WORK/triton-cache" "$PY" -m tjit aot build --manifest "$WORK/operators.manifest.json" --target cuda:80 --target cuda:90 \
  -o "$WORK/operators.tjb" 2>&1 | tail -n 1 >&2
log "built in $((SECONDS - start)) s on $(nproc) cores"

"$PY" -m tjit aot list --json "$WORK/operators.tjb" >"$WORK/list.json"
"$PY" - "$WORK/operators.manifest.json" "$WORK/list.json" <<'PY'
import json, sys
manifest, listing = (json.load(open(p)) for p in sys.argv[1:])
entries = listing["entries"] if isinstance(listing, dict) else listing
expected = 2 * len({json.dumps(e, sort_keys=True) for e in manifest["entries"]})
assert len(entries) == expected, f"{len(entries)} entries, expected {expected} (manifest x 2 targets)"
text = json.dumps(listing)
for arch in ("80", "90"):
    assert f'"arch": {arch}' in text or f"cuda:{arch}" in text, f"no cuda:{arch} entry"
print(f"[suite-bundle] {len(entries)} entries = manifest x (cuda:80, cuda:90)", file=sys.stderr)
PY

"$PROBE" --check-bundle "$WORK/operators.tjb"

"$PY" - "$WORK/operators.tjb" "$WORK/damaged.tjb" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 0x40  # inside the payload: one entry's bytes
open(sys.argv[2], "wb").write(bytes(data))
PY
if "$PROBE" --check-bundle "$WORK/damaged.tjb" 2>"$WORK/damaged.log"; then
  log "FAILED: a bundle with a flipped byte was accepted"
  exit 1
fi
grep -q "is damaged" "$WORK/damaged.log" || { cat "$WORK/damaged.log" >&2; exit 1; }
log "damaged copy rejected: $(head -c 200 "$WORK/damaged.log")"
log "passed"
