"""The kernels of benchmarks/autotune.py and tjit_bench_autotune: one elementwise add, autotuned
over eight configs and plain, so tuning cost and launch cost can be compared with Python Triton."""

import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": block}, num_warps=warps) for block in (256, 512, 1024, 2048) for warps in (4, 8)]


@triton.jit
def _add_body(x, y, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def add_tuned_kernel(x, y, out, n, BLOCK: tl.constexpr):
    _add_body(x, y, out, n, BLOCK)


@triton.jit
def add_plain_kernel(x, y, out, n, BLOCK: tl.constexpr):
    _add_body(x, y, out, n, BLOCK)
