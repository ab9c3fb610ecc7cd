"""Right and never stuck on a shared GPU: the long-row operators (softmax forward and backward,
layer_norm forward and backward, rms_norm's backward: programs that share a row wait for each other)
beside a kernel
that holds every SM but one, in a green context of a few SMs, on four streams at once and in two
CUDA graphs replayed at once.

The blocker is a hand-written PTX kernel loaded through the CUDA driver (ctypes, libcuda.so.1): one
block per SM but one (dynamic shared memory at the device's opt-in maximum, so no second block
fits an SM), each adding 1 to a `started` counter and then spinning until a flag is set. The host
waits until every block has started (reading the counter on a third stream), runs the operator on
its own stream, then sets the flag on that stream: the operator has one SM, and if any of its
programs waited for a program that cannot start, the blocker (waiting for the flag queued behind
the operator) never ends. Values are checked against aten in float64 after the blocker ends.

Each part runs in a subprocess (a hang cannot be interrupted in-process) that prints a START line
before each case and a DONE line after it; a case that does not finish in CASE_TIMEOUT seconds
fails with its operator and shape, and the subprocess is killed. Run as a script with the part's
name to see its output: python tests/python/test_shared_gpu.py blocker|green|streams|graphs."""

import ctypes
import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (a blocker kernel holding all SMs but one, green contexts); "
                                "runs on the CUDA machine")

SHAPES = [(8, 262144), (33, 262144), (4096, 12288), (4096, 16384)]
DTYPES = [torch.bfloat16, torch.float32]
LONG_ROW_OPS = ["softmax", "softmax_backward", "layer_norm", "layer_norm_backward", "rms_norm_backward"]
CASE_TIMEOUT = 120  # seconds for one case on one SM (the largest reads ~0.8 GB)
START_TIMEOUT = 120  # seconds for the subprocess to import torch and tjit

# One block per SM: thread 0 counts itself in, then polls the flag (nanosleep between polls keeps
# the SM's memory traffic low); no data, so the block only holds its SM through its shared memory.
BLOCKER_PTX = r"""
.version 8.0
.target sm_70
.address_size 64

.visible .entry tjit_test_blocker(.param .u64 started, .param .u64 flag)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p, %r1, 0;
    @%p bra DONE;
    ld.param.u64 %rd1, [started];
    ld.param.u64 %rd2, [flag];
    atom.relaxed.gpu.global.add.u32 %r2, [%rd1], 1;
WAIT:
    ld.relaxed.gpu.global.u32 %r3, [%rd2];
    setp.ne.u32 %p, %r3, 0;
    @%p bra DONE;
    nanosleep.u32 1000;
    bra.uni WAIT;
DONE:
    ret;
}
"""


# ---------------------------------------------------------------------------------------------------
# The subprocess side.


class Blocker:
    """The blocker kernel, loaded in the calling thread's current context (torch's primary one)."""

    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CUfunction_attribute
    MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97  # CUdevice_attribute

    def __init__(self, device_index):
        torch.cuda.init()
        cuda = ctypes.CDLL("libcuda.so.1")
        self.cuda = cuda
        void_p, c_int, c_uint = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        cuda.cuInit.argtypes = [c_uint]
        cuda.cuDeviceGet.argtypes = [ctypes.POINTER(c_int), c_int]
        cuda.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(c_int), c_int, c_int]
        cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(void_p), ctypes.c_char_p]
        cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(void_p), void_p, ctypes.c_char_p]
        cuda.cuFuncSetAttribute.argtypes = [void_p, c_int, c_int]
        cuda.cuLaunchKernel.argtypes = [void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, void_p,
                                        ctypes.POINTER(void_p), ctypes.POINTER(void_p)]
        cuda.cuGetErrorString.argtypes = [c_int, ctypes.POINTER(ctypes.c_char_p)]
        for fn in ("cuInit", "cuDeviceGet", "cuDeviceGetAttribute", "cuModuleLoadData", "cuModuleGetFunction",
                   "cuFuncSetAttribute", "cuLaunchKernel", "cuGetErrorString"):
            getattr(cuda, fn).restype = c_int
        self._check(cuda.cuInit(0), "cuInit")
        device = c_int()
        self._check(cuda.cuDeviceGet(ctypes.byref(device), device_index), "cuDeviceGet")
        optin = c_int()
        self._check(cuda.cuDeviceGetAttribute(ctypes.byref(optin), self.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
                    "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)")
        self.shared_bytes = optin.value
        # torch's context (the primary one) becomes current in this thread with its first allocation
        self.started = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        module = void_p()
        self._check(cuda.cuModuleLoadData(ctypes.byref(module), BLOCKER_PTX.encode() + b"\0"), "cuModuleLoadData")
        self.module = module
        function = void_p()
        self._check(cuda.cuModuleGetFunction(ctypes.byref(function), module, b"tjit_test_blocker"),
                    "cuModuleGetFunction")
        self.function = function
        self._check(cuda.cuFuncSetAttribute(function, self.MAX_DYNAMIC_SHARED_SIZE_BYTES, self.shared_bytes),
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        self.blocks = torch.cuda.get_device_properties(device_index).multi_processor_count - 1
        self.stream = torch.cuda.Stream()
        self.monitor = torch.cuda.Stream()

    def _check(self, result, what):
        if result != 0:
            text = ctypes.c_char_p()
            self.cuda.cuGetErrorString(result, ctypes.byref(text))
            raise RuntimeError(f"blocker: {what} failed with CUresult {result} ({text.value})")

    def launch(self):
        """Starts the blocker on its own stream and returns once every block is resident."""
        self.started.zero_()
        self.flag.zero_()
        torch.cuda.synchronize()
        args = [ctypes.c_void_p(self.started.data_ptr()), ctypes.c_void_p(self.flag.data_ptr())]
        params = (ctypes.c_void_p * 2)(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        self._check(self.cuda.cuLaunchKernel(self.function, self.blocks, 1, 1, 32, 1, 1, self.shared_bytes,
                                             ctypes.c_void_p(self.stream.cuda_stream), params, None),
                    "cuLaunchKernel")
        deadline = time.monotonic() + 30
        while True:
            with torch.cuda.stream(self.monitor):
                started = self.started.to("cpu").item()
            if started == self.blocks:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"blocker: {started} of {self.blocks} blocks started in 30 s")
            time.sleep(0.001)


def relative_error(got, want):
    got, want = got.double(), want.double()
    assert not got.isnan().any(), "an output the operator left unwritten or NaN"
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def limit(dtype):
    return 2e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-4


def waiting_form(plan, run, rows, cols, dtype):
    """`run` with the plan's team form forced, where one fits (the lag kernel for 2-byte rows): the
    form whose programs wait for each other, which these parts are about, whatever a table or a
    first call's tuning would choose."""
    import tjit.plans as plans
    from tjit import _C
    fitting = plans.plan(plan, rows=rows, cols=cols, dtype=dtype, device=plans.device_facts(torch.device("cuda")))
    teams = [n for n in fitting["fitting"] if n.startswith("team")]
    if not teams:
        return run
    form = "team_lag2048" if "team_lag2048" in teams and dtype.itemsize == 2 else teams[0]

    def forced():
        _C.force_plan_candidate(plan, form)
        try:
            return run()
        finally:
            _C.force_plan_candidate(plan, None)

    return forced


def make_case(name, rows, cols, dtype):
    """(run, check): run() calls the operator on the current stream and returns its outputs (inputs
    made here, on the current stream); check(outputs) raises unless they match aten in float64."""
    ops = torch.ops.tjit
    x = torch.randn(rows, cols, dtype=dtype, device="cuda") * 2 + 0.5
    if name == "add":
        y = torch.randn(rows, cols, dtype=dtype, device="cuda")
        return (lambda: ops.add(x, y, alpha=3)), (lambda out: x.double() + 3 * y.double(), )
    if name == "sum":
        return (lambda: ops.sum(x, [1])), (lambda out: x.double().sum(1), )
    if name == "softmax":
        return (lambda: ops.softmax(x, -1)), (lambda out: torch.softmax(x.double(), -1), )
    if name == "softmax_backward":
        y = torch.softmax(x.float(), -1).to(dtype)
        g = torch.randn(rows, cols, dtype=dtype, device="cuda")
        want = y.double() * (g.double() - (g.double() * y.double()).sum(-1, keepdim=True))
        return (lambda: ops.softmax_backward(g, y, -1, dtype)), (lambda out: want, )
    w = torch.randn(cols, dtype=dtype, device="cuda")
    b = torch.randn(cols, dtype=dtype, device="cuda")
    if name == "rms_norm_backward":
        dy = torch.randn(rows, cols, dtype=dtype, device="cuda")
        ds = torch.randn(rows, cols, dtype=dtype, device="cuda")
        _, rstd = ops.rms_norm_forward(x, [cols], w, 1e-5)
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        dx, dw = torch.autograd.grad((torch.nn.functional.rms_norm(xd, [cols], wd, 1e-5) * dy.double()).sum(), (xd, wd))
        dx += ds.double()
        return (waiting_form(name, lambda: ops.rms_norm_backward(dy, x, [cols], rstd, w, [True, True], ds), rows, cols,
                             dtype), (lambda out: dx, lambda out: dw))
    if name == "layer_norm":
        want = torch.ops.aten.native_layer_norm(x.double(), [cols], w.double(), b.double(), 1e-5)[0]
        return (lambda: ops.layer_norm_forward(x, [cols], w, b, 1e-5)[0]), (lambda out: want, )
    assert name == "layer_norm_backward", name
    dy = torch.randn(rows, cols, dtype=dtype, device="cuda")
    _, mean, rstd = ops.layer_norm_forward(x, [cols], w, b, 1e-5)
    _, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x.double(), [cols], w.double(), b.double(), 1e-5)
    want = torch.ops.aten.native_layer_norm_backward(dy.double(), x.double(), [cols], ref_mean, ref_rstd, w.double(),
                                                     b.double(), [True, True, True])
    return (waiting_form(name, lambda: ops.layer_norm_backward(dy, x, [cols], mean, rstd, w, b, [True, True, True]), rows,
                         cols, dtype), (lambda out: want[0], lambda out: want[1], lambda out: want[2]))


def check(outputs, wants, dtype, what):
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs, )
    for i, (out, want) in enumerate(zip(outputs, wants)):
        error = relative_error(out, want(out))
        if error > limit(dtype):
            raise AssertionError(f"{what}: output {i} off by {error:.3g} (relative to its largest value)")


def announce(state, what):
    print(f"{state} {what}", flush=True)


def part_blocker():
    blocker = Blocker(torch.cuda.current_device())
    work = torch.cuda.Stream()
    for rows, cols in SHAPES:
        for dtype in DTYPES:
            for name in LONG_ROW_OPS:
                what = f"{name} {rows}x{cols} {str(dtype).replace('torch.', '')} beside a kernel holding all SMs but one"
                announce("START", what)
                with torch.cuda.stream(work):
                    run, wants = make_case(name, rows, cols, dtype)
                    warm = run()  # compiles, tunes and fills the stream's allocator cache: nothing of that under the blocker
                    del warm
                torch.cuda.synchronize()
                blocker.launch()
                with torch.cuda.stream(work):
                    outputs = run()
                    blocker.flag.fill_(1)
                torch.cuda.synchronize()
                check(outputs, wants, dtype, what)
                announce("DONE", what)
                del outputs, run, wants


def part_green():
    from torch.cuda import green_contexts
    sms = 8
    context = green_contexts.GreenContext.create(num_sms=sms, device_id=torch.cuda.current_device())
    context.set_context()
    try:
        stream = context.Stream()
        cases = [("add", 33, 262144), ("sum", 33, 262144)] + [(name, rows, cols) for name in LONG_ROW_OPS
                                                              for rows, cols in ((33, 262144), (4096, 12288))]
        for name, rows, cols in cases:
            for dtype in DTYPES:
                what = f"{name} {rows}x{cols} {str(dtype).replace('torch.', '')} in a green context of {sms} SMs"
                announce("START", what)
                with torch.cuda.stream(stream):
                    # inputs written on the context's stream right before the operator (its first
                    # call also compiles and tunes here)
                    run, wants = make_case(name, rows, cols, dtype)
                    outputs = run()
                stream.synchronize()
                check(outputs, wants, dtype, what)
                with torch.cuda.stream(stream):
                    run, wants = make_case(name, rows, cols, dtype)  # fresh inputs, the binaries loaded
                    outputs = run()
                stream.synchronize()
                check(outputs, wants, dtype, what + " (second call)")
                announce("DONE", what)
    finally:
        context.pop_context()


def part_streams():
    # The same long-row operator launched on four streams at once, each on its own inputs: the team
    # backwards here (test_graph_capture.py's "concurrent" scenario has the softmax forward).
    for name, rows, cols, dtype in [("layer_norm_backward", 4096, 12288, torch.bfloat16),
                                    ("layer_norm_backward", 4096, 16384, torch.float32)]:
        what = f"{name} {rows}x{cols} {str(dtype).replace('torch.', '')} on four streams at once"
        announce("START", what)
        streams = [torch.cuda.Stream() for _ in range(4)]
        cases = []
        for stream in streams:
            with torch.cuda.stream(stream):
                run, wants = make_case(name, rows, cols, dtype)
                warm = run()  # compile and tune before the concurrent launches
                del warm
            cases.append((run, wants))
        torch.cuda.synchronize()
        outputs = []
        for stream, (run, _) in zip(streams, cases):
            with torch.cuda.stream(stream):
                outputs.append(run())
        torch.cuda.synchronize()
        for out, (_, wants) in zip(outputs, cases):
            check(out, wants, dtype, what)
        announce("DONE", what)


def part_graphs():
    # The same long-row operator captured in two CUDA graphs (each on its own inputs and workspace),
    # replayed at once on two streams, twice (outputs poisoned before each replay). Each graph keeps
    # its `run`, whose closure holds the inputs the graph reads: torch.cuda.graph empties the
    # allocator's cache as a capture starts, so the first graph's inputs, dropped before the second
    # capture, would be handed back to the driver and its replays would read unmapped memory.
    for name, rows, cols, dtype in [("layer_norm_backward", 4096, 12288, torch.bfloat16),
                                    ("softmax_backward", 33, 262144, torch.float32)]:
        what = f"{name} {rows}x{cols} {str(dtype).replace('torch.', '')} in two CUDA graphs replayed at once"
        announce("START", what)
        side = torch.cuda.Stream()
        captured = []  # (graph, run, outputs, wants)
        for _ in range(2):
            with torch.cuda.stream(side):
                run, wants = make_case(name, rows, cols, dtype)
                warm = run()  # compile and tune outside the capture
                del warm
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = run()
            captured.append((graph, run, static_out, wants))
        streams = [torch.cuda.Stream() for _ in captured]
        for _ in range(2):
            for _, _, out, _ in captured:
                for tensor in (out if isinstance(out, (tuple, list)) else (out, )):
                    tensor.fill_(float("nan"))
            torch.cuda.synchronize()
            for (graph, _, _, _), stream in zip(captured, streams):
                with torch.cuda.stream(stream):
                    graph.replay()
            torch.cuda.synchronize()
            for _, _, out, wants in captured:
                check(out, wants, dtype, what)
        announce("DONE", what)
        del captured, run, wants, static_out


PARTS = {"blocker": part_blocker, "green": part_green, "streams": part_streams, "graphs": part_graphs}


def main(part):
    import tjit  # noqa: F401  (registers torch.ops.tjit)
    torch.manual_seed(0)
    print("READY", flush=True)
    PARTS[part]()
    print("FINISHED", flush=True)


# ---------------------------------------------------------------------------------------------------
# The pytest side.


def run_part(part):
    """Runs one part in a subprocess, failing with the case that did not finish in time."""
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), part], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)],
                              daemon=True)
    reader.start()
    output, current, timeout = [], "starting (import torch and tjit)", START_TIMEOUT
    try:
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"hung: {current} (no progress in {timeout} s; the subprocess is killed)\n"
                                     + "".join(output[-30:]))
            if line is None:
                break
            output.append(line)
            if line.startswith("START "):
                current, timeout = line[len("START "):].strip(), CASE_TIMEOUT
            elif line.startswith(("DONE ", "READY")):
                current, timeout = f"after {current}", CASE_TIMEOUT
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    text = "".join(output)
    assert proc.returncode == 0 and "FINISHED" in text, f"{part} failed during: {current}\n" + text[-6000:]


@needs_cuda
def test_long_rows_beside_a_kernel_holding_all_sms_but_one():
    run_part("blocker")


def green_contexts_supported():
    try:
        from torch.cuda import green_contexts
    except ImportError:
        return False
    return bool(getattr(green_contexts, "SUPPORTED", hasattr(torch._C, "_CUDAGreenContext")))


@needs_cuda
@pytest.mark.skipif(not green_contexts_supported(),
                    reason="this torch has no torch.cuda.green_contexts (or was built without green context support)")
def test_operators_in_a_green_context():
    run_part("green")


@needs_cuda
def test_long_rows_on_four_streams_at_once():
    run_part("streams")


@needs_cuda
def test_long_rows_in_two_cuda_graphs_replayed_at_once():
    run_part("graphs")


def test_graphs_part_keeps_what_each_graph_reads(monkeypatch):
    # On CPU, with stand-ins for the CUDA calls: a capture frees whatever nothing references (as
    # torch.cuda.graph's empty_cache does with the allocator's cached blocks), and every replay
    # finds the inputs of its graph's case alive.
    import contextlib
    import gc
    import weakref

    made = []  # per case made: weak references to its inputs

    def fake_case(name, rows, cols, dtype):
        inputs = [torch.randn(3), torch.randn(3)]
        made.append([weakref.ref(t) for t in inputs])
        return (lambda: inputs[0] * inputs[1]), (lambda out: out, )

    class FakeGraph:
        def replay(self):
            gc.collect()
            assert all(ref() is not None for ref in self.reads), "a graph replayed after its inputs were freed"

    @contextlib.contextmanager
    def fake_capture(graph):
        gc.collect()
        graph.reads = made[-1]
        yield

    module = sys.modules[__name__]
    monkeypatch.setattr(module, "make_case", fake_case)
    monkeypatch.setattr(module, "check", lambda outputs, wants, dtype, what: None)
    monkeypatch.setattr(torch.cuda, "Stream", lambda: None)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", fake_capture)
    part_graphs()
    assert len(made) == 4


if __name__ == "__main__":
    main(sys.argv[1])
