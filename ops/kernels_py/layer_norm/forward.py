"""Layer normalisation over the last dimension, forward kernels (conventions: __init__.py). Short
rows, several a program, are the norm family's (norm_forward.py: norm_fwd_kernel, SUBTRACT_MEAN).

layer_norm_fwd_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row, stride_y_row,
                      eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, SINGLE_PASS, INDEX_64, BLOCK_TAIL, PRELOAD,
                      KEEP_ROW=False, ROW_STEPS=0)
    y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps), biased variance; also stores
    mean[m], rstd[m] unless mean_ptr / rstd_ptr are None (inference needs only y).  grid: (M,).
    SINGLE_PASS: the row lives in registers, N <= BLOCK_N + BLOCK_TAIL; BLOCK_TAIL (0: none):
    columns [BLOCK_N, BLOCK_N + BLOCK_TAIL) in a second block, so BLOCK_N < N needs no lanes padding
    the row to 2 * BLOCK_N. Its variance sums (x - mean)^2 over the row in registers (exact two-pass).
    Otherwise (BLOCK_TAIL = 0, any N >= 1) the row is read twice: Welford per lane, lanes merged
    with Chan's formula, then normalised; never E[x^2] - E[x]^2. PRELOAD (single pass only): weight
    and bias load with the row rather than after its reductions (_layer_norm_fwd_row says when).
    KEEP_ROW and ROW_STEPS (two passes only): _layer_norm_fwd_row_looped's.

layer_norm_fwd_persistent_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row,
                                 stride_y_row, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, BLOCK_TAIL, STAGES, INDEX_64)
    layer_norm_fwd_kernel's single pass (N <= BLOCK_N + BLOCK_TAIL) for rows pid, pid + P, ... (P
    programs), the row loop software-pipelined STAGES deep. grid: (P,), P = the programs the GPU holds
    at once (see the kernel's comment).

layer_norm_fwd_long_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, sync_ptr, M_BUCKET, N,
                           stride_x_row, stride_y_row, eps, HAS_WEIGHT, HAS_BIAS, INDEX_64)
    The forward of fp32, fp16 and bf16 rows under @triton.autotune over looped and split configs
    (the comment above it). CUDA only.
"""

import triton
import triton.language as tl

from ..row_exchange import (HELP_AFTER, HELP_BLOCK, poll_words, publish, publish_missing, row_and_chunk,
                            unpack_words)


@triton.jit
def layer_norm_fwd_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row, stride_y_row,
                          eps: tl.float64, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr,
                          SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_TAIL: tl.constexpr,
                          PRELOAD: tl.constexpr, KEEP_ROW: tl.constexpr = False, ROW_STEPS: tl.constexpr = 0):
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    eps = tl.full((), eps, ACC)  # an fp64 eps would otherwise promote fp32 rows' var + eps to fp64

    x_row = x_ptr + row * stride_x_row
    y_row = y_ptr + row * stride_y_row

    if SINGLE_PASS:
        mean, rstd = _layer_norm_fwd_row(y_row, x_row, w_ptr, b_ptr, N, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, BLOCK_TAIL,
                                         ACC, PRELOAD)
    else:
        mean, rstd = _layer_norm_fwd_row_looped(y_row, x_row, w_ptr, b_ptr, N, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N,
                                                ACC, KEEP_ROW, ROW_STEPS)

    if mean_ptr is not None:
        tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    if rstd_ptr is not None:
        tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


# Persistent forward for 2-byte rows of hidden sizes just past 4096 and 8192 (4097..5120,
# 8193..12288 columns): `grid` programs, each taking rows pid, pid + grid, ... Triton's pipeliner
# copies the next row (STAGES - 1 rows ahead) into shared memory while this one is reduced and
# stored, which a program a row cannot do. The grid must be the programs the GPU holds at once
# (TritonJitFunction::resident_programs_per_sm x SMs): more leave a second wave, fewer are placed
# unevenly (half the resident programs: -20%). Any dtype; fp64 rows accumulate in fp64, the others
# in fp32.
@triton.jit
def layer_norm_fwd_persistent_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row,
                                     stride_y_row, eps: tl.float64, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                                     BLOCK_N: tl.constexpr, BLOCK_TAIL: tl.constexpr, STAGES: tl.constexpr,
                                     INDEX_64: tl.constexpr):
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    eps = tl.full((), eps, ACC)
    for r in tl.range(tl.program_id(0), M, tl.num_programs(0), num_stages=STAGES):
        if INDEX_64:
            row = tl.full((), r, tl.int64)  # not r.to: the interpreter's loop index is a Python int
        else:
            row = r
        mean, rstd = _layer_norm_fwd_row(y_ptr + row * stride_y_row, x_ptr + row * stride_x_row, w_ptr, b_ptr, N, eps,
                                         HAS_WEIGHT, HAS_BIAS, BLOCK_N, BLOCK_TAIL, ACC, False)
        if mean_ptr is not None:
            tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
        if rstd_ptr is not None:
            tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


@triton.jit
def _layer_norm_fwd_row(y_row, x_row, w_ptr, b_ptr, N, eps, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_TAIL: tl.constexpr, ACC: tl.constexpr, PRELOAD: tl.constexpr):
    # One row held in registers (N <= BLOCK_N + BLOCK_TAIL), normalised and stored; returns (mean, rstd).
    # PRELOAD: weight and bias are loaded with x, so their latency overlaps x's instead of following
    # the reductions (their barriers keep the compiler from hoisting the loads), at the cost of their
    # registers through the reductions, which can cost a resident program per SM: separate candidates
    # of the plan (row_w*_preload), measured.
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    if BLOCK_TAIL > 0:
        tail_cols = BLOCK_N + tl.arange(0, BLOCK_TAIL)
        tail_mask = tail_cols < N
    if PRELOAD:
        w, b = _layer_norm_affine(w_ptr, b_ptr, cols, mask, HAS_WEIGHT, HAS_BIAS, ACC)
        if BLOCK_TAIL > 0:
            w_tail, b_tail = _layer_norm_affine(w_ptr, b_ptr, tail_cols, tail_mask, HAS_WEIGHT, HAS_BIAS, ACC)
    x = tl.load(x_row + cols, mask=mask, other=0.0).to(ACC)
    total = tl.sum(x, axis=0)
    if BLOCK_TAIL > 0:
        # Columns past BLOCK_N in a second, smaller block instead of one block padded to the
        # next power of two (5120 = 4096 + 1024 rather than 8192 lanes, 3/8 of them padding).
        x_tail = tl.load(x_row + tail_cols, mask=tail_mask, other=0.0).to(ACC)
        total += tl.sum(x_tail, axis=0)
    mean = total / N
    diff = tl.where(mask, x - mean, 0.0)
    squares = tl.sum(diff * diff, axis=0)
    if BLOCK_TAIL > 0:
        diff_tail = tl.where(tail_mask, x_tail - mean, 0.0)
        squares += tl.sum(diff_tail * diff_tail, axis=0)
    rstd = 1.0 / tl.sqrt(squares / N + eps)
    if not PRELOAD:
        w, b = _layer_norm_affine(w_ptr, b_ptr, cols, mask, HAS_WEIGHT, HAS_BIAS, ACC)
    _layer_norm_fwd_store(y_row, w, b, cols, mask, diff * rstd, HAS_WEIGHT, HAS_BIAS)
    if BLOCK_TAIL > 0:
        if not PRELOAD:
            w_tail, b_tail = _layer_norm_affine(w_ptr, b_ptr, tail_cols, tail_mask, HAS_WEIGHT, HAS_BIAS, ACC)
        _layer_norm_fwd_store(y_row, w_tail, b_tail, tail_cols, tail_mask, diff_tail * rstd, HAS_WEIGHT, HAS_BIAS)
    return mean, rstd


@triton.jit
def _layer_norm_affine(w_ptr, b_ptr, cols, mask, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                       ACC: tl.constexpr):
    # The weight and bias at `cols` (1 and 0 where absent; _layer_norm_fwd_store then skips them).
    w = 1.0
    b = 0.0
    if HAS_WEIGHT:
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(ACC)
    if HAS_BIAS:
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(ACC)
    return w, b


@triton.jit
def _layer_norm_fwd_store(y_row, w, b, cols, mask, xhat, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    y = xhat
    if HAS_WEIGHT:
        y = y * w
    if HAS_BIAS:
        y = y + b
    tl.store(y_row + cols, y.to(y_row.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_fwd_row_looped(y_row, x_row, w_ptr, b_ptr, N, eps, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                               BLOCK_N: tl.constexpr, ACC: tl.constexpr, KEEP_ROW: tl.constexpr,
                               ROW_STEPS: tl.constexpr):
    # One row of any length in BLOCK_N-column steps, read twice; returns (mean, rstd).
    # KEEP_ROW: L2 is asked to keep the row from the first pass to the second, and the weight and
    # bias throughout; the second pass goes from the row's start. ROW_STEPS (cdiv(N, BLOCK_N), or 0):
    # a compile-time trip count, so both loops unroll and every step's loads issue at once.
    KEEP: tl.constexpr = "evict_last" if KEEP_ROW else ""
    cols = tl.arange(0, BLOCK_N)
    steps = ROW_STEPS if ROW_STEPS > 0 else tl.cdiv(N, BLOCK_N)
    # Welford per lane: lane j sees columns j, j + BLOCK_N, ... Every lane has the same count until
    # the last, partial step, so the full steps load unmasked and update with one scalar
    # reciprocal rather than a division per element (+15% at 65536 bf16 columns).
    mean_vec = tl.zeros([BLOCK_N], dtype=ACC)
    m2_vec = tl.zeros([BLOCK_N], dtype=ACC)
    for step in range(0, steps - 1):
        x = tl.load(x_row + step * BLOCK_N + cols, eviction_policy=KEEP).to(ACC)
        delta = x - mean_vec
        mean_vec += delta * (1.0 / tl.full((), step + 1, ACC))
        m2_vec += delta * (x - mean_vec)
    c = (steps - 1) * BLOCK_N + cols
    mask = c < N
    x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy=KEEP).to(ACC)
    delta = x - mean_vec
    mean_vec += tl.where(mask, delta * (1.0 / tl.full((), steps, ACC)), 0.0)
    m2_vec += tl.where(mask, delta * (x - mean_vec), 0.0)
    cnt_vec = (steps - 1 + mask.to(tl.int32)).to(ACC)
    # Merge the lanes (Chan et al.): M2 = sum(M2_j + n_j * (mean_j - mean)^2).
    mean = tl.sum(cnt_vec * mean_vec, axis=0) / N
    d = mean_vec - mean
    var = tl.sum(m2_vec + cnt_vec * d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    # Without KEEP_ROW the second pass goes from the row's end, the part L2 most likely still holds.
    for i in range(0, steps):
        if KEEP_ROW:
            c = i * BLOCK_N + cols
        else:
            c = (steps - 1 - i) * BLOCK_N + cols
        mask = c < N
        x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy="evict_first").to(ACC)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + c, mask=mask, other=0.0, eviction_policy=KEEP).to(ACC)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + c, mask=mask, other=0.0, eviction_policy=KEEP).to(ACC)
        tl.store(y_row + c, y.to(y_row.dtype.element_ty), mask=mask)
    return mean, rstd


# Long rows on CUDA, under @triton.autotune: each config is either one program per row, looped as
# above (SPLIT=False, grid (M,)), or S = cdiv(N, BLOCK_N) programs per row (SPLIT=True, grid
# (M * S,)), each holding its BLOCK_N-column chunk in registers, so the row is read once. Split
# programs publish their chunk's (mean, M2) and wait for the row's other chunks through
# row_exchange (its docstring has the protocol): program p takes chunk p % S of row p // S, and
# one that has polled HELP_AFTER times publishes the missing chunks' words itself and reads its
# own chunk again. Then the chunks merge with Chan's formula in chunk order (every program of a
# row gets the same mean and rstd) and each program normalises its chunk.
#     sync      int64 [2 + M * cdiv(N, 4096)], ZEROED before each launch (reset_to_zero between
#               timing runs): room for the smallest split step
# M_BUCKET, the row count rounded up to a power of two (at most 4096), is in the tuning key and
# not read. fp32, fp16 and bf16 rows (statistics in fp32); S <= LONG_ROW_MAX_CHUNKS = 128.
LONG_ROW_MAX_CHUNKS = tl.constexpr(128)


def _long_row_configs():
    looped = [(8192, 16), (8192, 8), (4096, 16)]
    split = [(8192, 8), (4096, 4), (8192, 16), (16384, 16)]
    return ([triton.Config({"BLOCK_N": b, "SPLIT": False}, num_warps=w) for b, w in looped] +
            [triton.Config({"BLOCK_N": b, "SPLIT": True}, num_warps=w) for b, w in split])


@triton.jit
def _long_row_chunk(x_row, chunk, N, BLOCK_N: tl.constexpr):
    # A long-row program's chunk: its columns' mask, values (0.0 past N), count, mean and M2.
    cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    count = tl.minimum(N - chunk * BLOCK_N, BLOCK_N).to(tl.float32)
    chunk_mean = tl.sum(x, axis=0) / count
    diff = tl.where(mask, x - chunk_mean, 0.0)
    return cols, mask, x, chunk_mean, tl.sum(diff * diff, axis=0)


@triton.jit
def _chunk_mean_m2(chunk, x_row, N, BLOCK_N: tl.constexpr):
    # (mean, M2) of a chunk for the help path (publish_missing), read HELP_BLOCK columns at a time.
    offsets = tl.arange(0, HELP_BLOCK)
    begin = chunk * BLOCK_N
    end = tl.minimum(begin + BLOCK_N, N)
    total = 0.0
    for start in tl.range(begin, end, HELP_BLOCK, num_stages=1):
        cols = start + offsets
        total += tl.sum(tl.load(x_row + cols, mask=cols < end, other=0.0).to(tl.float32), axis=0)
    chunk_mean = total / (end - begin).to(tl.float32)
    m2 = 0.0
    for start in tl.range(begin, end, HELP_BLOCK, num_stages=1):
        cols = start + offsets
        mask = cols < end
        diff = tl.where(mask, tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) - chunk_mean, 0.0)
        m2 += tl.sum(diff * diff, axis=0)
    return chunk_mean, m2


@triton.autotune(configs=_long_row_configs(), key=["M_BUCKET", "N"], reset_to_zero=["sync_ptr"])
@triton.jit(do_not_specialize=["M_BUCKET"])
def layer_norm_fwd_long_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, sync_ptr, M_BUCKET, N,
                               stride_x_row, stride_y_row, eps: tl.float64, HAS_WEIGHT: tl.constexpr,
                               HAS_BIAS: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_N: tl.constexpr,
                               SPLIT: tl.constexpr):
    eps = tl.full((), eps, tl.float32)
    if SPLIT:
        S = tl.cdiv(N, BLOCK_N)
        row, chunk = row_and_chunk(S, INDEX_64)
        x_row = x_ptr + row * stride_x_row
        cols, mask, x, chunk_mean, chunk_m2 = _long_row_chunk(x_row, chunk, N, BLOCK_N)
        publish(sync_ptr, row, chunk, S, chunk_mean, chunk_m2, True)
        words, kmask = poll_words(sync_ptr, row, S, LONG_ROW_MAX_CHUNKS, HELP_AFTER)
        if tl.sum((words == 0).to(tl.int32), axis=0) > 0:
            # Rare: a chunk's program may not have started. Publish what is missing, then read this
            # chunk again (x is not held across the help, which would cost registers on every path).
            publish_missing(sync_ptr, row, S, _chunk_mean_m2, (x_row, N, BLOCK_N))
            words, kmask = poll_words(sync_ptr, row, S, LONG_ROW_MAX_CHUNKS, 0)
            cols, mask, x, chunk_mean, chunk_m2 = _long_row_chunk(x_row, chunk, N, BLOCK_N)
        means, m2s = unpack_words(words, kmask)
        k = tl.arange(0, LONG_ROW_MAX_CHUNKS)
        counts = tl.where(kmask, tl.minimum(N - k * BLOCK_N, BLOCK_N), 0).to(tl.float32)
        mean = tl.sum(counts * means, axis=0) / N
        d = means - mean
        var = tl.sum(tl.where(kmask, m2s + counts * d * d, 0.0), axis=0) / N
        rstd = 1.0 / tl.sqrt(var + eps)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        if chunk == 0:
            if mean_ptr is not None:
                tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
            if rstd_ptr is not None:
                tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))
    else:
        row = tl.program_id(0)
        if INDEX_64:
            row = row.to(tl.int64)
        mean, rstd = _layer_norm_fwd_row_looped(y_ptr + row * stride_y_row, x_ptr + row * stride_x_row, w_ptr, b_ptr,
                                                N, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, tl.float32, False, 0)
        if mean_ptr is not None:
            tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
        if rstd_ptr is not None:
            tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))
