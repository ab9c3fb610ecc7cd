"""Softmax over the last dimension, forward and backward, for tjit.

Plain ``@triton.jit`` kernels launched from C++ (ops/csrc/ops/softmax.cpp, which picks the kernel and
every ``tl.constexpr``).

Conventions
-----------
* The wrapper moves the softmax dim last and passes 2-D views [M rows, N columns]; columns are
  contiguous, each tensor has its own row stride (elements).
* Accumulation (max, exp, sums) is fp32, or fp64 when the input is fp64; outputs are cast to the
  output pointer's element type.
* ``INDEX_64``: True when any tensor has >= 2**31 elements (or row * stride can reach 2**31); the
  row index is then int64 before it meets a stride.
* Rows that are entirely -inf give NaN, like torch.softmax.

Kernels
-------
softmax_fwd_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_N, SINGLE_PASS, INDEX_64)
    out[m, :] = softmax(in[m, :]).          grid: (M,), one program per row.
    SINGLE_PASS: the row lives in registers, N <= BLOCK_N. Otherwise the row is taken in BLOCK_N
    steps and read twice (evict_last, then evict_first, so the second read hits L2); any N >= 1.

softmax_fwd_persistent_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_N, NUM_STAGES,
                              INDEX_64)
    The same for 2-byte (fp16/bf16) inputs, fp32 arithmetic. grid: (P,) with P <= M; program p takes
    rows p, p + P, ...; BLOCK_N = next_pow2(N) >= N; NUM_STAGES buffers of the row loop in shared memory.

softmax_bwd_kernel(grad_in_ptr, grad_out_ptr, out_ptr, M, N, stride_grad_in_row, stride_grad_out_row,
                   stride_out_row, BLOCK_N, SINGLE_PASS, INDEX_64)
    grad_in = out * (grad_out - sum(grad_out * out, row)), with out the forward result.
    grid: (M,), one program per row; SINGLE_PASS as in the forward.

softmax_fwd_rows_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_M, BLOCK_N, INDEX_64)
softmax_bwd_rows_kernel(grad_in_ptr, grad_out_ptr, out_ptr, M, N, stride_grad_in_row, stride_grad_out_row,
                        stride_out_row, BLOCK_M, BLOCK_N, INDEX_64)
    BLOCK_M rows per program, N <= BLOCK_N.   grid: (cdiv(M, BLOCK_M),).

softmax_fwd_split_kernel(out_ptr, in_ptr, sync_ptr, M, N, S, stride_in_row, stride_out_row, BLOCK_N, S_POW2,
                         ALIGN, INDEX_64)
softmax_bwd_split_kernel(grad_in_ptr, grad_out_ptr, out_ptr, sync_ptr, M, N, S, stride_grad_in_row,
                         stride_grad_out_row, stride_out_row, BLOCK_N, S_POW2, ALIGN, INDEX_64, REREAD)
    The same results with S = cdiv(N, BLOCK_N) <= S_POW2 programs per row. grid: (M * S,). CUDA
    only; sync and ALIGN: the comment above the kernels. REREAD: each program reads its chunk of
    grad_out and out again after the wait instead of holding it in registers.

softmax_fwd_long_kernel(out_ptr, in_ptr, sync_ptr, M_BUCKET, N, stride_in_row, stride_out_row, CHUNKS_POW2,
                        ALIGN, INDEX_64)
    The forward under @triton.autotune over looped and split configs (the comment above it).
"""

import triton
import triton.language as tl

from .row_exchange import HELP_AFTER, HELP_BLOCK, publish, publish_missing, row_and_chunk, wait

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x * LOG2E)


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
        _softmax_fwd_row_looped(out_row, in_row, N, BLOCK_N, ACC)


@triton.jit
def _softmax_fwd_row_looped(out_row, in_row, N, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    # Softmax of one row of any length in BLOCK_N-column steps: the row is read twice.
    cols = tl.arange(0, BLOCK_N)
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
        tl.store(out_row + c, y.to(out_row.dtype.element_ty), mask=mask)


@triton.jit
def softmax_fwd_persistent_kernel(out_ptr, in_ptr, M, N, stride_in_row, stride_out_row, BLOCK_N: tl.constexpr,
                                  NUM_STAGES: tl.constexpr, INDEX_64: tl.constexpr):
    # Each program walks rows start, start + P, ... (P programs), the row in registers as in the
    # single-pass kernel. The row loop is software-pipelined (NUM_STAGES): the next rows' loads are
    # in flight while this row reduces and stores, which one program per row cannot overlap once a
    # row fills a whole SM (2-byte rows of 20K-32K columns).
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else tl.float32
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    for row in tl.range(tl.program_id(0), M, tl.num_programs(0), num_stages=NUM_STAGES):
        if INDEX_64:
            in_row = in_ptr + row.to(tl.int64) * stride_in_row
            out_row = out_ptr + row.to(tl.int64) * stride_out_row
        else:
            in_row = in_ptr + row * stride_in_row
            out_row = out_ptr + row * stride_out_row
        x = tl.load(in_row + cols, mask=mask, other=float("-inf")).to(ACC)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


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


# Short rows: one row per program leaves most of a warp idle and launches M programs; these
# variants give each program BLOCK_M rows as a [BLOCK_M, BLOCK_N] tile (N <= BLOCK_N).
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



# Long rows on CUDA: S = cdiv(N, BLOCK_N) programs share a row, each holding its BLOCK_N-column
# chunk in registers, so the row is read once (the looped kernels read it twice, and once a row
# no longer fits L2 next to the other rows in flight, the second read comes from memory).
# Programs exchange per-chunk statistics through row_exchange (its docstring has the protocol):
#     sync      int64 [2 + M * S], ZEROED before each launch: chunk c's word for row m holds its two
#               fp32 statistics (forward: chunk max and sum of exp; backward: chunk dot, twice).
# Program p takes chunk p % S of row p // S; a program that has polled HELP_AFTER times publishes
# the missing chunks' words itself (publish_missing with _chunk_word), then reads its own chunk
# again. Every program of a row merges the same words in chunk order, so all of them normalise
# with the same numbers. The wrapper keeps S <= 128. Triton's interpreter runs programs one after
# another, so there every row of several chunks is helped.
#     grid = (M * S,), S_POW2 = next_pow2(S)
#
# ALIGN: 1, or the elements in 16 bytes when rows start off 16-byte boundaries (a 50257-column
# vocabulary). Then each row is cut into a head (the elements before its first 16-byte boundary),
# whole vectors, and a tail (fewer than ALIGN each); chunks are taken over the whole vectors, so
# they load and store 16 bytes at a time, and the row's last program adds the head and the tail.
# The caller passes ALIGN > 1 only when every tensor's base is 16-byte aligned and every row is
# as far off a boundary in each tensor (same row stride modulo ALIGN): the kernel tells the
# compiler the chunks are aligned. Without it a row's chunks load one element at a time, and the
# slowest chunk holds its whole row.


@triton.jit
def _chunk_word(chunk, a_row, b_row, S, offset, N, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr,
                FORWARD: tl.constexpr):
    # The two statistics chunk `chunk`'s own program publishes (forward: the chunk's max and sum
    # of exp(x - max); backward: its dot of grad_out and out, twice), equal up to rounding, read
    # HELP_BLOCK columns at a time.
    head, n_vec, edge_cols, edge_mask = _row_parts(offset, N, chunk == S - 1, ALIGN)
    a_vec = _vectors(a_row, head, ALIGN)
    b_vec = _vectors(b_row, head, ALIGN)
    begin = chunk * BLOCK_N
    end = tl.minimum(begin + BLOCK_N, n_vec)
    cols = tl.arange(0, HELP_BLOCK)
    if FORWARD:
        x_edge = tl.load(a_row + edge_cols, mask=edge_mask, other=float("-inf")).to(tl.float32)
        m = tl.max(x_edge, axis=0)
        for start in tl.range(begin, end, HELP_BLOCK, num_stages=1):
            c = start + cols
            m = tl.maximum(m, tl.max(tl.load(a_vec + c, mask=c < end, other=float("-inf")).to(tl.float32), axis=0))
        shift = tl.where(m == float("-inf"), 0.0, m) * LOG2E
        total = tl.sum(tl.math.exp2(x_edge * LOG2E - shift), axis=0)
        for start in tl.range(begin, end, HELP_BLOCK, num_stages=1):
            c = start + cols
            x = tl.load(a_vec + c, mask=c < end, other=float("-inf")).to(tl.float32)
            total += tl.sum(tl.math.exp2(x * LOG2E - shift), axis=0)
        return m, total
    else:
        go_edge = tl.load(a_row + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
        o_edge = tl.load(b_row + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
        dot = tl.sum(go_edge * o_edge, axis=0)
        for start in tl.range(begin, end, HELP_BLOCK, num_stages=1):
            c = start + cols
            go = tl.load(a_vec + c, mask=c < end, other=0.0).to(tl.float32)
            o = tl.load(b_vec + c, mask=c < end, other=0.0).to(tl.float32)
            dot += tl.sum(go * o, axis=0)
        return dot, dot


@triton.jit
def _row_parts(offset, N, last, ALIGN: tl.constexpr):
    # For a row whose first element is `offset` elements from an aligned base: the head's length,
    # the whole vectors' length (a multiple of ALIGN), and the head and tail columns with their
    # mask (only the row's `last` chunk takes them). ALIGN == 1: no head, no tail.
    if ALIGN > 1:
        head = tl.minimum((ALIGN - offset % ALIGN) % ALIGN, N).to(tl.int32)
        n_vec = tl.multiple_of((N - head) // ALIGN * ALIGN, ALIGN)
        e = tl.arange(0, 2 * ALIGN)
        edge_cols = tl.where(e < ALIGN, e, head + n_vec + e - ALIGN)
        edge_mask = tl.where(e < ALIGN, e < head, e - ALIGN < N - head - n_vec) & last
    else:
        head = 0
        n_vec = N
        edge_cols = tl.arange(0, 2)
        edge_mask = edge_cols < 0
    return head, n_vec, edge_cols, edge_mask


@triton.jit
def _vectors(row_ptr, head, ALIGN: tl.constexpr):
    # The row's first whole vector: 16-byte aligned when ALIGN > 1 (the caller checked).
    if ALIGN > 1:
        return tl.multiple_of(row_ptr + head, 16)
    else:
        return row_ptr


# Chunks wholly inside the vectors load and store unmasked; only the last is masked, against a
# length the compiler knows is a multiple of ALIGN, so it still moves whole vectors.
@triton.jit
def _load_chunk(row_ptr, chunk, N, other, BLOCK_N: tl.constexpr, EVICT: tl.constexpr):
    cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    if (chunk + 1) * BLOCK_N <= N:
        x = tl.load(row_ptr + cols, eviction_policy=EVICT).to(tl.float32)
    else:
        x = tl.load(row_ptr + cols, mask=cols < N, other=other, eviction_policy=EVICT).to(tl.float32)
    return x


@triton.jit
def _store_chunk(row_ptr, chunk, N, value, BLOCK_N: tl.constexpr):
    cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    if (chunk + 1) * BLOCK_N <= N:
        tl.store(row_ptr + cols, value.to(row_ptr.dtype.element_ty))
    else:
        tl.store(row_ptr + cols, value.to(row_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def softmax_fwd_split_kernel(out_ptr, in_ptr, sync_ptr, M, N, S, stride_in_row, stride_out_row, BLOCK_N: tl.constexpr,
                             S_POW2: tl.constexpr, ALIGN: tl.constexpr, INDEX_64: tl.constexpr):
    _softmax_fwd_chunk(out_ptr, in_ptr, sync_ptr, N, S, stride_in_row, stride_out_row, BLOCK_N, S_POW2, ALIGN,
                       INDEX_64)


@triton.jit
def _softmax_fwd_chunk(out_ptr, in_ptr, sync_ptr, N, S, stride_in_row, stride_out_row, BLOCK_N: tl.constexpr,
                       S_POW2: tl.constexpr, ALIGN: tl.constexpr, INDEX_64: tl.constexpr):
    # One program's BLOCK_N-column chunk of a row shared by S programs (S <= S_POW2).
    row, chunk = row_and_chunk(S, INDEX_64)
    in_row = in_ptr + row * stride_in_row
    out_row = out_ptr + row * stride_out_row
    head, n_vec, edge_cols, edge_mask = _row_parts(row * stride_in_row, N, chunk == S - 1, ALIGN)
    x = _load_chunk(_vectors(in_row, head, ALIGN), chunk, n_vec, float("-inf"), BLOCK_N, "")
    x_edge = tl.load(in_row + edge_cols, mask=edge_mask, other=float("-inf")).to(tl.float32)
    # A chunk of only -inf shifts by 0 instead of -inf (no -inf - -inf); its e and sum are 0.
    m = tl.maximum(tl.max(x, axis=0), tl.max(x_edge, axis=0))
    # In base 2 with the shift pre-scaled, each element's exponent is one FMA and one ex2 (tl.exp
    # would subtract, then multiply by log2(e)); e stays in registers, so each element costs one
    # exponential (+6% at 128256 bf16 columns).
    shift = tl.where(m == float("-inf"), 0.0, m) * LOG2E
    e = tl.math.exp2(x * LOG2E - shift)
    e_edge = tl.math.exp2(x_edge * LOG2E - shift)
    publish(sync_ptr, row, chunk, S, m, tl.sum(e, axis=0) + tl.sum(e_edge, axis=0), True)
    # Every chunk's (max, sum), merged in chunk order on every program of the row, so all of them
    # normalise with the same numbers.
    ms, ss, kmask, complete = wait(sync_ptr, row, S, S_POW2, HELP_AFTER)
    if not complete:
        # Rare: a chunk's program may not have started. Publish what is missing, then read this
        # chunk again (its e is not held across the help, which would cost registers on every path).
        publish_missing(sync_ptr, row, S, _chunk_word, (in_row, in_row, S, row * stride_in_row, N, BLOCK_N, ALIGN,
                                                     True))
        ms, ss, kmask, complete = wait(sync_ptr, row, S, S_POW2, 0)
        x = _load_chunk(_vectors(in_row, head, ALIGN), chunk, n_vec, float("-inf"), BLOCK_N, "")
        x_edge = tl.load(in_row + edge_cols, mask=edge_mask, other=float("-inf")).to(tl.float32)
        e = tl.math.exp2(x * LOG2E - shift)
        e_edge = tl.math.exp2(x_edge * LOG2E - shift)
    ms = tl.where(kmask, ms, float("-inf"))
    row_max = tl.max(ms, axis=0)
    total = tl.sum(tl.where(kmask, ss * tl.exp(ms - row_max), 0.0), axis=0)
    scale = tl.math.exp2(shift - row_max * LOG2E) / total
    _store_chunk(_vectors(out_row, head, ALIGN), chunk, n_vec, e * scale, BLOCK_N)
    tl.store(out_row + edge_cols, (e_edge * scale).to(out_ptr.dtype.element_ty), mask=edge_mask)


# Long forward rows on CUDA, under @triton.autotune: each config is either the looped kernel's
# one program per row (SPLIT=False, grid (M,)) or the split kernel's S = cdiv(N, BLOCK_N) programs
# per row (SPLIT=True, grid (M * S,)), so the tuner picks the strategy, the step and the warps for
# the row length, the row count and the dtype it sees. The caller passes a ZEROED `sync` with
# room for cdiv(N, 4096) chunks (int64 [2 + M * cdiv(N, 4096)]; the smallest split step; at most
# 128, so rows of up to 524288 columns; reset_to_zero zeroes it between timing runs),
# CHUNKS_POW2 = next_pow2(cdiv(N, 4096)) (>= 8: rows past 20480 columns) and ALIGN as for the split
# kernel. A config polls CHUNKS_POW2 * 4096 / BLOCK_N words, next_pow2 of its own chunk count
# or the power of two above it: polling more words costs the 8-warp configs a cross-warp
# reduction per poll (128 words instead of 32: -13%). M_BUCKET, the row count rounded up to a
# power of two (at most 4096), is in the tuning key but not read: a choice made on 3 rows is not
# reused for 4000.


def _long_row_configs():
    looped = [(8192, 32), (4096, 16), (16384, 16)]
    split = [(8192, 8), (4096, 4), (8192, 16), (16384, 16), (8192, 4)]
    return ([triton.Config({"BLOCK_N": b, "SPLIT": False}, num_warps=w) for b, w in looped] +
            [triton.Config({"BLOCK_N": b, "SPLIT": True}, num_warps=w) for b, w in split])


@triton.autotune(configs=_long_row_configs(), key=["M_BUCKET", "N"], reset_to_zero=["sync_ptr"])
@triton.jit(do_not_specialize=["M_BUCKET"])
def softmax_fwd_long_kernel(out_ptr, in_ptr, sync_ptr, M_BUCKET, N, stride_in_row, stride_out_row,
                            CHUNKS_POW2: tl.constexpr, ALIGN: tl.constexpr, INDEX_64: tl.constexpr,
                            BLOCK_N: tl.constexpr, SPLIT: tl.constexpr):
    if SPLIT:
        _softmax_fwd_chunk(out_ptr, in_ptr, sync_ptr, N, tl.cdiv(N, BLOCK_N), stride_in_row, stride_out_row, BLOCK_N,
                           CHUNKS_POW2 * 4096 // BLOCK_N, ALIGN, INDEX_64)
    else:
        row = tl.program_id(0)
        if INDEX_64:
            row = row.to(tl.int64)
        _softmax_fwd_row_looped(out_ptr + row * stride_out_row, in_ptr + row * stride_in_row, N, BLOCK_N,
                                tl.float32)


@triton.jit
def softmax_bwd_split_kernel(grad_in_ptr, grad_out_ptr, out_ptr, sync_ptr, M, N, S, stride_grad_in_row,
                             stride_grad_out_row, stride_out_row, BLOCK_N: tl.constexpr, S_POW2: tl.constexpr,
                             ALIGN: tl.constexpr, INDEX_64: tl.constexpr, REREAD: tl.constexpr):
    row, chunk = row_and_chunk(S, INDEX_64)
    go_row = grad_out_ptr + row * stride_grad_out_row
    o_row = out_ptr + row * stride_out_row
    gi_row = grad_in_ptr + row * stride_grad_in_row
    head, n_vec, edge_cols, edge_mask = _row_parts(row * stride_out_row, N, chunk == S - 1, ALIGN)
    # REREAD: the chunk is read again after the wait (from L1/L2, which "evict_last" asks to keep
    # it) instead of being held in registers across it; memory traffic is the same.
    if REREAD:
        go = _load_chunk(_vectors(go_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "evict_last")
        o = _load_chunk(_vectors(o_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "evict_last")
    else:
        go = _load_chunk(_vectors(go_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "")
        o = _load_chunk(_vectors(o_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "")
    go_edge = tl.load(go_row + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
    o_edge = tl.load(o_row + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
    dot = tl.sum(go * o, axis=0) + tl.sum(go_edge * o_edge, axis=0)
    publish(sync_ptr, row, chunk, S, dot, dot, True)
    dots, _, kmask, complete = wait(sync_ptr, row, S, S_POW2, HELP_AFTER)
    if not complete:
        # Rare: as in the forward; the chunk is read again below.
        publish_missing(sync_ptr, row, S, _chunk_word, (go_row, o_row, S, row * stride_out_row, N, BLOCK_N, ALIGN,
                                                     False))
        dots, _, kmask, complete = wait(sync_ptr, row, S, S_POW2, 0)
        if not REREAD:
            go = _load_chunk(_vectors(go_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "")
            o = _load_chunk(_vectors(o_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "")
    dot = tl.sum(dots, axis=0)
    if REREAD:
        go = _load_chunk(_vectors(go_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "evict_first")
        o = _load_chunk(_vectors(o_row, head, ALIGN), chunk, n_vec, 0.0, BLOCK_N, "evict_first")
    _store_chunk(_vectors(gi_row, head, ALIGN), chunk, n_vec, o * (go - dot), BLOCK_N)
    tl.store(gi_row + edge_cols, (o_edge * (go_edge - dot)).to(grad_in_ptr.dtype.element_ty), mask=edge_mask)
