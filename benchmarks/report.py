"""Turns a benchmark results JSON into the target verdicts, a Markdown report, PNG plots and the
terminal summary.

    python3 benchmarks/report.py benchmarks/results/<gpu>/results.json   # rewrite results.md + plots

Targets: targets.py (the list, and how each is evaluated).
"""

import argparse
import json
import math
import os
import sys

import first_call
import grid_report
import own_kernels
import tuned_choice
from targets import PEERS, TORCH_OPS_BEFORE, evaluate_targets, index_records, size_label

IMPL_ORDER = ("tjit", "tjit_torch_ops", "aten", "compile", "python_triton", "tutorial", "flaggems", "liger", "triton_op", "triton_launch",
              "copy")
COLORS = {"tjit": "C0", "tjit_torch_ops": "C8", "aten": "C1", "compile": "C7", "python_triton": "C2", "tutorial": "C3", "triton_op": "C4",
          "triton_launch": "C5", "flaggems": "C6", "liger": "C9", "copy": "gray"}
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"

# ------------------------------------------------------------------------------------ formatting


def _fmt(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.{digits}f}"
    return str(v)


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _text_table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return [fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def _ordered(names):
    return sorted(names, key=lambda n: (IMPL_ORDER.index(n) if n in IMPL_ORDER else len(IMPL_ORDER), n))


def python_overhead_rows(results):
    py = ((results.get("overhead") or {}).get("python") or {}).get("ops", {})
    impls = _ordered({k for e in py.values() for k in e["us_per_call"]})
    # tjit / each peer, where some operator has both
    ratios = ["tjit/aten", "tjit_torch_ops/aten", "tjit/python_triton"] + [f"tjit/{p}" for p in PEERS
                                                    if any(f"tjit/{p}" in e["ratios"] for e in py.values())]
    rows = []
    for op, e in py.items():
        us = e["us_per_call"]
        rows.append([op, "x".join(map(str, e["shape"]))] + [_fmt(us.get(i)) for i in impls] +
                    [_fmt(e["ratios"].get(r)) for r in ratios])
    return ["op", "shape"] + [f"{i} us" for i in impls] + ratios, rows


def _peers_info(results):
    """{peer: peers.Peer.describe()} as recorded by the bandwidth or overhead part (None if neither)."""
    bw = ((results.get("bandwidth") or {}).get("config") or {}).get("peers")
    return bw or ((results.get("overhead") or {}).get("python") or {}).get("peers")


def peers_markdown(results):
    info = _peers_info(results)
    if not info:
        return ["not recorded", ""]
    lines = _table(["peer", "version", "state"],
                   [[name, p.get("version") or "-", "used" if p.get("available") else p.get("note")]
                    for name, p in info.items()]) + [""]
    calls = []
    for name, p in info.items():
        if not p.get("available"):
            continue
        calls += [f"- {name} {op}: `{call}`" for op, call in (p.get("calls") or {}).items()]
        calls += [f"- {name} {op}: not measured ({why})" for op, why in (p.get("missing") or {}).items()]
        calls += [f"- {name} {op}: up to {cols} columns" for op, cols in (p.get("max_cols") or {}).items()]
    lines += calls + ([""] if calls else [])
    return lines + ["What each peer call is and what it counts: benchmarks/peers.py, benchmarks/README.md.", ""]


def targets_rows(targets, note_width=None):
    rows = []
    for t in targets:
        note = t["note"] or ""
        if note_width and len(note) > note_width:
            note = note[:note_width - 3] + "..."
        rows.append([t["target"], _fmt(t["ratio"]), t["status"], t["worst_at"] or "-", note])
    return ["target", "measured", "status", "worst at", "note"], rows


def write_markdown(results, path, plots=()):
    meta = results.get("meta", {})
    lines = [f"# tjit benchmarks: {meta.get('device_name', '?')}", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k not in ("argv", )]
    lines += ["", "Ratios are tjit / reference: host time ratios (lower is better) for overhead, bandwidth "
              "ratios (higher is better) for bandwidth. See benchmarks/README.md.", ""]
    targets = results.get("targets") or evaluate_targets(results)
    lines += ["## Targets", ""] + _table(*targets_rows(targets)) + [""]
    lines += ["## Peers (FlagGems, Liger-Kernel)", ""] + peers_markdown(results)

    lines += ["## Host overhead per call, Python", ""]
    py = (results.get("overhead") or {}).get("python")
    if py:
        lines += [f"{py['config']['statistic']}: {py['config']['rounds']} rounds x {py['config']['calls_per_round']} "
                  f"calls, fp32, device {py['config']['device']}.", ""]
        lines += _table(*python_overhead_rows(results)) + [""]
        for op, e in py["ops"].items():
            for name, err in e.get("errors", {}).items():
                lines.append(f"- {op}/{name}: {err}")
            bad = [k for k, v in e.get("checks", {}).items() if not v]
            if bad:
                lines.append(f"- {op}: results differ from aten for {', '.join(bad)}")
        lines += [f"- {n}" for n in py.get("notes", [])] + [""]
    else:
        lines += ["not run", ""]

    lines += ["## Host overhead per call, C++ (tjit_bench_overhead)", ""]
    cpp = (results.get("overhead") or {}).get("cpp")
    if not cpp:
        lines += ["not run", ""]
    elif cpp.get("skipped"):
        lines += [f"skipped: {cpp.get('reason')}", ""]
        if cpp.get("compile_check"):
            lines += [f"compile check (no GPU): `{json.dumps(cpp['compile_check'])}`", ""]
    else:
        lines += [f"{cpp.get('n')} {cpp.get('dtype')} elements, {cpp.get('rounds')} rounds x {cpp.get('calls')} calls, "
                  f"median host us per call; kernel {json.dumps(cpp.get('kernel', {}))}", ""]
        lines += _table(["measurement", "us per call"], [[k, _fmt(v)] for k, v in cpp.get("us_per_call", {}).items()])
        lines += [""] + _table(["ratio", "value"], [[k, _fmt(v)] for k, v in cpp.get("ratios", {}).items()]) + [""]
        if cpp.get("all_ops"):
            lines += [f"other ops: `{json.dumps(cpp['all_ops'])}`", ""]
        for k, v in (cpp.get("errors") or {}).items():
            lines.append(f"- {k}: {v}")
        lines.append("")

    lines += ["## Host overhead per launch, own kernels (tjit.jit)", ""]
    lines += own_kernels.markdown((results.get("overhead") or {}).get("own_kernels"), _table)

    lines += ["## Bandwidth (GB/s)", ""] + bandwidth_markdown(results.get("bandwidth"))
    lines += ["## Bandwidth at LLM shapes (GB/s)", "",
              "Softmax over vocabulary sizes and layer_norm over hidden sizes, rows chosen so that one bf16 tensor "
              "holds at least 256 MiB (benchmarks/bandwidth.py: llm_shapes; `--only llm`).", ""]
    lines += bandwidth_markdown(results.get("llm"))
    lines += grid_report.markdown(results)

    lines += ["## Cold start (fresh processes)", ""] + cold_start_markdown(results.get("cold_start"))
    lines += ["## First calls with plan choices (fresh processes)", ""] + first_call.markdown(
        results.get("first_call"), _table)

    lines += tuned_choice.markdown(results.get("tuned_choice"))

    lines += ["## Autotuning (benchmarks/autotune.py)", ""]
    tuned = results.get("autotune") or {}
    if tuned and not tuned.get("skipped"):
        import autotune
        lines += autotune.report(tuned).splitlines() + [""]
    else:
        lines += ["not run" + (f": {tuned['reason']}" if tuned.get("reason") else ""), ""]

    if plots:
        lines += ["## Plots", ""] + [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plots] + [""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def bandwidth_markdown(bw):
    """A bandwidth part's tables (one per op and pass), its errors and notes."""
    lines = []
    if bw:
        lines += [f"Timer: {bw['config']['timer']}.", ""]
        recs = bw["records"]
        groups = []
        for r in recs:
            g = (r["op"], r["pass"])
            if g not in groups:
                groups.append(g)
        for op, pas in groups:
            sub = [r for r in recs if r["op"] == op and r["pass"] == pas]
            # Columns: tjit always; others where something ran (a peer skipped everywhere, e.g. on
            # CPU, has no column; the notes say why).
            impls = _ordered({r["impl"] for r in sub if r["impl"] == "tjit" or "gbps" in r or r.get("error")})
            measured = {r["impl"] for r in sub if "gbps" in r}
            ratio_refs = ["aten"] + [p for p in PEERS if p in measured] + ["copy"]
            index = index_records(sub)
            lines += [f"### {op} {pas}", ""]
            rows, plain = [], False
            for dtype in dict.fromkeys(r["dtype"] for r in sub):
                for shape in dict.fromkeys(tuple(r["shape"]) for r in sub if r["dtype"] == dtype):
                    cells, vals = [], {}
                    for i in impls:
                        rec = index.get((op, pas, dtype, shape, i), {})
                        if "gbps" in rec:
                            vals[i] = rec["gbps"]
                            # copy is always timed both ways (the faster counts); others: a mark
                            # where the call could not be captured in a CUDA graph
                            mark = " †" if rec.get("timing") == "plain" and i != "copy" else ""
                            plain = plain or bool(mark)
                            cells.append(_fmt(rec["gbps"], 1) + mark + ("" if rec.get("ok", True) else " (wrong)"))
                        elif rec.get("error"):
                            cells.append("error")
                        else:
                            cells.append("-")
                    t = vals.get("tjit")
                    ratio = lambda ref: _fmt(t / vals[ref]) if t and vals.get(ref) else "-"  # noqa: E731
                    rows.append([dtype, size_label(shape)] + cells + [ratio(ref) for ref in ratio_refs])
            lines += _table(["dtype", "size"] + impls + [f"tjit/{ref}" for ref in ratio_refs], rows) + [""]
            if plain:
                lines += ["† not capturable in a CUDA graph: timed with do_bench (plain calls)", ""]
            errors = [f"- {r['dtype']} {size_label(r['shape'])} {r['impl']}: {r['error']}"
                      for r in sub if r.get("error")]
            lines += errors + ([""] if errors else [])
        if bw.get("notes"):
            lines += ["Notes:", ""] + [f"- {n}" for n in bw["notes"]] + [""]
    else:
        lines += ["not run", ""]
    return lines


COLD_START_SCENARIOS = (("jit", "no store (JIT)"), ("cold_store", "empty store"), ("warm_store", "warm store"),
                        ("bundle", "embedded bundle"))


def cold_start_rows(cold):
    """(headers, rows): each operator's first-call ms per implementation and scenario."""
    columns = []
    for kind, label in (("cpp", "C++"), ("python", "Python")):
        for scenario, name in COLD_START_SCENARIOS:
            s = ((cold.get(kind) or {}).get(scenario) or {})
            if "first_call_ms" in s:
                columns.append((f"{label} {name}", s))
    if "first_call_ms" in (cold.get("python_triton") or {}):
        columns.append(("Python Triton", cold["python_triton"]))
    measured = columns[0][1]["first_call_ms"] if columns else {}
    ops = [op for op in cold.get("config", {}).get("ops", []) if op in measured] or list(measured)
    rows = [[op] + [_fmt(s["first_call_ms"].get(op), 2) for _, s in columns] for op in ops]
    rows.append(["all first calls"] + [_fmt(s["all_first_calls_ms"], 1) for _, s in columns])
    rows.append(["import (tjit / triton + wrappers)"] + [_fmt(s.get("import_ms"), 1) for _, s in columns])
    rows.append(["CUDA context and inputs"] + [_fmt(s.get("context_ms"), 1) for _, s in columns])
    return ["first call, ms"] + [name for name, _ in columns], rows


def cold_start_markdown(cold):
    if not cold:
        return ["not run", ""]
    if cold.get("skipped"):
        return [f"skipped: {cold.get('reason')}", ""]
    lines = [f"Host ms from the call to its completion in a new process (median of {cold['config']['runs']} "
             f"processes per column; {cold['config']['shape']} {cold['config']['dtype']}); Triton's cache warm in "
             "every column. No store: every kernel compiled through the embedded interpreter (a Triton cache "
             "hit), as before the store existed. Empty store: the same plus writing the store. Warm store: "
             "filled by an earlier process. Embedded bundle (when liboperators was built with TJIT_EMBED_KERNELS=ON): "
             "TJIT_JIT=0, no store, every kernel from the bundle. See benchmarks/cold_start.py.", ""]
    lines += _table(*cold_start_rows(cold)) + [""]
    for kind in ("cpp", "python"):
        for scenario, name in COLD_START_SCENARIOS:
            s = (cold.get(kind) or {}).get(scenario) or {}
            flags = [f"{flag} {s[flag]}" for flag in ("libpython_mapped", "libtriton_mapped", "triton_imported")
                     if flag in s]
            lines.append(f"- {kind} {name}: {', '.join(flags) or 'no flags'}; results match aten: "
                         f"{s.get('correct')}" + (f"; errors: {s['errors']}" if s.get("errors") else ""))
    return lines + [""]


# ----------------------------------------------------------------------------------------- plots


def _bandwidth_plots(plt, recs, title, out_dir, prefix, rows_label):
    """One figure per (op, pass) of a bandwidth part: GB/s per implementation over the sizes, and
    tjit's ratio to each; files <prefix>_<op>_<pass>.png."""
    paths = []
    groups = list(dict.fromkeys((r["op"], r["pass"]) for r in recs))
    for op, pas in groups:
        sub = [r for r in recs if r["op"] == op and r["pass"] == pas and "gbps" in r]
        dtypes = list(dict.fromkeys(r["dtype"] for r in sub))
        if not dtypes:
            continue
        fig, axes = plt.subplots(2, len(dtypes), figsize=(6 * len(dtypes), 7.5), squeeze=False,
                                 gridspec_kw={"height_ratios": [3, 2]}, sharex="col")
        size_of = lambda r: r["shape"][-1] if len(r["shape"]) > 1 else r["numel"]  # noqa: E731
        for col, dtype in enumerate(dtypes):
            ax, rax = axes[0][col], axes[1][col]
            series = {}
            for impl in _ordered({r["impl"] for r in sub if r["dtype"] == dtype}):
                series[impl] = dict(sorted((size_of(r), r["gbps"]) for r in sub
                                           if r["dtype"] == dtype and r["impl"] == impl))
                style = dict(linestyle="--") if impl == "copy" else dict(marker="o", markersize=3)
                ax.plot(list(series[impl]), list(series[impl].values()), label=impl, color=COLORS.get(impl), **style)
            shape0 = next(r["shape"] for r in sub if r["dtype"] == dtype)
            rows = f", {shape0[0]} rows" if len(shape0) > 1 and prefix == "bandwidth" else ""
            ax.set_title(f"{op} {pas} {dtype}{rows}")
            ax.set_ylabel("GB/s")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            # Lower panel: tjit / each other implementation (1.0 = parity).
            tj = series.get("tjit", {})
            for impl, pts in series.items():
                if impl == "tjit":
                    continue
                xs = [x for x in tj if pts.get(x)]
                style = dict(linestyle="--") if impl == "copy" else dict(marker="o", markersize=3)
                rax.plot(xs, [tj[x] / pts[x] for x in xs], label=f"tjit / {impl}", color=COLORS.get(impl), **style)
            rax.axhline(1.0, color="black", linewidth=0.8)
            rax.set_xscale("log", base=2)
            rax.set_xlabel(rows_label if op in ("softmax", "layer_norm") else "elements")
            rax.set_ylabel("ratio")
            rax.grid(alpha=0.3)
            if tj:
                rax.legend(fontsize=8)
        fig.suptitle(title)
        paths.append(os.path.join(out_dir, f"{prefix}_{op}_{pas}.png"))
        fig.tight_layout()
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    return paths


def write_plots(results, out_dir, log=print):
    """PNG plots next to the results; returns the paths ([] with a printed note without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        log(f"  note: no plots (matplotlib unavailable: {type(exc).__name__}: {exc}); pip install matplotlib")
        return []
    paths = []
    title = (results.get("meta") or {}).get("device_name", "")

    py = ((results.get("overhead") or {}).get("python") or {}).get("ops", {})
    if py:
        ops = list(py)
        impls = _ordered({k for e in py.values() for k in e["us_per_call"]})
        fig, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.8 / max(len(impls), 1)
        for j, impl in enumerate(impls):
            vals = [py[op]["us_per_call"].get(impl, float("nan")) for op in ops]
            ax.bar([i + j * width for i in range(len(ops))], vals, width, label=impl, color=COLORS.get(impl))
        ax.set_xticks([i + width * (len(impls) - 1) / 2 for i in range(len(ops))])
        ax.set_xticklabels([f"{op}\n{'x'.join(map(str, py[op]['shape']))}" for op in ops])
        values = [v for e in py.values() for v in e["us_per_call"].values() if v > 0]
        if values and max(values) / min(values) > 50:
            ax.set_yscale("log")
        ax.set_ylabel("host us per call (median)")
        ax.set_title(f"Python host overhead, fp32 - {title}")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        paths.append(os.path.join(out_dir, "overhead_python.png"))
        fig.tight_layout()
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)

    cpp = (results.get("overhead") or {}).get("cpp") or {}
    if cpp.get("us_per_call"):
        names = list(cpp["us_per_call"])
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.barh(names, [cpp["us_per_call"][n] for n in names])
        ax.set_xlabel("host us per call (median)")
        ax.set_title(f"C++ host overhead, add 1024 fp32 - {title}")
        ax.grid(axis="x", alpha=0.3)
        paths.append(os.path.join(out_dir, "overhead_cpp.png"))
        fig.tight_layout()
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)

    paths += _bandwidth_plots(plt, (results.get("bandwidth") or {}).get("records", []), title, out_dir, "bandwidth",
                              "columns (rows fixed)")
    paths += _bandwidth_plots(plt, (results.get("llm") or {}).get("records", []), f"LLM shapes - {title}", out_dir,
                              "llm", "columns (rows: one bf16 tensor >= 256 MiB)")
    paths += grid_report.write_plots(plt, results, out_dir, title)
    cold = results.get("cold_start")
    if cold and not cold.get("skipped"):
        headers, rows = cold_start_rows(cold)
        op_rows = [r for r in rows if r[0] in cold["config"]["ops"]]
        if op_rows and len(headers) > 1:
            fig, ax = plt.subplots(figsize=(12, 6))
            width = 0.8 / (len(headers) - 1)
            for i, name in enumerate(headers[1:]):
                values = [float(r[i + 1]) if r[i + 1] != "-" else 0.0 for r in op_rows]
                ax.bar([k + i * width for k in range(len(op_rows))], values, width, label=name)
            ax.set_xticks([k + 0.4 - width / 2 for k in range(len(op_rows))])
            ax.set_xticklabels([r[0] for r in op_rows], rotation=15)
            ax.set_yscale("log")
            ax.set_ylabel("first call in a new process, ms (log)")
            ax.set_title("Cold start: first call of each operator")
            ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
            ax.grid(True, axis="y", which="both", alpha=0.3)
            paths.append(os.path.join(out_dir, "cold_start.png"))
            fig.tight_layout()
            fig.savefig(paths[-1], dpi=120)
            plt.close(fig)
    return paths


# --------------------------------------------------------------------------------------- summary


def summary_lines(results):
    lines = []
    meta = results.get("meta") or {}
    if meta.get("smoke"):
        lines.append(f"SMOKE RUN on {meta.get('device_name')}: tiny sizes, few iterations"
                     + (", Triton interpreter: the ratios say nothing about tjit's speed" if meta.get("device") == "cpu"
                        else ": the ratios are not meaningful"))
    py = ((results.get("overhead") or {}).get("python") or {}).get("ops")
    if py:
        table = _text_table(*python_overhead_rows(results))
        lines += ["Python host overhead (median us per call):"] + ["  " + row for row in table]
    cpp = (results.get("overhead") or {}).get("cpp")
    if cpp:
        if cpp.get("skipped"):
            lines.append(f"C++ overhead: skipped ({cpp.get('reason')})")
            cc = cpp.get("compile_check")
            if cc:
                lines.append(f"C++ compile check without GPU ({cc.get('target')}): " +
                             ("ok, raw launch signature " + str(cc.get("raw_launch_signature")) if cc.get("ok")
                              else f"FAILED: {cc.get('error') or cc.get('raw_launch_signature')}"))
        else:
            lines.append("C++ host overhead (median us per call): " +
                         ", ".join(f"{k} {_fmt(v)}" for k, v in cpp.get("us_per_call", {}).items()))
    lines += own_kernels.text_lines((results.get("overhead") or {}).get("own_kernels"))
    cold = results.get("cold_start")
    if cold and not cold.get("skipped"):
        lines += ["Cold start, first call in a new process (median ms):"]
        lines += ["  " + row for row in _text_table(*cold_start_rows(cold))]
    lines += first_call.text_lines(results.get("first_call"))
    targets = results.get("targets") or evaluate_targets(results)
    lines += ["", "Targets:"] + ["  " + row for row in _text_table(*targets_rows(targets, note_width=60))]
    counts = {s: sum(t["status"] == s for t in targets) for s in ("PASS", "MISS", "N/A")}
    lines.append(f"targets: {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['N/A']} N/A")
    return lines


def write_all(results, out_dir, log=print):
    """results.json, results.md and the plots into out_dir; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    results["targets"] = evaluate_targets(results)
    json_path = os.path.join(out_dir, RESULTS_JSON)
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1, default=str)
    plots = write_plots(results, out_dir, log)
    md_path = write_markdown(results, os.path.join(out_dir, RESULTS_MD), plots)
    return [json_path, md_path] + plots


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_json")
    args = parser.parse_args(argv)
    with open(args.results_json) as f:
        results = json.load(f)
    paths = write_all(results, os.path.dirname(os.path.abspath(args.results_json)))
    print("\n".join(summary_lines(results)))
    print("wrote " + ", ".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
