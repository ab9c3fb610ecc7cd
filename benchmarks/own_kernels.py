"""Host time per launch of a user's own Triton kernel (issue 64): Python Triton's `kernel[grid](...)`,
tjit.jit's, libcuda's cuLaunchKernel called through ctypes on the same cubin with everything prepared
ahead (the floor of a launch from Python), and tjit's bare C++ TritonJitFunction launch.

Two kernels of benchmarks/kernels/launch_overhead_kernels.py, launched tiny (grid (1,)) on fp32 CUDA
tensors allocated once:

    4_args    copy_scale_kernel(x, out, n, BLOCK=1024)                               n = 1000
    14_args   args14_kernel(x, y, z, out, n, x_stride, y_stride, shift, alpha, beta, gamma, eps,
                            BLOCK=1024, USE_Z=True): 4 pointers, 4 ints, 4 floats, 2 constexprs

    triton          kernel[(1,)](...), Python Triton's launch
    tjit_jit        tjit.jit(kernel)[(1,)](...), the subscript in every call, as users write it
    tjit_jit_bound  launch = tjit.jit(kernel)[(1,)] made once, then launch(...): the launch without
                    the subscript (tjit_jit - tjit_jit_bound is what the subscript costs)
    ctypes_floor    cuLaunchKernel from libcuda.so.1 through ctypes: the CUfunction of the CompiledKernel
                    Triton's launch returned (compiled.function), grid (1, 1, 1), block 32 * num_warps,
                    metadata.shared bytes of shared memory, torch's current stream, and kernelParams an
                    array of void* to ctypes values made once: each non-constexpr parameter of the
                    compiled signature in order (pointers as CUdeviceptr, ints and floats in the
                    signature's C type), then the trailing pointers Triton's launcher passes (Triton
                    3.6: global and profile scratch), null. Nothing is converted per call: one ctypes
                    call and a test of its CUresult.
    cpp             tjit_bench_overhead's own_4_args / own_14_args (benchmarks/cpp/bench_overhead.cpp,
                    given --own-kernel-file): TritonJitFunction::operator() of the same kernel with the
                    same arguments from C++, taken from the C++ part's JSON

Statistic as overhead.py's: the median over rounds of (host time of N back-to-back launches) / N,
torch.cuda.synchronize() before each round only, all eight (kernel, implementation) pairs round-robin
in one process after a warm-up. Before timing, each implementation launches once into an output
filled with a poison value, and the output is compared with torch's result (and the poison where the
kernel must not write); one that raises or differs is not timed, and its error is recorded and
printed as an ERROR line.

Ratios per kernel: tjit_jit / triton, tjit_jit / ctypes_floor, tjit_jit / cpp, tjit_jit_bound /
triton. Issue 64's targets (report.py): tjit_jit <= 0.30x triton at 4 and 14 arguments, below the
ctypes floor, and <= 1.5x the C++ launch.

CUDA only. Without a GPU nothing is timed: Python Triton launches CPU tensors only through its
interpreter (TRITON_INTERPRET=1), and tjit.jit hands interpreted kernels to Triton, so both columns
would time Triton's interpreter, and there is no CUfunction for the floor. The part is then skipped
with that reason; under TRITON_INTERPRET=1 (run_benchmarks' CPU smoke) both kernels are still run
once through the interpreter, by kernel[grid] and tjit.jit(kernel)[grid], and checked.

    python3 benchmarks/run_benchmarks.py --only overhead        # with the rest of the overhead part
    python3 benchmarks/own_kernels.py [--smoke] [--cpp-json F] [--no-cpp] [--out F.json]   # alone

This module imports nothing heavy at import time (report.py reads its tables and targets).
"""

import argparse
import ctypes
import importlib.util
import inspect
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_FILE = os.path.join(HERE, "kernels", "launch_overhead_kernels.py")
KERNEL_MODULE = "launch_overhead_kernels"
IMPLS = ("triton", "tjit_jit", "tjit_jit_bound", "ctypes_floor")
COLUMNS = IMPLS + ("cpp", )
RATIOS = ("tjit_jit/triton", "tjit_jit/ctypes_floor", "tjit_jit/cpp", "tjit_jit_bound/triton")
GRID = (1, )
N = 1000
BLOCK = 1024
SHIFT = 5
POISON = -777.0
CASE_NAMES = ("4_args", "14_args")  # make_cases' cases, and the C++ part's own_<case> figures
CPP_KEY_OF = "own_{case}"  # tjit_bench_overhead's figure for a case
# Issue 64's targets: report.py's TARGETS id -> the ratio its value is (the largest over the kernels).
TARGET_RATIOS = {"py_jit_vs_triton": "tjit_jit/triton", "py_jit_vs_floor": "tjit_jit/ctypes_floor",
                 "py_jit_vs_cpp": "tjit_jit/cpp"}
# A non-constexpr parameter's ctypes type by its type in Triton's signature (triton/backends/nvidia/
# driver.py: ty_to_cpp, and FLOAT_STORAGE_TYPE / pack_fp32 for floats: fp32 goes as a 4-byte float).
CTYPE_OF = {"i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
            "i64": ctypes.c_int64, "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
            "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "f32": ctypes.c_float,
            "fp64": ctypes.c_double}


class LaunchError(RuntimeError):
    """An implementation could not be set up or launched; the message says why."""


# ------------------------------------------------------------------------------------- kernels


def load_kernels():
    """The kernel module, imported under its own name in sys.modules (tjit.jit registers a kernel
    under its module-level name; Triton reads TRITON_INTERPRET when the file is executed)."""
    module = sys.modules.get(KERNEL_MODULE)
    if module is not None and os.path.realpath(getattr(module, "__file__", "")) == os.path.realpath(KERNEL_FILE):
        return module
    spec = importlib.util.spec_from_file_location(KERNEL_MODULE, KERNEL_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[KERNEL_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[KERNEL_MODULE]
        raise
    return module


class Case:
    """One kernel's launch: its arguments (allocated once), the expected output, and the calls."""

    def __init__(self, name, kernel, args, constexprs, out, expected, per_call, bound):
        self.name, self.kernel, self.args, self.constexprs = name, kernel, args, constexprs
        self.out, self.expected = out, expected
        self.per_call = per_call  # per_call(k): a no-argument callable making k[GRID](...) each call
        self.bound = bound  # bound(launch): a no-argument callable calling launch(...)
        names = list(getattr(kernel, "arg_names", None) or inspect.signature(kernel.fn).parameters)
        if len(names) != len(args) + len(constexprs):
            raise AssertionError(f"{name}: the kernel has {len(names)} parameters, the case passes "
                                 f"{len(args) + len(constexprs)}")
        self.params = len(names)
        self.named = dict(zip(names, args), **constexprs)  # every argument by parameter name


def make_cases(torch, module, device):
    """The two cases on `device`. The calls are written out (no *args / **kwargs unpacking), as a
    user's launch is; each implementation's call has the same form."""
    gen = torch.Generator().manual_seed(64)

    def randn(n):
        return torch.randn(n, generator=gen).to(device)

    f32 = dict(device=device, dtype=torch.float32)

    x4, out4 = randn(N), torch.empty(N, **f32)
    k4 = module.copy_scale_kernel
    case4 = Case("4_args", k4, (x4, out4, N), {"BLOCK": BLOCK}, out4, x4 * 2.0,
                 lambda k: lambda: k[GRID](x4, out4, N, BLOCK=BLOCK),
                 lambda launch: lambda: launch(x4, out4, N, BLOCK=BLOCK))

    x, y, z = randn(2 * N), randn(3 * N), randn(N)
    out = torch.empty(N + SHIFT, **f32)
    alpha, beta, gamma, eps = 0.5, -1.25, 2.0, 1e-3
    expected = torch.full((N + SHIFT, ), POISON, **f32)
    expected[SHIFT:] = alpha * x[::2] + beta * y[::3] + gamma * z + eps
    k14 = module.args14_kernel
    case14 = Case("14_args", k14, (x, y, z, out, N, 2, 3, SHIFT, alpha, beta, gamma, eps),
                  {"BLOCK": BLOCK, "USE_Z": True}, out, expected,
                  lambda k: lambda: k[GRID](x, y, z, out, N, 2, 3, SHIFT, alpha, beta, gamma, eps, BLOCK=BLOCK,
                                            USE_Z=True),
                  lambda launch: lambda: launch(x, y, z, out, N, 2, 3, SHIFT, alpha, beta, gamma, eps, BLOCK=BLOCK,
                                                USE_Z=True))
    return [case4, case14]


def check(torch, case, fn, sync):
    """Launch fn once into the poisoned output; None when it matches, else why not. Returns what fn
    returned as well (Triton's launch returns its CompiledKernel)."""
    case.out.fill_(POISON)
    sync()
    value = fn()
    sync()
    got = case.out.float().cpu()
    want = case.expected.float().cpu()
    if torch.allclose(got, want, rtol=1e-5, atol=1e-5):
        return None, value
    bad = (~torch.isclose(got, want, rtol=1e-5, atol=1e-5)).nonzero().flatten()
    i = int(bad[0])
    untouched = int((got == POISON).sum())
    return (f"output differs from torch's at {len(bad)} of {got.numel()} elements (first: [{i}] = {got[i].item()}, "
            f"expected {want[i].item()}; {untouched} elements still hold the poison {POISON})"), value


# ------------------------------------------------------------------------------ the ctypes floor


def trailing_launcher_params():
    """The names of the pointer parameters Triton's CUDA launcher appends after the kernel's own, read
    from the installed Triton's triton/backends/nvidia/driver.py (3.6: global_scratch, profile_scratch;
    earlier releases fewer). Raises when the source no longer reads as expected."""
    from triton.backends.nvidia import driver as nvidia_driver
    source = inspect.getsource(nvidia_driver.make_launcher)
    names = re.findall(r'params\.append\("&(\w+)"\)', source)
    if not names and "scratch" in source:
        raise LaunchError("cannot tell which trailing parameters Triton's launcher passes: "
                          f"{nvidia_driver.__file__}'s make_launcher no longer has params.append(\"&...\"); "
                          "read it and update own_kernels.trailing_launcher_params")
    return names


def kernel_params(compiled, named, trailing):
    """[(name, signature type, ctypes value)]: what Triton's launcher passes to cuLaunchKernelEx for
    `compiled`, given the launch's arguments by name: each non-constexpr parameter of the compiled
    signature in order, then the trailing pointers (null: the floor refuses kernels that need scratch)."""
    signature = getattr(getattr(compiled, "src", None), "signature", None)
    if not isinstance(signature, dict):
        raise LaunchError(f"the CompiledKernel has no src.signature dict (got {type(signature).__name__}); "
                          "this Triton's CompiledKernel differs from 3.6's")
    params = []
    for name, ty in signature.items():
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):
            raise LaunchError(f"parameter {name}: tuple type {ty!r}: the floor does not flatten tuples")
        if name not in named:
            raise LaunchError(f"parameter {name} of the compiled signature is not among the launch's arguments")
        value = named[name]
        if ty.startswith("*"):
            pointer = value.data_ptr() if hasattr(value, "data_ptr") else value
            if not isinstance(pointer, int):
                raise LaunchError(f"parameter {name} ({ty}): {type(value).__name__} is no pointer")
            params.append((name, ty, ctypes.c_uint64(pointer)))
        elif ty in CTYPE_OF:
            params.append((name, ty, CTYPE_OF[ty](value)))
        else:
            raise LaunchError(f"parameter {name}: type {ty} is not supported by the ctypes floor (fp16/bf16 "
                              "scalars, tensor descriptors)")
    return params + [(name, "*", ctypes.c_uint64(0)) for name in trailing]


_libcuda = None


def libcuda():
    global _libcuda
    if _libcuda is None:
        try:
            _libcuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise LaunchError(f"cannot load libcuda.so.1 through ctypes: {exc}") from exc
        _libcuda.cuLaunchKernel.restype = ctypes.c_int
        _libcuda.cuCtxGetCurrent.restype = ctypes.c_int
        _libcuda.cuGetErrorName.restype = ctypes.c_int
    return _libcuda


def cuda_error(cuda, code):
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(ctypes.c_int(code), ctypes.byref(name)) == 0 and name.value:
        return f"{name.value.decode()} ({code})"
    return f"CUresult {code}"


def launch_problems(meta):
    """What in a CompiledKernel's metadata a plain cuLaunchKernel with null scratch pointers cannot give
    (Triton's launcher allocates scratch and sets launch attributes for these); [] when none."""
    problems = [f"{field} = {getattr(meta, field)}" for field in
                ("global_scratch_size", "profile_scratch_size", "launch_cooperative_grid", "launch_pdl")
                if getattr(meta, field, 0)]
    if getattr(meta, "num_ctas", 1) != 1:
        problems.append(f"num_ctas = {meta.num_ctas}")
    return problems


def ctypes_floor(compiled, named, stream, grid=GRID):
    """(launch, info): launch() is one cuLaunchKernel of `compiled` with every argument prepared here;
    info describes what it passes. Raises LaunchError for what a plain cuLaunchKernel cannot launch as
    Triton does (scratch memory, clusters, cooperative or PDL launches)."""
    if not (hasattr(compiled, "metadata") and hasattr(compiled, "_init_handles")):
        raise LaunchError(f"kernel[grid](...) returned {type(compiled).__name__}, not Triton's CompiledKernel")
    meta = compiled.metadata
    problems = launch_problems(meta)
    if problems:
        raise LaunchError("the cubin needs what a plain cuLaunchKernel with null scratch does not give: "
                          + ", ".join(problems))
    compiled._init_handles()
    function = compiled.function
    if not function:
        raise LaunchError("the CompiledKernel has no loaded CUfunction (compiled.function is empty)")
    cuda = libcuda()
    context = ctypes.c_void_p()
    code = cuda.cuCtxGetCurrent(ctypes.byref(context))
    if code != 0 or not context.value:
        raise LaunchError(f"no current CUDA context on this thread (cuCtxGetCurrent: {cuda_error(cuda, code)}, "
                          f"context {context.value})")
    params = kernel_params(compiled, named, trailing_launcher_params())
    values = [v for _, _, v in params]
    array = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    block = 32 * meta.num_warps
    args = (ctypes.c_void_p(function), ctypes.c_uint(gx), ctypes.c_uint(gy), ctypes.c_uint(gz), ctypes.c_uint(block),
            ctypes.c_uint(1), ctypes.c_uint(1), ctypes.c_uint(meta.shared), ctypes.c_void_p(stream), array, None)
    call = cuda.cuLaunchKernel

    def launch():
        code = call(*args)
        if code:
            raise LaunchError(f"cuLaunchKernel: {cuda_error(cuda, code)}")

    launch.keep_alive = (values, array, args)
    info = {"params": [f"{name}: {ty} as {type(v).__name__}" for name, ty, v in params], "block": block,
            "shared": meta.shared, "num_warps": meta.num_warps, "stream": stream}
    return launch, info


# ------------------------------------------------------------------------------------- the part


def cpp_figure(cpp, case):
    """(us, note): the C++ part's bare TritonJitFunction launch of this case's kernel with its
    arguments (own_<case>), or None and why not."""
    if not cpp:
        return None, "the C++ part did not run"
    if cpp.get("skipped"):
        return None, f"the C++ part was skipped: {cpp.get('reason')}"
    key = CPP_KEY_OF.format(case=case)
    value = (cpp.get("us_per_call") or {}).get(key)
    if value is None:
        return None, f"tjit_bench_overhead reported no {key} (it needs --own-kernel-file)"
    if (cpp.get("checks") or {}).get(key) is False:
        return None, f"tjit_bench_overhead's {key} gave a wrong result"
    return value, f"tjit_bench_overhead's {key}: the same kernel and arguments from C++"


def _message(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def interpreter_checks(log):
    """CPU, TRITON_INTERPRET=1: each kernel once through kernel[grid] and tjit.jit(kernel)[grid] (both
    Triton's interpreter), checked against torch. {case: {impl: True or the error}}."""
    import torch
    import tjit
    module = load_kernels()
    out = {}
    for case in make_cases(torch, module, "cpu"):
        out[case.name] = {}
        for impl, fn in (("triton", case.per_call(case.kernel)), ("tjit_jit", case.per_call(tjit.jit(case.kernel)))):
            try:
                why, _ = check(torch, case, fn, lambda: None)
            except Exception as exc:
                why = _message(exc)
            out[case.name][impl] = True if why is None else why
            if why is not None:
                log(f"  ERROR: own kernels {case.name}/{impl} through the interpreter: {why}")
    return out


def run_own_kernels(device, smoke, cpp=None, log=print):
    """The part's results (see the module's docstring); `cpp`: the C++ part's results, for its figure."""
    calls = 5 if smoke else 1000
    rounds = 3 if smoke else 25
    warmup = 2 if smoke else 50
    result = {"config": {"device": device, "grid": list(GRID), "n": N, "dtype": "float32", "calls_per_round": calls,
                         "rounds": rounds, "warmup_calls": warmup,
                         "statistic": "median over rounds of host us per launch", "kernel_file":
                         os.path.relpath(KERNEL_FILE, os.path.dirname(HERE))},
              "cases": {}, "notes": [], "errors": []}
    if device != "cuda":
        result["skipped"] = True
        result["reason"] = ("needs a CUDA GPU: without one Python Triton launches only through its interpreter "
                            "(TRITON_INTERPRET=1), tjit.jit hands interpreted kernels to Triton, and there is no "
                            "CUfunction for the ctypes floor, so nothing here would measure a launch")
        log(f"  note: own kernels skipped: {result['reason']}")
        if os.environ.get("TRITON_INTERPRET") == "1":
            result["interpreter_checks"] = interpreter_checks(log)
            log("  own kernels through the interpreter: " + ", ".join(
                f"{c}/{i} {'ok' if v is True else 'FAILED'}" for c, d in result["interpreter_checks"].items()
                for i, v in d.items()))
        return result

    import torch
    import triton
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    from overhead import measure_round_robin
    result["config"]["triton"] = triton.__version__

    def sync():
        torch.cuda.synchronize()

    cpp_of = {}
    for name in CASE_NAMES:
        cpp_us, cpp_note = cpp_figure(cpp, name)
        cpp_of[name] = cpp_us
        result.setdefault("cpp", {})[name] = {"us_per_launch": cpp_us, "source": cpp_note}
        if cpp_us is None:
            result["notes"].append(f"{name}: cpp column empty: {cpp_note}")
            log(f"  note: {name}: cpp column empty: {cpp_note}")

    def fail(case, impl, why):
        case_entry = result["cases"][case.name]
        case_entry["errors"][impl] = why
        case_entry["checks"][impl] = False
        result["errors"].append(f"{case.name}/{impl}: {why}")
        log(f"  ERROR: own kernels {case.name}/{impl}: {why}")

    import tjit
    jit = getattr(tjit, "jit", None)
    module = load_kernels()
    cases = make_cases(torch, module, "cuda")
    fns, compiled_of = {}, {}
    for case in cases:
        result["cases"][case.name] = {"kernel": case.kernel.__name__ if hasattr(case.kernel, "__name__") else
                                      str(case.kernel), "params": case.params, "us_per_launch": {}, "ratios": {},
                                      "checks": {}, "errors": {}}
        made = {"triton": lambda case=case: case.per_call(case.kernel)}
        if jit is None:
            for impl in ("tjit_jit", "tjit_jit_bound"):
                fail(case, impl, f"this tjit ({tjit.__file__}) has no tjit.jit: build tjit from a branch with "
                     "ops/python_kernels.py")
        else:
            made["tjit_jit"] = lambda case=case: case.per_call(jit(case.kernel))
            made["tjit_jit_bound"] = lambda case=case: case.bound(jit(case.kernel)[GRID])
        # Triton's, then tjit's; the floors after every case's (a wrong floor could fault the context).
        for impl, make in made.items():
            try:
                fn = make()
                start = time.perf_counter()
                why, value = check(torch, case, fn, sync)
                result["cases"][case.name].setdefault("first_launch_with_check_ms", {})[impl] = (
                    (time.perf_counter() - start) * 1e3)
            except Exception as exc:
                why, value = _message(exc), None
            if why is not None:
                fail(case, impl, why)
                continue
            result["cases"][case.name]["checks"][impl] = True
            fns[f"{case.name}/{impl}"] = fn
            if impl == "triton":
                compiled_of[case.name] = value
    for case in cases:
        entry = result["cases"][case.name]
        if case.name not in compiled_of:
            fail(case, "ctypes_floor", "no CompiledKernel: Triton's launch failed")
            continue
        try:
            compiled = compiled_of[case.name]
            fn, info = ctypes_floor(compiled, case.named, torch.cuda.current_stream().cuda_stream)
            entry["signature"] = {k: str(v) for k, v in compiled.src.signature.items()}
            entry["ctypes_floor"] = info
            why, _ = check(torch, case, fn, sync)
        except Exception as exc:
            why = _message(exc)
        if why is not None:
            fail(case, "ctypes_floor", why)
            continue
        entry["checks"]["ctypes_floor"] = True
        fns[f"{case.name}/ctypes_floor"] = fn
    # Round-robin: case by case, in the order of IMPLS.
    order = [f"{c.name}/{i}" for c in cases for i in IMPLS if f"{c.name}/{i}" in fns]
    us = measure_round_robin({k: fns[k] for k in order}, sync, calls, rounds, warmup) if order else {}
    for case in cases:
        entry = result["cases"][case.name]
        times = {impl: us[f"{case.name}/{impl}"] for impl in IMPLS if f"{case.name}/{impl}" in us}
        if cpp_of.get(case.name) is not None:
            times["cpp"] = cpp_of[case.name]
        entry["us_per_launch"] = times
        for key in RATIOS:
            a, b = key.split("/")
            if times.get(a) and times.get(b):
                entry["ratios"][key] = times[a] / times[b]
        if "tjit_jit" in times and "tjit_jit_bound" in times:
            entry["subscript_us"] = times["tjit_jit"] - times["tjit_jit_bound"]
    for line in text_lines(result):
        log("  " + line)
    if result["errors"]:
        log(f"  ERROR: own kernels: {len(result['errors'])} implementation(s) failed and were not timed: "
            + "; ".join(result["errors"]))
    return result


# ------------------------------------------------------------------------------- tables, targets


def _fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def table(part):
    """(headers, rows) of the part: host us per launch and the ratios, one row per kernel."""
    headers = ["kernel", "params"] + [f"{c} us" for c in COLUMNS] + list(RATIOS)
    rows = []
    for name, e in (part.get("cases") or {}).items():
        us = e.get("us_per_launch", {})
        cells = [_fmt(us.get(c)) if c in us else ("error" if c in e.get("errors", {}) else "-") for c in COLUMNS]
        rows.append([name, e.get("params", "-")] + cells + [_fmt(e.get("ratios", {}).get(r)) for r in RATIOS])
    return headers, rows


def _text_table(headers, rows):
    widths = [max([len(str(h))] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return [fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def text_lines(part):
    """The part for the terminal: the table, or why it was skipped, and every error."""
    if not part:
        return []
    if part.get("skipped"):
        lines = [f"Own kernels through tjit.jit: skipped ({part.get('reason')})"]
        checks = part.get("interpreter_checks")
        if checks:
            lines.append("  checked through Triton's interpreter: " + ", ".join(
                f"{c}/{i} {'ok' if v is True else 'FAILED: ' + str(v)}"
                for c, d in checks.items() for i, v in d.items()))
        return lines
    lines = ["Own kernels, host us per launch (median; grid (1,)), tjit.jit against Triton, the ctypes floor, C++:"]
    lines += ["  " + row for row in _text_table(*table(part))]
    lines += [f"  ERROR {e}" for e in part.get("errors", [])]
    return lines


def markdown(part, md_table):
    """Markdown lines of the part; md_table(headers, rows) formats a table (report._table)."""
    if not part:
        return ["not run", ""]
    if part.get("skipped"):
        lines = [f"skipped: {part.get('reason')}", ""]
        for case, d in (part.get("interpreter_checks") or {}).items():
            lines += [f"- {case}/{impl} through Triton's interpreter: {'correct' if v is True else v}"
                      for impl, v in d.items()]
        return lines + [""]
    cfg = part["config"]
    lines = [f"{cfg['statistic']}: {cfg['rounds']} rounds x {cfg['calls_per_round']} launches, grid (1,), fp32, "
             f"n = {cfg['n']}, kernels of `{cfg['kernel_file']}`, Triton {cfg.get('triton')}. triton: "
             "`kernel[grid](...)`; tjit_jit: `tjit.jit(kernel)[grid](...)`; tjit_jit_bound: `launch = "
             "tjit.jit(kernel)[grid]` once, then `launch(...)`; ctypes_floor: libcuda's `cuLaunchKernel` through "
             "ctypes on Triton's cubin, every argument and the params array prepared ahead; cpp: "
             f"{cpp_sources(part)}. See benchmarks/own_kernels.py.", ""]
    lines += md_table(*table(part)) + [""]
    for name, e in part.get("cases", {}).items():
        if "subscript_us" in e:
            lines.append(f"- {name}: the subscript `k[grid]` costs {e['subscript_us']:.2f} us a launch "
                         "(tjit_jit - tjit_jit_bound)")
        if e.get("ctypes_floor"):
            lines.append(f"- {name} ctypes_floor passes: {', '.join(e['ctypes_floor']['params'])}; block "
                         f"{e['ctypes_floor']['block']}, shared {e['ctypes_floor']['shared']} B")
        for impl, why in e.get("errors", {}).items():
            lines.append(f"- **ERROR** {name}/{impl}: {why}")
    lines += [f"- {n}" for n in part.get("notes", [])]
    return lines + [""]


def cpp_sources(part):
    """Where the cpp column's figures came from, once per distinct source."""
    sources = []
    for case in (part.get("cpp") or {}).values():
        if isinstance(case, dict) and case.get("source") and case["source"] not in sources:
            sources.append(case["source"])
    return "; ".join(sources) or None


def target(part, tid):
    """(value, worst_at, note, failed) of issue 64's target `tid`: the largest ratio over the kernels."""
    key = TARGET_RATIOS[tid]
    if not part or part.get("skipped"):
        return None, None, "own kernels not measured" + (f": {part.get('reason')}" if part else ""), False
    cases = part.get("cases") or {}
    failed = any(e.get("checks", {}).get("tjit_jit") is False for e in cases.values())
    ratios = {name: e["ratios"][key] for name, e in cases.items() if key in e.get("ratios", {})}
    missing = []
    for name, e in cases.items():
        if name not in ratios:
            errors = [f"{impl} {e['errors'][impl]}" for impl in key.split("/") if impl in e.get("errors", {})]
            missing.append(f"{name}: {'; '.join(errors) or 'not measured'}")
    note = "; ".join(missing) or None
    if key.endswith("/cpp") and not ratios:
        note = cpp_sources(part) or note
    if not ratios:
        return None, None, note, failed
    worst = max(ratios, key=ratios.get)
    return ratios[worst], f"{worst}, host us per launch", note, failed


# ------------------------------------------------------------------------------------- alone


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="few rounds and launches (implied on CPU)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available, else cpu")
    p.add_argument("--cpp-json", help="the cpp column from this JSON: a results.json (overhead.cpp) or "
                   "tjit_bench_overhead's own output")
    p.add_argument("--cpp-bin", help="path of tjit_bench_overhead (default: as run_benchmarks.py finds it)")
    p.add_argument("--no-cpp", action="store_true", help="do not run tjit_bench_overhead for the cpp column")
    p.add_argument("--out", help="write the part's JSON here")
    args = p.parse_args(argv)
    os.environ.setdefault("TJIT_LOG_COMPILES", "0")
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernel file is loaded
    sys.path.insert(0, HERE)
    cpp = None
    if args.cpp_json:
        with open(args.cpp_json) as f:
            data = json.load(f)
        cpp = (data.get("overhead") or {}).get("cpp", data) if "overhead" in data else data
    elif not args.no_cpp:
        import overhead
        print("== host overhead, C++ (for the cpp column) ==", flush=True)
        cpp = overhead.run_cpp_overhead(device, args.smoke or device == "cpu", args.cpp_bin, allow_build=False)
    print("== host overhead per launch, own kernels ==", flush=True)
    part = run_own_kernels(device, args.smoke or device == "cpu", cpp)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(part, f, indent=1, default=str)
        print(f"wrote {args.out}")
    failed = part.get("errors") or [f"{c}/{i}" for c, d in (part.get("interpreter_checks") or {}).items()
                                     for i, v in d.items() if v is not True]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
