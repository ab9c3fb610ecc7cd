"""RMS normalisation over the last dimension, alone or after a residual add: its own backward
kernels, plain ``@triton.jit`` kernels launched from C++ (ops/csrc/ops/rms_norm/, whose plan picks
the kernel and every ``tl.constexpr``); the rest are the norm family's.

Conventions (as layer_norm's):

* The wrapper passes x, r (residual), s (x + r), y, dy, dx, ds as 2-D views [M rows, N columns]
  (N = prod(normalized_shape)), columns contiguous, each with its own row stride (elements).
  w and dw are contiguous [N].
* rstd is contiguous [M] in the accumulator dtype: fp32 for fp16/bf16/fp32 x, fp64 for fp64 x. All
  arithmetic is in that dtype; stores cast to the destination pointer's element type.
* Absent tensors arrive as None (a constexpr); every use is behind HAS_*/COMPUTE_* or a None test.
* ``eps`` is annotated ``tl.float64`` and converted once to the accumulator dtype (fp64 x uses it
  unrounded). ``INDEX_64``: row indices are int64 before they meet a stride.

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

The forward (norm_forward.py: norm_fwd_kernel), the fused backward, the dx-then-columns form and
the sum of partial rows (norm_backward.py: norm_bwd_fused_kernel, norm_bwd_dx_kernel,
norm_bwd_column_sums_kernel, norm_bwd_sums_finalize_kernel) are the norm family's, without a mean
or bias.
"""

import triton
import triton.language as tl

from .row_exchange import HELP_AFTER, TEAM_GAVE_UP, peek_words, publish, settle_words, team_runs, ticket, wait


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
