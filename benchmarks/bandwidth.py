"""Memory bandwidth of tjit's operators against aten, Python Triton, FlagGems, Liger-Kernel and a
device-to-device copy.

GB/s = (nominal bytes read + bytes written) / time, the same byte count for every implementation
of a case (so GB/s ratios are time ratios). Time: on CUDA, the median replay time of a CUDA graph
of the call (triton.testing.do_bench_cudagraph), so small sizes measure kernels rather than the
host's launch gaps (host overhead is overhead.py's job); calls that cannot be captured fall back to
triton.testing.do_bench (CUDA events, L2 flushed before each call); on CPU (Triton's
interpreter) the median of a few perf_counter timings, one in a smoke run. Each record says how it was
timed ("timing": "graph", "plain" or "perf_counter"; "capture_error" when a graph could not be
captured) and the notes name every implementation / case timed plainly. When one call's data is
under ~50 MB (fits in L2), the timed function rotates over several independent input sets.

Parts: the sweep (powers of two: add and sum over element counts, softmax and layer_norm over
column counts at 4096 rows) and, with llm=True, the shapes language models run (llm_shapes:
softmax at vocabulary sizes, layer_norm at hidden sizes, each tensor at least 256 MiB).

Implementations per case:
    tjit            torch.ops.tjit.<op> (layer_norm backward: torch.ops.tjit.layer_norm_backward)
    aten            the torch function (layer_norm backward: aten.native_layer_norm_backward)
    python_triton   the same Triton kernel from Python (triton_wrappers.py, python_baselines.add)
    tutorial        softmax forward only: the Triton tutorial's fused softmax (python_baselines)
    flaggems        FlagGems (flag_gems.ops): add, sum, softmax fwd/bwd, layer_norm fwd/bwd (peers.py)
    liger           Liger-Kernel: softmax fwd/bwd, layer_norm fwd/bwd up to 65536 columns (peers.py)
                    Backward passes of both call the library's backward function on saved statistics,
                    as the autograd engine would. A peer that is absent (not installed, CPU) or
                    lacks the op or size gets a "skipped" record with a note.
    copy            dst.copy_(src) moving the same number of bytes (bytes/2 read + bytes/2 written); on
                    CUDA the faster of a graph replay and a plainly timed call (do_bench), as graph
                    memcpy nodes run slower than plain copies at some sizes

Nominal bytes (e = element size, M rows, N columns, stats are fp32):
    add        3 * n * e                       sum        n * e + e
    softmax    fwd 2*M*N*e, bwd 3*M*N*e        layer_norm fwd 2*M*N*e + 2*N*e (inference: no mean/rstd)
                                               layer_norm bwd 3*M*N*e + 3*N*e + 8*M
The same count for every implementation, whatever else it moves: aten's, FlagGems' and Liger's
layer_norm forwards also store mean/rstd (FlagGems in x's dtype, so its backward reads 4*M bytes
of them for bf16), FlagGems' sum stores ~sqrt(n) partial sums, Liger's layer_norm backward
reduces per-SM partial dw/db in fp32 (2 * SMs * N * 4 bytes each way); none of that is counted.
"""

import itertools
import math
import statistics
import time

import torch
import torch.nn.functional as F

import peers as peer_lib
import python_baselines as pb
import triton_wrappers as tw

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
L2_ROTATE_BYTES = 50e6  # below this much data per call, rotate over several input sets
MAX_SETS = 8
MAX_FOOTPRINT_BYTES = 40e9  # skip cases whose tensors would need more than this
TUTORIAL_MAX_COLS = 65536  # the tutorial kernel keeps a whole row in registers
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 1e-2}
IMPL_ORDER = ("tjit", "aten", "compile", "python_triton", "tutorial", "flaggems", "liger", "copy")


def sweep(smoke):
    """Sizes: flat element counts (add, sum), rows and column counts (softmax, layer_norm)."""
    if smoke:
        return {"flat": [2**10, 2**12], "rows": 4, "cols": [128, 256]}
    return {"flat": [2**k for k in range(10, 29, 2)], "rows": 4096, "cols": [2**k for k in range(7, 19)]}


# The rows language models run: softmax over a vocabulary (Llama 2, GPT-2, Llama 3, Qwen 2, Gemma
# 3), layer_norm over a hidden size; rows so that one bf16 tensor holds at least 256 MiB.
VOCAB_SIZES = (32000, 50257, 128256, 151936, 262144)
HIDDEN_SIZES = (2048, 4096, 5120, 7168, 8192, 12288, 16384)
LLM_MIN_TENSOR_BYTES = 256 * 2**20


def llm_rows(cols, element_bytes=2, multiple=64):
    """The fewest rows, a multiple of `multiple`, for which rows x cols elements fill LLM_MIN_TENSOR_BYTES."""
    return multiple * math.ceil(LLM_MIN_TENSOR_BYTES / (cols * element_bytes * multiple))


def llm_shapes(smoke):
    """(rows, columns) per operator for the LLM part; tiny and not powers of two in smoke runs."""
    if smoke:
        hidden = [[5, 320], [3, 448]]
        return {"softmax": [[3, 500], [2, 1000]], "layer_norm": hidden, "rms_norm": hidden, "add_rms_norm": hidden}
    hidden = [[llm_rows(n), n] for n in HIDDEN_SIZES]
    return {"softmax": [[llm_rows(n), n] for n in VOCAB_SIZES], "layer_norm": hidden, "rms_norm": hidden,
            "add_rms_norm": hidden}


class Timer:

    def __init__(self, device, smoke, warmup_ms=20, rep_ms=60):
        self.cuda = device == "cuda"
        self.smoke = smoke
        self.warmup_ms = warmup_ms
        self.rep_ms = rep_ms
        self.graph_timings = 0
        self.plain_timings = 0
        self.last_timing = None  # how the last call timed: "graph", "plain" or "perf_counter"
        self.last_capture_error = None  # why the last call could not be captured (plain timings)

    def describe(self):
        if self.cuda:
            return (f"triton.testing.do_bench_cudagraph(rep={self.rep_ms}, return_mode='median'): replays of a "
                    f"CUDA graph of each call ({self.graph_timings} timings; {self.plain_timings} not capturable, "
                    f"timed with do_bench(warmup={self.warmup_ms}, rep={self.rep_ms}) instead)")
        if self.smoke:
            return "one time.perf_counter timing of one call (smoke run: CPU, Triton interpreter)"
        return "median of 3 time.perf_counter timings after 1 warm-up call (CPU, Triton interpreter)"

    def __call__(self, fn):
        """Median milliseconds per call of fn; then last_timing says how it was timed and
        last_capture_error why a CUDA graph could not be captured (None unless "plain")."""
        self.last_capture_error = None
        if self.cuda:
            import triton.testing
            # Replays of a CUDA graph of fn: GPU time without the host's launch gaps, so small
            # sizes measure the kernels, not the CPU (host overhead has its own benchmark).
            # Anything that cannot be captured falls back to timing plain calls.
            try:
                ms = triton.testing.do_bench_cudagraph(fn, rep=self.rep_ms, return_mode="median")
                self.graph_timings += 1
                self.last_timing = "graph"
                return ms
            except Exception as exc:  # noqa: BLE001 - capture unsupported for this fn
                torch.cuda.synchronize()
                self.plain_timings += 1
                self.last_timing = "plain"
                self.last_capture_error = _first_error_line(exc)
                return triton.testing.do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median")
        self.last_timing = "perf_counter"
        # A smoke run checks the harness, not the kernels: one timed call, no warm-up (the
        # interpreter's times mean nothing, and its long rows take seconds a call).
        if not self.smoke:
            fn()
        samples = []
        for _ in range(1 if self.smoke else 3):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)


def tjit_softmax_backward(grad_output, output, dim, input_dtype):
    """torch.ops.tjit.softmax_backward, with or without the trailing input_dtype argument (the
    schema has (grad_output, output, dim, input_dtype), like aten's _softmax_backward_data)."""
    op = torch.ops.tjit.softmax_backward
    if len(op.default._schema.arguments) >= 4:
        return op(grad_output, output, dim, input_dtype)
    return op(grad_output, output, dim)


def rel_err(got, ref, floor=0.0, chunk=2**24):
    """max|got - ref| / max(max|ref|, floor); inf on shape mismatch or NaN where ref has none.
    Works through chunks of `chunk` elements, so multi-GB outputs need little extra memory."""
    if got.shape != ref.shape:
        return math.inf
    got = got.detach().reshape(-1)
    ref = ref.detach().reshape(-1)
    if got.numel() == 0:
        return 0.0
    max_diff, max_ref = 0.0, 0.0
    for start in range(0, got.numel(), chunk):
        g = got[start:start + chunk].double()
        r = ref[start:start + chunk].double()
        if (torch.isnan(g) & ~torch.isnan(r)).any():
            return math.inf
        max_diff = max(max_diff, (g - r).abs().max().item())
        max_ref = max(max_ref, r.abs().max().item())
    scale = max(max_ref, floor)
    return max_diff / (scale if scale > 0 else 1.0)


def compile_static(fn):
    """torch.compile(fn) as a model of one hidden size gets it: static shapes, and more recompiles
    than Dynamo's default limit (every case recompiles the same code object for its shape and
    dtype), past which it would run the function eagerly."""
    import torch._dynamo
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 256))
            break
    return torch.compile(fn, dynamic=False)


def _gb(v):
    return f"{v:8.1f}" if v >= 10 else f"{v:8.4f}"


def _first_error_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


class Runner:

    def __init__(self, device, smoke, timer, ops_filter=None, dtypes=None, log=print, peers=None, impls_filter=None,
                 passes=("fwd", "bwd"), rounds=1):
        self.device = device
        # Each implementation is timed `rounds` times, the order rotated each round, and its median
        # kept: at a few microseconds a call one timing of the same kernel moves by a few percent
        # with the order and the capture, more than the differences a decode point has to show.
        self.rounds = max(1, rounds)
        self.passes = passes  # the decode grid times forward passes alone
        # Only these implementations (IMPL_ORDER names; "copy" included) when given: an A/B of two
        # tjit builds times tjit and the copy alone.
        self.impls_filter = impls_filter
        # FlagGems and Liger-Kernel ({name: peers.Peer}); absent ones carry the reason.
        self.peers = peer_lib.load(device) if peers is None else peers
        self.cuda = device == "cuda"
        self.smoke = smoke
        self.timer = timer
        self.ops_filter = ops_filter
        self.dtypes = dtypes or list(DTYPES)
        self.log = log
        self.records = []
        self.notes = []
        self.copy_cache = {}
        self.max_sets = 2 if smoke else MAX_SETS
        self.generator = None  # made at the first draw (randn)
        self.max_footprint = MAX_FOOTPRINT_BYTES
        if self.cuda:
            total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
            self.max_footprint = min(MAX_FOOTPRINT_BYTES, 0.8 * total)

    # -------------------------------------------------------------------------------- helpers

    def n_sets(self, nbytes):
        if nbytes >= L2_ROTATE_BYTES:
            return 1
        return max(1, min(self.max_sets, math.ceil(2 * L2_ROTATE_BYTES / max(nbytes, 1))))

    def randn(self, *shape, dtype, requires_grad=False):
        # A generator of our own: a peer whose call fails inside a graph capture can leave the
        # default CUDA generator registered with that dead capture, and every later draw from it fails.
        if self.generator is None:
            self.generator = torch.Generator(device=self.device).manual_seed(0)
        return torch.randn(*shape, dtype=dtype, device=self.device, requires_grad=requires_grad,
                           generator=self.generator)

    def free(self):
        if self.cuda:
            torch.cuda.empty_cache()

    def copy_gbps(self, nbytes, dtype):
        """(ms, GB/s) of dst.copy_(src) moving `nbytes` in all (nbytes/2 each way), memoised."""
        elt = torch.empty((), dtype=dtype).element_size()
        numel = max(1, int(nbytes // (2 * elt)))
        key = (numel, dtype)
        if key not in self.copy_cache:
            sets = [(self.randn(numel, dtype=dtype), torch.empty(numel, dtype=dtype, device=self.device))
                    for _ in range(self.n_sets(2 * numel * elt))]
            it = itertools.cycle(sets)

            def run():
                src, dst = next(it)
                dst.copy_(src)

            ms = self.timer(run)
            timing = self.timer.last_timing
            if self.cuda:
                # A copy_ captured in a CUDA graph becomes a memcpy node, which on an H200 runs at
                # ~2.8 TB/s for some sizes (512 MB, 1.5 GB) where a plain copy_ reaches ~4.2 TB/s
                # (measured 2026-11-22); the device's copy bandwidth is the better of the two.
                import triton.testing
                plain = triton.testing.do_bench(run, warmup=self.timer.warmup_ms, rep=self.timer.rep_ms,
                                                return_mode="median")
                if plain < ms:
                    ms, timing = plain, "plain"
            self.copy_cache[key] = (ms, 2 * numel * elt / ms / 1e6, timing)
            del sets, it
        return self.copy_cache[key]

    def case(self, op, pas, dtype_name, shape, nbytes, footprint, make_sets, impls, check, skip_notes=None):
        """Measures one case. impls: {name: make(input_set) -> zero-argument callable, or None when
        skipped (skip_notes: {name: why})}; the callable's result goes to
        check(name, result, input_set) -> relative error (first set only)."""
        dtype = DTYPES[dtype_name]
        base = {"op": op, "pass": pas, "dtype": dtype_name, "shape": list(shape), "numel": math.prod(shape),
                "bytes": int(nbytes)}
        label = f"{op} {pas} {dtype_name} {'x'.join(map(str, shape))}"
        if pas not in self.passes:
            return
        if footprint > self.max_footprint:
            note = f"{label}: skipped, needs ~{footprint / 1e9:.0f} GB (limit {self.max_footprint / 1e9:.0f} GB)"
            self.notes.append(note)
            self.log("  " + note)
            return
        if self.impls_filter:
            impls = {name: make for name, make in impls.items() if name in self.impls_filter}
        sets = make_sets(self.n_sets(nbytes))
        line = []
        recs = {}
        for name, make in impls.items():
            recs[name] = rec = dict(base, impl=name)
            if make is None:
                rec["skipped"] = True
                if (skip_notes or {}).get(name):
                    rec["note"] = skip_notes[name]
        timed = [name for name in impls if impls[name] is not None]
        for round_index in range(self.rounds):
            shift = round_index % max(1, len(timed))
            for name in timed[shift:] + timed[:shift]:
                rec = recs[name]
                if "error" in rec:
                    continue
                it = fns = None
                try:
                    fns = [impls[name](s) for s in sets]
                    if round_index == 0:
                        err = check(name, fns[0](), sets[0])
                        rec["max_rel_err"] = err
                        rec["ok"] = bool(err <= TOLERANCE[dtype])
                    it = itertools.cycle(fns)
                    rec.setdefault("ms_rounds", []).append(self.timer(lambda: next(it)()))
                    rec["timing"] = self.timer.last_timing
                    if self.timer.last_capture_error:
                        rec["capture_error"] = self.timer.last_capture_error
                except Exception as exc:  # recorded; the other implementations still run
                    rec["error"] = _first_error_line(exc)
                    rec.pop("ms_rounds", None)
                    if isinstance(exc, torch.OutOfMemoryError if hasattr(torch, "OutOfMemoryError") else MemoryError):
                        self.free()
                    self.log(f"  {label}: {name} failed: {rec['error']}")
                it = fns = None  # drop this implementation's outputs and graphs before the next one
        for name, rec in recs.items():
            if "ms_rounds" in rec:
                rec["ms"] = ms = statistics.median(rec["ms_rounds"])
                if self.rounds == 1:
                    del rec["ms_rounds"]
                rec["gbps"] = nbytes / ms / 1e6
                line.append(f"{name} {_gb(rec['gbps'])}" + ("" if rec["ok"] else "(WRONG)"))
            elif "error" in rec:
                line.append(f"{name} error")
            self.records.append(rec)
        sets = None
        if nbytes > 1e9:
            self.free()
        if self.impls_filter and "copy" not in self.impls_filter:
            self.log(f"  {label:<34} GB/s: " + "  ".join(line))
            return
        try:
            ms, gbps, timing = self.copy_gbps(nbytes, dtype)
            self.records.append(dict(base, impl="copy", ms=ms, gbps=gbps, timing=timing))
            line.append(f"copy {_gb(gbps)}")
        except Exception as exc:
            self.records.append(dict(base, impl="copy", error=_first_error_line(exc)))
        self.log(f"  {label:<34} GB/s: " + "  ".join(line))

    def note_once(self, note):
        if note not in self.notes:
            self.notes.append(note)
            self.log("  note: " + note)

    def tjit_or_none(self, op, make):
        if hasattr(torch.ops.tjit, op):
            return make
        self.note_once(f"torch.ops.tjit.{op} does not exist yet: tjit skipped in the {op} bandwidth cases")
        return None

    def peer_impls(self, op, pas, shape, inputs):
        """({peer: make or None}, {peer: why skipped}) for one case: make(input_set) binds the
        peer's (op, pas) to inputs(input_set) (the argument tuple peers.Peer.bind takes)."""
        impls, skipped = {}, {}
        for name, peer in self.peers.items():
            why = peer.why_not(op, pas, shape)
            if why is None:
                impls[name] = lambda s, peer=peer: peer.bind(op, pas, *inputs(s))
                continue
            impls[name], skipped[name] = None, why
            if not peer.available:
                self.note_once(f"{name}: {why}; skipped in every case")
            else:
                self.note_once(f"{name} {op} {pas}: {why}: skipped")
        return impls, skipped

    def capture_notes(self):
        """One note per (implementation, op, pass) timed with do_bench because its calls could not
        be captured in a CUDA graph (copy excepted: it is always timed both ways)."""
        plain = {}
        for r in self.records:
            if r.get("timing") == "plain" and r["impl"] != "copy":
                plain.setdefault((r["impl"], r["op"], r["pass"]), []).append(r)
        for (impl, op, pas), recs in plain.items():
            cases = ", ".join(f"{r['dtype']} {'x'.join(map(str, r['shape']))}" for r in recs)
            self.note_once(f"{impl} {op} {pas}: not capturable in a CUDA graph, timed with do_bench at {cases} "
                           f"(first error: {recs[0].get('capture_error')})")

    # ------------------------------------------------------------------------------------ ops

    def run_add(self, sizes):
        """sizes: element counts."""
        for dtype_name in self.dtypes:
            dtype = DTYPES[dtype_name]
            e = torch.empty((), dtype=dtype).element_size()
            for n in sizes:
                nbytes = 3 * n * e

                def make_sets(k, n=n, dtype=dtype):
                    return [(self.randn(n, dtype=dtype), self.randn(n, dtype=dtype)) for _ in range(k)]

                def check(name, got, s):
                    return rel_err(got, torch.add(*s))

                impls = {"tjit": self.tjit_or_none("add", lambda s: (lambda: torch.ops.tjit.add(*s))),
                         "aten": lambda s: (lambda: torch.add(*s)),
                         "python_triton": lambda s: (lambda: pb.add(*s))}
                peers, skipped = self.peer_impls("add", "fwd", [n], lambda s: s)
                self.case("add", "fwd", dtype_name, [n], nbytes, (2 * self.n_sets(nbytes) + 3) * n * e, make_sets,
                          {**impls, **peers}, check, skipped)

    def run_sum(self, sizes):
        """sizes: element counts."""
        for dtype_name in self.dtypes:
            dtype = DTYPES[dtype_name]
            e = torch.empty((), dtype=dtype).element_size()
            for n in sizes:
                nbytes = n * e + e

                def make_sets(k, n=n, dtype=dtype):
                    return [self.randn(n, dtype=dtype) for _ in range(k)]

                def check(name, got, x, n=n):
                    # A sum of n randn values is ~sqrt(n) in size; cancellation must not inflate the error.
                    return rel_err(got.float(), x.double().sum().float(), floor=math.sqrt(n))

                impls = {"tjit": self.tjit_or_none("sum", lambda x: (lambda: torch.ops.tjit.sum(x))),
                         "aten": lambda x: (lambda: torch.sum(x)),
                         "python_triton": lambda x: (lambda: tw.sum_all(x))}
                peers, skipped = self.peer_impls("sum", "fwd", [n], lambda x: (x, ))
                self.case("sum", "fwd", dtype_name, [n], nbytes, (self.n_sets(nbytes) + 1) * n * e, make_sets,
                          {**impls, **peers}, check, skipped)

    def run_softmax(self, shapes):
        """shapes: [rows, columns] pairs."""
        for dtype_name in self.dtypes:
            dtype = DTYPES[dtype_name]
            e = torch.empty((), dtype=dtype).element_size()
            for m, n in shapes:
                mn = m * n
                # forward
                nbytes = 2 * mn * e

                def make_fwd(k, n=n, dtype=dtype):
                    return [self.randn(m, n, dtype=dtype) for _ in range(k)]

                def check_fwd(name, got, x):
                    return rel_err(got, torch.softmax(x.float(), -1))

                compiled = self._compiled(lambda x: torch.softmax(x, -1))
                impls = {"tjit": self.tjit_or_none("softmax", lambda x: (lambda: torch.ops.tjit.softmax(x, -1))),
                         "aten": lambda x: (lambda: torch.softmax(x, -1)),
                         "compile": (lambda x: (lambda: compiled(x))) if compiled else None,
                         "python_triton": lambda x: (lambda: tw.softmax(x)),
                         "tutorial": (lambda x: (lambda: pb.tutorial_softmax(x))) if n <= TUTORIAL_MAX_COLS else None}
                peers, skipped = self.peer_impls("softmax", "fwd", [m, n], lambda x: (x, ))
                self._note_uncompiled(compiled, skipped)
                self.case("softmax", "fwd", dtype_name, [m, n], nbytes, (self.n_sets(nbytes) + 3) * mn * e, make_fwd,
                          {**impls, **peers}, check_fwd, skipped)

                # backward: grad_in = out * (grad_out - sum(grad_out * out))
                nbytes = 3 * mn * e

                def make_bwd(k, n=n, dtype=dtype):
                    return [(self.randn(m, n, dtype=dtype), torch.softmax(self.randn(m, n, dtype=dtype), -1))
                            for _ in range(k)]

                def check_bwd(name, got, s, dtype=dtype):
                    go, o = s
                    ref = torch.ops.aten._softmax_backward_data(go.float(), o.float(), -1, torch.float32)
                    return rel_err(got, ref)

                compiled = self._compiled(lambda go, o, dtype=dtype: torch.ops.aten._softmax_backward_data(go, o, -1,
                                                                                                          dtype))
                impls = {"tjit": self.tjit_or_none("softmax_backward", lambda s, dtype=dtype:
                                                   (lambda: tjit_softmax_backward(s[0], s[1], -1, dtype))),
                         "aten": lambda s, dtype=dtype:
                         (lambda: torch.ops.aten._softmax_backward_data(s[0], s[1], -1, dtype)),
                         "compile": (lambda s: (lambda: compiled(*s))) if compiled else None,
                         "python_triton": lambda s: (lambda: tw.softmax_backward(s[0], s[1]))}
                peers, skipped = self.peer_impls("softmax", "bwd", [m, n], lambda s, dtype=dtype: (s[0], s[1], dtype))
                self._note_uncompiled(compiled, skipped)
                self.case("softmax", "bwd", dtype_name, [m, n], nbytes, (2 * self.n_sets(nbytes) + 3) * mn * e,
                          make_bwd, {**impls, **peers}, check_bwd, skipped)

    def run_layer_norm(self, shapes):
        """shapes: [rows, columns] pairs."""
        eps = 1e-5
        for dtype_name in self.dtypes:
            dtype = DTYPES[dtype_name]
            e = torch.empty((), dtype=dtype).element_size()
            for m, n in shapes:
                mn = m * n
                # forward for inference (weight and bias in the input's dtype): tjit and the Python
                # wrapper store no mean/rstd; aten's native_layer_norm does, uncounted
                nbytes = 2 * mn * e + 2 * n * e

                def make_fwd(k, n=n, dtype=dtype):
                    return [(self.randn(m, n, dtype=dtype), self.randn(n, dtype=dtype), self.randn(n, dtype=dtype))
                            for _ in range(k)]

                def check_fwd(name, got, s, n=n):
                    x, w, b = s
                    return rel_err(got, F.layer_norm(x.float(), (n, ), w.float(), b.float(), eps))

                def tjit_fwd(s, n=n):
                    return lambda: torch.ops.tjit.layer_norm(s[0], [n], s[1], s[2], eps)

                compiled = self._compiled(lambda x, w, b, n=n: F.layer_norm(x, (n, ), w, b, eps))
                impls = {"tjit": self.tjit_or_none("layer_norm", tjit_fwd),
                         "aten": lambda s, n=n: (lambda: F.layer_norm(s[0], (n, ), s[1], s[2], eps)),
                         "compile": (lambda s: (lambda: compiled(*s))) if compiled else None,
                         "python_triton": lambda s: (lambda: tw.layer_norm(s[0], s[1], s[2], eps, stats=False)[0])}
                peers, skipped = self.peer_impls("layer_norm", "fwd", [m, n], lambda s: (*s, eps))
                self._note_uncompiled(compiled, skipped)
                self.case("layer_norm", "fwd", dtype_name, [m, n], nbytes, (self.n_sets(nbytes) + 3) * mn * e,
                          make_fwd, {**impls, **peers}, check_fwd, skipped)

                # backward: dx, dw, db from the backward operators / kernels
                nbytes = 3 * mn * e + 3 * n * e + 8 * m

                def make_bwd(k, n=n, dtype=dtype):
                    return [(self.randn(m, n, dtype=dtype, requires_grad=True),
                             self.randn(n, dtype=dtype, requires_grad=True),
                             self.randn(n, dtype=dtype, requires_grad=True),
                             self.randn(m, n, dtype=dtype)) for _ in range(k)]

                def triton_bwd(s):
                    x, w, b, dy = s
                    with torch.no_grad():
                        _, mean, rstd = tw.layer_norm(x.detach(), w.detach(), b.detach(), eps)
                    xd, wd = x.detach(), w.detach()
                    return lambda: tw.layer_norm_backward(dy, xd, wd, mean, rstd)

                def check_bwd(name, got, s, n=n):
                    x, w, b, dy = s
                    xf = x.detach().float().requires_grad_()
                    wf = w.detach().float().requires_grad_()
                    bf = b.detach().float().requires_grad_()
                    ref = torch.autograd.grad(F.layer_norm(xf, (n, ), wf, bf, eps), (xf, wf, bf), dy.float())
                    return max(rel_err(g, r) for g, r in zip(got, ref))

                # The backward operators themselves (dx, dw, db), as the autograd engine calls
                # them: tjit.layer_norm_backward against aten.native_layer_norm_backward.
                def op_bwd(forward_op, backward_op):

                    def make(s, n=n):
                        x, w, b, dy = (t.detach() for t in s)
                        with torch.no_grad():
                            _, mean, rstd = forward_op(x, [n], w, b, eps)
                        return lambda: backward_op(dy, x, [n], mean, rstd, w, b, [True, True, True])

                    return make

                def compiled_bwd(s):
                    """The backward torch.compile's forward records (AOTAutograd's), as the engine runs it."""
                    leaves = [t.detach().requires_grad_() for t in s[:3]]
                    return self._grads([compiled(*leaves)], leaves, [s[3]])

                impls = {"tjit": self.tjit_or_none("layer_norm_backward", op_bwd(
                    torch.ops.tjit.layer_norm_forward, torch.ops.tjit.layer_norm_backward)),
                         "aten": op_bwd(torch.ops.aten.native_layer_norm, torch.ops.aten.native_layer_norm_backward),
                         "compile": compiled_bwd if compiled else None,
                         "python_triton": triton_bwd}
                # The peers' backward functions too (peers.py computes their mean/rstd once, here).
                peers, skipped = self.peer_impls("layer_norm", "bwd", [m, n],
                                                 lambda s: (*(t.detach() for t in s), eps))
                self._note_uncompiled(compiled, skipped)
                self.case("layer_norm", "bwd", dtype_name, [m, n], nbytes, (4 * self.n_sets(nbytes) + 4) * mn * e,
                          make_bwd, {**impls, **peers}, check_bwd, skipped)


    def _compiled(self, fn):
        """torch.compile(fn) for one case, as torch.compile of the same function would give a user;
        None on CPU (inductor's compile time is not what the smoke run checks)."""
        if not self.cuda:
            self.note_once("compile: torch.compile peers run on CUDA only; skipped on CPU")
            return None
        return compile_static(fn)

    @staticmethod
    def _note_uncompiled(compiled, skipped):
        if compiled is None:
            skipped["compile"] = "torch.compile peers run on CUDA only"

    @staticmethod
    def _grads(out, inputs, grad):
        """A zero-argument callable: the gradients of `out` (already computed, its graph kept) for
        `inputs`, as the autograd engine runs the backward of whatever recorded it."""
        return lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True)

    def run_rms_norm(self, shapes, residual=False):
        """shapes: [rows, columns] pairs. rms_norm, or with residual add_rms_norm (the residual add
        fused in: (rms_norm(x + r), x + r)); forward and backward, weight in the input's dtype."""
        op = "add_rms_norm" if residual else "rms_norm"
        eps = 1e-6
        for dtype_name in self.dtypes:
            dtype = DTYPES[dtype_name]
            e = torch.empty((), dtype=dtype).element_size()
            for m, n in shapes:
                mn = m * n
                tensors = 2 if residual else 1  # row tensors read (x[, r]); as many written (y[, x + r])
                nbytes = 2 * tensors * mn * e + n * e

                def make_fwd(k, n=n, dtype=dtype):
                    return [tuple(self.randn(m, n, dtype=dtype) for _ in range(tensors)) + (self.randn(n, dtype=dtype), )
                            for _ in range(k)]

                def reference(s, n=n):
                    v = (s[0] + s[1]) if residual else s[0]
                    return F.rms_norm(v.float(), (n, ), s[-1].float(), eps), v

                def check_fwd(name, got, s):
                    ref, v = reference(s)
                    if residual:
                        return max(rel_err(got[0], ref), rel_err(got[1], v))
                    return rel_err(got, ref)

                def torch_fwd(x, r, w, n=n):
                    if residual:
                        v = x + r
                        return F.rms_norm(v, (n, ), w, eps), v
                    return F.rms_norm(x, (n, ), w, eps)

                def bind(fn):
                    return lambda s: (lambda: fn(*((s[0], s[1], s[2]) if residual else (s[0], None, s[1]))))

                if residual:
                    tjit_fwd = bind(lambda x, r, w, n=n: torch.ops.tjit.add_rms_norm(x, r, [n], w, eps))
                else:
                    tjit_fwd = bind(lambda x, r, w, n=n: torch.ops.tjit.rms_norm(x, [n], w, eps))
                compiled = self._compiled(torch_fwd)
                impls = {"tjit": self.tjit_or_none(op, tjit_fwd), "aten": bind(torch_fwd),
                         "compile": bind(compiled) if compiled else None}
                peers, skipped = self.peer_impls(op, "fwd", [m, n], lambda s: (*s, eps))
                self._note_uncompiled(compiled, skipped)
                self.case(op, "fwd", dtype_name, [m, n], nbytes, (tensors * self.n_sets(nbytes) + 3) * mn * e,
                          make_fwd, {**impls, **peers}, check_fwd, skipped)

                # backward: dx (and with a residual the gradient of x + r added in; input and
                # residual receive the same tensor) and dw, from the forward's saved statistics.
                nbytes = (3 + (1 if residual else 0)) * mn * e + 2 * n * e + 4 * m

                def make_bwd(k, n=n, dtype=dtype):
                    # (x, [r,] w, dy[, d(x + r)])
                    return [tuple(self.randn(m, n, dtype=dtype) for _ in range(tensors)) + (self.randn(n, dtype=dtype), )
                            + tuple(self.randn(m, n, dtype=dtype) for _ in range(tensors)) for _ in range(k)]

                def reference_grads(s, n=n):
                    leaves = [t.detach().float().requires_grad_() for t in s[:tensors + 1]]
                    if residual:
                        v = leaves[0] + leaves[1]
                        loss = (F.rms_norm(v, (n, ), leaves[2], eps) * s[3].float()).sum() + (v * s[4].float()).sum()
                        dx, _, dw = torch.autograd.grad(loss, leaves)
                    else:
                        dx, dw = torch.autograd.grad(F.rms_norm(leaves[0], (n, ), leaves[1], eps), leaves, s[2].float())
                    return dx, dw

                def check_bwd(name, got, s):
                    dx, dw = reference_grads(s)
                    return max(rel_err(got[0], dx), rel_err(got[-1], dw))

                def tjit_bwd(s, n=n):
                    x, w = s[0], s[tensors]
                    dy = s[tensors + 1]
                    with torch.no_grad():
                        if residual:
                            _, v, rstd = torch.ops.tjit.add_rms_norm_forward(x, s[1], [n], w, eps)
                        else:
                            v, (_, rstd) = x, torch.ops.tjit.rms_norm_forward(x, [n], w, eps)
                    ds = s[-1] if residual else None
                    return lambda: torch.ops.tjit.rms_norm_backward(dy, v, [n], rstd, w, [True, True], ds)

                def autograd_bwd(fn):
                    """The backward the autograd engine runs for fn's forward (graph kept, re-run)."""

                    def make(s):
                        leaves = [t.detach().requires_grad_() for t in s[:tensors + 1]]
                        out = fn(leaves[0], leaves[1] if residual else None, leaves[-1])
                        if residual:
                            outs, grads = list(out), [s[tensors + 1], s[tensors + 2]]
                            inputs = (leaves[0], leaves[2])  # d input (= d residual) and dw
                        else:
                            outs, grads = [out], [s[tensors + 1]]
                            inputs = (leaves[0], leaves[1])
                        return self._grads(outs, inputs, grads)

                    return make

                impls = {"tjit": self.tjit_or_none("rms_norm_backward", tjit_bwd),
                         "aten": autograd_bwd(torch_fwd),
                         "compile": autograd_bwd(compiled) if compiled else None}
                peers, skipped = self.peer_impls(op, "bwd", [m, n], lambda s: (*(t.detach() for t in s), eps))
                self._note_uncompiled(compiled, skipped)
                self.case(op, "bwd", dtype_name, [m, n], nbytes,
                          ((2 * tensors + 2) * self.n_sets(nbytes) + 6) * mn * e, make_bwd, {**impls, **peers},
                          check_bwd, skipped)

    def run_add_rms_norm(self, shapes):
        self.run_rms_norm(shapes, residual=True)


OPS = ("add", "sum", "softmax", "layer_norm", "rms_norm", "add_rms_norm")


def run_bandwidth(device, smoke, ops_filter=None, dtypes=None, warmup_ms=20, rep_ms=60, log=print, llm=False,
                  impls_filter=None, grid=None, passes=("fwd", "bwd"), rounds=1):
    """The sweep (powers of two; softmax and layer_norm over a fixed row count), with llm=True
    the LLM part: softmax at vocabulary sizes and layer_norm at hidden sizes (llm_shapes), or the
    sizes of grid ({op: sizes}, as grids.dense_grid and grids.decode_grid make them).
    impls_filter: measure only these implementations (IMPL_ORDER names); passes: "fwd", "bwd";
    rounds: timings of each implementation at each case, in rotated order (the median is kept)."""
    timer = Timer(device, smoke, warmup_ms, rep_ms)
    runner = Runner(device, smoke, timer, ops_filter, dtypes, log,
                    peers={} if impls_filter and not set(impls_filter) & {"flaggems", "liger"} else None,
                    impls_filter=impls_filter, passes=passes, rounds=rounds)
    if grid is not None:
        sizes = grid
        per_op = dict(grid)
    elif llm:
        sizes = llm_shapes(smoke)
        per_op = {op: sizes[op] for op in ("softmax", "layer_norm", "rms_norm", "add_rms_norm")}
    else:
        sizes = sweep(smoke)
        rows_by_cols = [[sizes["rows"], n] for n in sizes["cols"]]
        per_op = {"add": sizes["flat"], "sum": sizes["flat"], "softmax": rows_by_cols, "layer_norm": rows_by_cols}
    timings = {}
    for op, op_sizes in per_op.items():
        if ops_filter and op not in ops_filter:
            continue
        start = time.perf_counter()
        getattr(runner, f"run_{op}")(op_sizes)
        timings[op] = round(time.perf_counter() - start, 1)
        log(f"  ({op}: {timings[op]} s)")
    runner.capture_notes()
    return {"config": {"device": device, "timer": timer.describe(), "rounds": runner.rounds, "sizes": sizes,
                       "dtypes": runner.dtypes,
                       "peers": peer_lib.describe(runner.peers),
                       "l2_rotate_below_bytes": L2_ROTATE_BYTES, "max_input_sets": runner.max_sets,
                       "max_footprint_bytes": runner.max_footprint, "tutorial_max_cols": TUTORIAL_MAX_COLS,
                       "tolerance": {str(k).replace("torch.", ""): v for k, v in TOLERANCE.items()},
                       "seconds_per_op": timings},
            "records": runner.records, "notes": runner.notes}
