"""Elementwise add: out = x + alpha * y.

Launch contract (ops/csrc/ops/add.cpp is the caller):
  grid = (cdiv(n_elements, BLOCK),), num_warps = 4, BLOCK = 1024.
  HAS_ALPHA: alpha != 1 (when false, alpha and alpha_lo are ignored).
  alpha: fp32 for a floating out, an integer for an integer or bool out.
  alpha_lo: fp64 only: the rounding error of alpha as fp32 (alpha - float(alpha)), so that
    alpha + alpha_lo carries ~48 bits of the double alpha; pass 0.0 otherwise.
  INDEX_64: offsets may exceed 2**31 - 1, so index in int64.
x and y may have any dtype: each is converted to out's dtype on load (torch's promotion: the caller
  picks out's dtype with at::result_type), then to the op-math type (fp32 for the half types, int32
  for bool and integers narrower than 32 bits), in which the sum runs and is rounded once to out's.
add_kernel: x, y and out are contiguous and of n_elements each.
add_strided_kernel: out is contiguous, of the broadcast shape collapsed to 4 dims
  (size0 is implied by n_elements); x and y are addressed through their own strides over that
  shape (stride 0 where broadcast).
"""

import triton
import triton.language as tl


@triton.jit
def _to_op_math(v, OUT: tl.constexpr):
    """`v` in out's dtype (aten's common dtype), then in the type the sum runs in (aten's opmath).
    torch converts to the half types through float32 (c10::Half and c10::BFloat16 take a float)."""
    if OUT == tl.float16 or OUT == tl.bfloat16:
        if v.dtype != OUT:
            v = v.to(tl.float32).to(OUT)
        v = v.to(tl.float32)
    else:
        v = v.to(OUT)
        if OUT.is_int() and OUT.primitive_bitwidth < 32:
            v = v.to(tl.int32)
    return v


@triton.jit
def _scaled_sum(x, y, alpha, alpha_lo, OUT: tl.constexpr, HAS_ALPHA: tl.constexpr):
    x = _to_op_math(x, OUT)
    y = _to_op_math(y, OUT)
    if HAS_ALPHA:
        if OUT == tl.float64:
            y = y * alpha + y * alpha_lo  # alpha + alpha_lo is the double alpha
        else:
            y = y * alpha
    return x + y


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, alpha_lo, HAS_ALPHA: tl.constexpr,
               BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    out = _scaled_sum(x, y, alpha, alpha_lo, out_ptr.dtype.element_ty, HAS_ALPHA)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_strided_kernel(x_ptr, y_ptr, out_ptr, n_elements, size1, size2, size3,
                       x_stride0, x_stride1, x_stride2, x_stride3,
                       y_stride0, y_stride1, y_stride2, y_stride3,
                       alpha, alpha_lo, HAS_ALPHA: tl.constexpr, BLOCK: tl.constexpr,
                       INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    # Unravel the linear output index over the (collapsed) shape [size0, size1, size2, size3].
    i3 = offsets % size3
    rest = offsets // size3
    i2 = rest % size2
    rest = rest // size2
    i1 = rest % size1
    i0 = rest // size1
    x_offsets = i0 * x_stride0 + i1 * x_stride1 + i2 * x_stride2 + i3 * x_stride3
    y_offsets = i0 * y_stride0 + i1 * y_stride1 + i2 * y_stride2 + i3 * y_stride3
    x = tl.load(x_ptr + x_offsets, mask=mask)
    y = tl.load(y_ptr + y_offsets, mask=mask)
    out = _scaled_sum(x, y, alpha, alpha_lo, out_ptr.dtype.element_ty, HAS_ALPHA)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)
