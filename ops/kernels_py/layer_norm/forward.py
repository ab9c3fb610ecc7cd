"""Layer normalisation over the last dimension, forward and backward, for tjit.

Plain ``@triton.jit`` kernels launched from C++: the caller picks every ``tl.constexpr``. This file
imports nothing but triton.

Conventions
-----------
* The wrapper passes x, y, dy, dx as 2-D views [M rows, N columns] (N = prod(normalized_shape)),
  columns contiguous, each with its own row stride (elements). weight/bias/dw/db are contiguous [N].
* mean/rstd are contiguous [M] in the accumulator dtype: fp32 for fp16/bf16/fp32 x, fp64 for fp64 x.
  All arithmetic is in that dtype; stores cast to the destination pointer's element type.
* Absent weight/bias/dw/db arrive as None (a constexpr); every use is behind HAS_*/COMPUTE_*.
* ``eps`` is annotated ``tl.float64``: launches (Python Triton and tjit's C++ runtime alike) pass it
  as a double rather than the fp32 an unannotated float becomes, and the kernel converts it once to
  the accumulator dtype. fp64 x thus uses eps unrounded, as aten does (fp32(1e-5) moved rstd by up
  to 1.3e-8 relative in rows with var << eps); fp32/fp16/bf16 x get fp32(eps), as before.
  ``tl.full`` rather than ``eps.to``: Triton's interpreter passes the kernel a Python float.
* ``INDEX_64``: True when any tensor has >= 2**31 elements (or row * stride can reach 2**31); row
  indices are then int64 before they meet a stride.
* ``next_pow2`` = ``triton.next_power_of_2``; num_warps advice is a starting point.

Choosing BLOCK_N / SINGLE_PASS / num_warps for the row kernels (fwd and bwd_dx)
-------------------------------------------------------------------------------
    bwd_dx, and fwd of fp64 rows:
    if N <= 16384: BLOCK_N = next_pow2(N); SINGLE_PASS = True;  num_warps = min(16, max(1, BLOCK_N // 512))
    else:          BLOCK_N = 4096;         SINGLE_PASS = False; num_warps = 16
    fwd of fp32/fp16/bf16 rows, N <= 32768: BLOCK_N = next_pow2(N); SINGLE_PASS = True; BLOCK_TAIL = 0;
        2-byte x: num_warps = 4 (BLOCK_N <= 2048, or 4096 with N < 4096), 8 (<= 16384), 16 (32768);
                  except rows of 16385..20480 columns: BLOCK_N = 16384, BLOCK_TAIL = next_pow2(N - 16384),
                  num_warps = 4 (measurements in layer_norm.cpp)
        4-byte x: num_warps = 8 (BLOCK_N <= 2048), 16 (<= 8192), 32 (16384, 32768)
    fwd of 2-byte rows of 4097..5120 and 8193..12288 columns: layer_norm_fwd_persistent_kernel instead,
                   BLOCK_N = P = 4096 / 8192, BLOCK_TAIL = next_pow2(N - P), STAGES = 2, num_warps = 4,
                   maxnreg = 168 for P = 8192; grid = min(M, resident programs per SM x SMs)
    fwd, N > 32768 on CUDA, not fp64, cdiv(N, 4096) <= 128: layer_norm_fwd_long_kernel instead,
                   @triton.autotune over looped and split configs (above the kernel), keyed on N and
                   the row-count bucket.
SINGLE_PASS=True requires N <= BLOCK_N + BLOCK_TAIL (the row lives in registers); SINGLE_PASS=False
works for any N >= 1 (BLOCK_TAIL = 0). Forward, H200, 4096 rows, GB/s without / with mean and rstd stored (2026-11-23):
    fp32  2048: 8 warps 3631 / 3591 (4 warps 3453 / 3499)     bf16  2048: 4 warps 2996 / 2873 (8: 2781 / 2720)
    fp32  4096: 16 warps 3822 / 3781 (8 warps 3687 / 3700)    bf16  4096: 8 warps 3387 / 3335 (4: 3328 / 3293)
    fp32 16384: 32 warps 4017 / 3528 (16 warps 3511 / 3540)   bf16 16384: 8 warps 3609 / 3666 (16: 3601 / 2421)
    fp32 32768: 32 warps 3751 / 3609 (looped 3116)            bf16 32768: 16 warps 3217 / 3328 (looped 2818)
    N > 32768, the autotuned kernel (benchmark suite, inference): fp32 3.17 / 3.06 / 2.66 TB/s at
    65536 / 131072 / 262144 columns; bf16 2.85 / 2.70 / 2.63, up from 2.56 / 2.49 / 2.49 before the
    looped row below counted steps instead of dividing per element (FlagGems: 2.80 / 2.68 / 2.67).
    Loading weight and bias before the row's reductions, as Liger-Kernel does, gained 1-3% for
    fp32 rows of 4096-8192 columns but lost 1-30% at every other length measured, so they load after.

Short rows forward (ops/csrc/ops/layer_norm.cpp), N <= 1024: layer_norm_fwd_rows_kernel with
    BLOCK_N = next_pow2(N), BLOCK_M = max(4, T // BLOCK_N) (T = 2048 for 2-byte x, else 1024),
    num_warps = 8 if BLOCK_N <= 128 else 4.  H200, 4096 rows (one row per program in brackets):
    fp32 128: 2.0 TB/s [1.1]; bf16 128: 1.1 [0.56]; fp32 1024: 3.1 [2.7]; bf16 1024: 2.5 [2.2].

Kernels
-------
layer_norm_fwd_rows_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row,
                           stride_y_row, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_M, BLOCK_N, INDEX_64)
    layer_norm_fwd_kernel's single pass for BLOCK_M rows per program, N <= BLOCK_N.
    grid: (cdiv(M, BLOCK_M),).

layer_norm_fwd_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row, stride_y_row,
                      eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, SINGLE_PASS, INDEX_64, BLOCK_TAIL)
    y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps), biased variance; also stores
    mean[m], rstd[m] unless mean_ptr / rstd_ptr are None (inference needs only y).  grid: (M,).
    BLOCK_TAIL (SINGLE_PASS only; 0: none): columns [BLOCK_N, BLOCK_N + BLOCK_TAIL) in a second block,
    so a row may be N <= BLOCK_N + BLOCK_TAIL with BLOCK_N < N (no lanes padding it to 2 * BLOCK_N).
    Variance: SINGLE_PASS sums (x - mean)^2 over the row held in registers (exact two-pass);
    the looped path runs Welford per lane and merges lanes with Chan's formula, so the row is
    read twice (statistics, then normalise), never E[x^2] - E[x]^2.

layer_norm_fwd_persistent_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row,
                                 stride_y_row, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, BLOCK_TAIL, STAGES, INDEX_64)
    layer_norm_fwd_kernel's single pass (N <= BLOCK_N + BLOCK_TAIL) for rows pid, pid + P, ... (P
    programs), the row loop software-pipelined STAGES deep. grid: (P,), P = the programs the GPU holds
    at once (see the kernel's comment).

layer_norm_bwd_dx_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, M, N, stride_dx_row,
                         stride_dy_row, stride_x_row, HAS_WEIGHT, BLOCK_N, SINGLE_PASS, INDEX_64)
    xhat = (x - mean) * rstd, g = dy * w (or dy),
    dx = rstd * (g - mean_n(g) - xhat * mean_n(g * xhat)).   grid: (M,).
    The looped path reads dy, x (and w) twice.

layer_norm_bwd_dwdb_kernel(dw_ptr, db_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, M, N, stride_dy_row,
                           stride_x_row, COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64)
    dw[n] = sum_m dy[m, n] * xhat[m, n], db[n] = sum_m dy[m, n], written in dw/db's dtype.
    Each program owns BLOCK_N columns and walks all M rows in [BLOCK_M, BLOCK_N] tiles.
    grid: (cdiv(N, BLOCK_N),).  When COMPUTE_DW is False, x/mean/rstd are not read (may be None).

layer_norm_bwd_dwdb_partial_kernel(dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr,
                                   M, N, stride_dy_row, stride_x_row, rows_per_group,
                                   COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64)
    Same sums restricted to rows [g*rows_per_group, min((g+1)*rows_per_group, M)) for group g,
    stored to partial[g, n] (contiguous [G, N], accumulator dtype), G = cdiv(M, rows_per_group).
    grid: (cdiv(N, BLOCK_N), G)   (G <= 65535).

layer_norm_bwd_dwdb_finalize_kernel(dw_ptr, db_ptr, dw_partial_ptr, db_partial_ptr, G, N,
                                    COMPUTE_DW, COMPUTE_DB, BLOCK_G, BLOCK_N, INDEX_64)
    dw[n] = sum_g dw_partial[g, n] (and db likewise), both outputs in one launch.
    grid: (cdiv(N, BLOCK_N),); BLOCK_N = clamp(next_pow2(cdiv(N, 256)), 16, 128) (~256 programs),
    BLOCK_G = min(next_pow2(G), max(32, 2048 // BLOCK_N)), num_warps 4. (reduce.py's sum_mid_kernel with M=1, R=G, K=N, stride_r=N does the same for one
    buffer per launch.)

layer_norm_bwd_fused_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr,
                            rstd_ptr, M, N, stride_dx_row, stride_dy_row, stride_x_row, rows_per_program,
                            HAS_WEIGHT, COMPUTE_DX, COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64, BLOCK_TAIL)
    The whole backward in one pass over dy and x, for N <= BLOCK_N + BLOCK_TAIL (BLOCK_TAIL: columns
    past BLOCK_N in a [BLOCK_M, BLOCK_TAIL] tile beside each [BLOCK_M, BLOCK_N] one; 0: none): program p takes rows
    [p * rows_per_program, min((p + 1) * rows_per_program, M)) in [BLOCK_M, BLOCK_N] tiles, writes
    their dx and stores its sums of dy * xhat and dy to dw_partial[p, :] / db_partial[p, :]
    (contiguous [G, N], accumulator dtype; or dw/db themselves when G == 1). Any COMPUTE_* may be
    False (its pointer may then be None). grid: (G,), G = cdiv(M, rows_per_program).
    Then layer_norm_bwd_dwdb_finalize_kernel over the G partial rows when G > 1.

Fused backward plan (N <= 8192; ops/csrc/ops/layer_norm.cpp)
------------------------------------------------------------
    BLOCK_N = next_pow2(N); tile T (elements per program step) and programs per SM:
      2-byte x: T = 2048 (BLOCK_N <= 1024), 4096 (2048), 8192 (4096, 8192); 2 per SM for 128 < BLOCK_N <= 2048
      4-byte x: T = 2048 (BLOCK_N <= 512), 4096 (1024, 2048), 8192 (4096, 8192); 2 per SM for 128 < BLOCK_N <= 512
      8-byte x: the 4-byte T halved
    T = max(T, BLOCK_N); BLOCK_M = T // BLOCK_N; num_warps = clamp(T // 512, 4, 16); BLOCK_TAIL = 0
    except 4608 < N <= 5120, not fp64: BLOCK_N = 4096, BLOCK_TAIL = 1024, BLOCK_M = 1, 2-byte x: 4 warps,
      2 per SM; 4-byte: 16 warps, 1 per SM (H200: +15-20% over the padded 8192-column tile)
    G = min(per_sm * SMs, cdiv(M, BLOCK_M)); rows_per_program = cdiv(cdiv(M, G), BLOCK_M) * BLOCK_M
    H200, 4096 rows, bytes = 3 * M * N * e (dx kernel + dw/db plan below in brackets): fp32 1024:
    3.0 TB/s [2.3]; fp32 8192: 3.6 [2.3]; bf16 8192: 3.3 [2.0]. At 16384 columns the fused tile
    spills (2.0 TB/s vs 2.3), so longer rows keep the two kernels below.

Long-row backward on CUDA (8192 < N <= 32 * 4096, not fp64; ops/csrc/ops/layer_norm.cpp)
-----------------------------------------------------------------------------------------
    fp16/bf16 with dx wanted, N <= 32 * 2048: layer_norm_bwd_team_lag_kernel (above it: why), BLOCK_N =
    2048, S = cdiv(N, 2048) programs a team, num_warps = 4, maxnreg = 128, STAGES = 2; teams =
    max(1, P * SMs // S) with P the programs an SM holds (TritonJitFunction::resident_programs_per_sm;
    4 on an H100), rows split evenly.
    otherwise: layer_norm_bwd_team_kernel (above it: the protocol), BLOCK_N = 4096, S = cdiv(N, 4096)
    programs a team, num_warps = 4, 2 programs per SM: teams = max(1, 2 * SMs // S), rows split evenly;
    STAGES = 3.
    Then layer_norm_bwd_dwdb_finalize_kernel over the teams' partials.
    Everything else past 8192 columns (CPU, fp64, longer rows) takes the dx kernel and the plan below.

Weight/bias gradient plan (M rows, N columns > 8192, when the team kernel does not run)
--------------------------------------------------------------------------------------
    BLOCK_N = min(next_pow2(N), 128); BLOCK_M = 32 (16 for fp64); num_warps = 4
    col_blocks = cdiv(N, BLOCK_N)
    G = min(cdiv(4 * SMs, col_blocks), cdiv(M, BLOCK_M), 65535)   # aim for ~4 programs per SM
    rows_per_group = cdiv(cdiv(M, G), BLOCK_M) * BLOCK_M; G = cdiv(M, rows_per_group)
    G == 1 -> layer_norm_bwd_dwdb_kernel straight into dw/db (enough column blocks already, or few rows)
    G >  1 -> layer_norm_bwd_dwdb_partial_kernel into fp32/fp64 [G, N] buffers, then
              layer_norm_bwd_dwdb_finalize_kernel.
  e.g. H100 (132 SMs), M = 4M rows: N = 128 -> G = 528; N = 16384 -> 128 column blocks, G = 5.
  Measured on an H200, fp32, whole backward (dx + this plan) from Python, bytes = 3 * M * N * 4
  (2026-11-22; aten in brackets): 2**20 x 128: 1.75 TB/s [1.45] (G forced to 1: 0.06 TB/s);
  2**18 x 1024: 2.6 TB/s [2.3]; 2**14 x 16384: 1.74 TB/s [1.81].
"""

import triton
import triton.language as tl


@triton.jit
def layer_norm_fwd_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row, stride_y_row,
                          eps: tl.float64, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr,
                          SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    eps = tl.full((), eps, ACC)  # an fp64 eps would otherwise promote fp32 rows' var + eps to fp64

    x_row = x_ptr + row * stride_x_row
    y_row = y_ptr + row * stride_y_row

    if SINGLE_PASS:
        # Weight and bias load with the row when a thread's share of them is small: one block of up
        # to 8192 columns (8-32 a thread with plan_forward_rows' warps), not the tail blocks' 4-warp
        # programs (measurements in _layer_norm_fwd_row).
        PRELOAD: tl.constexpr = (BLOCK_TAIL == 0) and (BLOCK_N <= 8192)
        mean, rstd = _layer_norm_fwd_row(y_row, x_row, w_ptr, b_ptr, N, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, BLOCK_TAIL,
                                         ACC, PRELOAD)
    else:
        mean, rstd = _layer_norm_fwd_row_looped(y_row, x_row, w_ptr, b_ptr, N, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N,
                                                ACC)

    if mean_ptr is not None:
        tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    if rstd_ptr is not None:
        tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


# Persistent forward for 2-byte rows of hidden sizes just past 4096 and 8192 (4097..5120,
# 8193..12288 columns): `grid` programs, each taking rows pid, pid + grid, ... Triton's pipeliner
# copies the next row (STAGES - 1 rows ahead) into shared memory while this one is reduced and
# stored, which a program a row cannot do. The grid must be the programs the GPU holds at once
# (TritonJitFunction::resident_programs_per_sm x SMs): more leave a second wave, fewer are placed
# unevenly (H200, bf16 5120, 6 resident: 3 a SM 3.07 TB/s, 6 a SM 3.84). Any dtype; fp64 rows
# accumulate in fp64, the others in fp32.
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
    # registers through the reductions. H100, one program a row, TB/s (PRELOAD; not; Liger-Kernel,
    # which loads them first): fp32 16384 x 8192 3.014; 3.002; 3.012, 65536 x 2048 3.002; 2.990;
    # 3.002, 13120 x 5120 2.91; 2.87, bf16 32768 x 4096 2.986; 2.966; 2.984, 16384 x 8192 2.99;
    # 2.96, 18752 x 7168 2.94; 2.96. Not where a thread holds more: bf16 8192 x 16384 (8 warps, 64
    # columns a thread) 2.295; 2.946; 2.310, the 4-warp tail blocks (5120: 2.57; 2.95, 12288: 2.34;
    # 2.85), the persistent kernel; nor fp32 16384-column blocks (32 warps), which gained at 5504 x
    # 12288 (2.86; 2.81) but lost in the LLM benchmark's 10944 x 12288 (2.92; 2.99).
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
                               BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    # One row of any length in BLOCK_N-column steps, read twice; returns (mean, rstd).
    cols = tl.arange(0, BLOCK_N)
    steps = tl.cdiv(N, BLOCK_N)
    # Welford per lane: lane j sees columns j, j + BLOCK_N, ... Every lane has the same count until
    # the last, partial step, so the full steps load unmasked and update with one scalar
    # reciprocal rather than a division per element (bf16 65536 columns: 2.6 -> 3.0 TB/s).
    mean_vec = tl.zeros([BLOCK_N], dtype=ACC)
    m2_vec = tl.zeros([BLOCK_N], dtype=ACC)
    for step in range(0, steps - 1):
        x = tl.load(x_row + step * BLOCK_N + cols).to(ACC)
        delta = x - mean_vec
        mean_vec += delta * (1.0 / tl.full((), step + 1, ACC))
        m2_vec += delta * (x - mean_vec)
    c = (steps - 1) * BLOCK_N + cols
    mask = c < N
    x = tl.load(x_row + c, mask=mask, other=0.0).to(ACC)
    delta = x - mean_vec
    mean_vec += tl.where(mask, delta * (1.0 / tl.full((), steps, ACC)), 0.0)
    m2_vec += tl.where(mask, delta * (x - mean_vec), 0.0)
    cnt_vec = (steps - 1 + mask.to(tl.int32)).to(ACC)
    # Merge the lanes (Chan et al.): M2 = sum(M2_j + n_j * (mean_j - mean)^2).
    mean = tl.sum(cnt_vec * mean_vec, axis=0) / N
    d = mean_vec - mean
    var = tl.sum(m2_vec + cnt_vec * d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    # Normalise last step first: the end of the row, read last, is the part still in L2.
    for i in range(0, steps):
        c = (steps - 1 - i) * BLOCK_N + cols
        mask = c < N
        x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy="evict_first").to(ACC)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + c, mask=mask, other=0.0).to(ACC)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + c, mask=mask, other=0.0).to(ACC)
        tl.store(y_row + c, y.to(y_row.dtype.element_ty), mask=mask)
    return mean, rstd


# Long rows on CUDA, under @triton.autotune: each config is either one program per row, looped as
# above (SPLIT=False, grid (M,)), or S = cdiv(N, BLOCK_N) programs per row (SPLIT=True, grid
# (M * S,)), each holding its BLOCK_N-column chunk in registers, so the row is read once. Split
# programs publish their chunk's (mean, M2) and wait for the row's other chunks through `sync`,
# as softmax.py's split kernels do (its comment has the protocol): program p takes chunk p % S of
# row p // S, and one that has polled HELP_AFTER times reads the missing chunks itself, publishes
# their words (the first word in a slot stays) and reads its own chunk again. Then the chunks
# merge with Chan's formula in chunk order (every program of a row gets the same mean and rstd)
# and each program normalises its chunk.
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


# The exchange of the kernels whose programs share rows (twins of softmax.py's, whose comment has
# the protocol: each kernel file imports only triton). sync: int64 [2 + M * S], zeroed; sync[0] is
# the team kernels' ticket, sync[2 + row * S + chunk] the chunk's two fp32 statistics for the row
# in one word, 0 until written.
# Polls before a waiting long-row program reads a missing chunk itself, and the columns it takes at
# a time then.
HELP_AFTER = tl.constexpr(4096)
HELP_BLOCK = tl.constexpr(512)


@triton.jit
def _ticket(sync_ptr, S):
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    return (ticket // S).to(tl.int32), (ticket % S).to(tl.int32)


@triton.jit
def _publish(sync_ptr, row, chunk, S, hi, lo, FIRST: tl.constexpr = False):
    # +0.0 in the high half goes as -0.0 (the same in every sum), so no published word is 0.
    # FIRST: only into an empty slot (a compare-and-swap from 0), for slots two programs may fill.
    h = hi.to(tl.int32, bitcast=True)
    h = tl.where(h == 0, -2147483648, h)
    word = (h.to(tl.int64) << 32) | (lo.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF)
    if FIRST:
        tl.atomic_cas(sync_ptr + 2 + row * S + chunk, tl.full((), 0, tl.int64), word, sem="relaxed")
    else:
        tl.atomic_xchg(sync_ptr + 2 + row * S + chunk, word, sem="relaxed")


@triton.jit
def _unpack_words(words, kmask):
    # The published words' two fp32 halves; lanes past the row's chunks (kmask False) give 0.0.
    words = tl.where(kmask, words, 0)
    hi = (words >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    lo = (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return hi, lo


@triton.jit
def _poll_words(sync_ptr, row, S, S_POW2: tl.constexpr, POLLS: tl.constexpr):
    # The row's words once none is 0, or after POLLS polls (0: no limit); 1 past S.
    k = tl.arange(0, S_POW2)
    kmask = k < S
    slots = sync_ptr + 2 + row * S + k
    words = tl.where(kmask, tl.atomic_add(slots, 0, mask=kmask, sem="relaxed"), 1)
    polls = 1
    while (tl.sum((words == 0).to(tl.int32), axis=0) > 0) & (polls != POLLS):
        words = tl.where(kmask, tl.atomic_add(slots, 0, mask=kmask, sem="relaxed"), 1)
        polls += 1
    return words, kmask


@triton.jit
def _wait(sync_ptr, row, S, S_POW2: tl.constexpr):
    words, kmask = _poll_words(sync_ptr, row, S, S_POW2, 0)
    hi, lo = _unpack_words(words, kmask)
    return hi, lo, kmask


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
def _help_long_row(sync_ptr, x_row, row, S, N, BLOCK_N: tl.constexpr):
    # Publishes (mean, M2) of every chunk of the row still missing, read HELP_BLOCK columns at a
    # time (equal to its own program's up to rounding; the first word in a slot stays).
    offsets = tl.arange(0, HELP_BLOCK)
    for c in tl.range(0, S, num_stages=1):
        if tl.atomic_add(sync_ptr + 2 + row * S + c, 0, sem="relaxed") == 0:
            begin = c * BLOCK_N
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
            _publish(sync_ptr, row, c, S, chunk_mean, m2, True)


@triton.autotune(configs=_long_row_configs(), key=["M_BUCKET", "N"], reset_to_zero=["sync_ptr"])
@triton.jit(do_not_specialize=["M_BUCKET"])
def layer_norm_fwd_long_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, sync_ptr, M_BUCKET, N,
                               stride_x_row, stride_y_row, eps: tl.float64, HAS_WEIGHT: tl.constexpr,
                               HAS_BIAS: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_N: tl.constexpr,
                               SPLIT: tl.constexpr):
    eps = tl.full((), eps, tl.float32)
    if SPLIT:
        S = tl.cdiv(N, BLOCK_N)
        pid = tl.program_id(0)
        row = pid // S
        chunk = pid % S
        if INDEX_64:
            row = row.to(tl.int64)
        x_row = x_ptr + row * stride_x_row
        cols, mask, x, chunk_mean, chunk_m2 = _long_row_chunk(x_row, chunk, N, BLOCK_N)
        _publish(sync_ptr, row, chunk, S, chunk_mean, chunk_m2, True)
        words, kmask = _poll_words(sync_ptr, row, S, LONG_ROW_MAX_CHUNKS, HELP_AFTER)
        if tl.sum((words == 0).to(tl.int32), axis=0) > 0:
            # Rare: a chunk's program may not have started. Publish what is missing, then read this
            # chunk again (x is not held across the help, which would cost registers on every path).
            _help_long_row(sync_ptr, x_row, row, S, N, BLOCK_N)
            words, kmask = _poll_words(sync_ptr, row, S, LONG_ROW_MAX_CHUNKS, 0)
            cols, mask, x, chunk_mean, chunk_m2 = _long_row_chunk(x_row, chunk, N, BLOCK_N)
        means, m2s = _unpack_words(words, kmask)
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
                                                N, eps, HAS_WEIGHT, HAS_BIAS, BLOCK_N, tl.float32)
        if mean_ptr is not None:
            tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
        if rstd_ptr is not None:
            tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))


@triton.jit
def layer_norm_bwd_dx_kernel(dx_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, M, N, stride_dx_row, stride_dy_row,
                             stride_x_row, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr,
                             SINGLE_PASS: tl.constexpr, INDEX_64: tl.constexpr):
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32

    dx_row = dx_ptr + row * stride_dx_row
    dy_row = dy_ptr + row * stride_dy_row
    x_row = x_ptr + row * stride_x_row
    mean = tl.load(mean_ptr + row).to(ACC)
    rstd = tl.load(rstd_ptr + row).to(ACC)
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_PASS:
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(ACC)
        g = tl.load(dy_row + cols, mask=mask, other=0.0).to(ACC)
        if HAS_WEIGHT:
            g = g * tl.load(w_ptr + cols, mask=mask, other=0.0).to(ACC)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        c1 = tl.sum(g * xhat, axis=0) / N
        c2 = tl.sum(g, axis=0) / N
        dx = (g - (xhat * c1 + c2)) * rstd
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
            acc_gx += g * ((x - mean) * rstd)
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
            dx = (g - ((x - mean) * rstd * c1 + c2)) * rstd
            tl.store(dx_row + c, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dwdb_column_sums(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row_begin, row_end, cols, N, stride_dy_row, stride_x_row,
                      COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
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
            mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0).to(ACC)
            rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0).to(ACC)
            # dy is 0 outside the mask, so padding contributes nothing.
            dw_acc += dy * ((x - mean[:, None]) * rstd[:, None])
    return tl.sum(dw_acc, axis=0), tl.sum(db_acc, axis=0)


@triton.jit
def layer_norm_bwd_dwdb_kernel(dw_ptr, db_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, M, N, stride_dy_row, stride_x_row,
                               COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr,
                               BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw, db = _dwdb_column_sums(dy_ptr, x_ptr, mean_ptr, rstd_ptr, 0, M, cols, N, stride_dy_row, stride_x_row,
                               COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64)
    col_mask = cols < N
    if COMPUTE_DW:
        tl.store(dw_ptr + cols, dw.to(dw_ptr.dtype.element_ty), mask=col_mask)
    if COMPUTE_DB:
        tl.store(db_ptr + cols, db.to(db_ptr.dtype.element_ty), mask=col_mask)


@triton.jit
def layer_norm_bwd_dwdb_partial_kernel(dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, mean_ptr, rstd_ptr, M, N,
                                       stride_dy_row, stride_x_row, rows_per_group, COMPUTE_DW: tl.constexpr,
                                       COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                       INDEX_64: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    group = tl.program_id(1)
    if INDEX_64:
        group = group.to(tl.int64)
    row_begin = group * rows_per_group
    row_end = tl.minimum(row_begin + rows_per_group, M)
    dw, db = _dwdb_column_sums(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row_begin, row_end, cols, N, stride_dy_row,
                               stride_x_row, COMPUTE_DW, COMPUTE_DB, BLOCK_M, BLOCK_N, INDEX_64)
    col_mask = cols < N
    out_offs = group * N + cols
    if COMPUTE_DW:
        tl.store(dw_partial_ptr + out_offs, dw.to(dw_partial_ptr.dtype.element_ty), mask=col_mask)
    if COMPUTE_DB:
        tl.store(db_partial_ptr + out_offs, db.to(db_partial_ptr.dtype.element_ty), mask=col_mask)


@triton.jit
def layer_norm_bwd_dwdb_finalize_kernel(dw_ptr, db_ptr, dw_partial_ptr, db_partial_ptr, G, N,
                                        COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr, BLOCK_G: tl.constexpr,
                                        BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
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


@triton.jit
def layer_norm_fwd_rows_kernel(y_ptr, x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x_row, stride_y_row,
                               eps: tl.float64, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr):
    # layer_norm_fwd_kernel's single pass for BLOCK_M short rows per program (N <= BLOCK_N).
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    eps = tl.full((), eps, ACC)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask=mask, other=0.0).to(ACC)
    mean = tl.sum(x, axis=1) / N
    diff = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / N + eps)
    y = diff * rstd[:, None]
    if HAS_WEIGHT:
        y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(ACC)[None, :]
    if HAS_BIAS:
        y = y + tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(ACC)[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y_row + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if mean_ptr is not None:
        tl.store(mean_ptr + rows, mean.to(mean_ptr.dtype.element_ty), mask=row_mask)
    if rstd_ptr is not None:
        tl.store(rstd_ptr + rows, rstd.to(rstd_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def _bwd_tile_pointers(dy_ptr, x_ptr, rows, row_end, cols, col_mask, stride_dy_row, stride_x_row):
    mask = (rows < row_end)[:, None] & col_mask[None, :]
    return dy_ptr + rows[:, None] * stride_dy_row + cols[None, :], x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask


@triton.jit
def layer_norm_bwd_fused_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, M,
                                N, stride_dx_row, stride_dy_row, stride_x_row, rows_per_program,
                                HAS_WEIGHT: tl.constexpr, COMPUTE_DX: tl.constexpr, COMPUTE_DW: tl.constexpr,
                                COMPUTE_DB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                INDEX_64: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    # Program p walks rows [p * rows_per_program, ...) in [BLOCK_M, BLOCK_N] tiles (N <= BLOCK_N +
    # BLOCK_TAIL; with BLOCK_TAIL > 0 a [BLOCK_M, BLOCK_TAIL] tile beside each takes the columns
    # past BLOCK_N, as in the forward): dx of each row, and its rows' dw/db sums kept in registers,
    # stored once to partial[p, :]. dy and x are read once for all three gradients. The next
    # tile's loads are issued before this tile's reductions, so one program per SM keeps memory
    # busy (H200: +10-30% for bf16).
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    NEEDS_X: tl.constexpr = COMPUTE_DX or COMPUTE_DW
    row_begin = pid * rows_per_program
    row_end = tl.minimum(row_begin + rows_per_program, M)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    if COMPUTE_DX and HAS_WEIGHT:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(ACC)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    first_rows = row_begin + tl.arange(0, BLOCK_M)
    dy_tile, x_tile, mask = _bwd_tile_pointers(dy_ptr, x_ptr, first_rows, row_end, cols, col_mask, stride_dy_row,
                                               stride_x_row)
    dy_next = tl.load(dy_tile, mask=mask, other=0.0)
    if NEEDS_X:
        x_next = tl.load(x_tile, mask=mask, other=0.0)
    if BLOCK_TAIL > 0:
        tail_cols = BLOCK_N + tl.arange(0, BLOCK_TAIL)
        tail_col_mask = tail_cols < N
        if COMPUTE_DX and HAS_WEIGHT:
            w_tail = tl.load(w_ptr + tail_cols, mask=tail_col_mask, other=0.0).to(ACC)
        dw_acc_tail = tl.zeros([BLOCK_M, BLOCK_TAIL], dtype=ACC)
        db_acc_tail = tl.zeros([BLOCK_M, BLOCK_TAIL], dtype=ACC)
        dy_tile, x_tile, first_tail_mask = _bwd_tile_pointers(dy_ptr, x_ptr, first_rows, row_end, tail_cols,
                                                              tail_col_mask, stride_dy_row, stride_x_row)
        dy_tail_next = tl.load(dy_tile, mask=first_tail_mask, other=0.0)
        if NEEDS_X:
            x_tail_next = tl.load(x_tile, mask=first_tail_mask, other=0.0)
    for r0 in range(row_begin, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        row_mask = rows < row_end
        mask = row_mask[:, None] & col_mask[None, :]
        dy = dy_next.to(ACC)
        dy_tile, x_tile, next_mask = _bwd_tile_pointers(dy_ptr, x_ptr, rows + BLOCK_M, row_end, cols, col_mask,
                                                        stride_dy_row, stride_x_row)
        dy_next = tl.load(dy_tile, mask=next_mask, other=0.0)
        if NEEDS_X:
            x = x_next.to(ACC)
            x_next = tl.load(x_tile, mask=next_mask, other=0.0)
        if BLOCK_TAIL > 0:
            tail_mask = row_mask[:, None] & tail_col_mask[None, :]
            dy_tail = dy_tail_next.to(ACC)
            dy_tile, x_tile, next_tail_mask = _bwd_tile_pointers(dy_ptr, x_ptr, rows + BLOCK_M, row_end, tail_cols,
                                                                 tail_col_mask, stride_dy_row, stride_x_row)
            dy_tail_next = tl.load(dy_tile, mask=next_tail_mask, other=0.0)
            if NEEDS_X:
                x_tail = x_tail_next.to(ACC)
                x_tail_next = tl.load(x_tile, mask=next_tail_mask, other=0.0)
        if NEEDS_X:
            mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0).to(ACC)
            rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0).to(ACC)
            xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
            if BLOCK_TAIL > 0:
                xhat_tail = tl.where(tail_mask, (x_tail - mean[:, None]) * rstd[:, None], 0.0)
        if COMPUTE_DX:
            if HAS_WEIGHT:
                g = dy * w[None, :]
            else:
                g = dy
            sum_gx = tl.sum(g * xhat, axis=1)
            sum_g = tl.sum(g, axis=1)
            if BLOCK_TAIL > 0:
                if HAS_WEIGHT:
                    g_tail = dy_tail * w_tail[None, :]
                else:
                    g_tail = dy_tail
                sum_gx += tl.sum(g_tail * xhat_tail, axis=1)
                sum_g += tl.sum(g_tail, axis=1)
            c1 = sum_gx / N
            c2 = sum_g / N
            dx = (g - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
            tl.store(dx_ptr + rows[:, None] * stride_dx_row + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
            if BLOCK_TAIL > 0:
                dx_tail = (g_tail - (xhat_tail * c1[:, None] + c2[:, None])) * rstd[:, None]
                tl.store(dx_ptr + rows[:, None] * stride_dx_row + tail_cols[None, :],
                         dx_tail.to(dx_ptr.dtype.element_ty), mask=tail_mask)
        if COMPUTE_DW:
            dw_acc += dy * xhat
            if BLOCK_TAIL > 0:
                dw_acc_tail += dy_tail * xhat_tail
        if COMPUTE_DB:
            db_acc += dy
            if BLOCK_TAIL > 0:
                db_acc_tail += dy_tail
    if COMPUTE_DW:
        tl.store(dw_partial_ptr + pid * N + cols, tl.sum(dw_acc, axis=0).to(dw_partial_ptr.dtype.element_ty),
                 mask=col_mask)
        if BLOCK_TAIL > 0:
            tl.store(dw_partial_ptr + pid * N + tail_cols,
                     tl.sum(dw_acc_tail, axis=0).to(dw_partial_ptr.dtype.element_ty), mask=tail_col_mask)
    if COMPUTE_DB:
        tl.store(db_partial_ptr + pid * N + cols, tl.sum(db_acc, axis=0).to(db_partial_ptr.dtype.element_ty),
                 mask=col_mask)
        if BLOCK_TAIL > 0:
            tl.store(db_partial_ptr + pid * N + tail_cols,
                     tl.sum(db_acc_tail, axis=0).to(db_partial_ptr.dtype.element_ty), mask=tail_col_mask)


# Long rows backward on CUDA (N > 8192, where the fused kernel's row and its dw/db sums no longer
# fit one program's registers): a team of S = cdiv(N, BLOCK_N) programs shares rows
# [team * rows_per_team, ...), program `chunk` of the team owning columns [chunk * BLOCK_N, ...).
# Per row each program publishes its chunk's sums of g * xhat and g (g = dy * w) as one word and
# waits until the row's S chunks have (softmax.py's exchange); dx needs both sums over the whole
# row. Each program keeps its columns' dw/db sums in registers
# across the team's rows, stored once to dw_partial[team, :] / db_partial[team, :] (the finalize
# kernel adds the teams up, or dw/db themselves when there is one team). dy and x are read once.
# STAGES > 1: Triton's pipeliner copies the next rows' dy and x into shared memory (STAGES - 1 rows
# ahead) while this row waits on its team; the wait then spins in PTX (_wait_spin), since a loop
# in the row loop's body keeps the pipeliner from taking it. STAGES = 1 (the interpreter, which
# runs no PTX): _wait's loop, no copies ahead.
#     sync      int64 [2 + M * S], ZEROED before each launch: sync[0] hands out tickets (a team is S
#               consecutive tickets, so the team that waits on programs not yet started is the
#               last one handed out, as in softmax.py's split kernels: room for S programs
#               suffices), then the rows' words
#     grid = (teams * S,). CUDA only (programs wait for each other).
# H100, bf16 / fp32 10944 x 12288: 1.84 / 2.56 TB/s with a counter and separate partials -> 2.36 /
# 2.78 with the one-word exchange. H200, the kernel alone, bf16 / fp32 10944 x 12288: 2.79 / 3.59
# TB/s with the next row loaded into registers (bf16) or nothing ahead (fp32) -> 3.38 / 3.88 with
# STAGES = 3 (8192 x 16384: 2.77 / 3.54 -> 3.29 / 3.91); STAGES = 2: 2.53 / 3.65, 4: as 3.
@triton.jit
def _wait_spin(sync_ptr, row, S, S_POW2: tl.constexpr):
    # _wait without a Triton loop. Each lane loads its chunk's word until every lane of its warp has
    # a published (non-zero) one: vote.all keeps the branch warp-uniform. Lanes past S read the row's
    # first word (a valid address) and count as done; _unpack_words gives them 0.
    k = tl.arange(0, S_POW2)
    kmask = k < S
    slots = sync_ptr + 2 + row * S + tl.where(kmask, k, 0)
    words = tl.inline_asm_elementwise(
        """{
        .reg .pred %pw, %pm;
        setp.eq.s32 %pm, $2, 0;
        SPIN:
        ld.relaxed.gpu.global.b64 $0, [$1];
        setp.ne.s64 %pw, $0, 0;
        or.pred %pw, %pw, %pm;
        vote.sync.all.pred %pw, %pw, -1;
        @!%pw bra.uni SPIN;
        }""", "=l,l,r", [slots, kmask.to(tl.int32)], dtype=tl.int64, is_pure=False, pack=1)
    hi, lo = _unpack_words(words, kmask)
    return hi, lo, kmask


@triton.jit
def _team_member(sync_ptr, w_ptr, M, N, S, rows_per_team, HAS_WEIGHT: tl.constexpr, BLOCK_N: tl.constexpr,
                 INDEX_64: tl.constexpr):
    # A team program's ticket, its columns and their weight (1.0 without one), and its team's rows
    # [row_begin, row_end).
    team, chunk = _ticket(sync_ptr, S)
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
def _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row, cols, mask, stride_dy_row, stride_x_row, EVICT: tl.constexpr):
    # A row's dy and xhat (0 where masked) at `cols`, and its rstd; EVICT is the loads' L2 hint.
    dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0, eviction_policy=EVICT).to(tl.float32)
    mean = tl.load(mean_ptr + row).to(tl.float32)
    rstd = tl.load(rstd_ptr + row).to(tl.float32)
    return dy, tl.where(mask, (x - mean) * rstd, 0.0), rstd


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
            _publish(sync_ptr, row, chunk, S, tl.sum(g * xhat, axis=0), tl.sum(g, axis=0))
            if STAGES > 1:
                sums_gx, sums_g, _ = _wait_spin(sync_ptr, row, S, S_POW2)
            else:
                sums_gx, sums_g, _ = _wait(sync_ptr, row, S, S_POW2)
            c1 = tl.sum(sums_gx, axis=0) / N
            c2 = tl.sum(sums_g, axis=0) / N
            dx = (g - (xhat * c1 + c2)) * rstd
            tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
        if COMPUTE_DW:
            dw_acc += dy * xhat
        if COMPUTE_DB:
            db_acc += dy
    _store_team_sums(dw_partial_ptr, db_partial_ptr, team, N, cols, col_mask, dw_acc, db_acc, COMPUTE_DW, COMPUTE_DB)


# The team backward with the exchange off the critical path, for 2-byte rows when dx is wanted.
# In layer_norm_bwd_team_kernel a row's dx waits for the team's words, which takes an L2 round trip
# or more every row; at 8 warps an SM those waits leave the memory system idle (H100, bf16
# 8192 x 16384, ncu: DRAM 76% busy, the warps mostly stalled on the words). Here iteration i
# publishes row i's sums and adds row i to dw/db, then writes dx of row i - 1, whose words every
# member published an iteration before: they were loaded at the top of the iteration
# (_peek_words) and are polled again only if one is still missing (_settle_words). Row i - 1's dy
# and x are loaded a second time (the pipeliner copies them with row i's; L2 hits, DRAM traffic
# unchanged), so no row's values live across a wait: 2048-column chunks fit 128 registers, four
# 4-warp programs an SM. The protocol, sync and grid are layer_norm_bwd_team_kernel's; every
# member publishes row i before it waits on row i - 1, so a team never waits on itself.
# H100, bf16, the kernel alone, TB/s (layer_norm_bwd_team_kernel 4096/4, 2 an SM, 3 stages; this,
# 2048/4, maxnreg 128, 4 an SM, 2 stages): 8192 x 16384 2.56; 2.63, 10944 x 12288 2.57; 2.65,
# 14592 x 9216 2.33; 2.55, 4096 x 32768 2.49; 2.64 (DRAM 76% -> 79% busy). fp32 rows gain
# nothing (16384: 2.74; 2.70 at 3 an SM, the most their shared memory holds) and keep the other.
@triton.jit
def _peek_words(sync_ptr, row, S, S_POW2: tl.constexpr):
    # The row's words as they are now (0: not published yet), without waiting for the load.
    k = tl.arange(0, S_POW2)
    slots = sync_ptr + 2 + row * S + tl.where(k < S, k, 0)
    return tl.inline_asm_elementwise("ld.relaxed.gpu.global.b64 $0, [$1];", "=l,l", [slots], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _settle_words(sync_ptr, row, S, words, S_POW2: tl.constexpr):
    # _wait_spin, starting from words peeked earlier: polls again only while a lane of the warp
    # still has 0.
    k = tl.arange(0, S_POW2)
    kmask = k < S
    slots = sync_ptr + 2 + row * S + tl.where(kmask, k, 0)
    words = tl.inline_asm_elementwise(
        """{
        .reg .pred %pw, %pm;
        mov.b64 $0, $3;
        setp.eq.s32 %pm, $2, 0;
        CHECK:
        setp.ne.s64 %pw, $0, 0;
        or.pred %pw, %pw, %pm;
        vote.sync.all.pred %pw, %pw, -1;
        @%pw bra.uni DONE;
        ld.relaxed.gpu.global.b64 $0, [$1];
        bra.uni CHECK;
        DONE:
        }""", "=l,l,r,l", [slots, kmask.to(tl.int32), words], dtype=tl.int64, is_pure=False, pack=1)
    return _unpack_words(words, kmask)


@triton.jit(do_not_specialize=["rows_per_team"])  # the caller asks the binary's occupancy before it knows it
def layer_norm_bwd_team_lag_kernel(dx_ptr, dw_partial_ptr, db_partial_ptr, dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr,
                                   sync_ptr, M, N, S, rows_per_team, stride_dx_row, stride_dy_row, stride_x_row,
                                   HAS_WEIGHT: tl.constexpr, COMPUTE_DW: tl.constexpr, COMPUTE_DB: tl.constexpr,
                                   BLOCK_N: tl.constexpr, S_POW2: tl.constexpr, STAGES: tl.constexpr,
                                   INDEX_64: tl.constexpr):
    team, chunk, cols, col_mask, w, row_begin, row_end = _team_member(sync_ptr, w_ptr, M, N, S, rows_per_team,
                                                                      HAS_WEIGHT, BLOCK_N, INDEX_64)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for i in tl.range(row_begin, row_end + 1, num_stages=STAGES):
        # Row i (none on the last iteration): its sums published, its dy and xhat added to dw/db.
        row = tl.minimum(i, row_end - 1)
        now = i < row_end
        # Row i - 1 (none on the first iteration): its dx.
        prev = tl.maximum(i - 1, row_begin)
        after_first = i > row_begin
        if STAGES > 1:
            words = _peek_words(sync_ptr, prev, S, S_POW2)
        dy, xhat, _ = _team_row(dy_ptr, x_ptr, mean_ptr, rstd_ptr, row, cols, col_mask & now, stride_dy_row,
                                stride_x_row, "")
        if HAS_WEIGHT:
            g = dy * w
        else:
            g = dy
        if now:
            _publish(sync_ptr, row, chunk, S, tl.sum(g * xhat, axis=0), tl.sum(g, axis=0))
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
                sums_gx, sums_g = _settle_words(sync_ptr, prev, S, words, S_POW2)
            else:
                sums_gx, sums_g, _chunk_mask = _wait(sync_ptr, prev, S, S_POW2)
            c1 = tl.sum(sums_gx, axis=0) / N
            c2 = tl.sum(sums_g, axis=0) / N
            if HAS_WEIGHT:
                g_prev = dy_prev * w
            else:
                g_prev = dy_prev
            dx = (g_prev - (xhat_prev * c1 + c2)) * rstd_prev
            tl.store(dx_ptr + prev * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=prev_mask)
    _store_team_sums(dw_partial_ptr, db_partial_ptr, team, N, cols, col_mask, dw_acc, db_acc, COMPUTE_DW, COMPUTE_DB)
