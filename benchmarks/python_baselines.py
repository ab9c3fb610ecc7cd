"""Python-side baselines the benchmarks compare tjit with.

* ``add``: the plain Python Triton wrapper of ``add_kernel`` (ops/kernels_py/add.py), with the
  constexprs and launch options the C++ wrapper (ops/csrc/ops/add.cpp) uses for contiguous
  same-shape inputs: BLOCK=1024, num_warps=4, HAS_ALPHA = alpha != 1, INDEX_64 = n + 1024 > 2**31.
* ``tutorial_softmax``: a small version of the fused softmax from Triton's tutorial
  (one program per row, the whole row in registers: BLOCK = next_power_of_2(n_cols), num_warps
  from the block size).
* ``register_triton_ops()``: ``torch.library.triton_op`` + ``torch.library.wrap_triton`` versions
  of the add / sum / softmax / layer_norm wrappers, as ``torch.ops.tjit_bench.*``.
* ``patch_interpreter_for_numpy()`` (from triton_wrappers): lets Triton 3.6's interpreter run looped kernels with
  numpy >= 2.4 (CPU smoke runs only).

The sum / softmax / layer_norm Python Triton wrappers themselves live in triton_wrappers.py.
Importing this module loads the kernel files, so on CPU set TRITON_INTERPRET=1 first.
"""

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_wrappers as tw  # noqa: E402
from triton_wrappers import patch_interpreter_for_numpy  # noqa: E402,F401  (re-exported)

add_k = tw.add_k

ADD_BLOCK = 1024
ADD_NUM_WARPS = 4
_INT32_LIMIT = 2**31

# ------------------------------------------------------------------------------------------- add


def add(x, y, alpha=1):
    """x + alpha * y for contiguous same-shape x, y: torch.empty + add_kernel[grid](...)."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    integral = not x.dtype.is_floating_point
    add_k.add_kernel[(triton.cdiv(n, ADD_BLOCK), )](x, y, out, n, int(alpha) if integral else float(alpha), 0.0,
                                                   HAS_ALPHA=alpha != 1, BLOCK=ADD_BLOCK,
                                                   INDEX_64=n + ADD_BLOCK > _INT32_LIMIT, num_warps=ADD_NUM_WARPS)
    return out


def add_launch_only(x, y, out):
    """Just the ``add_kernel[grid](...)`` launch into a pre-allocated output (alpha = 1)."""
    n = out.numel()
    add_k.add_kernel[(triton.cdiv(n, ADD_BLOCK), )](x, y, out, n, 1.0, 0.0, HAS_ALPHA=False, BLOCK=ADD_BLOCK,
                                                   INDEX_64=n + ADD_BLOCK > _INT32_LIMIT, num_warps=ADD_NUM_WARPS)
    return out


# ------------------------------------------------------------------------------- tutorial softmax


@triton.jit
def tutorial_softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    # One program per row; the row lives in registers, so BLOCK_SIZE >= n_cols.
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_SIZE)
    valid = offsets < n_cols
    row_in = tl.load(in_ptr + row * in_row_stride + offsets, mask=valid, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(row_in - tl.max(row_in, axis=0))
    result = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + offsets, result.to(out_ptr.dtype.element_ty), mask=valid)


def tutorial_num_warps(block):
    if block >= 4096:
        return 16
    if block >= 2048:
        return 8
    return 4


def tutorial_softmax(x):
    """Softmax over the last dim of a 2-D tensor with contiguous rows, tutorial style."""
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    out = torch.empty_like(x)
    tutorial_softmax_kernel[(n_rows, )](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block,
                                        num_warps=tutorial_num_warps(block))
    return out


# --------------------------------------------------------------------------------- triton_op ops

TRITON_OP_NAMESPACE = "tjit_bench"
_registered = False


def register_triton_ops():
    """Defines torch.ops.tjit_bench.{add,sum,softmax,layer_norm} with torch.library.triton_op and
    wrap_triton, choosing constexprs like the Python wrappers. Idempotent."""
    global _registered
    if _registered:
        return torch.ops.tjit_bench
    wrap = torch.library.wrap_triton
    # Under Triton's interpreter (CPU) the kernels are InterpretedFunctions, which only newer torch
    # releases' wrap_triton takes: raise here, so the column is reported unavailable, not failing.
    wrap(add_k.add_kernel)

    @torch.library.triton_op(f"{TRITON_OP_NAMESPACE}::add", mutates_args=())
    def add_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = out.numel()
        wrap(add_k.add_kernel)[(triton.cdiv(n, ADD_BLOCK), )](x, y, out, n, 1.0, 0.0, HAS_ALPHA=False,
                                                             BLOCK=ADD_BLOCK, INDEX_64=n + ADD_BLOCK > _INT32_LIMIT,
                                                             num_warps=ADD_NUM_WARPS)
        return out

    @torch.library.triton_op(f"{TRITON_OP_NAMESPACE}::sum", mutates_args=())
    def sum_op(x: torch.Tensor) -> torch.Tensor:
        # Full reduction, as triton_wrappers.sum_all: one program up to 16K elements, else two stages
        # (round-robin blocks for 4-byte elements, else chunks). Without programmatic dependent launch:
        # this baseline measures host cost, which wrap_triton's launches set.
        x = x.contiguous()
        n = x.numel()
        index_64 = n >= _INT32_LIMIT
        out = torch.empty((), dtype=x.dtype, device=x.device)
        if n <= 16384:
            block_n = min(triton.next_power_of_2(n), 4096)
            wrap(tw.sum_k.sum_rows_kernel)[(1, )](x, out, 1, n, n, BLOCK_N=block_n, INDEX_64=index_64, PDL=False,
                                                     num_warps=tw._row_num_warps(block_n))
            return out
        block_n = 8192 if x.element_size() == 2 else 4096
        if x.element_size() == 4:
            splits = max(1, min(triton.cdiv(n, block_n), 8 * tw._num_sms(x.device)))
            partial = torch.empty((splits, ), dtype=tw._acc_dtype(x.dtype), device=x.device)
            wrap(tw.sum_k.sum_partial_strided_kernel)[(splits, )](x, partial, 1, n, n, splits, BLOCK_N=block_n,
                                                                     INDEX_64=index_64, PDL=False, num_warps=8)
        else:
            splits = max(1, min(triton.cdiv(n, block_n), 4 * tw._num_sms(x.device)))
            chunk = triton.cdiv(triton.cdiv(n, splits), block_n) * block_n
            splits = triton.cdiv(n, chunk)
            partial = torch.empty((splits, ), dtype=tw._acc_dtype(x.dtype), device=x.device)
            wrap(tw.sum_k.sum_partial_kernel)[(splits, )](x, partial, 1, n, n, chunk, BLOCK_N=block_n,
                                                             INDEX_64=index_64, PDL=False, num_warps=8)
        block_s = min(triton.next_power_of_2(splits), 4096)
        wrap(tw.sum_k.sum_rows_kernel)[(1, )](partial, out, 1, splits, splits, BLOCK_N=block_s, INDEX_64=False,
                                                 PDL=False, num_warps=tw._row_num_warps(block_s))
        return out

    @torch.library.triton_op(f"{TRITON_OP_NAMESPACE}::softmax", mutates_args=())
    def softmax_op(x: torch.Tensor) -> torch.Tensor:
        # Last dim of a 2-D tensor with contiguous rows (what the benchmarks pass).
        m, n = x.shape
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        block_n, single = tw._row_blocking(n, x.dtype)
        wrap(tw.softmax_k.softmax_fwd_kernel)[(m, )](out, x, m, n, x.stride(0), out.stride(0), BLOCK_N=block_n,
                                                     SINGLE_PASS=single, INDEX_64=tw._needs_index_64(x),
                                                     num_warps=tw._row_num_warps(block_n, single))
        return out

    @torch.library.triton_op(f"{TRITON_OP_NAMESPACE}::layer_norm", mutates_args=())
    def layer_norm_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        m, n = x.shape
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        block_n, single = tw._row_blocking(n, x.dtype)
        # No mean/rstd (None): inference, as torch.ops.tjit.layer_norm.
        wrap(tw.layer_norm_k.layer_norm_fwd_kernel)[(m, )](y, x, weight, bias, None, None, m, n, x.stride(0),
                                                           y.stride(0), eps, HAS_WEIGHT=True, HAS_BIAS=True,
                                                           BLOCK_N=block_n, SINGLE_PASS=single,
                                                           INDEX_64=tw._needs_index_64(x), BLOCK_TAIL=0,
                                                           PRELOAD=tw._row_preload(block_n, single),
                                                           num_warps=tw._row_num_warps(block_n, single))
        return y

    _registered = True
    return torch.ops.tjit_bench
