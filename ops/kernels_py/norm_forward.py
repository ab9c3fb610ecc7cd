"""The norm family's forward, one kernel for rms_norm, add_rms_norm and layer_norm's short rows
(conventions: layer_norm/__init__.py and rms_norm.py).

norm_fwd_kernel(y_ptr, s_ptr, mean_ptr, rstd_ptr, x_ptr, r_ptr, w_ptr, b_ptr, M, N, stride_y_row,
                stride_s_row, stride_x_row, stride_r_row, eps, HAS_RESIDUAL, HAS_WEIGHT, HAS_BIAS,
                SUBTRACT_MEAN, BLOCK_M, BLOCK_N, SINGLE_PASS, INDEX_64, BLOCK_TAIL=0, KEEP_ROW=False,
                ROW_STEPS=0)
    The row v is x, or with HAS_RESIDUAL s = x + r rounded to x's dtype (stored to s_ptr: what
    inference engines keep as the next residual). SUBTRACT_MEAN (layer_norm; one pass only): v
    minus the row's mean, whose square's mean is the biased variance. rstd = 1 / sqrt(mean(v^2) +
    eps), y = v * rstd * w + b; mean[m] and rstd[m] stored unless their pointers are None. Program p
    takes rows [p * BLOCK_M, (p + 1) * BLOCK_M). SINGLE_PASS: N <= BLOCK_N + BLOCK_TAIL, the rows
    in registers (BLOCK_TAIL: columns past BLOCK_N in a tile beside the block; 0: none); otherwise
    (any N >= 1) the columns in BLOCK_N steps, twice: the second pass from the last block back
    (those the first read last, most likely still in L2), reading v again (s with HAS_RESIDUAL, as
    stored) with evict_first; KEEP_ROW (two passes only): the first pass reads with evict_last, w
    and b with evict_last, and the second pass goes from the row's start. ROW_STEPS (two passes
    only): 0, or cdiv(N, BLOCK_N) as a compile-time constant. grid: (cdiv(M, BLOCK_M),).
"""

import triton
import triton.language as tl


@triton.jit
def _rows_tile(x_ptr, r_ptr, rows, cols, mask, stride_x_row, stride_r_row, HAS_RESIDUAL: tl.constexpr,
               ACC: tl.constexpr, EVICT: tl.constexpr):
    """The [rows, cols] tile of the row normalised: x, or x + r rounded to x's dtype."""
    x = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask=mask, other=0.0, eviction_policy=EVICT)
    if HAS_RESIDUAL:
        r = tl.load(r_ptr + rows[:, None] * stride_r_row + cols[None, :], mask=mask, other=0.0, eviction_policy=EVICT)
        # As `x + r` in torch: added in the accumulator dtype, rounded once to x's.
        return (x.to(ACC) + r.to(ACC)).to(x_ptr.dtype.element_ty)
    return x


@triton.jit
def norm_fwd_kernel(y_ptr, s_ptr, mean_ptr, rstd_ptr, x_ptr, r_ptr, w_ptr, b_ptr, M, N, stride_y_row, stride_s_row,
                    stride_x_row, stride_r_row, eps: tl.float64, HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                    HAS_BIAS: tl.constexpr, SUBTRACT_MEAN: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr,
                    BLOCK_TAIL: tl.constexpr = 0, KEEP_ROW: tl.constexpr = False, ROW_STEPS: tl.constexpr = 0):
    # The mean of a row read twice needs Welford's update (layer_norm_fwd_kernel): one pass only.
    tl.static_assert(SINGLE_PASS or not SUBTRACT_MEAN, "norm_fwd_kernel subtracts a mean in one pass only")
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    eps = tl.full((), eps, ACC)  # an fp64 eps would otherwise promote fp32 rows to fp64
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        col_mask = cols < N
        mask = row_mask[:, None] & col_mask[None, :]
        v = _rows_tile(x_ptr, r_ptr, rows, cols, mask, stride_x_row, stride_r_row, HAS_RESIDUAL, ACC, "")
        if HAS_RESIDUAL:
            tl.store(s_ptr + rows[:, None] * stride_s_row + cols[None, :], v, mask=mask)
        v = v.to(ACC)
        if not SUBTRACT_MEAN:
            squares = tl.sum(v * v, axis=1)
        if BLOCK_TAIL > 0:  # columns [BLOCK_N, BLOCK_N + BLOCK_TAIL) beside the block, not padded into it
            tail_cols = BLOCK_N + tl.arange(0, BLOCK_TAIL)
            tail_col_mask = tail_cols < N
            tail_mask = row_mask[:, None] & tail_col_mask[None, :]
            v_tail = _rows_tile(x_ptr, r_ptr, rows, tail_cols, tail_mask, stride_x_row, stride_r_row, HAS_RESIDUAL, ACC,
                                "")
            if HAS_RESIDUAL:
                tl.store(s_ptr + rows[:, None] * stride_s_row + tail_cols[None, :], v_tail, mask=tail_mask)
            v_tail = v_tail.to(ACC)
            if not SUBTRACT_MEAN:
                squares += tl.sum(v_tail * v_tail, axis=1)
        if SUBTRACT_MEAN:  # v becomes the row minus its mean (0 on padding lanes): an exact two-pass variance
            total = tl.sum(v, axis=1)
            if BLOCK_TAIL > 0:
                total += tl.sum(v_tail, axis=1)
            mean = total / N
            v = tl.where(mask, v - mean[:, None], 0.0)
            squares = tl.sum(v * v, axis=1)
            if BLOCK_TAIL > 0:
                v_tail = tl.where(tail_mask, v_tail - mean[:, None], 0.0)
                squares += tl.sum(v_tail * v_tail, axis=1)
        rstd = 1.0 / tl.sqrt(squares / N + eps)
        y = v * rstd[:, None]
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(ACC)[None, :]
        if HAS_BIAS:
            y = y + tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(ACC)[None, :]
        tl.store(y_ptr + rows[:, None] * stride_y_row + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
        if BLOCK_TAIL > 0:
            y_tail = v_tail * rstd[:, None]
            if HAS_WEIGHT:
                y_tail = y_tail * tl.load(w_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)[None, :]
            if HAS_BIAS:
                y_tail = y_tail + tl.load(b_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)[None, :]
            tl.store(y_ptr + rows[:, None] * stride_y_row + tail_cols[None, :], y_tail.to(y_ptr.dtype.element_ty),
                     mask=tail_mask)
    else:
        # KEEP_ROW: L2 is asked to keep the row from the first pass to the second, and w throughout;
        # the second pass goes from the row's start. ROW_STEPS: a compile-time trip count, so both
        # loops unroll and every step's loads issue at once (a run-time count issues one a step).
        KEEP: tl.constexpr = "evict_last" if KEEP_ROW else ""
        squares = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
        for start in range(0, ROW_STEPS * BLOCK_N if ROW_STEPS > 0 else N, BLOCK_N):
            c = start + cols
            col_mask = c < N
            mask = row_mask[:, None] & col_mask[None, :]
            v = _rows_tile(x_ptr, r_ptr, rows, c, mask, stride_x_row, stride_r_row, HAS_RESIDUAL, ACC, KEEP)
            if HAS_RESIDUAL:
                tl.store(s_ptr + rows[:, None] * stride_s_row + c[None, :], v, mask=mask)
            v = v.to(ACC)
            squares += v * v
        rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=1) / N + eps)
        # Without KEEP_ROW the second pass goes from the row's end, the blocks the first pass read
        # last and L2 most likely still holds; those reads are the row's last use. The sum, where
        # there is one, is read back as stored rather than x and r again.
        last = (ROW_STEPS if ROW_STEPS > 0 else tl.cdiv(N, BLOCK_N)) - 1
        for step in range(0, last + 1):
            if KEEP_ROW:
                c = step * BLOCK_N + cols
            else:
                c = (last - step) * BLOCK_N + cols
            col_mask = c < N
            mask = row_mask[:, None] & col_mask[None, :]
            if HAS_RESIDUAL:
                v = tl.load(s_ptr + rows[:, None] * stride_s_row + c[None, :], mask=mask, other=0.0,
                            eviction_policy="evict_first").to(ACC)
            else:
                v = tl.load(x_ptr + rows[:, None] * stride_x_row + c[None, :], mask=mask, other=0.0,
                            eviction_policy="evict_first").to(ACC)
            y = v * rstd[:, None]
            if HAS_WEIGHT:
                y = y * tl.load(w_ptr + c, mask=col_mask, other=0.0, eviction_policy=KEEP).to(ACC)[None, :]
            if HAS_BIAS:
                y = y + tl.load(b_ptr + c, mask=col_mask, other=0.0, eviction_policy=KEEP).to(ACC)[None, :]
            tl.store(y_ptr + rows[:, None] * stride_y_row + c[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if mean_ptr is not None:
        tl.store(mean_ptr + rows, mean.to(mean_ptr.dtype.element_ty), mask=row_mask)
    if rstd_ptr is not None:
        tl.store(rstd_ptr + rows, rstd.to(rstd_ptr.dtype.element_ty), mask=row_mask)
