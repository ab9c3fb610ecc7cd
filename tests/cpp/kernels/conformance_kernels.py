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


# Tensor descriptors (TMA on sm_90+): host-side descriptors passed as arguments, and descriptors built
# on the device (which need the launch's global scratch memory).


@triton.jit
def persistent_matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr):
    """C = A @ B with host descriptors: A (M, K) in blocks [BLOCK_M, BLOCK_K], B given as B^T (N, K) in
    blocks [BLOCK_N, BLOCK_K], C (M, N) in blocks [BLOCK_M, BLOCK_N] of c_desc's dtype.

    Persistent: launch with grid (min(NUM_SMS, num_tiles),); each program strides over the tiles.
    Ragged M, N, K need no masks: descriptor loads zero-fill out of bounds and stores are clipped."""
    start_pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tl.cdiv(M, BLOCK_M) * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(start_pid, num_tiles, NUM_SMS):
        off_m = (tile // num_pid_n) * BLOCK_M
        off_n = (tile % num_pid_n) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            off_k = kt * BLOCK_K
            a = a_desc.load([off_m, off_k])
            b = b_desc.load([off_n, off_k])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def attention_fwd_tma_kernel(q_desc, k_desc, v_desc, o_desc, sm_scale, N_CTX, HEAD_DIM: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Non-causal flash-attention forward, O = softmax(Q K^T * sm_scale) V, with an online exp2 softmax.

    q, k, v, o are (Z*H*N_CTX, HEAD_DIM) fp16 host descriptors (blocks [BLOCK_M, HEAD_DIM] for q/o,
    [BLOCK_N, HEAD_DIM] for k/v); each (z, h) owns a contiguous block of N_CTX rows.
    Grid: (cdiv(N_CTX, BLOCK_M), Z*H). Assumes N_CTX is a multiple of BLOCK_M and BLOCK_N: the rows
    are flattened, so a partial block would read the next head's rows rather than zeros."""
    start_m = tl.program_id(0)
    row0 = tl.program_id(1) * N_CTX
    off_q = row0 + start_m * BLOCK_M
    # Fold log2(e) into the scale so the softmax can use exp2.
    qk_scale = sm_scale * 1.44269504089
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    q = q_desc.load([off_q, 0])
    for start_n in range(0, N_CTX, BLOCK_N):
        k = k_desc.load([row0 + start_n, 0])
        qk = tl.dot(q, k.T) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        # Rescale what was accumulated under the old running max.
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([row0 + start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    o_desc.store([off_q, 0], (acc / l_i[:, None]).to(o_desc.dtype))


@triton.jit
def scale_rows_device_desc_kernel(x_ptr, y_ptr, M, N, stride_m, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """y = x * scale over an (M, N) row-major matrix, through descriptors built on the device.

    Grid: (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)). Device-side descriptors need a global scratch
    allocation, so the launcher must provide an allocator (triton.set_allocator in Python)."""
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[stride_m, 1], block_shape=[BLOCK_M, BLOCK_N])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[stride_m, 1], block_shape=[BLOCK_M, BLOCK_N])
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    x = x_desc.load([off_m, off_n])
    y_desc.store([off_m, off_n], (x * scale).to(y_desc.dtype))
