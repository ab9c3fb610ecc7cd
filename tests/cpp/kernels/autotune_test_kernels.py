"""Kernels under @triton.autotune and @triton.heuristics for tests/cpp/test_autotune.cpp."""

import triton
import triton.language as tl


# REPEAT reloads the input REPEAT times (volatile loads: nothing is merged), so the configs differ
# a lot in speed on a GPU and through the interpreter, while every one computes the same result.
@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 128, "REPEAT": 64}, num_warps=4),
        triton.Config({"BLOCK": 256, "REPEAT": 1}, num_warps=4),
        triton.Config({"BLOCK": 64, "REPEAT": 16}, num_warps=2),
    ],
    key=["n"],
)
@triton.jit
def double_kernel(x, out, n, BLOCK: tl.constexpr, REPEAT: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x + offsets, mask=mask, other=0.0, volatile=True)
    for _ in range(REPEAT - 1):
        value = tl.maximum(value, tl.load(x + offsets, mask=mask, other=0.0, volatile=True))
    tl.store(out + offsets, value * 2, mask=mask)


# Accumulates into `acc` (restored between timing runs) and sums into `total` (zeroed).
@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 256}, num_warps=4)],
    key=["n"],
    reset_to_zero=["total"],
    restore_value=["acc"],
)
@triton.jit
def accumulate_kernel(x, acc, total, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x + offsets, mask=mask, other=0.0)
    tl.store(acc + offsets, tl.load(acc + offsets, mask=mask) + value, mask=mask)
    tl.atomic_add(total, tl.sum(value, axis=0))


# Every timing run must start from a zeroed `counter` (as the split kernels' ticket counters need):
# a run's programs take tickets 0 .. P-1, and `worst` (never reset) keeps the largest
# ticket - (P - 1) seen, which stays 0 only if no run started from another run's count.
@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 256}, num_warps=4)],
    key=["n"],
    reset_to_zero=["counter"],
)
@triton.jit
def ticket_kernel(counter, worst, n, BLOCK: tl.constexpr):
    ticket = tl.atomic_add(counter, 1)
    tl.atomic_max(worst, ticket - tl.num_programs(0) + 1)


# Heuristics inside the autotuner see the config (EVEN reads BLOCK); SCALE is a caller constexpr.
@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})],
    key=["n"],
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_kernel(x, out, n, SCALE: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out + offsets, tl.load(x + offsets) * SCALE)
    else:
        mask = offsets < n
        tl.store(out + offsets, tl.load(x + offsets, mask=mask) * SCALE, mask=mask)


# Heuristics alone: the block is the next power of two of the row length, one program per row.
@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n_cols"])})
@triton.jit
def row_sum_kernel(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    values = tl.load(x + row * n_cols + offsets, mask=offsets < n_cols, other=0.0)
    tl.store(out + row, tl.sum(values, axis=0))


# A heuristic that reads more of a tensor than its dtype (tjit refuses: see _DtypeOnly).
@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["x"].shape[0])})
@triton.jit
def shape_reading_kernel(x, out, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out + offsets, tl.load(x + offsets))


def _keep_blocks_up_to_n(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= max(named_args["n"], 16)]


def _prefer_large_blocks(x, out, n, BLOCK, **kwargs):
    return 1.0 / BLOCK


# Pruning: configs with blocks larger than n go first, then the perf model keeps the best two.
@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (16, 32, 64, 128, 256)],
    key=["n"],
    prune_configs_by={"early_config_prune": _keep_blocks_up_to_n, "perf_model": _prefer_large_blocks, "top_k": 2},
)
@triton.jit
def pruned_copy_kernel(x, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask), mask=mask)


def _keep_blocks_up_to_limit(configs, named_args, **kwargs):
    # Reads the call's arguments as keyword arguments, as prune functions written for Python
    # callers that pass them by keyword do (kwargs["LIMIT"] raised KeyError through tjit before).
    return [c for c in configs if c.kwargs["BLOCK"] <= kwargs["LIMIT"] and c.kwargs["BLOCK"] <= named_args["n"]]


def _prefer_small_blocks(n, LIMIT, BLOCK):  # named parameters only, no **kwargs
    return BLOCK


# Pruning by argument name: LIMIT (a constexpr the caller passes) read from **kwargs; a perf model
# that names its parameters keeps the smallest block.
@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (16, 32, 64, 128, 256)],
    key=["n", "LIMIT", "BLOCK"],  # BLOCK is set by the configs: Python Triton leaves it out of the key
    prune_configs_by={"early_config_prune": _keep_blocks_up_to_limit, "perf_model": _prefer_small_blocks,
                      "top_k": 1},
)
@triton.jit
def pruned_by_name_kernel(x, out, n, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) * 2, mask=mask)


# A tensor named in the key: Python Triton keys on the tensor object, so each new tensor is tuned.
@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["x"])
@triton.jit
def tensor_keyed_kernel(x, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) - 1, mask=mask)


# One config fails to compile (its block breaks a static assertion); tuning skips it.
@triton.autotune(
    configs=[triton.Config({"BLOCK": 4096}), triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
    key=["n"],
)
@triton.jit
def partly_broken_kernel(x, out, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 1024, "blocks above 1024 are not supported")
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) + 1, mask=mask)


def _hook(kwargs):
    kwargs["out"].zero_()  # a tensor's use: not a descriptor-only hook


# A pre_hook that works on a tensor: run() refuses it unless a C++ hook is supplied; operator() with
# every argument still works.
@triton.autotune(configs=[triton.Config({"BLOCK": 64}, pre_hook=_hook)], key=["n"])
@triton.jit
def hooked_kernel(x, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask), mask=mask)


# The first config needs far more shared memory than any GPU has (5 stages of 256x128 and 128x256
# fp16 tiles: 640 KB); tuning skips it on CUDA. (The interpreter has no such limit: CUDA-only test.)
@triton.autotune(
    configs=[
        triton.Config({"BM": 256, "BN": 256, "BK": 128}, num_warps=8, num_stages=5),
        triton.Config({"BM": 64, "BN": 64, "BK": 32}, num_warps=4, num_stages=2),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a_mask = (rm[:, None] < M) & ((k + rk)[None, :] < K)
        b_mask = ((k + rk)[:, None] < K) & (rn[None, :] < N)
        a_tile = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=a_mask, other=0.0)
        b_tile = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=b_mask, other=0.0)
        acc += tl.dot(a_tile, b_tile)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# Tuples through run(): the pair of inputs and the (scale, bias) tuple reach the kernel as operator()
# passes them; the heuristic reads a tuple element (a scalar) and the tuple of tensors' dtypes. (The
# dtype is compared as text: importing torch here would make torch's own file one of this file's
# recorded sources, which differ between environments, e.g. the packaging test's virtualenv.)
@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})],
    key=["n"],
)
@triton.heuristics({"HAS_BIAS": lambda args: args["coefficients"][1] is not None,
                    "HALF_IN": lambda args: str(args["inputs"][0].dtype) == "torch.float16"})
@triton.jit
def tuple_axpb_kernel(inputs, out, coefficients, n, BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr,
                      HALF_IN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(inputs[0] + offsets, mask=mask).to(tl.float32)
    y = tl.load(inputs[1] + offsets, mask=mask).to(tl.float32)
    value = x * coefficients[0] + y
    if HAS_BIAS:
        value += coefficients[1]
    if HALF_IN:
        value = value * 1.0  # a different specialisation; the same values
    tl.store(out + offsets, value, mask=mask)


# Tensor descriptors through run(): configs change only launch options (a descriptor's block shape is
# fixed by its caller), and a heuristic reads the descriptor's block shape.
@triton.autotune(
    configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=4)],
    key=["M", "N"],
)
@triton.heuristics({"BM": lambda args: args["x_desc"].block_shape[0],
                    "BN": lambda args: args["x_desc"].block_shape[1]})
@triton.jit
def descriptor_scale_kernel(x_desc, y_desc, M, N, scale, BM: tl.constexpr, BN: tl.constexpr):
    off_m = tl.program_id(0) * BM
    off_n = tl.program_id(1) * BN
    y_desc.store([off_m, off_n], (x_desc.load([off_m, off_n]) * scale).to(y_desc.dtype))


# A config pre_hook on host descriptors, as Triton's TMA matmul tutorials have: it sets each
# descriptor's block shape from the config, and from a constexpr the caller passes (SPLIT_STORE
# stores C in two half-width blocks). The caller's descriptors carry some other block shape.
def _descriptor_blocks(nargs):
    block_m, block_n, block_k = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [block_m, block_k]
    nargs["b_desc"].block_shape = [block_n, block_k]
    nargs["c_desc"].block_shape = [block_m, block_n // 2] if nargs["SPLIT_STORE"] else [block_m, block_n]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}, num_warps=4, pre_hook=_descriptor_blocks),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 32}, num_warps=4, num_stages=2,
                      pre_hook=_descriptor_blocks),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def descriptor_hook_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, SPLIT_STORE: tl.constexpr,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        b = b_desc.load([off_n, k])
        acc = tl.dot(a, b.T, acc)
    c = acc.to(c_desc.dtype)
    if SPLIT_STORE:
        left, right = c.reshape(BLOCK_M, 2, BLOCK_N // 2).permute(0, 2, 1).split()
        c_desc.store([off_m, off_n], left)
        c_desc.store([off_m, off_n + BLOCK_N // 2], right)
    else:
        c_desc.store([off_m, off_n], c)


def _reads_shape(nargs):
    nargs["a_desc"].block_shape = [nargs["BLOCK_M"], min(nargs["a_desc"].shape[1], 32)]


# A descriptor hook that reads the call's descriptor shape: not recordable (its effect would depend
# on what the recorded decision is not keyed on).
@triton.autotune(configs=[triton.Config({"BLOCK_M": 16}, pre_hook=_reads_shape), triton.Config({"BLOCK_M": 32},
                 pre_hook=_reads_shape)], key=["M"])
@triton.jit
def shape_reading_hook_kernel(a_desc, out, M, BLOCK_M: tl.constexpr):
    pass


def _zero_total(nargs, reset_only=False):
    nargs["total"].zero_()


def _after_run(nargs, exception):
    pass


# @triton.autotune's own pre_hook (in place of reset_to_zero) and post_hook: Python that Python Triton
# runs around each timed run only.
@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                 pre_hook=_zero_total, post_hook=_after_run)
@triton.jit
def tuner_hooked_sum_kernel(x, total, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(total, tl.sum(tl.load(x + offsets, mask=offsets < n, other=0.0)))
