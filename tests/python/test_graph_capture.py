"""First calls and CUDA graph captures (GPU only).

A first call compiles (or reads the kernel store), loads the binary and may autotune: work that CUDA
forbids on any thread while another thread captures in the global mode, and that cannot time
anything on a stream being captured. Each scenario runs in a fresh process with an empty kernel
store (so every call is a first call) and a timeout (a hang fails the test):

* another thread captures a graph (global and thread-local modes) while this one makes first
  calls of every operator, long rows included (those autotune): the results are right and the
  other thread's graph replays right;
* a first call inside a capture of its own stream: the graph replays right (tuning deferred);
* tjit.prepare before a capture: the capture then compiles and tunes nothing;
* a long-row operator on four streams at once, and inside two graphs replayed concurrently.

Run as a script (`python3 tests/python/test_graph_capture.py <scenario>`) it runs one scenario and
prints one JSON line.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

# (operator, shape, dtype): long rows autotune on their first call.
CASES = [("softmax", (8, 262144), torch.float32), ("softmax", (33, 4096), torch.bfloat16),
         ("layer_norm", (8, 262144), torch.float32), ("layer_norm", (64, 5000), torch.bfloat16),
         ("add", (1000, 999), torch.float32), ("sum", (333, 4097), torch.float32),
         ("rms_norm", (96, 12288), torch.bfloat16)]


def _inputs(op, shape, dtype, gen):
    x = torch.randn(shape, dtype=dtype, device="cuda", generator=gen)
    if op == "layer_norm":
        w = torch.randn(shape[-1], dtype=dtype, device="cuda", generator=gen)
        b = torch.randn(shape[-1], dtype=dtype, device="cuda", generator=gen)
        return (x, w, b)
    if op == "add":
        return (x, torch.randn(shape, dtype=dtype, device="cuda", generator=gen))
    if op == "rms_norm":
        return (x, torch.randn(shape[-1], dtype=dtype, device="cuda", generator=gen))
    return (x, )


def _tjit_call(tjit, op, args):
    if op == "softmax":
        return tjit.softmax(args[0], -1)
    if op == "layer_norm":
        return tjit.layer_norm(args[0], [args[0].shape[-1]], args[1], args[2], 1e-5)
    if op == "add":
        return tjit.add(args[0], args[1], alpha=0.5)
    if op == "rms_norm":
        return tjit.rms_norm(args[0], [args[0].shape[-1]], args[1], 1e-6)
    return tjit.sum(args[0], [-1])


def _aten_call(op, args):
    if op == "softmax":
        return torch.softmax(args[0].float(), -1)
    if op == "layer_norm":
        x, w, b = (a.float() for a in args)
        return torch.nn.functional.layer_norm(x, [x.shape[-1]], w, b, 1e-5)
    if op == "add":
        return args[0].float() + 0.5 * args[1].float()
    if op == "rms_norm":
        x, w = (a.float() for a in args)
        return torch.nn.functional.rms_norm(x, [x.shape[-1]], w, 1e-6)
    return args[0].float().sum(-1)


def _error(got, want):
    got = got.float()
    assert not got.isnan().any(), "NaN in the output"
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def _captured_workload(mode, started, done, result):
    # Captures x = x * 1.0001 + 1 (at most 2000 times) and keeps the capture open until `done`, then
    # replays the graph once; the same steps on the CPU in float32 give the exact expected value.
    try:
        stream = torch.cuda.Stream()
        x = torch.ones(1 << 20, device="cuda")
        graph = torch.cuda.CUDAGraph()
        steps = 0
        with torch.cuda.graph(graph, stream=stream, capture_error_mode=mode):
            started.set()
            while not done.is_set() or steps < 8:
                if steps < 2000:
                    x.mul_(1.0001).add_(1.0)
                    steps += 1
                else:
                    time.sleep(0.001)
        x.fill_(1.0)
        graph.replay()
        torch.cuda.synchronize()
        want = torch.ones(1)
        for _ in range(steps):
            want.mul_(1.0001).add_(1.0)
        result["graph_error"] = abs(x[0].item() - want.item()) / want.item()
        result["steps"] = steps
    except Exception as exc:  # reported by the main thread
        result["graph_exception"] = repr(exc)
        started.set()


def scenario_other_thread_captures(mode):
    import tjit
    stream = torch.cuda.Stream()
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = [(op, _inputs(op, shape, dtype, gen)) for op, shape, dtype in CASES]
    torch.cuda.synchronize()
    started, done, result = threading.Event(), threading.Event(), {}
    capture = threading.Thread(target=_captured_workload, args=(mode, started, done, result))
    capture.start()
    started.wait()
    outputs = []
    try:
        # Nothing reserved: the outputs' cudaMalloc, too, happens while the other thread captures.
        with torch.cuda.stream(stream):
            for op, args in inputs:
                outputs.append(_tjit_call(tjit, op, args))
    finally:
        done.set()
        capture.join()
    stream.synchronize()  # this test's own wait: in the global mode CUDA refuses it during the capture
    errors = {f"{op} {tuple(args[0].shape)} {args[0].dtype}": _error(out, _aten_call(op, args))
              for (op, args), out in zip(inputs, outputs)}
    return {"errors": errors, **result}


def scenario_first_call_in_capture():
    import tjit
    gen = torch.Generator(device="cuda").manual_seed(1)
    inputs = [(op, _inputs(op, shape, dtype, gen)) for op, shape, dtype in CASES]
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = [_tjit_call(tjit, op, args) for op, args in inputs]
    for out in outputs:
        out.fill_(float("nan"))  # poison: only the replay writes them
    graph.replay()
    torch.cuda.synchronize()
    return {"errors": {f"{op} {tuple(args[0].shape)} {args[0].dtype}": _error(out, _aten_call(op, args))
                       for (op, args), out in zip(inputs, outputs)}}


def scenario_prepare():
    import tjit
    gen = torch.Generator(device="cuda").manual_seed(2)
    inputs = [(op, _inputs(op, shape, dtype, gen)) for op, shape, dtype in CASES]
    for op, args in inputs:
        tjit.prepare(_tjit_call, tjit, op, args)
    torch.cuda.synchronize()
    print("PREPARED", file=sys.stderr, flush=True)  # the compile log after this line must be empty
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = [_tjit_call(tjit, op, args) for op, args in inputs]
    for out in outputs:
        out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    return {"errors": {f"{op} {tuple(args[0].shape)} {args[0].dtype}": _error(out, _aten_call(op, args))
                       for (op, args), out in zip(inputs, outputs)}}


def scenario_concurrent_streams_and_graphs():
    import tjit
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = [torch.randn(33, 262144, device="cuda", generator=gen) for _ in range(4)]
    want = [torch.softmax(t, -1) for t in x]
    tjit.softmax(x[0], -1)  # the first call (tuning) outside the streams
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(4)]
    outputs = [None] * 4
    for _ in range(3):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                outputs[i] = tjit.softmax(x[i], -1)
    torch.cuda.synchronize()
    errors = {f"stream {i}": _error(outputs[i], want[i]) for i in range(4)}
    graphs, graph_out = [], []
    for i in range(2):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=streams[i]):
            graph_out.append(tjit.softmax(x[i], -1))
        graphs.append(g)
    for out in graph_out:
        out.fill_(float("nan"))
    for _ in range(3):
        for g, s in zip(graphs, streams):
            with torch.cuda.stream(s):
                g.replay()
    torch.cuda.synchronize()
    errors.update({f"graph {i}": _error(graph_out[i], want[i]) for i in range(2)})
    return {"errors": errors}


SCENARIOS = {
    "global": lambda: scenario_other_thread_captures("global"),
    "thread_local": lambda: scenario_other_thread_captures("thread_local"),
    "first_call_in_capture": scenario_first_call_in_capture,
    "prepare": scenario_prepare,
    "concurrent": scenario_concurrent_streams_and_graphs,
}


def _run(name, tmp_path, timeout=300):
    env = dict(os.environ, TJIT_CACHE_DIR=str(tmp_path / "store"), TJIT_LOG_COMPILES="1")
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), name], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"scenario {name} did not finish in {timeout} s (a hang)") from exc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def _check_errors(result, log):
    for case, error in result["errors"].items():
        assert error < 2e-2, f"{case}: relative error {error}\n{log[-3000:]}"


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs and captures need a GPU")


@needs_cuda
@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_first_calls_while_another_thread_captures(mode, tmp_path):
    result, log = _run(mode, tmp_path)
    _check_errors(result, log)
    assert "graph_exception" not in result, f"the other thread's capture failed: {result['graph_exception']}\n{log}"
    assert result["graph_error"] < 1e-6, result
    assert "autotuned" in log, "no first call autotuned: the scenario no longer covers tuning\n" + log[-3000:]


@needs_cuda
def test_first_call_inside_capture_of_its_stream(tmp_path):
    result, log = _run("first_call_in_capture", tmp_path)
    _check_errors(result, log)


@needs_cuda
def test_prepare_before_capture(tmp_path):
    result, log = _run("prepare", tmp_path)
    _check_errors(result, log)
    before, _, after = log.partition("PREPARED")
    assert "[tjit] compiled" in before, "prepare compiled nothing\n" + log[-3000:]
    assert "[tjit] compiled" not in after and "[tjit] autotun" not in after, \
        "the capture after tjit.prepare still compiled or tuned:\n" + after[-3000:]


@needs_cuda
def test_long_rows_on_four_streams_and_two_graphs(tmp_path):
    result, log = _run("concurrent", tmp_path)
    _check_errors(result, log)


if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
