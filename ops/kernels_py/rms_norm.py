"""RMS normalisation over the last dimension, alone or after a residual add: plain ``@triton.jit``
kernels launched from C++ (ops/csrc/ops/rms_norm/, whose plan picks the kernel and every
``tl.constexpr``).

Conventions (as layer_norm's):

* The wrapper passes x, r (residual), s (x + r), y, dy, dx, ds as 2-D views [M rows, N columns]
  (N = prod(normalized_shape)), columns contiguous, each with its own row stride (elements).
  w and dw are contiguous [N].
* rstd is contiguous [M] in the accumulator dtype: fp32 for fp16/bf16/fp32 x, fp64 for fp64 x. All
  arithmetic is in that dtype; stores cast to the destination pointer's element type.
* Absent tensors arrive as None (a constexpr); every use is behind HAS_*/COMPUTE_* or a None test.
* ``eps`` is annotated ``tl.float64`` and converted once to the accumulator dtype (fp64 x uses it
  unrounded). ``INDEX_64``: row indices are int64 before they meet a stride.

rms_norm_fwd_kernel(y_ptr, s_ptr, rstd_ptr, x_ptr, r_ptr, w_ptr, M, N, stride_y_row, stride_s_row,
                    stride_x_row, stride_r_row, eps, HAS_RESIDUAL, HAS_WEIGHT, BLOCK_M, BLOCK_N,
                    SINGLE_PASS, INDEX_64, BLOCK_TAIL=0, KEEP_ROW=False, ROW_STEPS=0)
    The row v is x, or with HAS_RESIDUAL s = x + r rounded to x's dtype (stored to s_ptr: what
    inference engines keep as the next residual). rstd = 1 / sqrt(mean(v^2) + eps),
    y = v * rstd * w; rstd[m] stored unless rstd_ptr is None. Program p takes rows
    [p * BLOCK_M, (p + 1) * BLOCK_M). SINGLE_PASS: N <= BLOCK_N + BLOCK_TAIL, the rows in registers
    (BLOCK_TAIL: columns past BLOCK_N in a tile beside the block; 0: none); otherwise
    (any N >= 1) the columns in BLOCK_N steps, twice: the second pass from the last block back
    (those the first read last, most likely still in L2), reading v again (s with HAS_RESIDUAL,
    as stored) with evict_first; KEEP_ROW (two passes only): the first pass reads with evict_last,
    w with evict_last, and the second pass goes from the row's start. ROW_STEPS (two passes only):
    0, or cdiv(N, BLOCK_N) as a compile-time constant. grid: (cdiv(M, BLOCK_M),).

rms_norm_bwd_team_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M, N, S,
                         rows_per_team, stride_dx_row, stride_dy_row, stride_v_row, stride_ds_row,
                         HAS_WEIGHT, COMPUTE_DW, BLOCK_N, S_POW2, STAGES, INDEX_64)
    vhat = v * rstd, g = dy * w (or dy), dx = rstd * (g - vhat * mean_n(g * vhat)) (+ ds, the
    gradient reaching v by another way, unless ds_ptr is None: add_rms_norm's sum output).
    CUDA only: teams of S = cdiv(N, BLOCK_N) <= S_POW2 programs share rows
    [team * rows_per_team, ...), each owning BLOCK_N columns, exchanging each row's sum of g * vhat
    through row_exchange.py (tickets, then team_runs: a team whose programs are not all running
    gives up whole), the row loop STAGES deep. A team that ran stores its sum of dy * vhat to
    dw_partial[team, :] when COMPUTE_DW (contiguous [G, N] fp32, or dw itself when G == 1).
    grid: (G * S,); sync int64 [2 + M * S + G], zeroed before each launch. Then, always,
    rms_norm_bwd_team_rescue_kernel, and norm_bwd_sums_finalize_kernel when G > 1.

    Its lag form is the norm family's norm_bwd_team_lag_kernel (norm_team.py: x = v, no mean, no
    bias), with the same grid, workspace and rescue.

rms_norm_bwd_team_rescue_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M,
                                N, S, rows_per_team, stride_dx_row, stride_dy_row, stride_v_row,
                                stride_ds_row, HAS_WEIGHT, COMPUTE_DW, BLOCK_N, INDEX_64)
    The rows of each team that gave up (its mode word in sync), one program a team, any N >= 1:
    their dx, and the team's dw_partial row. grid: (G,).

The fused pass, the dx-then-columns form and the sum of partial rows are the norm family's
(norm_backward.py: norm_bwd_fused_kernel, norm_bwd_dx_kernel, norm_bwd_column_sums_kernel,
norm_bwd_sums_finalize_kernel, without a mean).
"""

import triton
import triton.language as tl

from .row_exchange import HELP_AFTER, TEAM_GAVE_UP, peek_words, publish, settle_words, team_runs, ticket, wait


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
def rms_norm_fwd_kernel(y_ptr, s_ptr, rstd_ptr, x_ptr, r_ptr, w_ptr, M, N, stride_y_row, stride_s_row, stride_x_row,
                        stride_r_row, eps: tl.float64, HAS_RESIDUAL: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr,
                        INDEX_64: tl.constexpr, BLOCK_TAIL: tl.constexpr = 0, KEEP_ROW: tl.constexpr = False,
                        ROW_STEPS: tl.constexpr = 0):
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
            squares += tl.sum(v_tail * v_tail, axis=1)
        rstd = 1.0 / tl.sqrt(squares / N + eps)
        y = v * rstd[:, None]
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(ACC)[None, :]
        tl.store(y_ptr + rows[:, None] * stride_y_row + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
        if BLOCK_TAIL > 0:
            y_tail = v_tail * rstd[:, None]
            if HAS_WEIGHT:
                y_tail = y_tail * tl.load(w_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)[None, :]
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
            tl.store(y_ptr + rows[:, None] * stride_y_row + c[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if rstd_ptr is not None:
        tl.store(rstd_ptr + rows, rstd.to(rstd_ptr.dtype.element_ty), mask=row_mask)


# Rows of more columns than a fused program holds without spilling (sm_90: past 8192): each
# program keeps one chunk of the row and its share of w in registers, and the row's one sum crosses
# the team through the row exchange. No help path (as the family's lag team backward, norm_team.py: help code,
# even unexecuted, slows the pipelined loop); a team that is not all running gives up whole.
@triton.jit(do_not_specialize=["rows_per_team"])  # the caller asks the binary's occupancy before it knows it
def rms_norm_bwd_team_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M, N, S,
                             rows_per_team, stride_dx_row, stride_dy_row, stride_v_row, stride_ds_row,
                             HAS_WEIGHT: tl.constexpr, COMPUTE_DW: tl.constexpr, BLOCK_N: tl.constexpr,
                             S_POW2: tl.constexpr, STAGES: tl.constexpr, INDEX_64: tl.constexpr):
    team, chunk = ticket(sync_ptr, S)
    if INDEX_64:
        team = team.to(tl.int64)
    if team_runs(sync_ptr, sync_ptr + 2 + tl.cast(M, tl.int64) * S, team, chunk, S, HELP_AFTER):
        cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        w = 1.0
        if HAS_WEIGHT:
            w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        row_begin = team * rows_per_team
        row_end = tl.minimum(row_begin + rows_per_team, M)
        dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for row in tl.range(row_begin, row_end, num_stages=STAGES):
            dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=col_mask, other=0.0).to(tl.float32)
            v = tl.load(v_ptr + row * stride_v_row + cols, mask=col_mask, other=0.0).to(tl.float32)
            rstd = tl.load(rstd_ptr + row).to(tl.float32)
            vhat = v * rstd
            g = dy * w
            # The low half of the word is not used: rms_norm needs one sum.
            publish(sync_ptr, row, chunk, S, tl.sum(g * vhat, axis=0), tl.full((), 1.0, tl.float32))
            if STAGES > 1:
                sums, _ = settle_words(sync_ptr, row, S, peek_words(sync_ptr, row, S, S_POW2), S_POW2)
            else:
                sums, _, _, _ = wait(sync_ptr, row, S, S_POW2, 0)
            dx = (g - vhat * (tl.sum(sums, axis=0) / N)) * rstd
            if ds_ptr is not None:
                dx += tl.load(ds_ptr + row * stride_ds_row + cols, mask=col_mask, other=0.0).to(tl.float32)
            tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
            if COMPUTE_DW:
                dw_acc += dy * vhat
        if COMPUTE_DW:
            tl.store(dw_partial_ptr + team * N + cols, dw_acc.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)


# After rms_norm_bwd_team_kernel or its lag form, always: a team that gave up (normally none) has its
# rows done here by one program, which reads each row three times (its sum, then dx, then dw's
# partial row): no program waits for another. Programs of teams that ran read one word and end.
@triton.jit(do_not_specialize=["rows_per_team"])
def rms_norm_bwd_team_rescue_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M, N, S,
                                    rows_per_team, stride_dx_row, stride_dy_row, stride_v_row, stride_ds_row,
                                    HAS_WEIGHT: tl.constexpr, COMPUTE_DW: tl.constexpr, BLOCK_N: tl.constexpr,
                                    INDEX_64: tl.constexpr):
    team = tl.program_id(0)
    if INDEX_64:
        team = team.to(tl.int64)
    if tl.load(sync_ptr + 2 + tl.cast(M, tl.int64) * S + team) == TEAM_GAVE_UP:
        offsets = tl.arange(0, BLOCK_N)
        row_begin = team * rows_per_team
        row_end = tl.minimum(row_begin + rows_per_team, M)
        for row in range(row_begin, row_end):
            rstd = tl.load(rstd_ptr + row).to(tl.float32)
            acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            for start in range(0, N, BLOCK_N):
                cols = start + offsets
                mask = cols < N
                g = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0).to(tl.float32)
                if HAS_WEIGHT:
                    g = g * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                acc += g * tl.load(v_ptr + row * stride_v_row + cols, mask=mask, other=0.0).to(tl.float32)
            mean_gv = tl.sum(acc, axis=0) * rstd / N
            for start in range(0, N, BLOCK_N):
                cols = start + offsets
                mask = cols < N
                g = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0).to(tl.float32)
                if HAS_WEIGHT:
                    g = g * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                vhat = tl.load(v_ptr + row * stride_v_row + cols, mask=mask, other=0.0).to(tl.float32) * rstd
                dx = (g - vhat * mean_gv) * rstd
                if ds_ptr is not None:
                    dx += tl.load(ds_ptr + row * stride_ds_row + cols, mask=mask, other=0.0).to(tl.float32)
                tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if COMPUTE_DW:
            for start in range(0, N, BLOCK_N):
                cols = start + offsets
                mask = cols < N
                dw = tl.zeros([BLOCK_N], dtype=tl.float32)
                for row in range(row_begin, row_end):
                    rstd = tl.load(rstd_ptr + row).to(tl.float32)
                    dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0).to(tl.float32)
                    dw += dy * tl.load(v_ptr + row * stride_v_row + cols, mask=mask, other=0.0).to(tl.float32) * rstd
                tl.store(dw_partial_ptr + team * N + cols, dw.to(dw_partial_ptr.dtype.element_ty), mask=mask)
