"""Kernels for the runtime's own tests (tests/cpp): each exercises one specialisation rule."""

import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * scale, mask=mask)


# Every kind of parameter Python Triton specialises, plus the opt-outs.
@triton.jit(do_not_specialize=["n_dns"], do_not_specialize_on_alignment=["ptr_dnsoa", "n_dnsoa"])
def everything_kernel(ptr, ptr_dnsoa, const_ptr: tl.const, n, n_dns, n_dnsoa, n_i64: tl.int64, f, f64: tl.float64,
                      flag, maybe_ptr, C_INT: tl.constexpr, C_BOOL: tl.constexpr, C_FLOAT: tl.constexpr,
                      C_NONE: tl.constexpr):
    # Touch every runtime argument so none is optimised away.
    acc = tl.load(ptr) + tl.load(ptr_dnsoa) + tl.load(const_ptr)
    acc += (n + n_dns + n_dnsoa + n_i64).to(tl.float32) + f + f64.to(tl.float32)
    if flag:
        acc += 1.0
    if maybe_ptr is not None:
        acc += tl.load(maybe_ptr)
    acc += C_INT
    if C_BOOL:
        acc += C_FLOAT
    tl.store(ptr, acc)


# Uses more than 48 KiB of shared memory with the launch options the tests give it.
@triton.jit
def big_shared_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs[:, None] * BLOCK + offs[None, :])
    b = tl.dot(a, a)
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], b)


def not_a_kernel(x):
    return x


# Every kind of manifest value a bundle must keep apart (tests/cpp/test_kernel_bundle.cpp): a
# float64 and an i64 argument, a None pointer, float, bool and None constexprs, and an int
# specialised to 1.
@triton.jit
def variety_kernel(x_ptr, out_ptr, n, one, big: tl.int64, f64: tl.float64, maybe_ptr, C_FLOAT: tl.constexpr,
                   C_BOOL: tl.constexpr, C_NONE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask) * one + big % 3 + f64
    if maybe_ptr is not None:
        x += tl.load(maybe_ptr)
    if C_BOOL:
        x *= C_FLOAT
    if C_NONE is not None:
        x += 1.0
    tl.store(out_ptr + offsets, x, mask=mask)


# String and dtype constexprs (an activation chosen by name, as in Triton's matmul tutorial, and the
# output's element type): specialisation, interpreted and CUDA launches, compiles and bundles.
@triton.jit
def activation_kernel(x_ptr, out_ptr, n, ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if ACTIVATION == "leaky_relu":
        x = tl.where(x >= 0, x, 0.01 * x)
    elif ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    tl.store(out_ptr + offsets, x.to(OUT_DTYPE), mask=mask)


# Defaults a C++ call may leave out, as a Python call does: a runtime float, an int, a string and a
# dtype constexpr, and a None pointer.
@triton.jit
def defaults_kernel(x_ptr, out_ptr, n, scale=2.0, BLOCK: tl.constexpr = 128, ACTIVATION: tl.constexpr = "relu",
                    OUT_DTYPE: tl.constexpr = tl.float32, bias_ptr=None):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask) * scale
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offsets, mask=mask)
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    tl.store(out_ptr + offsets, x.to(OUT_DTYPE), mask=mask)


# Tuple arguments (Triton 3.3+): a pair of tensors, and a nested tuple of scalars whose elements are
# specialised as Python Triton specialises them (an int 1 becomes a constexpr, divisibility).
@triton.jit
def tuple_kernel(pair, scales, n, BLOCK: tl.constexpr):
    x_ptr = pair[0]
    out_ptr = pair[1]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * scales[0] + scales[1][0] * scales[1][1], mask=mask)
