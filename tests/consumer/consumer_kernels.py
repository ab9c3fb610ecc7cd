"""The consumer project's own kernel, launched through tjit::TritonJitFunction."""

import triton
import triton.language as tl


@triton.jit
def axpb_kernel(x_ptr, out_ptr, n, a, b, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * a + b, mask=mask)
