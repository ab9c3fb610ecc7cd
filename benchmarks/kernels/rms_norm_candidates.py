"""Candidate kernels of benchmarks/rms_norm_variants.py, not shipped: each is a committed kernel with
one thing changed, so an A/B in one process says whether that one thing pays.

rms_norm_bwd_team_lag_kernel
    rms_norm_bwd_team_kernel (ops/kernels_py/rms_norm.py, same arguments, grid, workspace and
    rescue) in the form of layer_norm's lag team backward (layer_norm/backward.py): iteration i
    publishes row i's sum and adds row i to dw, then writes dx of row i - 1, whose words were peeked
    at the top of the iteration and are re-polled only if one is missing; row i - 1's dy and v are
    read again (L2 hits), so nothing lives across a wait. Meant for 2-byte rows in 2048-column
    chunks capped at 128 registers (four programs an SM, where the team kernel's 4096-column chunks
    hold two): the bf16 rms_norm backward stops at 0.76-0.79x copy at 12288-16384 columns.
    CUDA only at STAGES > 1 (PTX waits); STAGES = 1 waits in Triton (the interpreter).
"""

import triton
import triton.language as tl

from triton_wrappers import rms_norm_k as _rms

HELP_AFTER = _rms.HELP_AFTER
peek_words = _rms.peek_words
publish = _rms.publish
settle_words = _rms.settle_words
team_runs = _rms.team_runs
ticket = _rms.ticket
wait = _rms.wait


@triton.jit(do_not_specialize=["rows_per_team"])
def rms_norm_bwd_team_lag_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M, N, S,
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
        for i in tl.range(row_begin, row_end + 1, num_stages=STAGES):
            # Row i (none on the last iteration): its sum published, its dy and vhat added to dw.
            row = tl.minimum(i, row_end - 1)
            now = i < row_end
            # Row i - 1 (none on the first iteration): its dx.
            prev = tl.maximum(i - 1, row_begin)
            after_first = i > row_begin
            if STAGES > 1:
                words = peek_words(sync_ptr, prev, S, S_POW2)
            mask = col_mask & now
            dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0).to(tl.float32)
            vhat = tl.load(v_ptr + row * stride_v_row + cols, mask=mask, other=0.0).to(tl.float32) * \
                tl.load(rstd_ptr + row).to(tl.float32)
            if now:
                publish(sync_ptr, row, chunk, S, tl.sum(dy * w * vhat, axis=0), tl.full((), 1.0, tl.float32), True)
            if COMPUTE_DW:
                dw_acc += dy * vhat
            prev_mask = col_mask & after_first
            # Read for the second time: L2 may drop them now.
            dy_prev = tl.load(dy_ptr + prev * stride_dy_row + cols, mask=prev_mask, other=0.0,
                              eviction_policy="evict_first").to(tl.float32)
            v_prev = tl.load(v_ptr + prev * stride_v_row + cols, mask=prev_mask, other=0.0,
                             eviction_policy="evict_first").to(tl.float32)
            rstd_prev = tl.load(rstd_ptr + prev).to(tl.float32)
            if after_first:
                if STAGES > 1:
                    sums, _ = settle_words(sync_ptr, prev, S, words, S_POW2)
                else:
                    sums, _, _, _ = wait(sync_ptr, prev, S, S_POW2, 0)
                dx = (dy_prev * w - v_prev * rstd_prev * (tl.sum(sums, axis=0) / N)) * rstd_prev
                if ds_ptr is not None:
                    dx += tl.load(ds_ptr + prev * stride_ds_row + cols, mask=prev_mask, other=0.0).to(tl.float32)
                tl.store(dx_ptr + prev * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=prev_mask)
        if COMPUTE_DW:
            tl.store(dw_partial_ptr + team * N + cols, dw_acc.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)


# The plan's other launches, so that one module runs a candidate's whole plan.
rms_norm_bwd_team_rescue_kernel = _rms.rms_norm_bwd_team_rescue_kernel
rms_norm_bwd_dw_finalize_kernel = _rms.rms_norm_bwd_dw_finalize_kernel
