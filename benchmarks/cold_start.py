"""Cold start: a fresh process's first call of each operator, with and without tjit's kernel store.

Every measurement is a new process (C++: tjit_bench_cold_start; Python: a `python -c` script), run
`runs` times in rounds that run every scenario once each; medians are reported. Scenarios, all
with Triton's own cache warm (a first, discarded pass fills it), so they differ only in what tjit
does:

    jit          TJIT_CACHE=0: no store, every kernel through the embedded interpreter and
                 triton.compile (a Triton cache hit): what a process paid before the store
    cold_store   an empty store folder per run: the same compiles, plus writing the store
    warm_store   a store filled by an earlier process: no Python, no Triton
    bundle       TJIT_JIT=0 and TJIT_CACHE=0, every kernel from the bundle embedded in liboperators
                 (only when it was built with -DTJIT_EMBED_KERNELS=ON): a Python-free deployment

Python Triton's first calls of the same kernels (benchmarks/triton_wrappers.py, python_baselines.py)
in a fresh process on a warm Triton cache are measured beside them. Times are host milliseconds
from the call to its completion (one synchronize); the CUDA context and the inputs exist before.
"""

import json
import os
import shutil
import statistics
import sys
import tempfile

from overhead import find_cpp_binary, run_json_process

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CPP_BINARY_NAME = "tjit_bench_cold_start"
SCENARIOS = ("jit", "cold_store", "warm_store")
OPS = ("add", "sum", "softmax", "softmax_backward", "layer_norm", "layer_norm_forward", "layer_norm_backward")

_INPUTS = """\
import json, sys, time
start = time.perf_counter()
import torch
torch.manual_seed(0)
x = torch.randn(64, 1024, device="cuda")
torch.cuda.synchronize()
context_ms = (time.perf_counter() - start) * 1e3
y = torch.randn(64, 1024, device="cuda")
w = torch.randn(1024, device="cuda")
b = torch.randn(1024, device="cuda")
grad = torch.randn(64, 1024, device="cuda")
ref_softmax = torch.softmax(x, 1)
ref_ln, mean, rstd = torch.ops.aten.native_layer_norm(x, [1024], w, b, 1e-5)
ref_ln_bwd = torch.ops.aten.native_layer_norm_backward(grad, x, [1024], mean, rstd, w, b, [True, True, True])
reference = {
    "add": torch.add(x, y, alpha=2), "sum": x.sum(1), "softmax": ref_softmax,
    "softmax_backward": torch.ops.aten._softmax_backward_data(grad, ref_softmax, 1, torch.float32),
    "layer_norm": ref_ln, "layer_norm_forward": ref_ln, "layer_norm_backward": ref_ln_bwd,
}
torch.cuda.synchronize()


def same(got, want):
    got = got if isinstance(got, (tuple, list)) else (got, )
    want = want if isinstance(want, (tuple, list)) else (want, )
    return len(got) == len(want) and all(
        g.shape == w.shape and torch.allclose(g, w, rtol=1e-3, atol=1e-3) for g, w in zip(got, want))


def first_calls(ops):
    # Times each call alone (launch to completion); compares with aten after the clock stops.
    times, correct = {}, {}
    for name, call in ops:
        t = time.perf_counter()
        result = call()
        torch.cuda.synchronize()
        times[name] = (time.perf_counter() - t) * 1e3
        correct[name] = bool(same(result, reference[name]))
    return times, correct
"""

# tjit from Python: import tjit (timed apart), then each operator's first call.
PYTHON_TJIT = _INPUTS + """
t = time.perf_counter()
import tjit
import_ms = (time.perf_counter() - t) * 1e3
ops = torch.ops.tjit
times, correct = first_calls([
    ("add", lambda: ops.add(x, y, alpha=2)),
    ("sum", lambda: ops.sum(x, [1])),
    ("softmax", lambda: ops.softmax(x, 1)),
    ("softmax_backward", lambda: ops.softmax_backward(grad, ref_softmax, 1, torch.float32)),
    ("layer_norm", lambda: ops.layer_norm(x, [1024], w, b)),
    ("layer_norm_forward", lambda: ops.layer_norm_forward(x, [1024], w, b)[0]),
    ("layer_norm_backward", lambda: ops.layer_norm_backward(grad, x, [1024], mean, rstd, w, b, [True, True, True])),
])
print(json.dumps({"context_ms": context_ms, "import_ms": import_ms, "first_call_ms": times, "correct": correct,
                  "triton_imported": "triton" in sys.modules}))
"""

# The same kernels launched by Python Triton (the benchmark's Python wrappers of tjit's kernel files).
PYTHON_TRITON = _INPUTS + """
t = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import triton
import python_baselines as pb
import triton_wrappers as tw
import_ms = (time.perf_counter() - t) * 1e3
times, correct = first_calls([
    ("add", lambda: pb.add(x, y, alpha=2)),
    ("sum", lambda: tw.sum_dim_last(x)),
    ("softmax", lambda: tw.softmax(x)),
    ("softmax_backward", lambda: tw.softmax_backward(grad, ref_softmax)),
    ("layer_norm", lambda: tw.layer_norm(x, w, b, stats=False)[0]),
    ("layer_norm_forward", lambda: tw.layer_norm(x, w, b)[0]),
    ("layer_norm_backward", lambda: tw.layer_norm_backward(grad, x, w, mean, rstd)),
])
print(json.dumps({"context_ms": context_ms, "import_ms": import_ms, "first_call_ms": times, "correct": correct,
                  "triton_imported": "triton" in sys.modules}))
"""


def _run(cmd, store, timeout, jit=True):
    """One fresh process; its JSON, or {"error": ...}."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TJIT_CACHE", "TJIT_CACHE_DIR", "TRITON_INTERPRET", "TJIT_JIT", "TJIT_RECORD")}
    env["TJIT_LOG_COMPILES"] = "0"
    if not jit:
        env["TJIT_JIT"] = "0"
    if store is None:
        env["TJIT_CACHE"] = "0"
    else:
        env["TJIT_CACHE_DIR"] = store
    return run_json_process(cmd, env, timeout)


def _summarise(samples):
    """Medians over runs of a scenario's processes (and anything that went wrong)."""
    good = [s for s in samples if "error" not in s]
    out = {"runs": len(samples), "errors": [s["error"] for s in samples if "error" in s]}
    if not good:
        return out
    out["first_call_ms"] = {op: statistics.median(s["first_call_ms"][op] for s in good)
                            for op in good[0]["first_call_ms"]}
    out["max_first_call_ms"] = max(out["first_call_ms"].values())
    out["all_first_calls_ms"] = statistics.median(sum(s["first_call_ms"].values()) for s in good)
    out["context_ms"] = statistics.median(s["context_ms"] for s in good)
    if "import_ms" in good[0]:
        out["import_ms"] = statistics.median(s["import_ms"] for s in good)
    out["correct"] = all(all(s["correct"].values()) for s in good)
    if "bundles" in good[0]:
        out["bundles"] = good[-1]["bundles"]
    for flag in ("libpython_mapped", "libtriton_mapped", "triton_imported"):
        if flag in good[0]:
            out[flag] = [bool(s[flag]) for s in good]
    if "store" in good[0]:
        out["store"] = good[-1]["store"]
    return out


def run_cold_start(device, smoke, binary=None, runs=None, log=print, timeout=600):
    if device != "cuda":
        note = "measured on CUDA only: on CPU the operators run through Triton's interpreter, which imports triton"
        # Still run the C++ program once: it must run (and say it skipped where there is no GPU).
        path = find_cpp_binary(binary, CPP_BINARY_NAME)
        checked = _run([path], None, timeout) if path else {"error": f"{CPP_BINARY_NAME} not built"}
        log(f"  note: cold start {note}; {CPP_BINARY_NAME} once, store off: {json.dumps(checked)[:300]}")
        return {"skipped": True, "reason": note, "cpp_check": checked}
    runs = runs or (1 if smoke else 5)
    path = find_cpp_binary(binary, CPP_BINARY_NAME)
    workdir = tempfile.mkdtemp(prefix="tjit-cold-start-")
    warm = os.path.join(workdir, "warm-store")
    python = [sys.executable, "-c"]
    kinds = {"python": python + [PYTHON_TJIT]}
    if path:
        kinds["cpp"] = [path]
    results = {"config": {"runs": runs, "shape": [64, 1024], "dtype": "float32", "statistic": "median over runs",
                          "ops": list(OPS)}}
    try:
        # Fill Triton's own cache (both tjit's embedded compiles and Python Triton use it), and the
        # warm store, before anything is timed.
        for name, cmd in kinds.items():
            _run(cmd, warm, timeout)
        _run(python + [PYTHON_TRITON, HERE], None, timeout)
        probe = _run(kinds["cpp"], None, timeout, jit=False) if path else {}
        embedded = any(b.get("embedded") for b in probe.get("bundles", []))
        scenarios = SCENARIOS + (("bundle",) if embedded else ())
        results["config"]["embedded_bundle"] = probe.get("bundles", []) if embedded else None
        # Rounds: each round runs every (kind, scenario) once, so a drift of the host's speed over
        # the part reaches every scenario alike and the ratios between scenarios keep. The bundle
        # is liboperators' (C++ program); `import tjit` here loads the checkout's build.
        plan = [(name, scenario) for name in kinds for scenario in (scenarios if name == "cpp" else SCENARIOS)]
        plan.append(("python_triton", "jit"))
        commands = dict(kinds, python_triton=python + [PYTHON_TRITON, HERE])
        samples = {step: [] for step in plan}
        for r in range(runs):
            for name, scenario in plan:
                if scenario in ("jit", "bundle"):
                    store = None
                elif scenario == "cold_store":
                    store = os.path.join(workdir, f"cold-{name}-{r}")
                else:
                    store = warm
                samples[(name, scenario)].append(_run(commands[name], store, timeout, jit=scenario != "bundle"))
        for name, scenario in plan:
            s = _summarise(samples[(name, scenario)])
            if name == "python_triton":
                results[name] = s
            else:
                results.setdefault(name, {})[scenario] = s
            log(f"  {name:13s} {scenario if name != 'python_triton' else '':10s} " + (
                f"max first call {s['max_first_call_ms']:8.2f} ms, all {s['all_first_calls_ms']:8.1f} ms"
                if "first_call_ms" in s else f"failed: {s['errors'][:1]}"))
        if not path:
            results["cpp"] = {"skipped": True, "reason": f"{CPP_BINARY_NAME} not found (build tjit's benchmarks)"}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results
