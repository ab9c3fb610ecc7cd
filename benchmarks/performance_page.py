"""Writes docs/performance.md, and the README's performance summary, from benchmarks/results/.

    python3 benchmarks/performance_page.py           # rewrite both from every benchmarks/results/<card>/results.json
    python3 benchmarks/performance_page.py --check   # exit 1 when either is not what the results give

One section per card (a folder of benchmarks/results/ with a results.json, as run_benchmarks.py
writes it): host time per call from Python and C++, one line per operator and pass of bandwidth
ratios over every size and dtype measured, cold start, the plots. The README gets the first
card's Python host-time table and bandwidth lines between its `performance summary` markers.
Numbers come only from the results; the per-size tables and the targets are in each card's
results.md (benchmarks/report.py).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
PAGE = os.path.join(ROOT, "docs", "performance.md")
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- performance summary: written by benchmarks/performance_page.py from benchmarks/results -->"
END = "<!-- end of performance summary -->"
# The README's summary is the card listed first here that has results.
README_CARDS = ("nvidia-h200", "nvidia-h100")
TORCH_FUNCTIONS = {"add": "torch.add", "sum": "torch.sum", "softmax": "torch.softmax", "layer_norm": "F.layer_norm"}
PEER_REFERENCES = ("aten", "tutorial", "flaggems", "liger")


def cards():
    found = []
    for name in sorted(os.listdir(RESULTS)):
        path = os.path.join(RESULTS, name, "results.json")
        if os.path.exists(path):
            with open(path) as f:
                found.append((name, json.load(f)))
    return found


def _us(v):
    return "-" if v is None else f"{v:.2f} us"


def python_host_table(results):
    ops = ((results.get("overhead") or {}).get("python") or {}).get("ops", {})
    rows = []
    for op, e in ops.items():
        us = e["us_per_call"]
        ratio = e["ratios"].get("tjit/aten")
        rows.append([op, "x".join(map(str, e["shape"])), _us(us.get("tjit")), _us(us.get("tjit_torch_ops")),
                     f"{_us(us.get('aten'))} (`{TORCH_FUNCTIONS.get(op, op)}`)", report._fmt(ratio),
                     _us(us.get("python_triton")), _us(us.get("flaggems"))])
    return report._table(["operator", "size", "`tjit.<op>`", "`torch.ops.tjit.<op>`", "torch's own",
                          "tjit / torch's", "Python Triton", "FlagGems"], rows)


def cpp_host_lines(results):
    cpp = (results.get("overhead") or {}).get("cpp") or {}
    if not cpp or cpp.get("skipped"):
        return []
    us = cpp.get("us_per_call", {})
    return [f"From C++ (add, {cpp.get('n')} elements): `tjit::add` {_us(us.get('tjit_add'))}, `at::add` "
            f"{_us(us.get('at_add'))}; a bare `TritonJitFunction` launch {_us(us.get('bare_triton_jit_function'))}, "
            f"a raw `cuLaunchKernel` of the same cubin {_us(us.get('raw_cuLaunchKernel'))}.", ""]


def _span(values):
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def bandwidth_lines(records):
    """(op, pass, sizes, dtypes, tjit/aten, tjit/best reference, tjit/copy) over every measured case."""
    cases = {}
    for r in records:
        if "gbps" not in r or not r.get("ok", True):
            continue
        cases.setdefault((r["op"], r["pass"]), {}).setdefault((r["dtype"], tuple(r["shape"])), {})[r["impl"]] = r["gbps"]
    lines = []
    order = ("add", "sum", "softmax", "layer_norm")
    for (op, pas), by_case in sorted(cases.items(), key=lambda c: (order.index(c[0][0]) if c[0][0] in order
                                                                    else len(order), c[0][0], c[0][1] != "fwd")):
        vs_aten, vs_best, vs_copy = [], [], []
        for impls in by_case.values():
            t = impls.get("tjit")
            if not t:
                continue
            if impls.get("aten"):
                vs_aten.append(t / impls["aten"])
            refs = [impls[i] for i in PEER_REFERENCES if impls.get(i)]
            if refs:
                vs_best.append(t / max(refs))
            if impls.get("copy"):
                vs_copy.append(t / impls["copy"])
        shapes = sorted({shape for _, shape in by_case}, key=lambda s: (len(s), s[-1], s))
        if len(shapes[0]) == 1:
            sizes = report.size_label(shapes[0]) + ("" if len(shapes) == 1 else f" ... {report.size_label(shapes[-1])}")
            sizes += " elements"
        else:
            sizes = f"{shapes[0][-1]} ... {shapes[-1][-1]} columns"
        dtypes = "/".join(dict.fromkeys(d.replace("float", "fp").replace("bfp16", "bf16") for d, _ in by_case))
        lines.append([f"{op} {pas}", sizes, dtypes, _span(vs_aten), _span(vs_best), _span(vs_copy)])
    return lines


BANDWIDTH_HEADERS = ["operator", "sizes", "dtypes", "tjit / aten", "tjit / best of aten and peers", "tjit / device copy"]


def card_section(name, results):
    meta = results.get("meta", {})
    lines = [f"## {meta.get('device_name', name)}", "",
             f"From [`benchmarks/results/{name}/`](../benchmarks/results/{name}/): torch {meta.get('torch')}, "
             f"Triton {meta.get('triton')}, CUDA {meta.get('cuda')}, {meta.get('sm_count')} SMs. Per-size tables, "
             f"the targets and notes: [results.md](../benchmarks/results/{name}/results.md)"
             + (f"; about this machine: [README](../benchmarks/results/{name}/README.md)"
                if os.path.exists(os.path.join(RESULTS, name, "README.md")) else "") + ".", "",
             "### Host time per call", "",
             "From Python, float32, median of rounds of many calls (lower is better):", ""]
    lines += python_host_table(results) + [""] + cpp_host_lines(results)
    records = ((results.get("bandwidth") or {}).get("records") or []) + ((results.get("llm") or {}).get("records") or [])
    lines += ["### Bandwidth", "",
              "Ratios of achieved memory bandwidth (higher is better), the range over every size and dtype "
              "measured (CUDA-graph replay; peers: the Triton tutorial, FlagGems, Liger-Kernel where they "
              "have the operator and give the right result):", ""]
    lines += report._table(BANDWIDTH_HEADERS, bandwidth_lines(records)) + [""]
    cold = results.get("cold_start") or {}
    if cold and not cold.get("skipped"):
        lines += ["### Cold start", "", "A new process's first call, host ms (median of several processes):", ""]
        lines += report._table(*report.cold_start_rows(cold)) + [""]
    others = sorted(f for f in os.listdir(os.path.join(RESULTS, name)) if f.endswith(".json") and f != "results.json")
    if others:
        lines += ["Measured apart: " + ", ".join(f"[{f}](../benchmarks/results/{name}/{f})" for f in others)
                  + " (benchmarks/README.md says what each holds).", ""]
    plots = sorted(f for f in os.listdir(os.path.join(RESULTS, name)) if f.endswith(".png"))
    if plots:
        lines += ["### Plots", ""]
        lines += [f"![{p[:-4]}](../benchmarks/results/{name}/{p})" for p in plots] + [""]
    return lines


def page():
    lines = ["# Performance", "",
             "<!-- Written by benchmarks/performance_page.py from benchmarks/results/; edit that, not this. -->", "",
             "Measured with [`benchmarks/run_benchmarks.py`](../benchmarks/run_benchmarks.py) (what each "
             "benchmark does, the targets: [benchmarks/README.md](../benchmarks/README.md)). To reproduce on "
             "a GPU and refresh this page:", "",
             "```bash",
             "python3 benchmarks/run_benchmarks.py --out benchmarks/results   # writes benchmarks/results/<card>/",
             "python3 benchmarks/performance_page.py                          # this page and the README's summary",
             "```", "",
             "Host times vary between machines and runs of one card (the CPU, clocks); compare ratios "
             "within one run.", ""]
    for name, results in cards():
        lines += card_section(name, results)
    return "\n".join(lines).rstrip("\n") + "\n"


def readme_summary():
    available = dict(cards())
    name = next((c for c in README_CARDS if c in available), None) or next(iter(available))
    results = available[name]
    device = results.get("meta", {}).get("device_name", name)
    records = ((results.get("bandwidth") or {}).get("records") or []) + ((results.get("llm") or {}).get("records") or [])
    lines = [BEGIN, "", f"Host time per call from Python on an {device} (float32; lower is better):", ""]
    lines += python_host_table(results) + [""]
    lines += [f"Bandwidth on the {device}, the range over every size and dtype measured (higher is better):", ""]
    lines += report._table(BANDWIDTH_HEADERS, bandwidth_lines(records)) + ["", END]
    return "\n".join(lines)


def readme_with_summary(text):
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md lacks the markers {BEGIN!r} ... {END!r}")
    return text[:start] + readme_summary() + text[end + len(END):]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say whether both are up to date")
    args = parser.parse_args(argv)
    with open(README) as f:
        readme = f.read()
    wanted = {PAGE: page(), README: readme_with_summary(readme)}
    stale = []
    for path, text in wanted.items():
        current = open(path).read() if os.path.exists(path) else None
        if current != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                with open(path, "w") as f:
                    f.write(text)
    if args.check:
        if stale:
            print(f"out of date with benchmarks/results: {', '.join(stale)} (run python3 benchmarks/performance_page.py)")
            return 1
        print("docs/performance.md and the README's summary match benchmarks/results")
        return 0
    print(f"wrote {', '.join(stale) or 'nothing (up to date)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
