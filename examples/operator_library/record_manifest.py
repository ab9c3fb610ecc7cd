"""Records the manifest of the kernels a deployment of libmyops needs, by making the calls it makes.

    python record_manifest.py --library build/libmyops.so -o myops.manifest.json \
        [--dtypes float16 bfloat16] [--sizes 1 16 4096 4097] [--index64]

A manifest lists specialisations (dtypes, integer arguments' divisibility, constexprs); rather than
writing them, this script calls the operator, forward and backward, once per dtype and size, with
TJIT_RECORD set, on the CPU (Triton's interpreter specialises as a CUDA launch does) or on CUDA. The
sizes need not be the deployment's: a size stands for every size with the same specialisation
(1, a multiple of 16, anything else). --index64 adds the 64-bit-offset variant of every entry, which
the plan chooses for tensors of 2**31 elements or more, too big to record here.

Recording a test run works the same way: TJIT_RECORD=myops.manifest.json pytest tests/. Either
manifest builds the bundle: cmake -DMYOPS_BUNDLE_MANIFEST=myops.manifest.json.
"""

import argparse
import json
import os
import subprocess
import sys


# Runs in a child process with TJIT_RECORD set: the runtime reads it when it first launches and
# writes the manifest as the process ends.
_CALLS = """
import sys, torch
library, device, dtypes, sizes = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(",")
torch.ops.load_library(library)
for name in dtypes:
    for n in sizes:
        x = torch.randn(int(n), device=device).to(getattr(torch, name)).requires_grad_()
        torch.ops.myops.scaled_silu(x, 1.5).sum().backward()
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", required=True, help="libmyops.so (built or installed)")
    parser.add_argument("-o", "--output", required=True, help="the manifest to write (merged into if present)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16", "float64"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 16, 17])
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is a GPU, else cpu")
    parser.add_argument("--index64", action="store_true", help="also the INDEX_64 variants (tensors >= 2**31)")
    args = parser.parse_args()
    output = os.path.abspath(args.output)
    device = args.device
    if device is None:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    subprocess.run([sys.executable, "-c", _CALLS, os.path.abspath(args.library), device, ",".join(args.dtypes),
                    ",".join(map(str, args.sizes))], env=dict(os.environ, TJIT_RECORD=output), check=True)
    print(f"recorded {len(args.dtypes)} dtypes x {len(args.sizes)} sizes on {device} into {output}")
    if args.index64:
        add_index64(output)


def add_index64(path):
    with open(path) as f:
        manifest = json.load(f)
    entries = manifest["entries"]
    known = {json.dumps(e, sort_keys=True) for e in entries}
    added = 0
    for e in list(entries):
        if e.get("args", {}).get("INDEX_64") is False and "scaled_silu" in e["function"]:
            # A count of 2**31 or more is a 64-bit integer, a multiple of 16 or not.
            for n in ("i64", "i64:16"):
                wide = json.loads(json.dumps(e))
                wide["args"]["INDEX_64"] = True
                wide["args"]["n"] = n
                if json.dumps(wide, sort_keys=True) not in known:
                    known.add(json.dumps(wide, sort_keys=True))
                    entries.append(wide)
                    added += 1
    with open(path, "w") as f:
        f.write('{"tjit_manifest": 1, "entries": [\n')
        f.write(",\n".join(json.dumps(e) for e in entries))
        f.write("\n]}\n")
    print(f"added {added} INDEX_64 variants: {len(entries)} entries in {path}")


if __name__ == "__main__":
    main()
