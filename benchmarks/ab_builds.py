"""A/B of two tjit builds on the GPU at hand: the bandwidth sweep and the LLM shapes (tjit and the
device copy only), and host time per call, each build in its own processes, alternating A, B, A, B.

Two builds cannot share one process (both register the operators of namespace tjit), so each is
measured by its own Python (with --path-a/--path-b: a `pip install --target` folder of that build first
on PYTHONPATH, ahead of an editable install). Rounds
alternate the builds so drift affects both alike; the copy, measured by both, is the control.

    python3 benchmarks/ab_builds.py --python-a /tmp/venv-a/bin/python --python-b /tmp/venv-b/bin/python \\
        --parts bandwidth,llm,overhead --rounds 2 --out /tmp/ab

Prints, per (op, pass, dtype, shape), tjit's GB/s for A and B (median over rounds) and B / A, with
the copy's B / A beside it; and the Python host time per call of each operator. Writes every
round's raw results under --out.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Run inside each build's Python: one part, tjit (and the copy) only, results as JSON.
CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import torch, tjit
part = {part!r}
if part == "overhead":
    import overhead
    result = overhead.run_python_overhead("cuda", False, None, log=lambda *a: None, peers={{}})
else:
    import bandwidth
    result = bandwidth.run_bandwidth("cuda", False, ops_filter={ops!r}, llm=part == "llm",
                                     impls_filter=("tjit", "copy"), log=lambda *a: None)
result["tjit_library"] = tjit.LIBRARY_PATH
json.dump(result, open({out!r}, "w"))
"""


def run_part(python, path, kernel_dir, part, out, ops=None):
    code = CHILD.format(here=HERE, part=part, out=out, ops=ops)
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (path, env.get("PYTHONPATH"))))
    if kernel_dir:
        env["TJIT_KERNEL_DIR"] = os.path.abspath(kernel_dir)
    subprocess.run([python, "-c", code], check=True, env=env)
    with open(out) as f:
        return json.load(f)


def bandwidth_table(runs_a, runs_b):
    """{key: {impl: [gbps per round]}} per build, keyed by (op, pass, dtype, shape)."""

    def collect(runs):
        table = {}
        for run in runs:
            for rec in run["records"]:
                if "gbps" not in rec:
                    continue
                key = (rec["op"], rec["pass"], rec["dtype"], "x".join(map(str, rec["shape"])))
                table.setdefault(key, {}).setdefault(rec["impl"], []).append(rec["gbps"])
        return table

    return collect(runs_a), collect(runs_b)


def print_bandwidth(part, runs_a, runs_b, tolerance):
    a, b = bandwidth_table(runs_a, runs_b)
    print(f"\n{part}: tjit GB/s, median of {len(runs_a)} rounds per build (B / A; the copy's B / A is the control)")
    print(f"{'case':<40} {'A':>9} {'B':>9} {'B/A':>7} {'copy B/A':>9}")
    outside = []
    for key in sorted(set(a) & set(b)):
        if "tjit" not in a[key] or "tjit" not in b[key]:
            continue
        ga, gb = statistics.median(a[key]["tjit"]), statistics.median(b[key]["tjit"])
        ratio = gb / ga
        copy = ""
        if a[key].get("copy") and b[key].get("copy"):
            copy = f"{statistics.median(b[key]['copy']) / statistics.median(a[key]['copy']):.3f}"
        flag = "" if abs(ratio - 1) <= tolerance else "  <-"
        if flag:
            outside.append(key)
        print(f"{' '.join(key):<40} {ga:9.1f} {gb:9.1f} {ratio:7.3f} {copy:>9}{flag}")
    print(f"{part}: {len(outside)} of {len(set(a) & set(b))} cases outside +-{tolerance:.0%}")
    return outside


def print_overhead(runs_a, runs_b):
    def per_op(runs, impl):
        table = {}
        for run in runs:
            for op, entry in run["ops"].items():
                if impl in entry["us_per_call"]:
                    table.setdefault(op, []).append(entry["us_per_call"][impl])
        return table

    a, b = per_op(runs_a, "tjit"), per_op(runs_b, "tjit")
    aten_a, aten_b = per_op(runs_a, "aten"), per_op(runs_b, "aten")
    # Processes differ in host speed (aten moves with tjit between them): tjit / aten, measured in
    # one process, is what compares the builds.
    print("\noverhead: host time per call from Python, us, median over rounds; tjit/aten within each build's process")
    for op in sorted(set(a) & set(b)):
        ta, tb = statistics.median(a[op]), statistics.median(b[op])
        line = f"  {op:<12} tjit A {ta:7.2f}  B {tb:7.2f}  B/A {tb / ta:.3f}"
        if op in aten_a and op in aten_b:
            ra, rb = ta / statistics.median(aten_a[op]), tb / statistics.median(aten_b[op])
            line += f"   tjit/aten A {ra:.3f}  B {rb:.3f}  B/A {rb / ra:.3f}"
        print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python-a", required=True, help="the Python of build A (the baseline)")
    p.add_argument("--python-b", required=True, help="the Python of build B (the change)")
    p.add_argument("--path-a", help="put first on build A's PYTHONPATH (e.g. a pip --target folder holding tjit)")
    p.add_argument("--path-b", help="likewise for build B")
    p.add_argument("--kernel-dir-a", help="build A's kernels_py folder (TJIT_KERNEL_DIR): A/B of kernel-only changes "
                   "with one build")
    p.add_argument("--kernel-dir-b", help="likewise for build B")
    p.add_argument("--parts", default="bandwidth,llm,overhead")
    p.add_argument("--ops", help="comma-separated operators the bandwidth and LLM parts measure (default: all)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for part in args.parts.split(","):
        runs = {"a": [], "b": []}
        for r in range(args.rounds):
            for build, python, path, kernel_dir in (("a", args.python_a, args.path_a, args.kernel_dir_a),
                                                    ("b", args.python_b, args.path_b, args.kernel_dir_b)):
                out = os.path.join(args.out, f"{part}_{build}{r}.json")
                print(f"[ab] {part} round {r} build {build.upper()}", file=sys.stderr, flush=True)
                runs[build].append(run_part(python, path, kernel_dir, part, out, args.ops.split(",") if args.ops else None))
        if part == "overhead":
            print_overhead(runs["a"], runs["b"])
        else:
            print_bandwidth(part, runs["a"], runs["b"], args.tolerance)


if __name__ == "__main__":
    main()
