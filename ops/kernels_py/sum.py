"""Sum reductions for tjit.

Plain ``@triton.jit`` kernels launched from C++ (ops/csrc/ops/sum.cpp, which picks the kernel, the
plan and every ``tl.constexpr``).

Conventions shared by every kernel
----------------------------------
* Pointers are typed by the tensors passed; inputs may be fp16, bf16, fp32, fp64, int32 or int64.
  Accumulation is fp32, fp64 when the *input* is fp64, int64 for integers. Results are cast to the
  output pointer's element type, so a partial buffer should be allocated in the accumulator dtype
  (fp32/fp64/int64: kit::accumulator_type).
* Strides are in elements. The reduced/innermost columns are contiguous (stride 1).
* ``INDEX_64``: pass True when any tensor touched has >= 2**31 elements (or any offset
  ``row * stride`` can reach 2**31); row/program indices are then widened to int64 before they
  are multiplied by a stride. False keeps all index math in int32 (faster).
* ``PDL`` (the kernels of the two-stage plan): pass True only when the launch uses programmatic
  dependent launch (Triton's ``launch_pdl=True``; compute capability 9.0 or newer). The kernel then
  waits (``griddepcontrol.wait``) until the kernel before it in the stream has finished and its
  writes are visible, and at once lets the next one start launching. With False it does neither.

Kernels
-------
sum_rows_kernel(in_ptr, out_ptr, M, N, stride_in_row, BLOCK_N, INDEX_64, PDL)
    out[m] = sum_n in[m, n] for a 2-D view [M, N]; out is contiguous [M].
    grid    : (M,)  -- one program per row. Any N works (the program loops over BLOCK_N chunks).

sum_rows_blocked_kernel(in_ptr, out_ptr, M, N, stride_in_row, BLOCK_M, BLOCK_N, INDEX_64)
    Same result as sum_rows_kernel, BLOCK_M rows per program (short rows, many of them).
    grid    : (cdiv(M, BLOCK_M),); loops if N > BLOCK_N.

sum_mid_kernel(in_ptr, out_ptr, M, R, K, stride_m, stride_r, BLOCK_R, BLOCK_K, INDEX_64)
    out[m, k] = sum_r in[m, r, k] for a 3-D view [M, R, K] with k contiguous (stride 1); out is
    contiguous [M, K]. Reduces a non-last dim without a transpose: dim 0 of a row-major [R, K]
    matrix is M=1, stride_r=K.
    grid    : (M * cdiv(K, BLOCK_K),)  -- 1-D on purpose: grid dims 1/2 are limited to 65535.

sum_mid_split_kernel(in_ptr, partial_ptr, M, R, K, stride_m, stride_r, rows_per_split,
                     BLOCK_R, BLOCK_K, INDEX_64)
    Stage 1 of a split middle reduction: S = cdiv(R, rows_per_split) splits; program (m, s, kb)
    sums rows [s*rows_per_split, min((s+1)*rows_per_split, R)) and writes partial[m, s, k]
    (contiguous [M, S, K], accumulator dtype).
    grid    : (M * S * cdiv(K, BLOCK_K),); rows_per_split should be a multiple of BLOCK_R.
    Stage 2: sum_mid_kernel(partial, out, M, S, K, stride_m=S*K, stride_r=K, ...).

sum_partial_kernel(in_ptr, partial_ptr, M, N, stride_in_row, chunk, BLOCK_N, INDEX_64, PDL)
    Stage 1 of a two-stage row/full reduction. Each row is cut into S = cdiv(N, chunk) chunks;
    program p = m*S + s sums in[m, s*chunk : min((s+1)*chunk, N)] into partial[m*S + s]
    (contiguous [M, S], accumulator dtype).
    grid    : (M * S,); chunk a multiple of BLOCK_N and < 2**31.
    Stage 2: sum_rows_kernel(partial, out, M, S, stride_in_row=S, ...).

sum_partial_strided_kernel(in_ptr, partial_ptr, M, N, stride_in_row, splits, BLOCK_N, INDEX_64, PDL)
    Stage 1 as sum_partial_kernel, with each row's BLOCK_N-column blocks dealt out round-robin:
    program p = m*S + s (S = splits) sums blocks s, s + S, s + 2S, ... of row m into partial[p].
    grid    : (M * S,); S <= cdiv(N, BLOCK_N). Stage 2 as above.
"""

import triton
import triton.language as tl


@triton.jit
def _dependent_launch(PDL: tl.constexpr):
    """Programmatic dependent launch: wait for the kernel before (its writes visible), then let the next
    one launch, so that its launch overlaps this kernel instead of following it."""
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def sum_rows_kernel(in_ptr, out_ptr, M, N, stride_in_row, BLOCK_N: tl.constexpr, INDEX_64: tl.constexpr,
                    PDL: tl.constexpr):
    _dependent_launch(PDL)
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else (
        tl.int64 if in_ptr.dtype.element_ty.is_int() else tl.float32)

    in_row = in_ptr + row * stride_in_row
    cols = tl.arange(0, BLOCK_N)
    # Per-lane partial sums; one tree reduction at the end instead of one per chunk.
    acc = tl.zeros([BLOCK_N], dtype=ACC)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        acc += tl.load(in_row + c, mask=c < N, other=0.0).to(ACC)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


@triton.jit
def sum_rows_blocked_kernel(in_ptr, out_ptr, M, N, stride_in_row, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else (
        tl.int64 if in_ptr.dtype.element_ty.is_int() else tl.float32)

    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    row_ptrs = in_ptr + rows[:, None] * stride_in_row
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        mask = row_mask[:, None] & (c[None, :] < N)
        acc += tl.load(row_ptrs + c[None, :], mask=mask, other=0.0).to(ACC)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1).to(out_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def _sum_mid_block(in_ptr, m, r_begin, r_end, k, K, stride_m, stride_r, BLOCK_R: tl.constexpr,
                   BLOCK_K: tl.constexpr, INDEX_64: tl.constexpr):
    """Sum in[m, r_begin:r_end, k] over r for a vector k of BLOCK_K column indices."""
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else (
        tl.int64 if in_ptr.dtype.element_ty.is_int() else tl.float32)
    base = in_ptr + m * stride_m
    k_mask = k < K
    r_offs = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_K], dtype=ACC)
    for r0 in range(r_begin, r_end, BLOCK_R):
        r = r0 + r_offs
        mask = (r < r_end)[:, None] & k_mask[None, :]
        if INDEX_64:
            r = r.to(tl.int64)
        acc += tl.load(base + r[:, None] * stride_r + k[None, :], mask=mask, other=0.0).to(ACC)
    return tl.sum(acc, axis=0)


@triton.jit
def sum_mid_kernel(in_ptr, out_ptr, M, R, K, stride_m, stride_r, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
                   INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    num_kb = tl.cdiv(K, BLOCK_K)
    # Neighbouring programs take neighbouring column blocks of the same m: contiguous memory.
    m = pid // num_kb
    k = (pid % num_kb) * BLOCK_K + tl.arange(0, BLOCK_K)
    total = _sum_mid_block(in_ptr, m, 0, R, k, K, stride_m, stride_r, BLOCK_R, BLOCK_K, INDEX_64)
    tl.store(out_ptr + m * K + k, total.to(out_ptr.dtype.element_ty), mask=k < K)


@triton.jit
def sum_mid_split_kernel(in_ptr, partial_ptr, M, R, K, stride_m, stride_r, rows_per_split, BLOCK_R: tl.constexpr,
                         BLOCK_K: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    num_kb = tl.cdiv(K, BLOCK_K)
    num_splits = tl.cdiv(R, rows_per_split)
    kb = pid % num_kb
    ms = pid // num_kb  # = m * num_splits + s, also the row of the [M*S, K] partial buffer
    m = ms // num_splits
    s = ms % num_splits
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    r_begin = s * rows_per_split
    r_end = tl.minimum(r_begin + rows_per_split, R)
    total = _sum_mid_block(in_ptr, m, r_begin, r_end, k, K, stride_m, stride_r, BLOCK_R, BLOCK_K, INDEX_64)
    tl.store(partial_ptr + ms * K + k, total.to(partial_ptr.dtype.element_ty), mask=k < K)


@triton.jit
def sum_partial_kernel(in_ptr, partial_ptr, M, N, stride_in_row, chunk, BLOCK_N: tl.constexpr,
                       INDEX_64: tl.constexpr, PDL: tl.constexpr):
    _dependent_launch(PDL)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else (
        tl.int64 if in_ptr.dtype.element_ty.is_int() else tl.float32)

    num_splits = tl.cdiv(N, chunk)
    row = pid // num_splits
    start = (pid % num_splits) * chunk  # int64 when INDEX_64: N itself may exceed 2**31
    # Offsets inside one chunk fit in int32 (chunk < 2**31); only the chunk base needs 64 bits.
    chunk_ptr = in_ptr + row * stride_in_row + start
    n_here = tl.minimum(N - start, chunk)
    if INDEX_64:
        n_here = n_here.to(tl.int32)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=ACC)
    for off in range(0, n_here, BLOCK_N):
        c = off + cols
        acc += tl.load(chunk_ptr + c, mask=c < n_here, other=0.0).to(ACC)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0).to(partial_ptr.dtype.element_ty))


@triton.jit
def sum_partial_strided_kernel(in_ptr, partial_ptr, M, N, stride_in_row, splits, BLOCK_N: tl.constexpr,
                               INDEX_64: tl.constexpr, PDL: tl.constexpr):
    _dependent_launch(PDL)
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)  # then the block index and the column offsets are int64 too
    ACC: tl.constexpr = tl.float64 if in_ptr.dtype.element_ty == tl.float64 else (
        tl.int64 if in_ptr.dtype.element_ty.is_int() else tl.float32)

    row = pid // splits
    in_row = in_ptr + row * stride_in_row
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=ACC)
    # Neighbouring programs read neighbouring blocks at every step.
    for block in range(pid % splits, tl.cdiv(N, BLOCK_N), splits):
        c = block * BLOCK_N + cols
        acc += tl.load(in_row + c, mask=c < N, other=0.0).to(ACC)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0).to(partial_ptr.dtype.element_ty))
