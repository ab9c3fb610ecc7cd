"""Softmax over the last dimension, forward and backward, for tjit.

Plain ``@triton.jit`` kernels launched from C++: the caller picks every ``tl.constexpr``. This file
imports nothing but triton.

Conventions
-----------
* The C++ wrapper moves the softmax dim last and passes 2-D views [M rows, N columns]; columns are
  contiguous, each tensor has its own row stride (elements).
* Accumulation (max, exp, sums) is fp32, or fp64 when the input is fp64; outputs are cast to the
  output pointer's element type.
* ``INDEX_64``: True when any tensor has >= 2**31 elements (or row * stride can reach 2**31); the
  row index is then int64 before it meets a stride.
* ``next_pow2`` = ``triton.next_power_of_2``. num_warps advice is a starting point.

Choosing BLOCK_N / SINGLE_PASS / num_warps (both kernels)
--------------------------------------------------------
    if N <= LIMIT: BLOCK_N = next_pow2(N); SINGLE_PASS = True;   num_warps = min(16, max(1, BLOCK_N // 512))
    else:          BLOCK_N = 4096;         SINGLE_PASS = False; num_warps = 16
with LIMIT = 32768 for the forward (one row in registers at 16 warps, as the Triton tutorial) and
16384 for the backward (two rows in registers). The looped paths hint L2 to keep the row between
their two reads (evict_last, then evict_first).
SINGLE_PASS=True requires N <= BLOCK_N (the row lives in registers). SINGLE_PASS=False works for
any N >= 1 (rows of 2**20 columns and more) and reads the input twice (forward: online max/sum,
then normalise).
Measured on an H200, fp32, compiled from Python (2026-11-22): single pass reaches ~4.1 TB/s for
N = 512 ... 16384 with the warps above (looped 4096/16 warps at N = 16384: ~3.0 TB/s; 8+ warps at
N = 512: <= 2.9 TB/s); looped at N = 65536: ~2.7 TB/s. Few very long rows (M < #SMs) prefer
BLOCK_N = 16384 with 16 warps (128 x 2**20: 2.6 vs 1.8 TB/s). Short rows (N <= 128) are limited
by one row per program (~1.7 TB/s at 2**20 x 128).

Kernels
-------
softmax_fwd_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_N, SINGLE_PASS, INDEX_64)
    out[m, :] = softmax(in[m, :]).          grid: (M,), one program per row.

softmax_bwd_kernel(grad_in_ptr, grad_out_ptr, out_ptr, M, N, stride_grad_in_row, stride_grad_out_row,
                   stride_out_row, BLOCK_N, SINGLE_PASS, INDEX_64)
    grad_in = out * (grad_out - sum(grad_out * out, row)), with out the forward result.
    grid: (M,), one program per row.

Rows that are entirely -inf give NaN, like torch.softmax.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_fwd_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_N: tl.constexpr,
                       SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr):
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else tl.float32

    in_row = in_ptr + row * stride_in_row
    out_row = out_ptr + row * stride_out_row
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_PASS:
        mask = cols < N
        # Padding lanes load -inf so they neither win the max nor add to the sum (exp(-inf) = 0).
        x = tl.load(in_row + cols, mask=mask, other=float("-inf")).to(ACC)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        # Pass 1: online softmax statistics kept per lane (running max m_vec and sum of
        # exp(x - m_vec)), so each chunk costs no cross-lane reduction.
        m_vec = tl.full([BLOCK_N], float("-inf"), ACC)
        s_vec = tl.zeros([BLOCK_N], dtype=ACC)
        # The row is read again in pass 2: ask L2 to keep it (evict_last) so the second read
        # is served from L2 rather than from memory.
        for start in range(0, N, BLOCK_N):
            c = start + cols
            x = tl.load(in_row + c, mask=c < N, other=float("-inf"), eviction_policy="evict_last").to(ACC)
            m_new = tl.maximum(m_vec, x)
            # A lane that has seen only -inf keeps m_new = -inf; shifting by 0 instead avoids
            # exp(-inf - -inf) = NaN (its sum stays 0 either way).
            shift = tl.where(m_new == float("-inf"), 0.0, m_new)
            s_vec = s_vec * tl.exp(m_vec - shift) + tl.exp(x - shift)
            m_vec = m_new
        row_max = tl.max(m_vec, axis=0)
        # Lanes with m_vec = -inf have s_vec = 0 and exp(-inf) = 0: they drop out.
        inv_sum = 1.0 / tl.sum(s_vec * tl.exp(m_vec - row_max), axis=0)

        # Pass 2: normalise.
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            x = tl.load(in_row + c, mask=mask, other=float("-inf"), eviction_policy="evict_first").to(ACC)
            y = tl.exp(x - row_max) * inv_sum
            tl.store(out_row + c, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_kernel(grad_in_ptr, grad_out_ptr, out_ptr, M, N, stride_grad_in_row, stride_grad_out_row,
                       stride_out_row, BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr):
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32

    gi_row = grad_in_ptr + row * stride_grad_in_row
    go_row = grad_out_ptr + row * stride_grad_out_row
    o_row = out_ptr + row * stride_out_row
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_PASS:
        mask = cols < N
        go = tl.load(go_row + cols, mask=mask, other=0.0).to(ACC)
        o = tl.load(o_row + cols, mask=mask, other=0.0).to(ACC)
        dot = tl.sum(go * o, axis=0)
        tl.store(gi_row + cols, (o * (go - dot)).to(grad_in_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_N], dtype=ACC)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            go = tl.load(go_row + c, mask=mask, other=0.0, eviction_policy="evict_last").to(ACC)
            o = tl.load(o_row + c, mask=mask, other=0.0, eviction_policy="evict_last").to(ACC)
            acc += go * o
        dot = tl.sum(acc, axis=0)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            go = tl.load(go_row + c, mask=mask, other=0.0, eviction_policy="evict_first").to(ACC)
            o = tl.load(o_row + c, mask=mask, other=0.0, eviction_policy="evict_first").to(ACC)
            tl.store(gi_row + c, (o * (go - dot)).to(grad_in_ptr.dtype.element_ty), mask=mask)


# Short rows (N <= 256): one row per program leaves most of a warp idle and launches M programs;
# these variants give each program BLOCK_M rows as a [BLOCK_M, BLOCK_N] tile.
#     BLOCK_N = next_pow2(N); BLOCK_M = max(1, min(4096 // BLOCK_N, next_pow2(M))); num_warps = 4
#     grid = (cdiv(M, BLOCK_M),)


@triton.jit
def softmax_fwd_rows_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else tl.float32
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    # Padding loads -inf: it neither wins the max nor adds to the sum. Rows past M compute NaN
    # that the masked store drops.
    x = tl.load(in_ptr + rows[:, None] * stride_in_row + cols[None, :], mask=mask, other=float("-inf")).to(ACC)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(out_ptr + rows[:, None] * stride_out_row + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_rows_kernel(grad_in_ptr, grad_out_ptr, out_ptr, M, N, stride_grad_in_row, stride_grad_out_row,
                            stride_out_row, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    go = tl.load(grad_out_ptr + rows[:, None] * stride_grad_out_row + cols[None, :], mask=mask, other=0.0).to(ACC)
    o = tl.load(out_ptr + rows[:, None] * stride_out_row + cols[None, :], mask=mask, other=0.0).to(ACC)
    dot = tl.sum(go * o, axis=1)
    gi = o * (go - dot[:, None])
    tl.store(grad_in_ptr + rows[:, None] * stride_grad_in_row + cols[None, :], gi.to(grad_in_ptr.dtype.element_ty),
             mask=mask)

