"""The norm family's backward, one set of kernels for layer_norm, rms_norm and add_rms_norm
(conventions: layer_norm/__init__.py and rms_norm.py): the fused pass, or two steps (dx a row per
program, then the column sums of dw and db over groups of rows), and the sum of partial rows that
every backward form with more than one group ends with.

xhat = (x - mean) * rstd, or x * rstd when mean_ptr is None (rms_norm: x is the normalised row v).

norm_bwd_dx_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, M, N, stride_dx_row,
                   stride_dy_row, stride_x_row, stride_ds_row, HAS_WEIGHT, BLOCK_N, SINGLE_PASS, INDEX_64)
    g = dy * w (or dy), dx = rstd * (g - xhat * mean_n(g * xhat) - mean_n(g)), without the last term
    for rms_norm, plus ds (add_rms_norm's gradient reaching the sum another way) unless ds_ptr is
    None. grid: (M,). SINGLE_PASS: the row lives in registers, N <= BLOCK_N; otherwise (any N >= 1)
    dy, x (and w) are read twice in BLOCK_N steps.

norm_bwd_fused_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr,
                      M, N, stride_dx_row, stride_dy_row, stride_x_row, stride_ds_row, rows_per_program,
                      HAS_WEIGHT, COMPUTE_DX, COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64, BLOCK_TAIL,
                      PREFETCH, PRELOAD_W)
    The whole backward in one pass over dy and x, N <= BLOCK_N + BLOCK_TAIL (BLOCK_TAIL: columns past
    BLOCK_N in a [BLOCK_M, BLOCK_TAIL] tile beside each [BLOCK_M, BLOCK_N] one; 0: none): program p
    takes rows [p * rows_per_program, min((p + 1) * rows_per_program, M)) in tiles, writes their dx
    (as norm_bwd_dx_kernel's) and stores its sums of dy * xhat and dy to dw_partial[p, :] and
    db_partial[p, :] (contiguous [G, N], accumulator dtype; or dw/db themselves when G == 1). Any
    COMPUTE_* may be False (its pointer may then be None). PREFETCH: the next tile is loaded before
    this one's sums; PRELOAD_W: w is held in registers across the rows (else loaded with each tile).
    grid: (G,), G = cdiv(M, rows_per_program). Then norm_bwd_sums_finalize_kernel when G > 1.

norm_bwd_column_sums_kernel(dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, M, N,
                            stride_dy_row, stride_x_row, rows_per_group, COMPUTE_DW, COMPUTE_DB,
                            BLOCK_M, BLOCK_N, INDEX_64)
    dw_partial[g, n] = sum of dy * xhat and db_partial[g, n] = sum of dy over rows
    [g * rows_per_group, min((g + 1) * rows_per_group, M)), BLOCK_N columns a program, in
    [BLOCK_M, BLOCK_N] tiles (contiguous [G, N] in the accumulator dtype, or dw/db themselves when
    G == 1). When COMPUTE_DW is False, x, mean and rstd are not read (may be None).
    grid: (cdiv(N, BLOCK_N), G)   (G <= 65535).

norm_bwd_sums_finalize_kernel(dw_ptr, db_ptr, dw_partial_ptr, db_partial_ptr, G, N, COMPUTE_DW,
                              COMPUTE_DB, BLOCK_G, BLOCK_N, INDEX_64)
    dw[n] = sum_g dw_partial[g, n] (and db likewise), both outputs in one launch.
    grid: (cdiv(N, BLOCK_N),).
"""

import triton
import triton.language as tl


@triton.jit
def _centred(x, mean):
    # x - mean, or x where the norm has no mean (rms_norm).
    if mean is None:
        centred = x
    else:
        centred = x - mean
    return centred


@triton.jit
def norm_bwd_dx_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, M, N, stride_dx_row, stride_dy_row,
                       stride_x_row, stride_ds_row, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr,
                       SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr):
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32

    dx_row = dx_ptr + row * stride_dx_row
    dy_row = dy_ptr + row * stride_dy_row
    x_row = x_ptr + row * stride_x_row
    mean = None
    if mean_ptr is not None:
        mean = tl.load(mean_ptr + row).to(ACC)
    rstd = tl.load(rstd_ptr + row).to(ACC)
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_PASS:
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(ACC)
        g = tl.load(dy_row + cols, mask=mask, other=0.0).to(ACC)
        if HAS_WEIGHT:
            g = g * tl.load(w_ptr + cols, mask=mask, other=0.0).to(ACC)
        xhat = tl.where(mask, _centred(x, mean) * rstd, 0.0)
        c1 = tl.sum(g * xhat, axis=0) / N
        if mean_ptr is None:
            dx = (g - xhat * c1) * rstd
        else:
            c2 = tl.sum(g, axis=0) / N
            dx = (g - (xhat * c1 + c2)) * rstd
        if ds_ptr is not None:
            dx += tl.load(ds_ptr + row * stride_ds_row + cols, mask=mask, other=0.0).to(ACC)
        tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    else:
        acc_gx = tl.zeros([BLOCK_N], dtype=ACC)
        acc_g = tl.zeros([BLOCK_N], dtype=ACC)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy="evict_last").to(ACC)
            g = tl.load(dy_row + c, mask=mask, other=0.0, eviction_policy="evict_last").to(ACC)
            if HAS_WEIGHT:
                g = g * tl.load(w_ptr + c, mask=mask, other=0.0).to(ACC)
            # g is 0 on padding lanes, so xhat needs no mask here.
            acc_gx += g * (_centred(x, mean) * rstd)
            if mean_ptr is not None:
                acc_g += g
        c1 = tl.sum(acc_gx, axis=0) / N
        c2 = tl.sum(acc_g, axis=0) / N
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy="evict_first").to(ACC)
            g = tl.load(dy_row + c, mask=mask, other=0.0, eviction_policy="evict_first").to(ACC)
            if HAS_WEIGHT:
                g = g * tl.load(w_ptr + c, mask=mask, other=0.0).to(ACC)
            if mean_ptr is None:
                dx = (g - x * rstd * c1) * rstd
            else:
                dx = (g - ((x - mean) * rstd * c1 + c2)) * rstd
            if ds_ptr is not None:
                dx += tl.load(ds_ptr + row * stride_ds_row + c, mask=mask, other=0.0).to(ACC)
            tl.store(dx_row + c, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tile(ptr, rows, row_end, cols, N, stride_row):
    """The [rows, cols] tile at ptr as stored (0 outside the rows and N)."""
    mask = (rows < row_end)[:, None] & (cols < N)[None, :]
    return tl.load(ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0)


@triton.jit
def _tile_pointers(dy_ptr, x_ptr, rows, row_end, cols, col_mask, stride_dy_row, stride_x_row):
    """The addresses of the [rows, cols] tiles of dy and x, and their mask."""
    mask = (rows < row_end)[:, None] & col_mask[None, :]
    dy_tile = dy_ptr + rows[:, None] * stride_dy_row + cols[None, :]
    return dy_tile, x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask


@triton.jit
def _fused_dx_store(dx_ptr, ds_ptr, rows, cols, mask, g, xhat, c1, c2, rstd, stride_dx_row, stride_ds_row,
                    ACC: tl.constexpr):
    if c2 is None:
        dx = (g - xhat * c1[:, None]) * rstd[:, None]
    else:
        dx = (g - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
    if ds_ptr is not None:
        dx += tl.load(ds_ptr + rows[:, None] * stride_ds_row + cols[None, :], mask=mask, other=0.0).to(ACC)
    tl.store(dx_ptr + rows[:, None] * stride_dx_row + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fused_xhat(x, mean, rstd, mask):
    # x is 0 on padding lanes, so x * rstd is too; x - mean is not.
    if mean is None:
        xhat = x * rstd[:, None]
    else:
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
    return xhat


@triton.jit
def norm_bwd_fused_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, ds_ptr, M,
                          N, stride_dx_row, stride_dy_row, stride_x_row, stride_ds_row, rows_per_program,
                          HAS_WEIGHT: tl.constexpr, COMPUTE_DX: tl.constexpr, COMPUTE_DW: tl.constexpr,
                          COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          INDEX_64: tl.constexpr, BLOCK_TAIL: tl.constexpr, PREFETCH: tl.constexpr,
                          PRELOAD_W: tl.constexpr):
    # BLOCK_TAIL > 0: rows just past a power of two (5120, 12288) as a block and a tail beside it,
    # not padded to the next. PREFETCH: one program an SM keeps memory busy through the row sums.
    # PRELOAD_W False: w from L1 with each tile, for rows whose w would not fit the registers.
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if dy_ptr.dtype.element_ty == tl.float64 else tl.float32
    HAS_TAIL: tl.constexpr = BLOCK_TAIL > 0
    NEEDS_X: tl.constexpr = COMPUTE_DX or COMPUTE_DW
    row_begin = pid * rows_per_program
    row_end = tl.minimum(row_begin + rows_per_program, M)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    if not PREFETCH:
        tail_cols = BLOCK_N + tl.arange(0, BLOCK_TAIL if HAS_TAIL else 1)
        tail_col_mask = tail_cols < N
    HOLD_W: tl.constexpr = COMPUTE_DX and HAS_WEIGHT and PRELOAD_W
    if HOLD_W:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(ACC)
        if HAS_TAIL and not PREFETCH:
            w_tail = tl.load(w_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)
    # 2-D accumulators, reduced over rows once at the end (not a cross-warp reduction per tile).
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    if HAS_TAIL:
        dw_acc_tail = tl.zeros([BLOCK_M, BLOCK_TAIL], dtype=ACC)
        db_acc_tail = tl.zeros([BLOCK_M, BLOCK_TAIL], dtype=ACC)
    # Prefetched tiles: both tiles' addresses, then their loads (ptxas schedules this order better:
    # loads issued after their addresses, -13% for fp32 rows of 3000 columns otherwise).
    if PREFETCH:
        first = row_begin + tl.arange(0, BLOCK_M)
        dy_tile, x_tile, first_mask = _tile_pointers(dy_ptr, x_ptr, first, row_end, cols, col_mask, stride_dy_row,
                                                     stride_x_row)
        dy_next = tl.load(dy_tile, mask=first_mask, other=0.0)
        if NEEDS_X:
            x_next = tl.load(x_tile, mask=first_mask, other=0.0)
        tail_cols = BLOCK_N + tl.arange(0, BLOCK_TAIL if HAS_TAIL else 1)
        tail_col_mask = tail_cols < N
        if HAS_TAIL:
            if HOLD_W:
                w_tail = tl.load(w_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)
            dy_tile, x_tile, first_mask = _tile_pointers(dy_ptr, x_ptr, first, row_end, tail_cols, tail_col_mask,
                                                         stride_dy_row, stride_x_row)
            dy_tail_next = tl.load(dy_tile, mask=first_mask, other=0.0)
            if NEEDS_X:
                x_tail_next = tl.load(x_tile, mask=first_mask, other=0.0)
    for r0 in range(row_begin, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        row_mask = rows < row_end
        mask = row_mask[:, None] & col_mask[None, :]
        if PREFETCH:
            dy = dy_next.to(ACC)
            dy_tile, x_tile, next_mask = _tile_pointers(dy_ptr, x_ptr, rows + BLOCK_M, row_end, cols, col_mask,
                                                        stride_dy_row, stride_x_row)
            dy_next = tl.load(dy_tile, mask=next_mask, other=0.0)
            if NEEDS_X:
                x = x_next.to(ACC)
                x_next = tl.load(x_tile, mask=next_mask, other=0.0)
        else:
            dy = _tile(dy_ptr, rows, row_end, cols, N, stride_dy_row).to(ACC)
            if NEEDS_X:
                x = _tile(x_ptr, rows, row_end, cols, N, stride_x_row).to(ACC)
        if HAS_TAIL:
            tail_mask = row_mask[:, None] & tail_col_mask[None, :]
            if PREFETCH:
                dy_tail = dy_tail_next.to(ACC)
                dy_tile, x_tile, next_mask = _tile_pointers(dy_ptr, x_ptr, rows + BLOCK_M, row_end, tail_cols,
                                                            tail_col_mask, stride_dy_row, stride_x_row)
                dy_tail_next = tl.load(dy_tile, mask=next_mask, other=0.0)
                if NEEDS_X:
                    x_tail = x_tail_next.to(ACC)
                    x_tail_next = tl.load(x_tile, mask=next_mask, other=0.0)
            else:
                dy_tail = _tile(dy_ptr, rows, row_end, tail_cols, N, stride_dy_row).to(ACC)
                if NEEDS_X:
                    x_tail = _tile(x_ptr, rows, row_end, tail_cols, N, stride_x_row).to(ACC)
        if NEEDS_X:
            mean = None
            if mean_ptr is not None:
                mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0).to(ACC)
            rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0).to(ACC)
            xhat = _fused_xhat(x, mean, rstd, mask)
            if HAS_TAIL:
                xhat_tail = _fused_xhat(x_tail, mean, rstd, tail_mask)
        if COMPUTE_DX:
            g = dy
            if HAS_WEIGHT:
                if not PRELOAD_W:
                    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(ACC)
                g = dy * w[None, :]
            sum_gx = tl.sum(g * xhat, axis=1)
            sum_g = None
            if mean_ptr is not None:
                sum_g = tl.sum(g, axis=1)
            if HAS_TAIL:
                g_tail = dy_tail
                if HAS_WEIGHT:
                    if not PRELOAD_W:
                        w_tail = tl.load(w_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)
                    g_tail = dy_tail * w_tail[None, :]
                sum_gx += tl.sum(g_tail * xhat_tail, axis=1)
                if mean_ptr is not None:
                    sum_g += tl.sum(g_tail, axis=1)
            c1 = sum_gx / N
            c2 = None
            if mean_ptr is not None:
                c2 = sum_g / N
            _fused_dx_store(dx_ptr, ds_ptr, rows, cols, mask, g, xhat, c1, c2, rstd, stride_dx_row, stride_ds_row, ACC)
            if HAS_TAIL:
                _fused_dx_store(dx_ptr, ds_ptr, rows, tail_cols, tail_mask, g_tail, xhat_tail, c1, c2, rstd,
                                stride_dx_row, stride_ds_row, ACC)
        if COMPUTE_DW:
            dw_acc += dy * xhat
            if HAS_TAIL:
                dw_acc_tail += dy_tail * xhat_tail
        if COMPUTE_DB:
            db_acc += dy
            if HAS_TAIL:
                db_acc_tail += dy_tail
    if COMPUTE_DW:
        _store_column_sums(dw_partial_ptr, pid * N, cols, col_mask, dw_acc)
        if HAS_TAIL:
            _store_column_sums(dw_partial_ptr, pid * N, tail_cols, tail_col_mask, dw_acc_tail)
    if COMPUTE_DB:
        _store_column_sums(db_partial_ptr, pid * N, cols, col_mask, db_acc)
        if HAS_TAIL:
            _store_column_sums(db_partial_ptr, pid * N, tail_cols, tail_col_mask, db_acc_tail)


@triton.jit
def _store_column_sums(partial_ptr, offset, cols, col_mask, acc):
    tl.store(partial_ptr + offset + cols, tl.sum(acc, axis=0).to(partial_ptr.dtype.element_ty), mask=col_mask)


@triton.jit
def _column_sums(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row_begin, row_end, cols, N, stride_dy_row, stride_x_row,
                 COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 INDEX_64: tl.constexpr):
    """(sum dy * xhat, sum dy) over rows [row_begin, row_end) for the BLOCK_N columns `cols`."""
    ACC: tl.constexpr = tl.float64 if dy_ptr.dtype.element_ty == tl.float64 else tl.float32
    col_mask = cols < N
    row_offs = tl.arange(0, BLOCK_M)
    # 2-D accumulators, reduced over rows once at the end (not a cross-warp reduction per tile).
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    for m0 in range(row_begin, row_end, BLOCK_M):
        rows = m0 + row_offs
        row_mask = rows < row_end
        if INDEX_64:
            rows = rows.to(tl.int64)
        mask = row_mask[:, None] & col_mask[None, :]
        dy = tl.load(dy_ptr + rows[:, None] * stride_dy_row + cols[None, :], mask=mask, other=0.0).to(ACC)
        if COMPUTE_DB:
            db_acc += dy
        if COMPUTE_DW:
            x = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask=mask, other=0.0).to(ACC)
            # dy is 0 outside the mask, so padding contributes nothing.
            if mean_ptr is None:
                rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0).to(ACC)
                dw_acc += dy * (x * rstd[:, None])
            else:
                mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0).to(ACC)
                rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0).to(ACC)
                dw_acc += dy * ((x - mean[:, None]) * rstd[:, None])
    return tl.sum(dw_acc, axis=0), tl.sum(db_acc, axis=0)


@triton.jit
def norm_bwd_column_sums_kernel(dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, M, N,
                                stride_dy_row, stride_x_row, rows_per_group, COMPUTE_DW: tl.constexpr,
                                COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                INDEX_64: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    group = tl.program_id(1)
    if INDEX_64:
        group = group.to(tl.int64)
    row_begin = group * rows_per_group
    row_end = tl.minimum(row_begin + rows_per_group, M)
    dw, db = _column_sums(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row_begin, row_end, cols, N, stride_dy_row,
                          stride_x_row, COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64)
    col_mask = cols < N
    out_offs = group * N + cols
    if COMPUTE_DW:
        tl.store(dw_partial_ptr + out_offs, dw.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)
    if COMPUTE_DB:
        tl.store(db_partial_ptr + out_offs, db.to(db_partial_ptr.dtype.element_ty), mask=col_mask)


@triton.jit
def norm_bwd_sums_finalize_kernel(dw_ptr, db_ptr, dw_partial_ptr, db_partial_ptr, G, N, COMPUTE_DW: tl.constexpr,
                                  COMPUTE_DB: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
                                  INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    g_offs = tl.arange(0, BLOCK_G)
    if COMPUTE_DW:
        ACC_W: tl.constexpr = tl.float64 if dw_partial_ptr.dtype.element_ty == tl.float64 else tl.float32
        dw_acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=ACC_W)
    if COMPUTE_DB:
        ACC_B: tl.constexpr = tl.float64 if db_partial_ptr.dtype.element_ty == tl.float64 else tl.float32
        db_acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=ACC_B)
    for g0 in range(0, G, BLOCK_G):
        g = g0 + g_offs
        mask = (g < G)[:, None] & col_mask[None, :]
        if INDEX_64:
            g = g.to(tl.int64)
        offs = g[:, None] * N + cols[None, :]
        if COMPUTE_DW:
            dw_acc += tl.load(dw_partial_ptr + offs, mask=mask, other=0.0).to(ACC_W)
        if COMPUTE_DB:
            db_acc += tl.load(db_partial_ptr + offs, mask=mask, other=0.0).to(ACC_B)
    if COMPUTE_DW:
        tl.store(dw_ptr + cols, tl.sum(dw_acc, axis=0).to(dw_ptr.dtype.element_ty), mask=col_mask)
    if COMPUTE_DB:
        tl.store(db_ptr + cols, tl.sum(db_acc, axis=0).to(db_ptr.dtype.element_ty), mask=col_mask)
