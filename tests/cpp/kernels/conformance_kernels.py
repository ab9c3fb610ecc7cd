"""Kernels written as Triton's tutorials and the peers write them, launched from C++ and from
Python Triton on the same inputs (tests/cpp/test_conformance.cpp): the outputs must be equal."""

import triton
import triton.language as tl


# A matmul with an activation chosen by name and the output's dtype as constexprs (Triton's matmul
# tutorial), with block sizes left to their defaults by callers that do not choose them.
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr = tl.float16, BLOCK_M: tl.constexpr = 64,
                  BLOCK_N: tl.constexpr = 64, BLOCK_K: tl.constexpr = 32):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    if ACTIVATION == "leaky_relu":
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    elif ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(OUT_DTYPE),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# Tuple arguments: tensors and their sizes in tuples (nested), as Triton 3.3+ kernels take them.
@triton.jit
def axpby_kernel(xy, out, coefficients, n, BLOCK: tl.constexpr = 256):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(xy[0] + offsets, mask=mask)
    y = tl.load(xy[1] + offsets, mask=mask)
    result = x * coefficients[0] + y * coefficients[1][0]
    if coefficients[1][1] is not None:
        result += coefficients[1][1]
    tl.store(out + offsets, result, mask=mask)
