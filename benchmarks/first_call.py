"""First calls of operators whose plans are measured choices (issue 63, item 6; rms_norm's,
add_rms_norm's and layer_norm's forwards and the norms' backwards, softmax both ways, sum's rows, add): what a fresh process's first call of a new shape class
costs when its plan is tuned there (every fitting candidate compiled and timed), when a card's
table decides, and when the kernel store already holds the choice and the binaries.

Every measurement is a new process running the same calls in order, each timed alone (host ms from
the call to its completion; the CUDA context and the inputs exist before). Scenarios:

    table          the card's table decides (as on an H200); empty kernel store, empty Triton cache:
                   the chosen candidate's compile is in the first call of a class
    tuned          TJIT_PLAN_TABLES=0 (a card without a table): the first call of a class compiles
                   and times every fitting candidate (empty store, empty Triton cache)
    default        TJIT_PLAN_TABLES=0 and TJIT_TUNE=0: the default rule, compile included
    tuned_store    TJIT_PLAN_TABLES=0 with the store a `tuned` process filled: the choice and its
                   binary are read back, nothing is compiled or timed
    table_store    the table with a store an earlier process filled

The calls (CALLS): rms_norm, add_rms_norm, layer_norm, softmax, sum and add at classes a model meets, one repeated in
the same class (3000 rows: row class 4096, already chosen in this process, so it costs a launch). Each result is checked against the
operator's definition in float64. runs processes per scenario (rounds: every scenario once per
round), medians reported. CUDA only: the CPU runs plans through Triton's interpreter, where nothing
is tuned.

    python3 benchmarks/run_benchmarks.py --only first_call

This module imports nothing heavy at import time (report.py reads its tables and target).
"""

import json
import os
import shutil
import statistics
import sys
import tempfile

# (operator, dtype, rows, columns)
CALLS = (("rms_norm", "bfloat16", 4096, 4096), ("rms_norm", "bfloat16", 16, 4096), ("rms_norm", "bfloat16", 4096, 5120),
         ("rms_norm", "bfloat16", 3000, 4096), ("add_rms_norm", "bfloat16", 4096, 4096),
         ("rms_norm", "float32", 4096, 4096), ("layer_norm", "bfloat16", 4096, 4096),
         ("layer_norm", "bfloat16", 16, 5120), ("softmax", "bfloat16", 4096, 32000),
         ("softmax_backward", "bfloat16", 4096, 32000), ("rms_norm_backward", "bfloat16", 4096, 4096),
         ("layer_norm_backward", "bfloat16", 4096, 4096), ("sum", "float32", 4, 1000000), ("sum", "bfloat16", 4096, 4096),
         ("add", "bfloat16", 4096, 4096), ("add", "float32", 1, 4096))
SCENARIOS = ("table", "tuned", "default", "tuned_store", "table_store")
# The store each warm scenario reads, filled by one untimed process of the scenario named.
FILLED_BY = {"tuned_store": "tuned", "table_store": "table"}
WARM_STORE_LIMIT_MS = 50  # a warm store's first call: the cold-start targets' bound

_SCRIPT = """\
import json, sys, time
import torch
calls = json.loads(sys.argv[1])
gen = torch.Generator(device="cuda").manual_seed(63)
inputs = []
for op, dtype, rows, cols in calls:
    dt = getattr(torch, dtype)
    x = torch.randn(rows, cols, device="cuda", dtype=dt, generator=gen)
    r = torch.randn(rows, cols, device="cuda", dtype=dt, generator=gen)
    w = torch.randn(cols, device="cuda", dtype=dt, generator=gen)
    inputs.append((x, r, w))
torch.cuda.synchronize()
import tjit
import tjit.plans as plans


def reference(op, x, r, w):
    if op in ("rms_norm_backward", "layer_norm_backward"):  # r stands for the gradient; dx
        xd = x.double().requires_grad_()
        if op == "layer_norm_backward":
            y = torch.nn.functional.layer_norm(xd, [x.shape[-1]], w.double(), r[0].double(), 1e-5)
        else:
            y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
        return torch.autograd.grad(y, xd, r.double())[0]
    if op == "layer_norm":  # r stands for the bias
        return torch.nn.functional.layer_norm(x.double(), [x.shape[-1]], w.double(), r[0].double(), 1e-5)
    if op == "softmax":
        return torch.softmax(x.double(), -1)
    if op == "softmax_backward":  # r stands for the gradient, the output is x's softmax
        y = torch.softmax(x.double(), -1).to(x.dtype).double()
        return y * (r.double() - (r.double() * y).sum(-1, keepdim=True))
    if op == "sum":
        return x.double().sum(-1)
    if op == "add":
        return x.double() + r.double()
    v = x.double() + r.double() if op == "add_rms_norm" else x.double()
    y = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    return y


def call(op, x, r, w, cols):
    if op == "add_rms_norm":
        return torch.ops.tjit.add_rms_norm(x, r, [cols], w, 1e-6)[0]
    if op == "layer_norm":
        return torch.ops.tjit.layer_norm(x, [cols], w, r[0], 1e-5)
    if op == "softmax":
        return torch.ops.tjit.softmax(x, -1)
    if op == "sum":
        return torch.ops.tjit.sum(x, [1])
    if op == "add":
        return torch.ops.tjit.add(x, r)
    return torch.ops.tjit.rms_norm(x, [cols], w, 1e-6)


def chosen(op, rows, cols, dtype, device):
    # The candidate the plan now takes for this call's class (as the call remembered it).
    dt = getattr(torch, dtype)
    if op == "add":
        return plans.plan("add", numel=rows * cols, dtype=dt, device=device).get("candidate")
    name = {"layer_norm": "layer_norm_forward", "sum": "sum_rows", "softmax": "softmax",
            "softmax_backward": "softmax_backward", "rms_norm_backward": "rms_norm_backward",
            "layer_norm_backward": "layer_norm_backward"}.get(op, "rms_norm_forward")
    extra = {"has_residual": op == "add_rms_norm"} if name == "rms_norm_forward" else {}
    return plans.plan(name, rows=rows, cols=cols, dtype=dt, device=device, **extra).get("candidate")


out = []
for (op, dtype, rows, cols), (x, r, w) in zip(calls, inputs):
    # The backwards' inputs (softmax's output, the norms' statistics) are made outside the timed call.
    want = reference(op, x, r, w)
    if op == "softmax_backward":
        y_in = torch.softmax(x.float(), -1).to(x.dtype)
        torch.cuda.synchronize()
        t = time.perf_counter()
        y = torch.ops.tjit.softmax_backward(r, y_in, -1, x.dtype)
    elif op == "rms_norm_backward":
        rstd = torch.ops.tjit.rms_norm_forward(x, [cols], w, 1e-6)[1]
        torch.cuda.synchronize()
        t = time.perf_counter()
        y = torch.ops.tjit.rms_norm_backward(r, x, [cols], rstd, w, [True, True], None)[0]
    elif op == "layer_norm_backward":
        _, mean, rstd = torch.ops.tjit.layer_norm_forward(x, [cols], w, r[0], 1e-5)
        torch.cuda.synchronize()
        t = time.perf_counter()
        y = torch.ops.tjit.layer_norm_backward(r, x, [cols], mean, rstd, w, r[0], [True, True, True])[0]
    else:
        torch.cuda.synchronize()
        t = time.perf_counter()
        y = call(op, x, r, w, cols)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3
    tol = 2e-2 if dtype != "float32" else 1e-4
    if op == "sum":  # a sum of many terms: its rounding grows with their count
        tol = tol * cols ** 0.5
    correct = bool(torch.allclose(y.double(), want, rtol=tol, atol=tol))
    out.append({"ms": ms, "correct": correct, "candidate": chosen(op, rows, cols, dtype, x.device)})
print(json.dumps({"calls": out}))
"""


def _env(scenario, store, triton_cache):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TJIT_CACHE", "TJIT_CACHE_DIR", "TJIT_PLAN_TABLES", "TJIT_TUNE", "TRITON_INTERPRET",
                        "TJIT_RECORD", "TRITON_CACHE_DIR")}
    env.update(TJIT_LOG_COMPILES="0", TJIT_CACHE_DIR=store, TRITON_CACHE_DIR=triton_cache)
    if scenario in ("tuned", "default", "tuned_store"):
        env["TJIT_PLAN_TABLES"] = "0"
    if scenario == "default":
        env["TJIT_TUNE"] = "0"
    return env


def _run(scenario, store, triton_cache, timeout):
    """One fresh process; its JSON, or {"error": ...}."""
    from overhead import run_json_process  # at run time: report.py imports this module for its tables
    return run_json_process([sys.executable, "-c", _SCRIPT, json.dumps(CALLS)], _env(scenario, store, triton_cache),
                            timeout)


def call_label(call):
    op, dtype, rows, cols = call
    return f"{op} {dtype} {rows}x{cols}"


def _summarise(samples):
    good = [s for s in samples if "error" not in s]
    out = {"runs": len(samples), "errors": [s["error"] for s in samples if "error" in s]}
    if not good:
        return out
    out["ms"] = [statistics.median(s["calls"][i]["ms"] for s in good) for i in range(len(CALLS))]
    out["correct"] = all(c["correct"] for s in good for c in s["calls"])
    out["candidates"] = [c["candidate"] for c in good[-1]["calls"]]
    return out


def run_first_call(device, smoke, runs=None, log=print, timeout=900):
    if device != "cuda":
        note = ("measured on CUDA only: a plan is tuned by timing its candidates on the GPU (on CPU the "
                "interpreter runs the default rule)")
        log(f"  note: first calls {note}")
        return {"skipped": True, "reason": note}
    runs = runs or (1 if smoke else 3)
    workdir = tempfile.mkdtemp(prefix="tjit-first-call-")
    result = {"config": {"runs": runs, "calls": [call_label(c) for c in CALLS], "scenarios": list(SCENARIOS),
                         "statistic": "median over runs of host ms from the call to its completion"}}
    try:
        shared_cache = os.path.join(workdir, "triton-cache")
        for scenario, filler in FILLED_BY.items():
            filled = _run(filler, os.path.join(workdir, f"store-{scenario}"), shared_cache, timeout)
            if "error" in filled:
                log(f"  note: filling the store for {scenario} failed: {filled['error']}")
        samples = {s: [] for s in SCENARIOS}
        for r in range(runs):
            for scenario in SCENARIOS:
                if scenario in FILLED_BY:
                    store, cache = os.path.join(workdir, f"store-{scenario}"), shared_cache
                else:
                    store = os.path.join(workdir, f"{scenario}-{r}-store")
                    cache = os.path.join(workdir, f"{scenario}-{r}-triton")
                samples[scenario].append(_run(scenario, store, cache, timeout))
        result["scenarios"] = {s: _summarise(samples[s]) for s in SCENARIOS}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for line in text_lines(result):
        log("  " + line)
    return result


def table(part):
    """(headers, rows): ms per call and scenario."""
    scenarios = [s for s in SCENARIOS if "ms" in (part.get("scenarios") or {}).get(s, {})]
    rows = []
    for i, label in enumerate(part["config"]["calls"]):
        rows.append([label] + [f"{part['scenarios'][s]['ms'][i]:.1f}" for s in scenarios])
    return ["first call, ms"] + scenarios, rows


def _text_table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)) for r in [headers] + rows]


def text_lines(part):
    if not part:
        return []
    if part.get("skipped"):
        return [f"First calls with plan choices: skipped ({part.get('reason')})"]
    lines = ["First calls with plan choices, fresh processes (median ms):"]
    lines += ["  " + row for row in _text_table(*table(part))]
    for s, e in (part.get("scenarios") or {}).items():
        if e.get("errors"):
            lines.append(f"  ERROR {s}: {e['errors'][0]}")
        if e.get("correct") is False:
            lines.append(f"  ERROR {s}: a result differs from the definition")
    return lines


def markdown(part, md_table):
    if not part:
        return ["not run", ""]
    if part.get("skipped"):
        return [f"skipped: {part.get('reason')}", ""]
    lines = [f"{part['config']['statistic']}, {part['config']['runs']} processes a scenario. table: the card's "
             "table decides (empty store and Triton cache); tuned: no table, every fitting candidate compiled and "
             "timed at a class's first call; default: no table, TJIT_TUNE=0; tuned_store / table_store: a store "
             "an earlier process filled. See benchmarks/first_call.py.", ""]
    lines += md_table(*table(part)) + [""]
    for s, e in (part.get("scenarios") or {}).items():
        if "candidates" in e:
            lines.append(f"- {s}: chosen " + ", ".join(
                f"{label}: {c}" for label, c in zip(part["config"]["calls"], e["candidates"])) +
                f"; results match the definition: {e.get('correct')}")
        for err in e.get("errors", []):
            lines.append(f"- **ERROR** {s}: {err}")
    return lines + [""]


def target(part):
    """(value, where, note, failed) of "a warm store's first call <= 50 ms": the slowest first call of
    the warm-store scenarios."""
    if not part or part.get("skipped"):
        return None, None, "first calls not measured" + (f": {part.get('reason')}" if part else ""), False
    worst = None
    problems = []
    for s in FILLED_BY:
        e = (part.get("scenarios") or {}).get(s) or {}
        if "ms" not in e:
            problems.append(f"{s} not measured" + (f": {e['errors'][0]}" if e.get("errors") else ""))
            continue
        if e.get("correct") is False:
            problems.append(f"{s}: a result differs from the definition")
        i = max(range(len(e["ms"])), key=e["ms"].__getitem__)
        if worst is None or e["ms"][i] > worst[0]:
            worst = (e["ms"][i], f"{s}, {part['config']['calls'][i]}")
    if worst is None:
        return None, None, "; ".join(problems), bool(problems)
    return worst[0], worst[1], "; ".join(problems) or None, bool(problems)
