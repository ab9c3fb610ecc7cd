"""The kernels of benchmarks/own_kernels.py: a user's own @triton.jit kernels, launched tiny (grid (1,))
so the host's cost per launch is what is measured, from Python Triton, tjit.jit, ctypes' cuLaunchKernel
and C++.

copy_scale_kernel   4 parameters: out[i] = 2 * x[i]                      (x, out, n, BLOCK)
args14_kernel      14 parameters: pointers, ints, floats and constexprs (see below)

Integer arguments must not be 1 at the call (Triton specialises an int equal to 1 into a constant,
and the launch would pass one argument less): own_kernels.py passes n = 1000, strides 2 and 3,
shift 5.
"""

import triton
import triton.language as tl


@triton.jit
def copy_scale_kernel(x, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) * 2.0, mask=mask)


@triton.jit
def args14_kernel(x, y, z, out,  # 4 pointers
                  n, x_stride, y_stride, shift,  # 4 ints
                  alpha, beta, gamma, eps,  # 4 floats
                  BLOCK: tl.constexpr, USE_Z: tl.constexpr):  # 2 constexprs
    """out[shift + i] = alpha * x[i * x_stride] + beta * y[i * y_stride] (+ gamma * z[i] with USE_Z) + eps,
    for i < n; out[:shift] untouched."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    a = tl.load(x + i * x_stride, mask=mask, other=0.0)
    b = tl.load(y + i * y_stride, mask=mask, other=0.0)
    r = alpha * a + beta * b + eps
    if USE_Z:
        r += gamma * tl.load(z + i, mask=mask, other=0.0)
    tl.store(out + shift + i, r, mask=mask)
