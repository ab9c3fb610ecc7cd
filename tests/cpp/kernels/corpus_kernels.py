"""Kernels modelled on Triton's tutorials (3.6), using the rest of @triton.autotune the way the
tutorials do: config pre_hooks that shape host tensor descriptors, prune functions that read the
call's arguments by name, keys naming tensors and names the caller does not pass, heuristics,
tuples, descriptors made on the device, arrays of pointers and programmatic dependent launch.
tests/cpp/test_conformance_corpus.cpp calls each from C++ and from Python Triton, as the
tutorials' own wrappers call them (noted above each kernel), and compares the outputs."""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

_TRITON = tuple(int(p) for p in triton.__version__.split(".")[:2])


# --- Attention forward through host descriptors whose block shapes a config pre_hook sets -------
# The wrapper makes the descriptors with a placeholder block shape ([1, 1]); each config's pre_hook
# gives them the config's blocks. The prune reads N_CTX and STAGE by name (passed by keyword).
# Python: attn_fwd_kernel[lambda META: (triton.cdiv(N_CTX, META["BLOCK_M"]), Z * H)](
#             sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX=N_CTX, HEAD_DIM=64, STAGE=1)


def _attn_descriptor_hook(nargs):
    block_m, block_n, head_dim = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    if not isinstance(nargs["desc_q"], TensorDescriptor):
        return
    nargs["desc_q"].block_shape = [block_m, head_dim]
    nargs["desc_k"].block_shape = [block_n, head_dim]
    nargs["desc_v"].block_shape = [block_n, head_dim]
    nargs["desc_o"].block_shape = [block_m, head_dim]


def _attn_prune(configs, named_args, **kwargs):
    n_ctx = kwargs["N_CTX"]
    stage = kwargs["STAGE"]
    return [c for c in configs
            if c.kwargs["BLOCK_M"] <= n_ctx and (c.kwargs["BLOCK_M"] >= c.kwargs["BLOCK_N"] or stage == 1)]


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s, pre_hook=_attn_descriptor_hook)
             for bm in (64, 128) for bn in (32, 64) for w in (4, 8) for s in (2, 3)],
    key=["N_CTX", "HEAD_DIM", "STAGE"], prune_configs_by={"early_config_prune": _attn_prune})
@triton.jit
def attn_fwd_kernel(sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    """Non-causal attention (STAGE 1): O = softmax(Q K^T sm_scale) V over (Z*H*N_CTX, HEAD_DIM) fp16
    rows, and M = the rows' log2-sum-exp2 (fp32, Z*H*N_CTX). N_CTX a multiple of the blocks."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    row0 = off_hz * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    for start_n in tl.range(0, N_CTX, BLOCK_N):
        k = desc_k.load([row0 + start_n, 0])
        qk = tl.dot(q, k.T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = desc_v.load([row0 + start_n, 0])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_ij
    m_i += tl.math.log2(l_i)
    tl.store(M + row0 + offs_m, m_i)
    desc_o.store([row0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))


# --- Autotuned TMA matmul through host descriptors shaped by a config pre_hook -------------------
# Python: matmul_tma_kernel[lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)](
#             a_desc, b_desc, c_desc, M, N, K)   (descriptors made with block_shape [1, 1])


def _matmul_descriptor_hook(nargs):
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn]


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s,
                           pre_hook=_matmul_descriptor_hook)
             for bm, bn, bk, w, s in ((128, 128, 64, 8, 3), (128, 64, 64, 4, 4), (64, 128, 32, 4, 3))],
    key=["M", "N", "K"])
@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C (M, N) = A (M, K) @ B^T, with B given as (N, K); grouped tile order for L2 reuse."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


# --- Persistent matmul through descriptors made on the device, pruned by a keyword argument ------
# As the tutorial's descriptor-persistent matmul: the prune reads kwargs["FLATTEN"] (and an
# epilogue split in two is kept only with a flattened loop).
# Python: matmul_descriptor_persistent_kernel[lambda META: (min(NUM_SMS, triton.cdiv(M, META["BLOCK_M"]) *
#             triton.cdiv(N, META["BLOCK_N"])),)](a, b, c, M, N, K, NUM_SMS=NUM_SMS, FLATTEN=flatten)


def _persistent_prune(configs, named_args, **kwargs):
    flatten = kwargs["FLATTEN"]
    return [c for c in configs if not (c.kwargs["EPILOGUE_SUBTILE"] and flatten is False)]


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "EPILOGUE_SUBTILE": sub}, num_warps=w,
                           num_stages=3)
             for bm, bn, w in ((128, 128, 8), (64, 128, 4)) for sub in (True, False)],
    key=["M", "N", "K", "FLATTEN"], prune_configs_by={"early_config_prune": _persistent_prune})
@triton.jit
def matmul_descriptor_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                        BLOCK_K: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                                        NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr):
    """C (M, N) fp16 = A (M, K) @ B^T with B as (N, K), all contiguous; K a multiple of 8."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N])
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tl.cdiv(M, BLOCK_M) * num_pid_n
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=FLATTEN):
        off_m = (tile // num_pid_n) * BLOCK_M
        off_n = (tile % num_pid_n) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            acc = tl.dot(a_desc.load([off_m, k * BLOCK_K]), b_desc.load([off_n, k * BLOCK_K]).T, acc)
        if EPILOGUE_SUBTILE:
            acc0, acc1 = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c_desc.store([off_m, off_n], acc0.to(tl.float16))
            c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], acc.to(tl.float16))


# --- Keys naming a tensor and names the caller does not pass; heuristics; tuples ----------------
# The key names a tensor (out), a parameter a config sets (BLOCK) and, where Triton accepts it at
# decoration (before 3.9), a name that is no parameter at all (a misspelling, as in Triton's
# grouped TMA GEMM tutorial). Python: axpb_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](
#             (x, y), out, (alpha, beta), n)
_MISSPELT_KEY = ["n_elements"] if _TRITON < (3, 9) else []


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2), triton.Config({"BLOCK": 512}, num_warps=4)],
                 key=["n", "out", "BLOCK"] + _MISSPELT_KEY)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def axpb_kernel(xy, out, coefficients, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """out = x * alpha + y * beta, x and y given as a tuple, the coefficients as a tuple."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(xy[0] + offsets)
        y = tl.load(xy[1] + offsets)
        tl.store(out + offsets, x * coefficients[0] + y * coefficients[1])
    else:
        mask = offsets < n
        x = tl.load(xy[0] + offsets, mask=mask)
        y = tl.load(xy[1] + offsets, mask=mask)
        tl.store(out + offsets, x * coefficients[0] + y * coefficients[1], mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2), triton.Config({"BLOCK": 512}, num_warps=4)],
                 key=["x", "n"])
@triton.jit
def square_kernel(x, out, n, BLOCK: tl.constexpr):
    """out = x * x; the key names the tensor x (Python Triton keys on the tensor object)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offsets, mask=offsets < n)
    tl.store(out + offsets, v * v, mask=offsets < n)


# --- Grouped GEMM over arrays of pointers (tutorial 08) ------------------------------------------
# Python: grouped_matmul_kernel[lambda META: (META["NUM_SM"],)](a_ptrs, b_ptrs, c_ptrs, sizes, lds, group_size)
# where a_ptrs... are int64 tensors of data_ptr()s, sizes (g*3) the (m, n, k), lds (g*3) the leading dims.


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "NUM_SM": 84}),
                          triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "NUM_SM": 128}, num_warps=8)],
                 key=["group_size"])
@triton.jit
def grouped_matmul_kernel(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds, group_size,
                          NUM_SM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C_g = A_g @ B_g (fp16 in, fp16 out) for each problem g; programs stride over all tiles."""
    tile = tl.program_id(0)
    last_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        tiles_n = tl.cdiv(gn, BLOCK_N)
        num_tiles = tl.cdiv(gm, BLOCK_M) * tiles_n
        while tile >= last_end and tile < last_end + num_tiles:
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            local = tile - last_end
            offs_m = (local // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = (local % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
            for kk in range(0, tl.cdiv(gk, BLOCK_K)):
                ks = kk * BLOCK_K + offs_k
                a = tl.load(a_ptr + offs_m[:, None] * lda + ks[None, :],
                            mask=(offs_m[:, None] < gm) & (ks[None, :] < gk), other=0.0)
                b = tl.load(b_ptr + ks[:, None] * ldb + offs_n[None, :],
                            mask=(ks[:, None] < gk) & (offs_n[None, :] < gn), other=0.0)
                acc = tl.dot(a, b, acc)
            tl.store(c_ptr + offs_m[:, None] * ldc + offs_n[None, :], acc.to(tl.float16),
                     mask=(offs_m[:, None] < gm) & (offs_n[None, :] < gn))
            tile += NUM_SM
        last_end = last_end + num_tiles


# --- Programmatic dependent launch (tutorial 11) -------------------------------------------------
# Python: pdl_add_kernel[grid](x, y, out, n, BLOCK=1024, USE_GDC=True, launch_pdl=True)


@triton.jit
def pdl_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
    """out = x + y; with USE_GDC the loads wait for the previous kernel on the stream (gdc_wait) and
    the next kernel may start once they are issued (gdc_launch_dependents)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if USE_GDC:
        tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    if USE_GDC:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offsets, x + y, mask=mask)
