"""scaled_silu: out = scale * x * sigmoid(x), and its gradient.

Launch contract (csrc/scaled_silu.cpp is the caller; its plan_scaled_silu chooses):
  grid = (cdiv(n, BLOCK),), num_warps = 4.
  x, grad, out: contiguous, n elements each, one floating dtype (fp32, fp16, bf16, fp64).
  scale: fp64 for fp64 tensors, fp32 otherwise.
  INDEX_64: offsets may reach 2**31, so index in int64.
Half types compute in fp32 and round once; fp64 computes in fp64.
"""

import triton
import triton.language as tl


@triton.jit
def _offsets(n, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    return offsets, offsets < n


@triton.jit
def _compute_type(x):
    if x.dtype != tl.float64:
        x = x.to(tl.float32)
    return x


@triton.jit
def scaled_silu_forward_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    offsets, mask = _offsets(n, BLOCK, INDEX_64)
    x = _compute_type(tl.load(x_ptr + offsets, mask=mask))
    out = scale * x * tl.sigmoid(x)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def scaled_silu_backward_kernel(grad_ptr, x_ptr, grad_x_ptr, n, scale, BLOCK: tl.constexpr,
                                INDEX_64: tl.constexpr):
    offsets, mask = _offsets(n, BLOCK, INDEX_64)
    x = _compute_type(tl.load(x_ptr + offsets, mask=mask))
    grad = _compute_type(tl.load(grad_ptr + offsets, mask=mask))
    s = tl.sigmoid(x)
    # d/dx x * sigmoid(x) = s + x * s * (1 - s)
    grad_x = grad * scale * (s + x * s * (1.0 - s))
    tl.store(grad_x_ptr + offsets, grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
