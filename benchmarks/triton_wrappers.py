"""Plain-Python Triton wrappers around tjit's kernels (ops/kernels_py/*.py).

These are the "Python Triton" side of the benchmarks: allocate outputs with torch, pick the
constexprs exactly as the kernel files' header comments prescribe, and launch with
``kernel[grid](...)``. They do little validation: inputs are expected on one device, floating point,
with the op over the last dim. 2-D inputs whose last dim has stride 1 are used as they are (their row
stride is passed to the kernels); anything else is made contiguous first.

Keyword arguments such as ``block_n`` / ``index_64`` / ``groups`` override the automatic choices;
tests/python/kernels_interpreter_check.py uses them to reach every kernel path with small inputs.
"""

import importlib
import importlib.util
import math
import os
import sys
import types

import torch
import triton

_KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "ops", "kernels_py")


def _load(name):
    # The kernels package loaded by path under a private name (importing tjit would load its C++
    # libraries), so the kernel modules' relative imports work; name is a module of the package
    # ("softmax", "layer_norm.forward").
    package = "_tjit_kernels_py"
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(package, os.path.join(_KERNEL_DIR, "__init__.py"),
                                                      submodule_search_locations=[_KERNEL_DIR])
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{name}")


add_k = _load("add")
sum_k = _load("sum")
softmax_k = _load("softmax")
# layer_norm's forward and backward kernels under one name
layer_norm_k = types.SimpleNamespace(**{**vars(_load("layer_norm.forward")), **vars(_load("layer_norm.backward"))})

# Checks set this so any element a kernel fails to write stays NaN and is caught.
FILL_OUTPUTS_WITH_NAN = False

_INT32_LIMIT = 2**31


def _empty(shape, dtype, device):
    if FILL_OUTPUTS_WITH_NAN:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _acc_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _num_sms(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter: keep the grids small, the split paths still get exercised


_RESIDENT_PER_SM = {}


def _resident_per_sm(kernel, args, options, **constexprs):
    """TritonJitFunction::resident_programs_per_sm for a Python launch: the driver's occupancy of
    the binary kernel[grid](*args, **constexprs, **options) runs (1 on CPU, the interpreter)."""
    device = args[0].device
    if device.type != "cuda":
        return 1
    key = (kernel.fn.__name__, device.index,
           tuple(a.dtype if isinstance(a, torch.Tensor) else type(a) for a in args),
           tuple(sorted(constexprs.items())), tuple(sorted(options.items())))
    if key not in _RESIDENT_PER_SM:
        import ctypes
        compiled = kernel.warmup(*args, grid=(1, ), **constexprs, **options)
        compiled._init_handles()
        programs = ctypes.c_int(0)
        rc = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(programs), ctypes.c_void_p(compiled.function), ctypes.c_int(32 * options["num_warps"]),
            ctypes.c_size_t(compiled.metadata.shared))
        assert rc == 0, f"cuOccupancyMaxActiveBlocksPerMultiprocessor: CUresult {rc}"
        _RESIDENT_PER_SM[key] = max(programs.value, 1)
    return _RESIDENT_PER_SM[key]


def _rows_view(x):
    """[M, N] view of x with contiguous columns (copy only if needed)."""
    n = x.shape[-1] if x.dim() > 0 else 1
    if x.dim() == 2 and x.stride(1) == 1:
        return x
    return x.contiguous().view(-1, n)


def _extent(t):
    """1 + largest element offset reachable through t's strides (what the kernel indexes)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))


def _needs_index_64(*tensors):
    return any(t is not None and max(t.numel(), _extent(t)) >= _INT32_LIMIT for t in tensors)


def _row_num_warps(block_n, single_pass=True):
    return min(16, max(1, block_n // 512)) if single_pass else 16


def _row_blocking(n, dtype, block_n=None, single_pass=None):
    """(BLOCK_N, SINGLE_PASS) for the one-program-per-row softmax / layer_norm kernels."""
    if block_n is None:
        block_n = triton.next_power_of_2(n) if n <= 16384 else 4096
    if single_pass is None:
        single_pass = n <= block_n
    assert n <= block_n or not single_pass, "SINGLE_PASS needs N <= BLOCK_N"
    return block_n, single_pass


# ----------------------------------------------------------------------------------------------- sum


def sum_dim_last(x, block_n=None, index_64=None, blocked=None):
    """x.sum(-1): sum_rows_kernel (long rows) or sum_rows_blocked_kernel (short rows)."""
    x2 = _rows_view(x)
    m, n = x2.shape
    out = _empty((m, ), x.dtype, x.device)
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    if blocked is None:
        blocked = n < 512
    if blocked:
        block_n = block_n or min(triton.next_power_of_2(n), 512)
        block_m = max(1, min(4096 // block_n, triton.next_power_of_2(m)))
        sum_k.sum_rows_blocked_kernel[(triton.cdiv(m, block_m), )](x2, out, m, n, x2.stride(0), BLOCK_M=block_m,
                                                                       BLOCK_N=block_n, INDEX_64=index_64,
                                                                       num_warps=4)
    else:
        block_n = block_n or min(triton.next_power_of_2(n), 4096)
        sum_k.sum_rows_kernel[(m, )](x2, out, m, n, x2.stride(0), BLOCK_N=block_n, INDEX_64=index_64, PDL=False,
                                        num_warps=_row_num_warps(block_n))
    return out.view(x.shape[:-1])


def _dependent_launch(device):
    """Whether launches on `device` use programmatic dependent launch (compute capability 9.0+), as
    sum.cpp decides (it also asks for a CUDA 12.3+ driver, which torch's CUDA 12.3+ builds need)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (9, 0)


def _pdl_kwargs(pdl):
    return {"launch_pdl": True} if pdl else {}


def sum_rows_two_stage(x, chunk=None, block_n=None, index_64=None, strided=None):
    """x.sum(-1) for few long rows: a first stage into partial sums (sum_partial_strided_kernel for
    4-byte elements, else sum_partial_kernel), then sum_rows_kernel on the partials; both launched
    with programmatic dependent launch where the device has it."""
    x2 = _rows_view(x)
    m, n = x2.shape
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    if strided is None:
        strided = chunk is None and x.element_size() == 4
    if block_n is None:
        block_n = 8192 if x.element_size() == 2 else 4096
    pdl = _dependent_launch(x.device)
    if strided:
        splits = max(1, min(triton.cdiv(n, block_n), 8 * _num_sms(x.device) // max(m, 1)))
        partial = _empty((m, splits), _acc_dtype(x.dtype), x.device)
        sum_k.sum_partial_strided_kernel[(m * splits, )](x2, partial, m, n, x2.stride(0), splits, BLOCK_N=block_n,
                                                            INDEX_64=index_64, PDL=pdl, num_warps=8, maxnreg=32,
                                                            **_pdl_kwargs(pdl))
    else:
        if chunk is None:
            # sum.cpp: up to 4 chunk programs an SM; 2-byte rows up to 16 while a chunk keeps 8 blocks.
            splits = 4 * _num_sms(x.device) // max(m, 1)
            if x.element_size() == 2:
                splits = max(splits, min(16 * _num_sms(x.device) // max(m, 1), triton.cdiv(n, block_n) // 8))
            splits = max(1, min(triton.cdiv(n, block_n), splits))
            chunk = triton.cdiv(triton.cdiv(n, splits), block_n) * block_n
        splits = triton.cdiv(n, chunk)
        partial = _empty((m, splits), _acc_dtype(x.dtype), x.device)
        sum_k.sum_partial_kernel[(m * splits, )](x2, partial, m, n, x2.stride(0), chunk, BLOCK_N=block_n,
                                                    INDEX_64=index_64, PDL=pdl, num_warps=8, **_pdl_kwargs(pdl))
    out = _empty((m, ), x.dtype, x.device)
    block_s = min(triton.next_power_of_2(splits), 4096)
    sum_k.sum_rows_kernel[(m, )](partial, out, m, splits, splits, BLOCK_N=block_s, INDEX_64=False, PDL=pdl,
                                    num_warps=_row_num_warps(block_s), **_pdl_kwargs(pdl))
    return out.view(x.shape[:-1])


def sum_all(x, chunk=None, block_n=None, index_64=None, strided=None):
    """x.sum(): one sum_rows_kernel program up to 8K elements (16K without dependent launch), else the
    two-stage plan."""
    one_program = 8192 if _dependent_launch(x.device) else 16384
    if chunk is None and strided is None and x.numel() <= one_program:
        return sum_dim_last(x.contiguous().view(1, -1), block_n=block_n, index_64=index_64, blocked=False).view(())
    return sum_rows_two_stage(x.contiguous().view(1, -1), chunk=chunk, block_n=block_n, index_64=index_64,
                              strided=strided).view(())


def sum_dim(x, dim, splits=None, block_r=None, block_k=None, index_64=None):
    """x.sum(dim) without a transpose: view x as [M, R, K] and use sum_mid_kernel
    (with sum_mid_split_kernel first when there are too few column blocks)."""
    x = x.contiguous()
    dim = dim % x.dim()
    m = math.prod(x.shape[:dim])
    r = x.shape[dim]
    k = math.prod(x.shape[dim + 1:])
    out_shape = x.shape[:dim] + x.shape[dim + 1:]
    if index_64 is None:
        index_64 = _needs_index_64(x)
    block_k = block_k or min(triton.next_power_of_2(k), 256)
    block_r = block_r or max(1, min(2048 // block_k, triton.next_power_of_2(r)))
    num_kb = triton.cdiv(k, block_k)
    if splits is None:
        base = m * num_kb
        splits = min(triton.cdiv(4 * _num_sms(x.device), base), triton.cdiv(r, block_r))
    out = _empty((m, k), x.dtype, x.device)
    if splits <= 1:
        sum_k.sum_mid_kernel[(m * num_kb, )](x, out, m, r, k, r * k, k, BLOCK_R=block_r, BLOCK_K=block_k,
                                                INDEX_64=index_64, num_warps=4)
        return out.view(out_shape)
    rows_per_split = triton.cdiv(triton.cdiv(r, splits), block_r) * block_r
    splits = triton.cdiv(r, rows_per_split)
    partial = _empty((m, splits, k), _acc_dtype(x.dtype), x.device)
    sum_k.sum_mid_split_kernel[(m * splits * num_kb, )](x, partial, m, r, k, r * k, k, rows_per_split,
                                                           BLOCK_R=block_r, BLOCK_K=block_k, INDEX_64=index_64,
                                                           num_warps=4)
    block_s = max(1, min(2048 // block_k, triton.next_power_of_2(splits)))
    sum_k.sum_mid_kernel[(m * num_kb, )](partial, out, m, splits, k, splits * k, k, BLOCK_R=block_s,
                                            BLOCK_K=block_k, INDEX_64=index_64, num_warps=4)
    return out.view(out_shape)


# ------------------------------------------------------------------------------------------- softmax


def _softmax_plan(m, n, t, single_pass_limit, backward):
    """The plan ops/csrc/ops/softmax.cpp makes (softmax.py's header): ("rows", block_m, block_n, warps),
    ("row", block_n, single_pass, warps), ("persistent", block_n, programs, warps) or
    ("split", block_n, chunks, warps, reread)."""
    if n <= 256:
        block_n = triton.next_power_of_2(n)
        return ("rows", max(1, min(1024 // block_n, triton.next_power_of_2(m))), block_n, 4)
    if not backward and t.element_size() == 2 and 16384 < n <= single_pass_limit:
        if n > 20480:
            return ("persistent", triton.next_power_of_2(n), min(m, _num_sms(t.device)), 32)
        return ("row", 4096, False, 16)
    if n <= single_pass_limit:
        block_n = triton.next_power_of_2(n)
        return ("row", block_n, True, 32 if block_n > 16384 and not backward else min(16, max(1, block_n // 512)))
    chunks = triton.cdiv(n, 4096)
    split_dtype = t.dtype != torch.float64 if backward else t.element_size() == 4
    if t.is_cuda and split_dtype and chunks <= 128 and m * chunks < 2**30:
        two_byte = t.element_size() == 2
        if backward and chunks > (32 if two_byte else 48):
            return ("split", 8192, triton.cdiv(n, 8192), 8, False)
        return ("split", 4096, chunks, 4, backward and two_byte)
    if t.is_cuda and m < _num_sms(t.device):
        return ("row", 16384, False, 16)
    return ("row", 8192, False, 32) if t.element_size() == 2 else ("row", 4096, False, 16)


LONG_ROW_MIN_SPLIT_BLOCK = 4096  # the autotuned long-row kernels' smallest split step
LONG_ROW_MAX_CHUNKS = 128


def _tuned_long_rows(m, n, t, min_cols):
    """Whether ops/csrc/ops/{softmax,layer_norm}.cpp send these rows to the autotuned
    *_fwd_long_kernel (CUDA, past the single-pass limit, not fp64, S = cdiv(n, 4096) <= 128)."""
    chunks = triton.cdiv(n, LONG_ROW_MIN_SPLIT_BLOCK)
    return (t.is_cuda and n > min_cols and t.dtype != torch.float64 and chunks <= LONG_ROW_MAX_CHUNKS
            and m * chunks < 2**30)


def _split_sync(m, chunks, device):
    """The zeroed workspace of the kernels whose programs share rows: the ticket, then a word per chunk."""
    return torch.zeros(2 + m * chunks, dtype=torch.int64, device=device)


def _split_alignment(n, *tensors):
    """softmax.cpp's split_alignment: ALIGN for 2-D row views `tensors` of n columns."""
    size = tensors[0].element_size()
    per_vector = 16 // size
    offset = tensors[0].stride(0) % per_vector
    if any(t.element_size() != size or t.data_ptr() % 16 or t.stride(0) % per_vector != offset for t in tensors):
        return 1
    aligned = n % per_vector == 0 and all(t.stride(0) % per_vector == 0 for t in tensors)
    return 1 if aligned else per_vector


def _long_row_arguments(m, n, device):
    """What the C++ operator gives an autotuned *_fwd_long_kernel: a grid from the chosen config, a
    zeroed sync with room for the smallest split step and the row-count bucket of the tuning key."""
    sync = _split_sync(m, triton.cdiv(n, LONG_ROW_MIN_SPLIT_BLOCK), device)
    bucket = min(triton.next_power_of_2(m), 4096)
    grid = lambda meta: (m * triton.cdiv(n, meta["BLOCK_N"]) if meta["SPLIT"] else m, )  # noqa: E731
    return grid, sync, bucket


def softmax(x, dim=-1, block_n=None, index_64=None, single_pass=None):
    if dim % max(x.dim(), 1) != x.dim() - 1:
        return softmax(x.movedim(dim, -1), -1, block_n, index_64, single_pass).movedim(-1, dim)
    x2 = _rows_view(x)
    m, n = x2.shape
    out = _empty((m, n), x.dtype, x.device)
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    tuned_from = 20480 if x2.element_size() == 2 else 32768  # softmax.cpp: 2-byte rows tune from 20481 columns
    if block_n is None and single_pass is None and _tuned_long_rows(m, n, x2, tuned_from):
        grid, sync, bucket = _long_row_arguments(m, n, x.device)
        chunks_pow2 = triton.next_power_of_2(triton.cdiv(n, LONG_ROW_MIN_SPLIT_BLOCK))
        softmax_k.softmax_fwd_long_kernel[grid](out, x2, sync, bucket, n, x2.stride(0), out.stride(0),
                                                CHUNKS_POW2=chunks_pow2, ALIGN=_split_alignment(n, x2, out),
                                                INDEX_64=index_64)
        return out.view(x.shape)
    plan = _softmax_plan(m, n, x2, 32768, backward=False)
    if block_n is not None or single_pass is not None:  # an explicit one-program-per-row launch
        block_n, single = _row_blocking(n, x.dtype, block_n, single_pass)
        plan = ("row", block_n, single, _row_num_warps(block_n, single))
    if plan[0] == "rows":
        _, bm, bn, warps = plan
        softmax_k.softmax_fwd_rows_kernel[(triton.cdiv(m, bm), )](out, x2, m, n, x2.stride(0), out.stride(0),
                                                                 BLOCK_M=bm, BLOCK_N=bn, INDEX_64=index_64,
                                                                 num_warps=warps)
    elif plan[0] == "persistent":
        _, bn, programs, warps = plan
        softmax_k.softmax_fwd_persistent_kernel[(programs, )](out, x2, m, n, x2.stride(0), out.stride(0), BLOCK_N=bn,
                                                              NUM_STAGES=3, INDEX_64=index_64, num_warps=warps)
    elif plan[0] == "split":
        _, bn, chunks, warps, _ = plan
        softmax_k.softmax_fwd_split_kernel[(m * chunks, )](out, x2, _split_sync(m, chunks, x.device), m, n, chunks,
                                                           x2.stride(0), out.stride(0), BLOCK_N=bn,
                                                           S_POW2=triton.next_power_of_2(chunks),
                                                           ALIGN=_split_alignment(n, x2, out), INDEX_64=index_64,
                                                           num_warps=warps)
    else:
        _, bn, single, warps = plan
        softmax_k.softmax_fwd_kernel[(m, )](out, x2, m, n, x2.stride(0), out.stride(0), BLOCK_N=bn,
                                            SINGLE_PASS=single, INDEX_64=index_64, num_warps=warps)
    return out.view(x.shape)


def softmax_backward(grad_out, out, block_n=None, index_64=None, single_pass=None):
    go2 = _rows_view(grad_out)
    o2 = _rows_view(out)
    m, n = o2.shape
    grad_in = _empty((m, n), out.dtype, out.device)
    if index_64 is None:
        index_64 = _needs_index_64(go2, o2)
    plan = _softmax_plan(m, n, o2, 16384 if out.dtype == torch.float64 else 32768, backward=True)
    if block_n is not None or single_pass is not None:
        block_n, single = _row_blocking(n, out.dtype, block_n, single_pass)
        plan = ("row", block_n, single, _row_num_warps(block_n, single))
    if plan[0] == "rows":
        _, bm, bn, warps = plan
        softmax_k.softmax_bwd_rows_kernel[(triton.cdiv(m, bm), )](grad_in, go2, o2, m, n, grad_in.stride(0),
                                                                 go2.stride(0), o2.stride(0), BLOCK_M=bm, BLOCK_N=bn,
                                                                 INDEX_64=index_64, num_warps=warps)
    elif plan[0] == "split":
        _, bn, chunks, warps, reread = plan
        softmax_k.softmax_bwd_split_kernel[(m * chunks, )](grad_in, go2, o2, _split_sync(m, chunks, out.device), m, n,
                                                           chunks, grad_in.stride(0), go2.stride(0), o2.stride(0),
                                                           BLOCK_N=bn, S_POW2=triton.next_power_of_2(chunks),
                                                           ALIGN=_split_alignment(n, grad_in, go2, o2),
                                                           INDEX_64=index_64, REREAD=reread, num_warps=warps,
                                                           maxnreg=80 if bn == 8192 else None)
    else:
        _, bn, single, warps = plan
        softmax_k.softmax_bwd_kernel[(m, )](grad_in, go2, o2, m, n, grad_in.stride(0), go2.stride(0), o2.stride(0),
                                            BLOCK_N=bn, SINGLE_PASS=single, INDEX_64=index_64, num_warps=warps)
    return grad_in.view(out.shape)


# ---------------------------------------------------------------------------------------- layer_norm


LAYER_NORM_FWD_SINGLE_PASS_LIMIT = 32768  # layer_norm.cpp's kForwardSinglePassLimit (not fp64)


def layer_norm(x, weight, bias, eps=1e-5, block_n=None, index_64=None, single_pass=None, stats=True,
               persistent=None):
    """Returns (y, mean, rstd); mean/rstd have aten's shape x.shape[:-1] + (1,). With stats=False
    (inference, as tjit.layer_norm does) they are neither allocated nor stored, and are None.
    persistent=(BLOCK_N, BLOCK_TAIL, programs) forces layer_norm_fwd_persistent_kernel with those
    blocks and that grid (tests)."""
    x2 = _rows_view(x)
    m, n = x2.shape
    acc = _acc_dtype(x.dtype)
    y = _empty((m, n), x.dtype, x.device)
    mean = _empty((m, ), acc, x.device) if stats else None
    rstd = _empty((m, ), acc, x.device) if stats else None
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    if (block_n is None and single_pass is None and persistent is None and
            _tuned_long_rows(m, n, x2, LAYER_NORM_FWD_SINGLE_PASS_LIMIT)):
        grid, sync, bucket = _long_row_arguments(m, n, x.device)
        layer_norm_k.layer_norm_fwd_long_kernel[grid](y, x2, weight, bias, mean, rstd, sync, bucket, n,
                                                      x2.stride(0), y.stride(0), eps, HAS_WEIGHT=weight is not None,
                                                      HAS_BIAS=bias is not None, INDEX_64=index_64)
    elif persistent is not None:
        head, tail, programs = persistent
        _layer_norm_persistent(x2, y, weight, bias, mean, rstd, m, n, eps, index_64, head, tail, dict(num_warps=4),
                               programs)
    else:
        _layer_norm_rows(x2, y, weight, bias, mean, rstd, m, n, eps, block_n, single_pass, index_64)
    if not stats:
        return y.view(x.shape), None, None
    stat_shape = x.shape[:-1] + (1, )
    return y.view(x.shape), mean.view(stat_shape), rstd.view(stat_shape)


_MEMORY_GBPS = {}


def _memory_bandwidth_gbps(device):
    """tjit::memory_bandwidth_gbps: the peak DRAM bandwidth of a CUDA device (two transfers a memory
    clock over the bus width), read from the driver; 0 for any other device."""
    if device.type != "cuda":
        return 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _MEMORY_GBPS:
        import ctypes
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, clock_khz, bus_bits = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), index) == 0
        for out, attribute in ((clock_khz, 36), (bus_bits, 37)):  # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, ..._BUS_WIDTH
            assert cuda.cuDeviceGetAttribute(ctypes.byref(out), attribute, dev) == 0
        _MEMORY_GBPS[index] = clock_khz.value * bus_bits.value // 4_000_000
    return _MEMORY_GBPS[index]


def _persistent_forward_plan(n, x2):
    """layer_norm.cpp's plan_persistent_forward: (head, tail, launch options), or None; only where the
    memory wants more in flight than one program a row keeps (>= 30 GB/s an SM: the H200, not the H100)."""
    if x2.element_size() != 2:
        return None
    if x2.is_cuda and _memory_bandwidth_gbps(x2.device) < 30 * _num_sms(x2.device):
        return None
    for head in (4096, 8192):
        if head < n <= head + (head // 2 if head == 8192 else head // 4):
            options = dict(num_warps=4, maxnreg=168) if head == 8192 else dict(num_warps=4)
            return head, triton.next_power_of_2(n - head), options
    return None


def _layer_norm_persistent(x2, y, weight, bias, mean, rstd, m, n, eps, index_64, head, tail, options, programs=None):
    """layer_norm_fwd_persistent_kernel, 2 stages; by default as many programs as the GPU holds
    (layer_norm.cpp's persistent plan), the row loop pipelined."""
    args = (y, x2, weight, bias, mean, rstd, m, n, x2.stride(0), y.stride(0), eps)
    constexprs = dict(HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None, BLOCK_N=head, BLOCK_TAIL=tail,
                      STAGES=2, INDEX_64=index_64)
    kernel = layer_norm_k.layer_norm_fwd_persistent_kernel
    if programs is None:
        programs = min(m, _resident_per_sm(kernel, args, options, **constexprs) * _num_sms(x2.device))
    kernel[(programs, )](*args, **constexprs, **options)


def _layer_norm_rows(x2, y, weight, bias, mean, rstd, m, n, eps, block_n, single_pass, index_64):
    if block_n is None and single_pass is None and n <= 1024:
        # layer_norm.cpp's short-row plan: several rows per program.
        bn = triton.next_power_of_2(n)
        bm = max(4, (2048 if x2.element_size() == 2 else 1024) // bn)
        layer_norm_k.layer_norm_fwd_rows_kernel[(triton.cdiv(m, bm), )](
            y, x2, weight, bias, mean, rstd, m, n, x2.stride(0), y.stride(0), eps, HAS_WEIGHT=weight is not None,
            HAS_BIAS=bias is not None, BLOCK_M=bm, BLOCK_N=bn, INDEX_64=index_64, num_warps=8 if bn <= 128 else 4)
        return
    persistent = _persistent_forward_plan(n, x2) if block_n is None and single_pass is None else None
    if persistent is not None:
        _layer_norm_persistent(x2, y, weight, bias, mean, rstd, m, n, eps, index_64, *persistent)
        return
    tail = 0
    if block_n is None and single_pass is None and x2.element_size() != 8 and n <= LAYER_NORM_FWD_SINGLE_PASS_LIMIT:
        # layer_norm.cpp's plan_forward_rows: the row in registers, warps by element size; 2-byte
        # rows just past 4096, 8192 and 16384 as that block plus a small tail block.
        block_n, single = triton.next_power_of_2(n), True
        if x2.element_size() == 2:
            head = n if block_n == n else block_n // 2
            tail = triton.next_power_of_2(n - head)
            if head >= 4096 and n > head and tail <= (head // 2 if head == 8192 else head // 4):
                block_n, warps = head, 8 if head == 8192 else 4
            else:
                padded_to_4096 = block_n == 4096 and n < block_n
                tail, warps = 0, 4 if block_n <= 2048 or padded_to_4096 else 8 if block_n <= 16384 else 16
        else:
            warps = 8 if block_n <= 2048 else 16 if block_n <= 8192 else 32
    else:
        block_n, single = _row_blocking(n, x2.dtype, block_n, single_pass)
        warps = _row_num_warps(block_n, single)
    layer_norm_k.layer_norm_fwd_kernel[(m, )](y, x2, weight, bias, mean, rstd, m, n, x2.stride(0), y.stride(0), eps,
                                              HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,
                                              BLOCK_N=block_n, SINGLE_PASS=single, INDEX_64=index_64,
                                              BLOCK_TAIL=tail, num_warps=warps)


def layer_norm_backward(dy, x, weight, mean, rstd, compute_dw=None, compute_db=True, block_n=None, index_64=None,
                        groups=None, block_m=None, block_n_dwdb=None, single_pass=None):
    """Returns (dx, dw, db); dw is None without weight (or compute_dw=False), db None if not compute_db.
    groups=None picks the dwdb plan from the header of layer_norm.py; groups=1 forces the direct kernel."""
    x2 = _rows_view(x)
    dy2 = _rows_view(dy)
    m, n = x2.shape
    mean = mean.reshape(-1)
    rstd = rstd.reshape(-1)
    if compute_dw is None:
        compute_dw = weight is not None
    if index_64 is None:
        index_64 = _needs_index_64(x2, dy2)

    dx = _empty((m, n), x.dtype, x.device)
    explicit = any(v is not None for v in (block_n, groups, block_m, block_n_dwdb, single_pass))
    if not explicit and n <= 8192:
        return _layer_norm_backward_fused(dx, dy2, x2, weight, mean, rstd, m, n, compute_dw, compute_db, index_64,
                                          x.shape)
    if not explicit and x.is_cuda and x.dtype != torch.float64 and triton.cdiv(n, 4096) <= 32:
        return _layer_norm_backward_teams(dx, dy2, x2, weight, mean, rstd, m, n, compute_dw, compute_db, index_64,
                                          x.shape)
    block_n, single = _row_blocking(n, x.dtype, block_n, single_pass)
    layer_norm_k.layer_norm_bwd_dx_kernel[(m, )](dx, dy2, x2, weight, mean, rstd, m, n, dx.stride(0), dy2.stride(0),
                                                 x2.stride(0), HAS_WEIGHT=weight is not None, BLOCK_N=block_n,
                                                 SINGLE_PASS=single, INDEX_64=index_64,
                                                 num_warps=_row_num_warps(block_n, single))
    dx = dx.view(x.shape)
    if not (compute_dw or compute_db):
        return dx, None, None

    wdtype = weight.dtype if weight is not None else x.dtype
    dw = _empty((n, ), wdtype, x.device) if compute_dw else None
    db = _empty((n, ), wdtype, x.device) if compute_db else None
    bn = block_n_dwdb or min(triton.next_power_of_2(n), 128)
    bm = block_m or (16 if x.dtype == torch.float64 else 32)
    col_blocks = triton.cdiv(n, bn)
    if groups is None:
        groups = min(triton.cdiv(4 * _num_sms(x.device), col_blocks), triton.cdiv(m, bm), 65535)
    groups = max(groups, 1)
    rows_per_group = triton.cdiv(triton.cdiv(m, groups), bm) * bm
    groups = triton.cdiv(m, rows_per_group)
    if groups <= 1:
        layer_norm_k.layer_norm_bwd_dwdb_kernel[(col_blocks, )](dw, db, dy2, x2, mean, rstd, m, n, dy2.stride(0),
                                                                x2.stride(0), COMPUTE_DW=compute_dw,
                                                                COMPUTE_DB=compute_db, BLOCK_M=bm, BLOCK_N=bn,
                                                                INDEX_64=index_64, num_warps=4)
        return dx, dw, db
    acc = _acc_dtype(x.dtype)
    dw_part = _empty((groups, n), acc, x.device) if compute_dw else None
    db_part = _empty((groups, n), acc, x.device) if compute_db else None
    layer_norm_k.layer_norm_bwd_dwdb_partial_kernel[(col_blocks, groups)](
        dw_part, db_part, dy2, x2, mean, rstd, m, n, dy2.stride(0), x2.stride(0), rows_per_group,
        COMPUTE_DW=compute_dw, COMPUTE_DB=compute_db, BLOCK_M=bm, BLOCK_N=bn, INDEX_64=index_64, num_warps=4)
    _finalize_dwdb(dw, db, dw_part, db_part, groups, n)
    return dx, dw, db


def _finalize_dwdb(dw, db, dw_part, db_part, groups, n):
    bnf = min(max(triton.next_power_of_2(triton.cdiv(n, 256)), 16), 128)
    block_g = min(triton.next_power_of_2(groups), max(32, 2048 // bnf))
    layer_norm_k.layer_norm_bwd_dwdb_finalize_kernel[(triton.cdiv(n, bnf), )](dw, db, dw_part, db_part, groups, n,
                                                                              COMPUTE_DW=dw is not None,
                                                                              COMPUTE_DB=db is not None,
                                                                              BLOCK_G=block_g, BLOCK_N=bnf,
                                                                              INDEX_64=False, num_warps=4)


def _column_sum_buffers(weight, x2, n, groups, compute_dw, compute_db):
    """(dw, db, dw_part, db_part): where a one-pass backward's `groups` programs (or teams) store their
    dw/db sums, [groups, n] in the accumulator dtype, or dw/db themselves when one group sums every
    row (layer_norm.cpp's ColumnSums)."""
    wdtype = weight.dtype if weight is not None else x2.dtype
    dw = _empty((n, ), wdtype, x2.device) if compute_dw else None
    db = _empty((n, ), wdtype, x2.device) if compute_db else None
    acc = _acc_dtype(x2.dtype)
    dw_part = _empty((groups, n), acc, x2.device) if compute_dw and groups > 1 else dw
    db_part = _empty((groups, n), acc, x2.device) if compute_db and groups > 1 else db
    return dw, db, dw_part, db_part


def _finish_column_sums(dw, db, dw_part, db_part, groups, n):
    if (dw is not None or db is not None) and groups > 1:
        _finalize_dwdb(dw, db, dw_part, db_part, groups, n)


def _layer_norm_backward_fused(dx, dy2, x2, weight, mean, rstd, m, n, compute_dw, compute_db, index_64, shape):
    """layer_norm.cpp's fused backward (N <= 8192): one pass over dy and x, dw/db as per-program partials."""
    bn, tail = triton.next_power_of_2(n), 0
    if x2.element_size() != 8 and 4096 + 512 < n <= 4096 + 1024:
        # 4096 columns plus a 1024-column tail (hidden size 5120)
        bn, tail, bm = 4096, 1024, 1
        warps, per_sm = (4, 2) if x2.element_size() == 2 else (16, 1)
    elif x2.element_size() == 2:
        tile = 2048 if bn <= 1024 else 4096 if bn <= 2048 else 8192
        per_sm = 2 if 128 < bn <= 2048 else 1
    else:
        tile = 2048 if bn <= 512 else 4096 if bn <= 2048 else 8192
        per_sm = 2 if 128 < bn <= 512 else 1
        if x2.element_size() == 8:
            tile //= 2
    if not tail:
        tile = max(tile, bn)
        bm, warps = tile // bn, max(4, min(16, tile // 512))
    programs = min(per_sm * _num_sms(x2.device), triton.cdiv(m, bm))
    rows_per_program = triton.cdiv(triton.cdiv(m, programs), bm) * bm
    programs = triton.cdiv(m, rows_per_program)
    dw, db, dw_part, db_part = _column_sum_buffers(weight, x2, n, programs, compute_dw, compute_db)
    layer_norm_k.layer_norm_bwd_fused_kernel[(programs, )](
        dx, dw_part, db_part, dy2, x2, weight, mean, rstd, m, n, dx.stride(0), dy2.stride(0), x2.stride(0),
        rows_per_program, HAS_WEIGHT=weight is not None, COMPUTE_DX=True, COMPUTE_DW=compute_dw,
        COMPUTE_DB=compute_db, BLOCK_M=bm, BLOCK_N=bn, INDEX_64=index_64, BLOCK_TAIL=tail, num_warps=warps)
    _finish_column_sums(dw, db, dw_part, db_part, programs, n)
    return dx.view(shape), dw, db


def _team_split(m, chunks, programs_per_sm, device):
    """(teams, rows_per_team): m rows split evenly over as many teams of `chunks` programs as run at
    once (layer_norm.cpp's teams_for)."""
    teams = max(1, programs_per_sm * _num_sms(device) // chunks)
    rows_per_team = triton.cdiv(m, min(teams, m))
    return triton.cdiv(m, rows_per_team), rows_per_team


def _layer_norm_backward_teams(dx, dy2, x2, weight, mean, rstd, m, n, compute_dw, compute_db, index_64, shape):
    """layer_norm.cpp's long-row backward on CUDA (8192 < N <= 32 * 4096): teams of S = cdiv(N, 4096)
    programs share rows, two programs per SM, the row loop pipelined 3 stages deep; 2-byte rows of up
    to 32 * 2048 columns: the lag kernel's teams of S = cdiv(N, 2048), as many programs as an SM holds."""
    if x2.element_size() == 2 and triton.cdiv(n, 2048) <= 32:
        return _layer_norm_backward_team_lag(dx, dy2, x2, weight, mean, rstd, m, n, compute_dw, compute_db, index_64,
                                             shape)
    chunks = triton.cdiv(n, 4096)
    teams, rows_per_team = _team_split(m, chunks, 2, x2.device)
    dw, db, dw_part, db_part = _column_sum_buffers(weight, x2, n, teams, compute_dw, compute_db)
    layer_norm_k.layer_norm_bwd_team_kernel[(teams * chunks, )](
        dx, dw_part, db_part, dy2, x2, weight, mean, rstd, _split_sync(m, chunks, x2.device), m, n, chunks,
        rows_per_team, dx.stride(0),
        dy2.stride(0), x2.stride(0), HAS_WEIGHT=weight is not None, COMPUTE_DX=True, COMPUTE_DW=compute_dw,
        COMPUTE_DB=compute_db, BLOCK_N=4096, S_POW2=triton.next_power_of_2(chunks),
        STAGES=3, INDEX_64=index_64, num_warps=4)
    _finish_column_sums(dw, db, dw_part, db_part, teams, n)
    return dx.view(shape), dw, db


def _layer_norm_backward_team_lag(dx, dy2, x2, weight, mean, rstd, m, n, compute_dw, compute_db, index_64, shape):
    """layer_norm.cpp's backward for 2-byte rows of 8192 < N <= 32 * 2048 on CUDA: teams of S = cdiv(N, 2048)
    programs (layer_norm_bwd_team_lag_kernel), as many as the GPU holds (the occupancy asked with mean standing
    in for the partial sums, as layer_norm.cpp does)."""
    chunks = triton.cdiv(n, 2048)
    sync = _split_sync(m, chunks, x2.device)

    def args(dw_part, db_part, rows_per_team):
        return (dx, dw_part, db_part, dy2, x2, weight, mean, rstd, sync, m, n, chunks, rows_per_team, dx.stride(0),
                dy2.stride(0), x2.stride(0))
    constexprs = dict(HAS_WEIGHT=weight is not None, COMPUTE_DW=compute_dw, COMPUTE_DB=compute_db, BLOCK_N=2048,
                      S_POW2=triton.next_power_of_2(chunks), STAGES=2, INDEX_64=index_64)
    options = {"num_warps": 4, "maxnreg": 128}
    programs_per_sm = _resident_per_sm(layer_norm_k.layer_norm_bwd_team_lag_kernel,
                                       args(mean if compute_dw else None, mean if compute_db else None, 1), options,
                                       **constexprs)
    teams, rows_per_team = _team_split(m, chunks, programs_per_sm, x2.device)
    dw, db, dw_part, db_part = _column_sum_buffers(weight, x2, n, teams, compute_dw, compute_db)
    layer_norm_k.layer_norm_bwd_team_lag_kernel[(teams * chunks, )](*args(dw_part, db_part, rows_per_team),
                                                                    **constexprs, **options)
    _finish_column_sums(dw, db, dw_part, db_part, teams, n)
    return dx.view(shape), dw, db


def patch_interpreter_for_numpy():
    """Triton 3.6's interpreter converts a 1-element array loop bound with int(array), which numpy
    >= 2.4 rejects, so `for i in range(0, N, BLOCK)` with a runtime N fails (triton-lang/triton#9171,
    fixed upstream by #9172). Re-registers __index__ as the fix does. No-op on older numpy. Used by
    the benchmarks' CPU smoke mode and tests/python/kernels_interpreter_check.py; tjit's own
    runtime carries the same fix in ops/triton_adapter.py (embedded, self-contained)."""
    import numpy as np
    from triton.runtime import interpreter

    try:
        int(np.array([1]))
        return
    except TypeError:
        pass
    if getattr(interpreter._patch_lang_tensor, "_tjit_index_fix", False):
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._tjit_index_fix = True
    interpreter._patch_lang_tensor = patched
