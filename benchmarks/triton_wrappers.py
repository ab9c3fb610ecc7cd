"""Plain-Python Triton wrappers around tjit's kernels (ops/kernels_py/*.py).

These are the "Python Triton" side of the benchmarks: allocate outputs with torch, ask tjit's C++ plan
for the inputs (tjit.plans: the same plan functions the operators execute) and launch what it
returns with ``kernel[grid](*args, **constexprs, num_warps=..., maxnreg=...)``. They do little validation: inputs are expected on one device, floating point,
with the op over the last dim. 2-D inputs whose last dim has stride 1 are used as they are (their row
stride is passed to the kernels); anything else is made contiguous first.

Keyword arguments such as ``block_n`` / ``index_64`` / ``groups`` override the plan's choices;
tests/python/kernels_interpreter_check.py uses them to reach every kernel path with small inputs.
``device=`` (device facts, tjit.plans.device_facts) plans as for another device.
"""

import importlib
import importlib.util
import math
import os
import sys
import types

import torch
import triton

from tjit import plans

_KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "ops", "kernels_py")
KERNEL_PACKAGE = "_tjit_kernels_py"


def _load(name):
    # The kernels package loaded by path under a private name (importing tjit would load its C++
    # libraries), so the kernel modules' relative imports work; name is a module of the package
    # ("softmax", "layer_norm.forward").
    package = KERNEL_PACKAGE
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
norm_team_k = _load("norm_team")  # the norm family's team backward in lag form
norm_backward_k = _load("norm_backward")  # the norm family's fused pass, dx, column sums and their finalize
norm_forward_k = _load("norm_forward")  # the norm family's forward (layer_norm's short rows)
# layer_norm's forward and backward kernels under one name, with the family's they launch
layer_norm_k = types.SimpleNamespace(**{**vars(_load("layer_norm.forward")), **vars(_load("layer_norm.backward")),
                                        **vars(norm_team_k), **vars(norm_backward_k), **vars(norm_forward_k)})
rms_norm_k = _load("rms_norm")

# Checks set this so any element a kernel fails to write stays NaN and is caught.
FILL_OUTPUTS_WITH_NAN = False

_INT32_LIMIT = 2**31


def _empty(shape, dtype, device):
    if FILL_OUTPUTS_WITH_NAN:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _acc_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


_FACTS = {}


def _facts(device):
    """The device facts tjit's operators plan with for `device` (the interpreter's for CPU)."""
    key = str(device)
    if key not in _FACTS:
        _FACTS[key] = plans.device_facts(device if device.type == "cuda" else None)
    return _FACTS[key]


def _num_sms(device):
    return _facts(device)["multiprocessors"]


_PLANS = {}


def _plan(name, dtype, device, facts=None, **inputs):
    """tjit's plan `name` for these inputs, cached: a plan is a pure function of them, and the benchmarks
    time this wrapper's host work per call."""
    facts = facts or _facts(device)
    key = (name, dtype, tuple(facts.values()),
           tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in inputs.items()))
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 4096:
            _PLANS.clear()
        plan = _PLANS[key] = plans.plan(name, dtype=dtype, device=facts, **inputs)
    return plan


def _options(launch):
    options = {"num_warps": launch["num_warps"]}
    if launch["maxnreg"]:
        options["maxnreg"] = launch["maxnreg"]
    if launch["launch_pdl"]:
        options["launch_pdl"] = True
    return options


def _launch(module, launch, *args):
    """kernel[grid](*args, **constexprs, **options) as the plan's `launch` says."""
    kernel = getattr(module, launch["kernel"])
    kernel[tuple(launch["grid"])](*args, **launch["constexprs"], **_options(launch))


def _rows_of(t):
    """(element_sizes, base_offsets, row_strides) entries of a 2-D row view, as the plans take them."""
    return t.element_size(), t.data_ptr() % 16, t.stride(0)


def _alignment_inputs(*tensors):
    facts = [_rows_of(t) for t in tensors]
    return dict(element_sizes=[f[0] for f in facts], base_offsets=[f[1] for f in facts],
                row_strides=[f[2] for f in facts])


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


def _row_preload(block_n, single_pass):
    """layer_norm_fwd_kernel's PRELOAD for a forced one-program-per-row launch: weight and bias with the
    row while the row is one block of at most 8192 columns."""
    return single_pass and block_n <= 8192


# ----------------------------------------------------------------------------------------------- sum


def _sum_rows_planned(x2, m, n, index_64, facts=None, candidate=None):
    """x2 [m, n] summed by rows as the sum_rows plan says (one launch, or two stages through a partial);
    candidate: that plan candidate's launches."""
    plan = _plan("sum_rows", x2.dtype, x2.device, facts, rows=m, cols=n, index64=index_64,
                 **_candidate("sum_rows", candidate))
    out = _empty((m, ), x2.dtype, x2.device)
    launches = plan["launches"]
    if len(launches) == 1:
        _launch(sum_k, launches[0], x2, out, m, n, x2.stride(0))
        return out
    first, second = launches
    partial = _empty(tuple(plan["workspace"]["partial"]), _acc_dtype(x2.dtype), x2.device)
    per_row = first["args"]["splits"] if "splits" in first["args"] else first["args"]["chunk"]
    _launch(sum_k, first, x2, partial, m, n, x2.stride(0), per_row)
    splits = second["args"]["N"]
    _launch(sum_k, second, partial, out, m, splits, splits)
    return out


def sum_dim_last(x, block_n=None, index_64=None, blocked=None, device=None, candidate=None):
    """x.sum(-1) as tjit's sum_rows plan says (or its candidate `candidate`); block_n / blocked force
    sum_rows_kernel or sum_rows_blocked_kernel with that block."""
    x2 = _rows_view(x)
    m, n = x2.shape
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    if block_n is None and blocked is None:
        return _sum_rows_planned(x2, m, n, index_64, device, candidate).view(x.shape[:-1])
    out = _empty((m, ), x.dtype, x.device)
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


def sum_rows_two_stage(x, chunk=None, block_n=None, index_64=None, strided=None):
    """x.sum(-1) forced through two stages: a first stage into partial sums (sum_partial_strided_kernel
    with `strided`, else sum_partial_kernel with columns of `chunk` a program), then sum_rows_kernel on
    the partials. Without `chunk`, `strided` and `block_n`: the sum_rows plan (two stages or not)."""
    x2 = _rows_view(x)
    m, n = x2.shape
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    if chunk is None and strided is None and block_n is None:
        return _sum_rows_planned(x2, m, n, index_64).view(x.shape[:-1])
    if strided is None:
        strided = chunk is None and x.element_size() == 4
    if block_n is None:
        block_n = 8192 if x.element_size() == 2 else 4096
    pdl = _facts(x.device)["dependent_launch"] and x.is_cuda
    if strided:
        # Up to 8 programs an SM of the planning device, at least one block each.
        splits = max(1, min(triton.cdiv(n, block_n), 8 * _num_sms(x.device) // max(m, 1)))
        partial = _empty((m, splits), _acc_dtype(x.dtype), x.device)
        sum_k.sum_partial_strided_kernel[(m * splits, )](x2, partial, m, n, x2.stride(0), splits, BLOCK_N=block_n,
                                                            INDEX_64=index_64, PDL=pdl, num_warps=8, maxnreg=32,
                                                            **_pdl_kwargs(pdl))
    else:
        if chunk is None:
            chunk = triton.cdiv(triton.cdiv(n, max(1, min(triton.cdiv(n, block_n), 4 * _num_sms(x.device)))),
                                block_n) * block_n
        splits = triton.cdiv(n, chunk)
        partial = _empty((m, splits), _acc_dtype(x.dtype), x.device)
        sum_k.sum_partial_kernel[(m * splits, )](x2, partial, m, n, x2.stride(0), chunk, BLOCK_N=block_n,
                                                    INDEX_64=index_64, PDL=pdl, num_warps=8, **_pdl_kwargs(pdl))
    out = _empty((m, ), x.dtype, x.device)
    block_s = min(triton.next_power_of_2(splits), 4096)
    sum_k.sum_rows_kernel[(m, )](partial, out, m, splits, splits, BLOCK_N=block_s, INDEX_64=False, PDL=pdl,
                                    num_warps=_row_num_warps(block_s), **_pdl_kwargs(pdl))
    return out.view(x.shape[:-1])


def _pdl_kwargs(pdl):
    return {"launch_pdl": True} if pdl else {}


def sum_all(x, chunk=None, block_n=None, index_64=None, strided=None):
    """x.sum(): the sum_rows plan for one row of every element; chunk / block_n / strided force the two
    stages."""
    if chunk is None and strided is None and block_n is None:
        return sum_dim_last(x.contiguous().view(1, -1), index_64=index_64).view(())
    return sum_rows_two_stage(x.contiguous().view(1, -1), chunk=chunk, block_n=block_n, index_64=index_64,
                              strided=strided).view(())


def sum_dim(x, dim, splits=None, block_r=None, block_k=None, index_64=None):
    """x.sum(dim) without a transpose: x viewed as [M, R, K], sum_mid_kernel (with sum_mid_split_kernel
    first where the sum_middle plan splits R). splits / block_r / block_k override the plan."""
    x = x.contiguous()
    dim = dim % x.dim()
    m = math.prod(x.shape[:dim])
    r = x.shape[dim]
    k = math.prod(x.shape[dim + 1:])
    out_shape = x.shape[:dim] + x.shape[dim + 1:]
    if index_64 is None:
        index_64 = _needs_index_64(x)
    out = _empty((m, k), x.dtype, x.device)
    if splits is None and block_r is None and block_k is None:
        plan = _plan("sum_middle", x.dtype, x.device, m=m, r=r, k=k, index64=index_64)
        if len(plan["launches"]) == 1:
            _launch(sum_k, plan["launches"][0], x, out, m, r, k, r * k, k)
            return out.view(out_shape)
        split, mid = plan["launches"]
        partial = _empty(tuple(plan["workspace"]["partial"]), _acc_dtype(x.dtype), x.device)
        _launch(sum_k, split, x, partial, m, r, k, r * k, k, split["args"]["rows_per_split"])
        s = mid["args"]["R"]
        _launch(sum_k, mid, partial, out, m, s, k, s * k, k)
        return out.view(out_shape)
    block_k = block_k or min(triton.next_power_of_2(k), 256)
    block_r = block_r or max(1, min(2048 // block_k, triton.next_power_of_2(r)))
    num_kb = triton.cdiv(k, block_k)
    splits = splits or 1
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


def _split_sync(words, device):
    """The zeroed workspace of the kernels whose programs share rows: the ticket, then a word per chunk."""
    return torch.zeros(words, dtype=torch.int64, device=device)


def _split_alignment(n, *tensors):
    """The split kernels' ALIGN for 2-D row views `tensors` of n columns, as softmax's plan picks it."""
    plan = plans.plan("softmax_split_alignment", dtype=tensors[0].dtype, device=plans.CPU, cols=n,
                      **_alignment_inputs(*tensors))
    return plan["workspace"]["ALIGN"]


def _long_row_grid(m, n):
    """The autotuned *_fwd_long_kernel's grid (its contract): cdiv(N, BLOCK_N) programs a row when the
    config splits rows, else one."""
    return lambda meta: (m * triton.cdiv(n, meta["BLOCK_N"]) if meta["SPLIT"] else m, )  # noqa: E731


def _launch_long(module, launch, m, n, *args):
    kernel = getattr(module, launch["kernel"])
    kernel[_long_row_grid(m, n)](*args, **launch["constexprs"])


def _candidate(plan, name):
    """describe_plan's input forcing candidate `name` of `plan` ({} for None)."""
    if name is None:
        return {}
    from tjit import _C
    return {"candidate": _C.plan_candidates(plan).index(name)}


def softmax(x, dim=-1, block_n=None, index_64=None, single_pass=None, device=None, tuner=True, candidate=None):
    """softmax over `dim` as tjit's softmax plan says (device: facts to plan for, default x's device;
    tuner=False: as while a CUDA graph capture finds no tuned config; candidate: that plan candidate's
    launch); block_n / single_pass force softmax_fwd_kernel with that block."""
    if dim % max(x.dim(), 1) != x.dim() - 1:
        return softmax(x.movedim(dim, -1), -1, block_n, index_64, single_pass, device, tuner,
                       candidate).movedim(-1, dim)
    x2 = _rows_view(x)
    m, n = x2.shape
    out = _empty((m, n), x.dtype, x.device)
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    if block_n is not None or single_pass is not None:  # an explicit one-program-per-row launch
        block_n, single = _row_blocking(n, x.dtype, block_n, single_pass)
        softmax_k.softmax_fwd_kernel[(m, )](out, x2, m, n, x2.stride(0), out.stride(0), BLOCK_N=block_n,
                                            SINGLE_PASS=single, INDEX_64=index_64,
                                            num_warps=_row_num_warps(block_n, single))
        return out.view(x.shape)
    plan = _plan("softmax", x.dtype, x.device, device, rows=m, cols=n, index64=index_64, tuner_available=tuner,
                 **_alignment_inputs(out, x2), **_candidate("softmax", candidate))
    launch = plan["launches"][0]
    kind = plan["kind"]
    if kind == "long":
        sync = _split_sync(plan["workspace"]["row_exchange_words"], x.device)
        _launch_long(softmax_k, launch, m, n, out, x2, sync, launch["args"]["M_BUCKET"], n, x2.stride(0),
                     out.stride(0))
    elif kind == "split":
        sync = _split_sync(plan["workspace"]["row_exchange_words"], x.device)
        _launch(softmax_k, launch, out, x2, sync, m, n, launch["args"]["S"], x2.stride(0), out.stride(0))
    else:  # short_rows, row, persistent
        _launch(softmax_k, launch, out, x2, m, n, x2.stride(0), out.stride(0))
    return out.view(x.shape)


def softmax_backward(grad_out, out, block_n=None, index_64=None, single_pass=None, device=None, candidate=None):
    go2 = _rows_view(grad_out)
    o2 = _rows_view(out)
    m, n = o2.shape
    grad_in = _empty((m, n), out.dtype, out.device)
    if index_64 is None:
        index_64 = _needs_index_64(go2, o2)
    if block_n is not None or single_pass is not None:
        block_n, single = _row_blocking(n, out.dtype, block_n, single_pass)
        softmax_k.softmax_bwd_kernel[(m, )](grad_in, go2, o2, m, n, grad_in.stride(0), go2.stride(0), o2.stride(0),
                                            BLOCK_N=block_n, SINGLE_PASS=single, INDEX_64=index_64,
                                            num_warps=_row_num_warps(block_n, single))
        return grad_in.view(out.shape)
    plan = _plan("softmax_backward", out.dtype, out.device, device, rows=m, cols=n, index64=index_64,
                 **_alignment_inputs(grad_in, go2, o2), **_candidate("softmax_backward", candidate))
    launch = plan["launches"][0]
    if plan["kind"] == "split":
        sync = _split_sync(plan["workspace"]["row_exchange_words"], out.device)
        _launch(softmax_k, launch, grad_in, go2, o2, sync, m, n, launch["args"]["S"], grad_in.stride(0),
                go2.stride(0), o2.stride(0))
    else:  # short_rows, row
        _launch(softmax_k, launch, grad_in, go2, o2, m, n, grad_in.stride(0), go2.stride(0), o2.stride(0))
    return grad_in.view(out.shape)


# ---------------------------------------------------------------------------------------- layer_norm


def layer_norm(x, weight, bias, eps=1e-5, block_n=None, index_64=None, single_pass=None, stats=True,
               persistent=None, device=None, tuner=True):
    """Returns (y, mean, rstd); mean/rstd have aten's shape x.shape[:-1] + (1,). With stats=False
    (inference, as tjit.layer_norm does) they are neither allocated nor stored, and are None.
    The launch is tjit's layer_norm_forward plan; block_n / single_pass force layer_norm_fwd_kernel,
    persistent=(BLOCK_N, BLOCK_TAIL, programs) layer_norm_fwd_persistent_kernel with those blocks and
    that grid (tests)."""
    x2 = _rows_view(x)
    m, n = x2.shape
    acc = _acc_dtype(x.dtype)
    y = _empty((m, n), x.dtype, x.device)
    mean = _empty((m, ), acc, x.device) if stats else None
    rstd = _empty((m, ), acc, x.device) if stats else None
    if index_64 is None:
        index_64 = _needs_index_64(x2)
    args = (y, x2, weight, bias, mean, rstd)
    hw = dict(HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None)
    if persistent is not None:
        head, tail, programs = persistent
        layer_norm_k.layer_norm_fwd_persistent_kernel[(programs, )](*args, m, n, x2.stride(0), y.stride(0), eps, **hw,
                                                                    BLOCK_N=head, BLOCK_TAIL=tail, STAGES=2,
                                                                    INDEX_64=index_64, num_warps=4)
    elif block_n is not None or single_pass is not None:
        block_n, single = _row_blocking(n, x2.dtype, block_n, single_pass)
        layer_norm_k.layer_norm_fwd_kernel[(m, )](*args, m, n, x2.stride(0), y.stride(0), eps, **hw, BLOCK_N=block_n,
                                                  SINGLE_PASS=single, INDEX_64=index_64, BLOCK_TAIL=0,
                                                  PRELOAD=_row_preload(block_n, single),
                                                  num_warps=_row_num_warps(block_n, single))
    else:
        inputs = dict(rows=m, cols=n, index64=index_64, has_weight=weight is not None, has_bias=bias is not None,
                      tuner_available=tuner)
        plan = _plan("layer_norm_forward", x.dtype, x.device, device, **inputs)
        launch = plan["launches"][0]
        if plan["kind"] == "long":
            sync = _split_sync(plan["workspace"]["row_exchange_words"], x.device)
            _launch_long(layer_norm_k, launch, m, n, *args, sync, launch["args"]["M_BUCKET"], n, x2.stride(0),
                         y.stride(0), eps)
        else:
            run_args = args + (m, n, x2.stride(0), y.stride(0), eps)
            if plan["needs_occupancy"]:
                # As many programs as the GPU holds: the plan again, with the binary's occupancy.
                per_sm = _resident_per_sm(getattr(layer_norm_k, launch["kernel"]), run_args, _options(launch),
                                          **launch["constexprs"])
                plan = _plan("layer_norm_forward", x.dtype, x.device, device, resident_programs_per_sm=per_sm,
                             **inputs)
                launch = plan["launches"][0]
            if launch["kernel"] == norm_forward_k.norm_fwd_kernel.fn.__name__:
                # the family's kernel: no residual (nor its sum), their strides 0
                run_args = (y, None, mean, rstd, x2, None, weight, bias, m, n, y.stride(0), 0, x2.stride(0), 0, eps)
            _launch(layer_norm_k, launch, *run_args)
    if not stats:
        return y.view(x.shape), None, None
    stat_shape = x.shape[:-1] + (1, )
    return y.view(x.shape), mean.view(stat_shape), rstd.view(stat_shape)


def layer_norm_backward(dy, x, weight, mean, rstd, compute_dw=None, compute_db=True, block_n=None, index_64=None,
                        groups=None, block_m=None, block_n_dwdb=None, single_pass=None, device=None):
    """Returns (dx, dw, db); dw is None without weight (or compute_dw=False), db None if not compute_db.
    The launches are tjit's layer_norm_backward plan. Any of block_n, groups, block_m, block_n_dwdb,
    single_pass forces the dx kernel then the dw/db column kernels: groups (default 1) row groups,
    groups=1 the direct kernel."""
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
    wdtype = weight.dtype if weight is not None else x.dtype
    dw = _empty((n, ), wdtype, x.device) if compute_dw else None
    db = _empty((n, ), wdtype, x.device) if compute_db else None
    explicit = any(v is not None for v in (block_n, groups, block_m, block_n_dwdb, single_pass))
    if not explicit:
        _layer_norm_backward_planned(dx, dw, db, dy2, x2, weight, mean, rstd, m, n, index_64, device)
        return dx.view(x.shape), dw, db
    block_n, single = _row_blocking(n, x.dtype, block_n, single_pass)
    norm_backward_k.norm_bwd_dx_kernel[(m, )](dx, dy2, x2, weight, mean, rstd, None, m, n, dx.stride(0), dy2.stride(0),
                                              x2.stride(0), 0, HAS_WEIGHT=weight is not None, BLOCK_N=block_n,
                                              SINGLE_PASS=single, INDEX_64=index_64,
                                              num_warps=_row_num_warps(block_n, single))
    dx = dx.view(x.shape)
    if not (compute_dw or compute_db):
        return dx, None, None
    bn = block_n_dwdb or min(triton.next_power_of_2(n), 128)
    bm = block_m or (16 if x.dtype == torch.float64 else 32)
    col_blocks = triton.cdiv(n, bn)
    groups = max(groups or 1, 1)
    rows_per_group = triton.cdiv(triton.cdiv(m, groups), bm) * bm
    groups = triton.cdiv(m, rows_per_group)
    acc = _acc_dtype(x.dtype)
    # One group writes dw/db itself; more write partial rows that the finalize adds up.
    dw_part = _empty((groups, n), acc, x.device) if compute_dw and groups > 1 else dw
    db_part = _empty((groups, n), acc, x.device) if compute_db and groups > 1 else db
    norm_backward_k.norm_bwd_column_sums_kernel[(col_blocks, groups)](
        dw_part, db_part, dy2, x2, mean, rstd, m, n, dy2.stride(0), x2.stride(0), rows_per_group,
        COMPUTE_DW=compute_dw, COMPUTE_DB=compute_db, BLOCK_M=bm, BLOCK_N=bn, INDEX_64=index_64, num_warps=4)
    if groups > 1:
        _finalize_dwdb(dw, db, dw_part, db_part, groups, n)
    return dx, dw, db


def _finalize_dwdb(dw, db, dw_part, db_part, groups, n):
    """norm_bwd_sums_finalize_kernel over `groups` partial rows, for the forced (explicit) backward;
    planned launches take the finalize their plan returns."""
    bnf = min(max(triton.next_power_of_2(triton.cdiv(n, 256)), 16), 128)
    block_g = min(triton.next_power_of_2(groups), max(32, 2048 // bnf))
    norm_backward_k.norm_bwd_sums_finalize_kernel[(triton.cdiv(n, bnf), )](dw, db, dw_part, db_part, groups, n,
                                                                           COMPUTE_DW=dw is not None,
                                                                           COMPUTE_DB=db is not None,
                                                                           BLOCK_G=block_g, BLOCK_N=bnf,
                                                                           INDEX_64=False, num_warps=4)


def _layer_norm_backward_planned(dx, dw, db, dy2, x2, weight, mean, rstd, m, n, index_64, facts):
    """The launches of tjit's layer_norm_backward plan, dx always wanted (as the operator's autograd asks)."""
    inputs = dict(rows=m, cols=n, want_dx=True, want_dw=dw is not None, want_db=db is not None,
                  has_weight=weight is not None, index64=index_64)
    plan = _plan("layer_norm_backward", x2.dtype, x2.device, facts, **inputs)
    ws = plan["workspace"]
    acc = _acc_dtype(x2.dtype)

    def partials(shape):
        if shape is None:
            return dw, db
        return (_empty(tuple(shape), acc, x2.device) if dw is not None else None,
                _empty(tuple(shape), acc, x2.device) if db is not None else None)

    kind = plan["kind"]
    launches = list(plan["launches"])
    if kind == "fused":
        dw_part, db_part = partials(ws.get("column_partials"))
        main = launches.pop(0)
        # the family's fused kernel: no ds (add_rms_norm's), its stride 0
        _launch(layer_norm_k, main, dx, dw_part, db_part, dy2, x2, weight, mean, rstd, None, m, n, dx.stride(0),
                dy2.stride(0), x2.stride(0), 0, main["args"]["rows_per_program"])
    elif kind in ("team", "team_lag"):
        main = launches[0]

        def team_args(dw_part, db_part, sync, rows_per_team):
            if main["kernel"] == norm_team_k.norm_bwd_team_lag_kernel.fn.__name__:
                # the family's kernel: no ds (add_rms_norm's), its stride 0
                return (dx, dw_part, db_part, dy2, x2, weight, mean, rstd, None, sync, m, n, main["args"]["S"],
                        rows_per_team, dx.stride(0), dy2.stride(0), x2.stride(0), 0)
            return (dx, dw_part, db_part, dy2, x2, weight, mean, rstd, sync, m, n, main["args"]["S"], rows_per_team,
                    dx.stride(0), dy2.stride(0), x2.stride(0))

        if plan["needs_occupancy"]:
            # Teams follow the occupancy, asked with stand-ins of the buffers sized by the team count: mean
            # (fp32, like the partial sums) and an int64 word (the row words, with a mode word a team).
            stand_in = torch.empty(1, dtype=torch.int64, device=x2.device)
            per_sm = _resident_per_sm(getattr(layer_norm_k, main["kernel"]),
                                      team_args(mean if dw is not None else None, mean if db is not None else None,
                                                stand_in, 1), _options(main), **main["constexprs"])
            plan = _plan("layer_norm_backward", x2.dtype, x2.device, facts, resident_programs_per_sm=per_sm, **inputs)
            ws = plan["workspace"]
            launches = list(plan["launches"])
            main = launches[0]
        launches.pop(0)
        sync = _split_sync(ws["row_exchange_words"], x2.device)
        dw_part, db_part = partials(ws.get("column_partials"))
        _launch(layer_norm_k, main, *team_args(dw_part, db_part, sync, main["args"]["rows_per_team"]))
    else:  # dx_dwdb
        dx_launch = launches.pop(0)
        _launch(layer_norm_k, dx_launch, dx, dy2, x2, weight, mean, rstd, None, m, n, dx.stride(0), dy2.stride(0),
                x2.stride(0), 0)
        if launches:
            columns = launches.pop(0)
            dw_part, db_part = partials(ws.get("column_partials"))
            _launch(layer_norm_k, columns, dw_part, db_part, dy2, x2, mean, rstd, m, n, dy2.stride(0),
                    x2.stride(0), columns["args"]["rows_per_group"])
    if launches:  # the finalize: dw/db = the sum of the partials' rows
        finalize = launches.pop(0)
        if kind == "team_lag":  # also finishes the rows of a team that gave up (the row words in sync)
            a = finalize["args"]
            _launch(layer_norm_k, finalize, dw, db, dw_part, db_part, dx, dy2, x2, weight, mean, rstd, sync, m, n,
                    a["S"], a["rows_per_team"], a["G"], dx.stride(0), dy2.stride(0), x2.stride(0))
        else:
            _launch(layer_norm_k, finalize, dw, db, dw_part, db_part, finalize["args"]["G"], n)


def patch_interpreter_for_numpy():
    """Triton 3.6's interpreter converts a 1-element array loop bound with int(array), which numpy
    >= 2.4 rejects, so `for i in range(0, N, BLOCK)` with a runtime N fails (triton-lang/triton#9171,
    fixed upstream by #9172). Re-registers __index__ as the fix does. No-op on older numpy. Used by
    the benchmarks' CPU smoke mode and tests/python/kernels_interpreter_check.py; tjit's own
    runtime carries the same fix in ops/triton_adapter/interpreter.py (embedded, self-contained)."""
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
