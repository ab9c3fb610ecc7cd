"""The dense and decode parts' verdicts, tables and plots (grids.py makes their sizes).

Per point, tjit is compared with the best peer that gave right results there: aten, torch.compile,
the Triton tutorial's softmax, FlagGems and Liger-Kernel (not the python_triton column: those are
tjit's own kernels). Ratios are time ratios, best peer's time / tjit's (above 1: tjit is faster),
and tjit / copy bandwidth as the control. Per operator, pass and dtype: the minimum (where), the
median, and every point below the target.
"""

import os
import statistics

PEERS = ("aten", "compile", "tutorial", "flaggems", "liger")
DENSE_EVERY_POINT = 0.99  # tjit >= 0.99x the best peer at every point of the dense grid
DENSE_MEDIAN = 1.02  # and >= 1.02x at the median, per operator, pass and dtype
DECODE_EVERY_POINT = 1.00  # decode: tjit's GPU time <= the best peer's at every point

TARGETS = (
    ("dense_peers_every_point", f"dense grid: tjit >= {DENSE_EVERY_POINT:.2f}x the best of aten, torch.compile, "
     "FlagGems, Liger at every point, every operator, pass and dtype (value: worst speed ratio)", "ge",
     DENSE_EVERY_POINT, "dense"),
    ("dense_peers_median", f"dense grid: median tjit / best peer >= {DENSE_MEDIAN:.2f}x per operator, pass and dtype "
     "(value: the lowest median)", "ge", DENSE_MEDIAN, "dense"),
    ("decode_peers_every_point", "decode rows (1..256 at hidden 2048..8192), GPU time per call in a CUDA graph: tjit "
     f"<= {DECODE_EVERY_POINT:.2f}x the best peer's at every point (value: worst time ratio tjit / best peer)", "le",
     DECODE_EVERY_POINT, "decode"),
)


def _size(record):
    return record["shape"][-1] if len(record["shape"]) > 1 else record["numel"]


def points(records):
    """One entry per (op, pass, dtype, shape) where tjit was timed: tjit's and the best peer's ms,
    speed = best peer ms / tjit ms, copy = tjit GB/s / copy GB/s; wrong = tjit's result was wrong."""
    cases = {}
    for r in records:
        key = (r["op"], r["pass"], r["dtype"], tuple(r["shape"]))
        cases.setdefault(key, {})[r["impl"]] = r
    out = []
    for (op, pas, dtype, shape), impls in cases.items():
        tjit = impls.get("tjit")
        if not tjit or "ms" not in tjit:
            continue
        peers = {name: impls[name]["ms"] for name in PEERS
                 if name in impls and "ms" in impls[name] and impls[name].get("ok", True)}
        best = min(peers, key=peers.get) if peers else None
        copy = impls.get("copy", {})
        out.append({"op": op, "pass": pas, "dtype": dtype, "shape": list(shape), "size": _size(tjit),
                    "tjit_ms": tjit["ms"], "best": best, "best_ms": peers.get(best),
                    "speed": peers[best] / tjit["ms"] if best else None,
                    "copy": tjit["gbps"] / copy["gbps"] if copy.get("gbps") else None,
                    "wrong": not tjit.get("ok", True)})
    return out


def summary(records, every_point):
    """[{op, pass, dtype, n, min, min_at, median, below: [points], wrong: [points]}] per group."""
    groups = {}
    for p in points(records):
        groups.setdefault((p["op"], p["pass"], p["dtype"]), []).append(p)
    out = []
    for (op, pas, dtype), pts in groups.items():
        rated = [p for p in pts if p["speed"] is not None]
        entry = {"op": op, "pass": pas, "dtype": dtype, "n": len(pts), "min": None, "min_at": None, "median": None,
                 "copy_min": min((p["copy"] for p in pts if p["copy"]), default=None),
                 "below": sorted((p for p in rated if p["speed"] < every_point), key=lambda p: p["speed"]),
                 "wrong": [p for p in pts if p["wrong"]]}
        if rated:
            worst = min(rated, key=lambda p: p["speed"])
            entry.update(min=worst["speed"], min_at=f"{'x'.join(map(str, worst['shape']))} (vs {worst['best']})",
                         median=statistics.median(p["speed"] for p in rated))
        out.append(entry)
    return out


def evaluate(results):
    """The dense and decode targets, in report.evaluate_targets' form."""
    out = []
    for tid, desc, kind, threshold, part in TARGETS:
        records = (results.get(part) or {}).get("records", [])
        groups = summary(records, threshold if part == "dense" else 1.0)
        rated = [g for g in groups if g["min"] is not None]
        ratio = at = note = None
        failed = any(g["wrong"] for g in groups)
        if not records:
            note = f"--only {part} not run"
        elif not rated:
            note = "no peer measured"
        elif tid == "dense_peers_median":
            g = min(rated, key=lambda g: g["median"])
            ratio, at = g["median"], f"{g['op']} {g['pass']} {g['dtype']}"
        else:
            g = min(rated, key=lambda g: g["min"])
            ratio = g["min"] if kind == "ge" else 1.0 / g["min"]
            at = f"{g['op']} {g['pass']} {g['dtype']} {g['min_at']}"
            below = sum(len(g["below"]) for g in rated)
            note = f"{below} of {sum(g['n'] for g in rated)} points below" if below else None
        if failed:
            status = "MISS"
            note = "; ".join(filter(None, [note, "tjit gave wrong results at " + ", ".join(
                f"{g['op']} {g['pass']} {g['dtype']}" for g in groups if g["wrong"])]))
        elif ratio is None:
            status = "N/A"
        elif kind == "ge":
            status = "PASS" if ratio >= threshold else "MISS"
        else:
            status = "PASS" if ratio <= threshold else "MISS"
        out.append({"id": tid, "target": desc, "kind": kind, "threshold": threshold, "ratio": ratio, "worst_at": at,
                    "status": status, "note": note})
    return out


def _fmt(v):
    return "-" if v is None else f"{v:.3f}"


def markdown(results):
    """The dense and decode sections of results.md."""
    lines = []
    for part, title, threshold, what in (
            ("dense", "Dense grid", DENSE_EVERY_POINT, "bandwidth, sizes by rule (benchmarks/grids.py; `--only dense`)"),
            ("decode", "Decode rows", DECODE_EVERY_POINT, "GPU time per call inside a CUDA graph, forward passes "
             "(`--only decode`)")):
        lines += [f"## {title}", "", f"{what}. speed = best peer's time / tjit's (above 1: tjit faster); copy = "
                  "tjit's bandwidth / the device copy's.", ""]
        records = (results.get(part) or {}).get("records", [])
        if not records:
            lines += ["not run", ""]
            continue
        groups = summary(records, threshold)
        lines += ["| op | pass | dtype | points | min speed | at (best peer) | median speed | min copy | below |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {g['op']} | {g['pass']} | {g['dtype']} | {g['n']} | {_fmt(g['min'])} | {g['min_at'] or '-'} | "
                  f"{_fmt(g['median'])} | {_fmt(g['copy_min'])} | {len(g['below'])} |" for g in groups]
        below = [p for g in groups for p in g["below"]]
        if below:
            lines += ["", f"Points below {threshold:.2f}x:", ""]
            lines += [f"- {p['op']} {p['pass']} {p['dtype']} {'x'.join(map(str, p['shape']))}: {p['speed']:.3f} "
                      f"(tjit {p['tjit_ms'] * 1e3:.2f} us, {p['best']} {p['best_ms'] * 1e3:.2f} us)" for p in below]
        lines += [f"- {n}" for n in (results.get(part) or {}).get("notes", [])] + [""]
    return lines


def write_plots(plt, results, out_dir, title):
    """<part>_<op>_<pass>.png: tjit / best peer (speed) against size, one line per dtype."""
    paths = []
    for part, threshold in (("dense", DENSE_EVERY_POINT), ("decode", DECODE_EVERY_POINT)):
        pts = points((results.get(part) or {}).get("records", []))
        for op, pas in dict.fromkeys((p["op"], p["pass"]) for p in pts):
            fig, ax = plt.subplots(figsize=(8, 4))
            for dtype in dict.fromkeys(p["dtype"] for p in pts):
                sel = sorted((p["shape"][0] if part == "decode" else p["size"], p["speed"], p["shape"][-1])
                             for p in pts if (p["op"], p["pass"], p["dtype"]) == (op, pas, dtype) and p["speed"])
                if part == "decode":
                    for cols in sorted({s[2] for s in sel}):
                        ax.plot([s[0] for s in sel if s[2] == cols], [s[1] for s in sel if s[2] == cols],
                                marker="o", markersize=3, label=f"{dtype} {cols} columns")
                else:
                    ax.plot([s[0] for s in sel], [s[1] for s in sel], marker="o", markersize=3, label=dtype)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.axhline(threshold, color="red", linewidth=0.8, linestyle="--")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("rows" if part == "decode" else ("elements" if op in ("add", "sum") else "columns"))
            ax.set_ylabel("best peer time / tjit time")
            ax.set_title(f"{part} {op} {pas} - {title}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            paths.append(os.path.join(out_dir, f"{part}_{op}_{pas}.png"))
            fig.tight_layout()
            fig.savefig(paths[-1], dpi=110)
            plt.close(fig)
    return paths
