"""The norm family's team backward in lag form, one kernel for layer_norm, rms_norm and add_rms_norm
(conventions: layer_norm/__init__.py and rms_norm.py).

norm_bwd_team_lag_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr,
                         sync_ptr, M, N, S, rows_per_team, stride_dx_row, stride_dy_row, stride_x_row,
                         stride_ds_row, HAS_WEIGHT, COMPUTE_DW, COMPUTE_DB, BLOCK_N, S_POW2, STAGES, INDEX_64)
    dx of every row, and each team's column sums of dy * xhat (dw) and dy (db), by teams of
    S = cdiv(N, BLOCK_N) <= S_POW2 programs sharing rows [team * rows_per_team, ...), each owning
    BLOCK_N columns; fp32 statistics.
    xhat = (x - mean) * rstd, or x * rstd when mean_ptr is None (rms_norm: x is the normalised row v);
    g = dy * w (or dy); dx = (g - xhat * mean_n(g * xhat) - mean_n(g)) * rstd, without the last term
    for rms_norm (one statistic crosses the team), plus ds (add_rms_norm's gradient reaching the sum
    another way) unless ds_ptr is None. The team's sums go to dw_partial[team, :] / db_partial[team, :]
    when COMPUTE_DW / COMPUTE_DB (contiguous [G, N]).
    grid: (G * S,); sync int64 [2 + M * S + G], ZEROED before each launch: the tickets, the rows'
    words, then the teams' mode words (row_exchange.py). CUDA only for S > 1 (STAGES > 1 waits in
    PTX; STAGES = 1, the interpreter, waits in Triton). A team that gives up (team_runs) leaves its
    rows to the kernel its operator launches after this one: layer_norm_bwd_team_lag_finalize_kernel,
    rms_norm_bwd_team_rescue_kernel.

The lag form: iteration i publishes row i's statistics and adds row i to dw/db, then writes dx of
row i - 1, whose words every member published an iteration before: they were loaded at the top of
the iteration (peek_words) and are polled again only if one is still missing (settle_words). In a
form that waits for a row's words before its dx (the held form), each row costs an L2 round trip
or more, and at 8 warps an SM those waits leave the memory system idle. Row i - 1's dy and x are
loaded a second time (the pipeliner copies them with row i's; L2 hits, DRAM traffic unchanged), so
no row's values live across a wait: 2048-column chunks fit 128 registers, four 4-warp programs an
SM. Every member publishes row i before it waits on row i - 1, so a team never waits on itself.
The kernel has no help path: any help code, even where it never runs, made ptxas schedule the
pipelined loop about 5% slower. A program asks once whether its whole team runs
(row_exchange.team_runs): normally yes, and its waits have no limit; a team whose programs are not
all running after HELP_AFTER polls of the ticket count (another kernel holds the SMs; a green
context or MPS share smaller than the team) gives up whole.
"""

import triton
import triton.language as tl

from .row_exchange import HELP_AFTER, peek_words, publish, settle_words, team_runs, ticket, wait


@triton.jit
def _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row, cols, mask, stride_dy_row, stride_x_row, EVICT: tl.constexpr):
    # A row's dy, its x centred (x - mean) and scaled by rstd, 0 where masked, and its rstd; EVICT is
    # the loads' L2 hint. Without a mean (rms_norm) x comes back as loaded, not scaled (masked lanes
    # load 0): the caller scales it where it uses it, so that the lag kernel's loop is scheduled as
    # rms_norm's own was (rstd applied inside the dx branch: the same PTX).
    dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    if mean_ptr is None:
        rstd = tl.load(rstd_ptr + row).to(tl.float32)
        xhat = x
    else:
        mean = tl.load(mean_ptr + row).to(tl.float32)
        rstd = tl.load(rstd_ptr + row).to(tl.float32)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    return dy, xhat, rstd


@triton.jit(do_not_specialize=["rows_per_team"])  # the caller asks the binary's occupancy before it knows it
def norm_bwd_team_lag_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr,
                             sync_ptr, M, N, S, rows_per_team, stride_dx_row, stride_dy_row, stride_x_row,
                             stride_ds_row, HAS_WEIGHT: tl.constexpr, COMPUTE_DW: tl.constexpr,
                             COMPUTE_DB: tl.constexpr, BLOCK_N: tl.constexpr, S_POW2: tl.constexpr,
                             STAGES: tl.constexpr, INDEX_64: tl.constexpr):
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
        db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for i in tl.range(row_begin, row_end + 1, num_stages=STAGES):
            # Row i (none on the last iteration): its statistics published, its dy and xhat added to dw/db.
            row = tl.minimum(i, row_end - 1)
            now = i < row_end
            # Row i - 1 (none on the first iteration): its dx.
            prev = tl.maximum(i - 1, row_begin)
            after_first = i > row_begin
            if STAGES > 1:
                words = peek_words(sync_ptr, prev, S, S_POW2)
            dy, xhat, rstd = _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row, cols, col_mask & now, stride_dy_row,
                                       stride_x_row, "")
            if mean_ptr is None:
                xhat = xhat * rstd  # rms_norm: _team_row leaves x unscaled
            if HAS_WEIGHT:
                g = dy * w
            else:
                g = dy
            if now:
                # rms_norm needs one statistic: the low half of the word is not used. Its expressions are
                # written as rms_norm's own kernel had them: the same PTX, so the same schedule.
                if mean_ptr is None:
                    publish(sync_ptr, row, chunk, S, tl.sum(dy * w * xhat, axis=0), tl.full((), 1.0, tl.float32), True)
                else:
                    publish(sync_ptr, row, chunk, S, tl.sum(g * xhat, axis=0), tl.sum(g, axis=0), True)
            if COMPUTE_DW:
                dw_acc += dy * xhat
            if COMPUTE_DB:
                db_acc += dy
            prev_mask = col_mask & after_first
            # Read for the second time: L2 may drop them now.
            dy_prev, xhat_prev, rstd_prev = _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, prev, cols, prev_mask,
                                                      stride_dy_row, stride_x_row, "evict_first")
            if after_first:
                if STAGES > 1:
                    sums_gx, sums_g = settle_words(sync_ptr, prev, S, words, S_POW2)
                else:
                    sums_gx, sums_g, _chunk_mask, _complete = wait(sync_ptr, prev, S, S_POW2, 0)
                if mean_ptr is None:
                    # rms_norm: one statistic; x unscaled (_team_row). w is 1.0 without a weight.
                    dx = (dy_prev * w - xhat_prev * rstd_prev * (tl.sum(sums_gx, axis=0) / N)) * rstd_prev
                else:
                    c1 = tl.sum(sums_gx, axis=0) / N
                    c2 = tl.sum(sums_g, axis=0) / N
                    if HAS_WEIGHT:
                        g_prev = dy_prev * w
                    else:
                        g_prev = dy_prev
                    dx = (g_prev - (xhat_prev * c1 + c2)) * rstd_prev
                if ds_ptr is not None:
                    dx += tl.load(ds_ptr + prev * stride_ds_row + cols, mask=prev_mask, other=0.0).to(tl.float32)
                tl.store(dx_ptr + prev * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=prev_mask)
        if COMPUTE_DW:
            tl.store(dw_partial_ptr + team * N + cols, dw_acc.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)
        if COMPUTE_DB:
            tl.store(db_partial_ptr + team * N + cols, db_acc.to(db_partial_ptr.dtype.element_ty), mask=col_mask)
