"""Layer normalisation over the last dimension, backward kernels (conventions: __init__.py).

The fused pass, the dx-then-columns form and the sum of partial rows are the norm family's
(norm_backward.py: norm_bwd_fused_kernel, norm_bwd_dx_kernel, norm_bwd_column_sums_kernel,
norm_bwd_sums_finalize_kernel, with layer_norm's mean).

layer_norm_bwd_team_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr,
                           sync_ptr, M, N, S, rows_per_team, stride_dx_row, stride_dy_row, stride_x_row,
                           HAS_WEIGHT, COMPUTE_DX, COMPUTE_DW, COMPUTE_DB, BLOCK_N, S_POW2, STAGES, INDEX_64)
    The whole backward of long rows by teams of S = cdiv(N, BLOCK_N) <= S_POW2 programs (fp32
    statistics; the comment above it). grid: (teams * S,). CUDA only. Then
    norm_bwd_sums_finalize_kernel over the teams' partials when there is more than one team.
    Its lag form, for 2-byte rows when dx is wanted, is the norm family's norm_bwd_team_lag_kernel
    (norm_team.py); after it, always:

layer_norm_bwd_team_lag_finalize_kernel(dw_ptr, db_ptr, dw_partial_ptr, db_partial_ptr, dx_ptr, dy_ptr, x_ptr, w_ptr,
                                        mean_ptr, rstd_ptr, sync_ptr, M, N, S, rows_per_team, G, stride_dx_row,
                                        stride_dy_row, stride_x_row, HAS_WEIGHT, COMPUTE_DW, COMPUTE_DB, BLOCK_G,
                                        BLOCK_N, INDEX_64)
    dw/db from the G teams' partial rows, and the whole backward (dx, dw, db) of the rows of any team
    that gave up (its mode word in sync). grid: (cdiv(N, BLOCK_N),).
"""

import triton
import triton.language as tl

from ..norm_team import _team_row
from ..row_exchange import (HELP_AFTER, HELP_BLOCK, TEAM_GAVE_UP, helping_spin_asm, pack_word, publish, publish_missing,
                            spin_slots, ticket, unpack_words, wait)


# Long rows backward on CUDA (where the fused kernel's row and its dw/db sums no longer fit one
# program's registers): a team of S = cdiv(N, BLOCK_N) programs shares rows
# [team * rows_per_team, ...), program `chunk` of the team owning columns [chunk * BLOCK_N, ...).
# Per row each program publishes its chunk's sums of g * xhat and g (g = dy * w) as one word and
# waits until the row's S chunks have (row_exchange); dx needs both sums over the whole row. Each
# program keeps its columns' dw/db sums in registers across the team's rows, stored once to
# dw_partial[team, :] / db_partial[team, :] (the finalize kernel adds the teams up, or dw/db
# themselves when there is one team). dy and x are read once.
# STAGES > 1: Triton's pipeliner copies the next rows' dy and x into shared memory (STAGES - 1 rows
# ahead) while this row waits on its team; the wait then spins in PTX (_team_wait), since a loop
# in the row loop's body keeps the pipeliner from taking it. STAGES = 1 (the interpreter, which
# runs no PTX): wait's loop, no copies ahead.
# A program that has waited HELP_AFTER polls for a row computes the missing chunks' sums itself
# (row_exchange's help path; every word goes in by compare-and-swap from 0, so all programs of the
# row read the same sums): a team then finishes with room on the GPU for one program, e.g. beside
# a kernel that holds every other SM, in a small green context or an MPS share.
#     sync      int64 [2 + M * S], ZEROED before each launch: sync[0] hands out tickets (a team is S
#               consecutive tickets), then the rows' words
#     grid = (teams * S,). CUDA only (programs wait for each other; the interpreter runs them
#     one after another, so there every row of a team of several is helped).


def _chunk_sums_ptx(dtype):
    # helping_spin_asm's chunk_word for the team kernels: the chunk's sums of g * xhat (%hi) and g
    # (%lo), g = dy * w, xhat = (x - mean) * rstd, in fp32; lane l reads columns l, l + 32, ... of
    # the chunk, then the lanes' sums meet by shuffles. Operands (the kernel's arguments, which ptxas
    # can read again where needed rather than hold in registers through the loop): $7 dy, $8 x,
    # $9 w (0: none), $10 mean, $11 rstd, $12 the row, $13 dy's and $14 x's row strides
    # (int64), $15 N, $16 BLOCK_N (int32); dy, x and w of `dtype` ("f32", "bf16", "f16", "f64"; mean
    # and rstd fp64 with fp64 rows, fp32 otherwise).
    size = {"f64": 8, "f32": 4}.get(dtype, 2)
    stat = "f64" if dtype == "f64" else "f32"  # mean and rstd: the accumulator type

    def load(dst, address, pred=""):
        # One element at `address` into the fp32 register `dst`.
        if dtype == "f32":
            return f"{pred}ld.global.f32 {dst}, [{address}];"
        if dtype == "f64":
            return f"{pred}ld.global.f64 %f64v, [{address}];\n{pred}cvt.rn.f32.f64 {dst}, %f64v;"
        if dtype == "bf16":
            return (f"{pred}ld.global.b16 %h, [{address}];\n{pred}cvt.u32.u16 %r, %h;\n{pred}shl.b32 %r, %r, 16;\n"
                    f"{pred}mov.b32 {dst}, %r;")
        return f"{pred}ld.global.b16 %h, [{address}];\n{pred}cvt.f32.f16 {dst}, %h;"

    def load_stat(dst, address):
        if stat == "f64":
            return f"ld.global.f64 %f64v, [{address}];\ncvt.rn.f32.f64 {dst}, %f64v;"
        return f"ld.global.f32 {dst}, [{address}];"

    reduce = "".join(f"""
        shfl.sync.bfly.b32 %tmp, %sgx, {d}, 31, -1;
        add.f32 %sgx, %sgx, %tmp;
        shfl.sync.bfly.b32 %tmp, %sg, {d}, 31, -1;
        add.f32 %sg, %sg, %tmp;""" for d in (16, 8, 4, 2, 1))
    return f"""{{
        .reg .pred %pin, %hasw, %pz;
        .reg .u32 %i, %end, %r;
        .reg .b64 %off, %ad, %dy, %x;
        .reg .f32 %mean, %rstd, %sgx, %sg, %fx, %fg, %fw, %tmp;
        .reg .f64 %f64v;
        .reg .b16 %h;
        mul.lo.s64 %off, $12, {8 if stat == "f64" else 4};
        add.s64 %ad, $10, %off;
        {load_stat("%mean", "%ad")}
        add.s64 %ad, $11, %off;
        {load_stat("%rstd", "%ad")}
        mul.lo.s64 %off, $12, $13;
        mad.lo.s64 %dy, %off, {size}, $7;
        mul.lo.s64 %off, $12, $14;
        mad.lo.s64 %x, %off, {size}, $8;
        mul.lo.u32 %i, %c, $16;
        add.u32 %end, %i, $16;
        min.u32 %end, %end, $15;
        add.u32 %i, %i, %lane;
        mov.f32 %sgx, 0f00000000;
        mov.f32 %sg, 0f00000000;
        setp.ne.u64 %hasw, $9, 0;
        COLS:
        setp.ge.u32 %pin, %i, %end;
        @%pin bra COLSDONE;
        mul.wide.u32 %off, %i, {size};
        add.s64 %ad, %dy, %off;
        {load("%fg", "%ad")}
        add.s64 %ad, %x, %off;
        {load("%fx", "%ad")}
        @%hasw add.s64 %ad, $9, %off;
        {load("%fw", "%ad", "@%hasw ")}
        @%hasw mul.f32 %fg, %fg, %fw;
        sub.f32 %fx, %fx, %mean;
        mul.f32 %fx, %fx, %rstd;
        fma.rn.f32 %sgx, %fg, %fx, %sgx;
        add.f32 %sg, %sg, %fg;
        add.u32 %i, %i, 32;
        bra COLS;
        COLSDONE:{reduce}
        mov.b32 %hi, %sgx;
        setp.eq.b32 %pz, %hi, 0;
        @%pz mov.b32 %hi, 0x80000000;
        mov.b32 %lo, %sg;
        }}"""


_PUBLISH_AND_WAIT_F32 = tl.constexpr(helping_spin_asm(_chunk_sums_ptx("f32")))
_PUBLISH_AND_WAIT_BF16 = tl.constexpr(helping_spin_asm(_chunk_sums_ptx("bf16")))
_PUBLISH_AND_WAIT_F16 = tl.constexpr(helping_spin_asm(_chunk_sums_ptx("f16")))
_PUBLISH_AND_WAIT_F64 = tl.constexpr(helping_spin_asm(_chunk_sums_ptx("f64")))


@triton.jit
def _team_chunk_sums(chunk, dy_row, x_row, w_ptr, mean_ptr, rstd_ptr, row, N, BLOCK_N: tl.constexpr,
                     HAS_WEIGHT: tl.constexpr):
    # _chunk_sums_ptx in Triton, for publish_missing (STAGES = 1): HELP_BLOCK columns at a time.
    mean = tl.load(mean_ptr + row).to(tl.float32)
    rstd = tl.load(rstd_ptr + row).to(tl.float32)
    offsets = tl.arange(0, HELP_BLOCK)
    begin = chunk * BLOCK_N
    end = tl.minimum(begin + BLOCK_N, N)
    sum_gx = 0.0
    sum_g = 0.0
    for start in tl.range(begin, end, HELP_BLOCK, num_stages=1):
        cols = start + offsets
        mask = cols < end
        g = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_WEIGHT:
            g = g * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        sum_gx += tl.sum(g * tl.where(mask, (x - mean) * rstd, 0.0), axis=0)
        sum_g += tl.sum(g, axis=0)
    return sum_gx, sum_g


@triton.jit
def _team_wait(sync_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, row, N, S, stride_dy_row, stride_x_row, chunk,
               sum_gx, sum_g, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr, S_POW2: tl.constexpr,
               STAGES: tl.constexpr):
    # Publishes the program's own sums (sum_gx, sum_g of `chunk`), then every chunk's sums for the
    # row (0.0 past S) once all are published; a wait that lasts HELP_AFTER polls publishes the
    # missing chunks' sums itself (row_exchange's help path). STAGES > 1: one asm block
    # (helping_spin_asm), each warp on its own; STAGES = 1 (the interpreter): wait and
    # publish_missing, with Triton loops.
    dy_row = dy_ptr + row * stride_dy_row
    x_row = x_ptr + row * stride_x_row
    if STAGES > 1:
        DT: tl.constexpr = x_ptr.dtype.element_ty
        STAT: tl.constexpr = tl.float64 if DT == tl.float64 else tl.float32
        tl.static_assert(mean_ptr.dtype.element_ty == STAT and rstd_ptr.dtype.element_ty == STAT)
        slots, kmask = spin_slots(sync_ptr, row, S, S_POW2)
        if HAS_WEIGHT:
            w_address = w_ptr.to(tl.int64)
        else:
            w_address = tl.full((), 0, tl.int64)
        if DT == tl.float32:
            ASM: tl.constexpr = _PUBLISH_AND_WAIT_F32
        elif DT == tl.bfloat16:
            ASM: tl.constexpr = _PUBLISH_AND_WAIT_BF16
        elif DT == tl.float16:
            ASM: tl.constexpr = _PUBLISH_AND_WAIT_F16
        else:
            ASM: tl.constexpr = _PUBLISH_AND_WAIT_F64
        words = tl.inline_asm_elementwise(
            ASM, "=l,l,r,r,r,l,l,l,l,l,l,l,l,l,l,r,r",
            [slots, kmask.to(tl.int32), tl.arange(0, S_POW2), HELP_AFTER, (sync_ptr + 2 + row * S + chunk).to(tl.int64),
             pack_word(sum_gx, sum_g), dy_ptr.to(tl.int64), x_ptr.to(tl.int64), w_address, mean_ptr.to(tl.int64),
             rstd_ptr.to(tl.int64), row.to(tl.int64), tl.cast(stride_dy_row, tl.int64),
             tl.cast(stride_x_row, tl.int64), N, BLOCK_N], dtype=tl.int64, is_pure=False, pack=1)
        sums_gx, sums_g = unpack_words(words, kmask)
    else:
        publish(sync_ptr, row, chunk, S, sum_gx, sum_g, True)
        sums_gx, sums_g, kmask, complete = wait(sync_ptr, row, S, S_POW2, HELP_AFTER)
        if not complete:
            publish_missing(sync_ptr, row, S, _team_chunk_sums,
                            (dy_row, x_row, w_ptr, mean_ptr, rstd_ptr, row, N, BLOCK_N, HAS_WEIGHT))
            sums_gx, sums_g, kmask, complete = wait(sync_ptr, row, S, S_POW2, 0)
    return sums_gx, sums_g


@triton.jit
def _team_member(sync_ptr, w_ptr, M, N, S, rows_per_team, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr,
                 INDEX_64: tl.constexpr):
    # A team program's ticket, its columns and their weight (1.0 without one), and its team's rows
    # [row_begin, row_end).
    team, chunk = ticket(sync_ptr, S)
    if INDEX_64:
        team = team.to(tl.int64)
    cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = 1.0
    if HAS_WEIGHT:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    row_begin = team * rows_per_team
    row_end = tl.minimum(row_begin + rows_per_team, M)
    return team, chunk, cols, col_mask, w, row_begin, row_end


@triton.jit
def _store_team_sums(dw_partial_ptr, db_partial_ptr, team, N, cols, col_mask, dw_acc, db_acc,
                     COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr):
    # The program's columns of its team's row of the dw/db partial sums.
    if COMPUTE_DW:
        tl.store(dw_partial_ptr + team * N + cols, dw_acc.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)
    if COMPUTE_DB:
        tl.store(db_partial_ptr + team * N + cols, db_acc.to(db_partial_ptr.dtype.element_ty), mask=col_mask)


@triton.jit
def layer_norm_bwd_team_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr,
                               sync_ptr, M, N, S, rows_per_team, stride_dx_row, stride_dy_row,
                               stride_x_row, HAS_WEIGHT: tl.constexpr, COMPUTE_DX: tl.constexpr,
                               COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr, BLOCK_N: tl.constexpr,
                               S_POW2: tl.constexpr, STAGES: tl.constexpr, INDEX_64: tl.constexpr):
    team, chunk, cols, col_mask, w, row_begin, row_end = _team_member(sync_ptr, w_ptr, M, N, S, rows_per_team,
                                                                      HAS_WEIGHT, BLOCK_N, INDEX_64)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for row in tl.range(row_begin, row_end, num_stages=STAGES):
        dy, xhat, rstd = _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row, cols, col_mask, stride_dy_row, stride_x_row,
                                   "")
        if COMPUTE_DX:
            if HAS_WEIGHT:
                g = dy * w
            else:
                g = dy
            sums_gx, sums_g = _team_wait(sync_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, row, N, S, stride_dy_row,
                                         stride_x_row, chunk, tl.sum(g * xhat, axis=0), tl.sum(g, axis=0), HAS_WEIGHT,
                                         BLOCK_N, S_POW2, STAGES)
            c1 = tl.sum(sums_gx, axis=0) / N
            c2 = tl.sum(sums_g, axis=0) / N
            dx = (g - (xhat * c1 + c2)) * rstd
            tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
        if COMPUTE_DW:
            dw_acc += dy * xhat
        if COMPUTE_DB:
            db_acc += dy
    _store_team_sums(dw_partial_ptr, db_partial_ptr, team, N, cols, col_mask, dw_acc, db_acc, COMPUTE_DW, COMPUTE_DB)

@triton.jit
def _given_up_rows(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, modes_ptr, M, N, rows_per_team, G, cols,
                   col_mask, stride_dx_row, stride_dy_row, stride_x_row, HAS_WEIGHT: tl.constexpr,
                   ROW_BLOCK: tl.constexpr):
    # The rows of the teams that gave up, for the columns `cols`: dx, and their dw/db sums. Each row's
    # two sums over all its columns come first (every program computes them the same way, so all
    # column blocks of a row use the same ones).
    dw = tl.zeros(cols.shape, dtype=tl.float32)
    db = tl.zeros(cols.shape, dtype=tl.float32)
    w = 1.0
    if HAS_WEIGHT:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    offsets = tl.arange(0, ROW_BLOCK)
    for team in range(0, G):
        if tl.load(modes_ptr + team) == TEAM_GAVE_UP:
            row_begin = team * rows_per_team
            for row in range(row_begin, tl.minimum(row_begin + rows_per_team, M)):
                mean = tl.load(mean_ptr + row).to(tl.float32)
                rstd = tl.load(rstd_ptr + row).to(tl.float32)
                sum_gx = tl.zeros([ROW_BLOCK], dtype=tl.float32)
                sum_g = tl.zeros([ROW_BLOCK], dtype=tl.float32)
                for start in range(0, N, ROW_BLOCK):
                    c = start + offsets
                    mask = c < N
                    g = tl.load(dy_ptr + row * stride_dy_row + c, mask=mask, other=0.0).to(tl.float32)
                    if HAS_WEIGHT:
                        g = g * tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
                    x = tl.load(x_ptr + row * stride_x_row + c, mask=mask, other=0.0).to(tl.float32)
                    sum_gx += g * tl.where(mask, (x - mean) * rstd, 0.0)
                    sum_g += g
                c1 = tl.sum(sum_gx, axis=0) / N
                c2 = tl.sum(sum_g, axis=0) / N
                dy, xhat, _ = _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row, cols, col_mask, stride_dy_row,
                                        stride_x_row, "")
                dx = (dy * w - (xhat * c1 + c2)) * rstd
                tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
                dw += dy * xhat
                db += dy
    return dw, db


# After norm_team.norm_bwd_team_lag_kernel (layer_norm's), always: dw/db from the teams' partial rows (as
# norm_bwd_sums_finalize_kernel), and the rows of any team that gave up (normally none: one
# vector load of the mode words finds that out).
#     grid: (cdiv(N, BLOCK_N),). G: the teams; dw_partial_ptr/db_partial_ptr [G, N] fp32.
@triton.jit(do_not_specialize=["rows_per_team", "G"])
def layer_norm_bwd_team_lag_finalize_kernel(dw_ptr, db_ptr, dw_partial_ptr, db_partial_ptr, dx_ptr, dy_ptr, x_ptr,
                                            w_ptr, mean_ptr, rstd_ptr, sync_ptr, M, N, S, rows_per_team, G,
                                            stride_dx_row, stride_dy_row, stride_x_row, HAS_WEIGHT: tl.constexpr,
                                            COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr,
                                            BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    modes_ptr = sync_ptr + 2 + tl.cast(M, tl.int64) * S
    g_offs = tl.arange(0, BLOCK_G)
    dw_acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    gave_up = 0
    for g0 in range(0, G, BLOCK_G):
        g = g0 + g_offs
        exists = g < G
        ran = exists & (tl.load(modes_ptr + g, mask=exists, other=0) != TEAM_GAVE_UP)
        gave_up += tl.sum((exists & ~ran).to(tl.int32), axis=0)
        if INDEX_64:
            g = g.to(tl.int64)
        mask = ran[:, None] & col_mask[None, :]
        offs = g[:, None] * N + cols[None, :]
        if COMPUTE_DW:
            dw_acc += tl.load(dw_partial_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if COMPUTE_DB:
            db_acc += tl.load(db_partial_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dw = tl.sum(dw_acc, axis=0)
    db = tl.sum(db_acc, axis=0)
    if gave_up > 0:
        dw_rest, db_rest = _given_up_rows(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, modes_ptr, M, N,
                                          rows_per_team, G, cols, col_mask, stride_dx_row, stride_dy_row,
                                          stride_x_row, HAS_WEIGHT, HELP_BLOCK)
        dw += dw_rest
        db += db_rest
    if COMPUTE_DW:
        tl.store(dw_ptr + cols, dw.to(dw_ptr.dtype.element_ty), mask=col_mask)
    if COMPUTE_DB:
        tl.store(db_ptr + cols, db.to(db_ptr.dtype.element_ty), mask=col_mask)
