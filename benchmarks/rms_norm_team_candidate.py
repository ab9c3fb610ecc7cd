"""A candidate backward for rms_norm past 8192 columns, measured by rms_norm_variants.py (CUDA only).

rms_norm_bwd_team_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M, N, S,
                         rows_per_team, stride_dx_row, stride_dy_row, stride_v_row, stride_ds_row,
                         BLOCK_N, S_POW2, STAGES)
    layer_norm_bwd_team_kernel's protocol (ops/kernels_py/layer_norm/backward.py) with rms_norm's
    one row sum, sum of dy * w * vhat (the published word's low half is unused): teams of S =
    cdiv(N, BLOCK_N) <= S_POW2 programs share rows [team * rows_per_team, ...), each owning BLOCK_N
    columns and keeping their dw sums in registers, stored to dw_partial[team, :]. grid: (teams * S,);
    sync int64 [2 + M * S], zeroed before each launch. CUDA only: a row's S programs wait for each
    other. Then rms_norm_bwd_dw_finalize_kernel over the teams' partials when there is more than one.
"""

import triton
import triton.language as tl

from tjit.kernels_py.rms_norm import rms_norm_bwd_dw_finalize_kernel  # noqa: F401 - the team plan's finalize
from tjit.kernels_py.row_exchange import peek_words, publish, settle_words, ticket, wait


@triton.jit
def rms_norm_bwd_team_kernel(dx_ptr, dw_partial_ptr, dy_ptr, v_ptr, w_ptr, rstd_ptr, ds_ptr, sync_ptr, M, N, S,
                             rows_per_team, stride_dx_row, stride_dy_row, stride_v_row, stride_ds_row,
                             BLOCK_N: tl.constexpr, S_POW2: tl.constexpr, STAGES: tl.constexpr):
    team, chunk = ticket(sync_ptr, S)
    cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
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
        publish(sync_ptr, row, chunk, S, tl.sum(g * vhat, axis=0), tl.full((), 1.0, tl.float32))
        if STAGES > 1:
            sums, _ = settle_words(sync_ptr, row, S, peek_words(sync_ptr, row, S, S_POW2), S_POW2)
        else:
            sums, _, _, _complete = wait(sync_ptr, row, S, S_POW2, 0)
        c = tl.sum(sums, axis=0) / N
        dx = (g - vhat * c) * rstd
        if ds_ptr is not None:
            dx += tl.load(ds_ptr + row * stride_ds_row + cols, mask=col_mask, other=0.0).to(tl.float32)
        tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
        dw_acc += dy * vhat
    tl.store(dw_partial_ptr + team * N + cols, dw_acc.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)
