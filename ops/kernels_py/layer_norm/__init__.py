"""Layer normalisation over the last dimension: forward.py and backward.py hold the kernels, plain
``@triton.jit`` kernels launched from C++ (ops/csrc/ops/layer_norm.cpp, which picks the kernel and
every ``tl.constexpr``).

Conventions of both:

* The wrapper passes x, y, dy, dx as 2-D views [M rows, N columns] (N = prod(normalized_shape)),
  columns contiguous, each with its own row stride (elements). weight/bias/dw/db are contiguous [N].
* mean/rstd are contiguous [M] in the accumulator dtype: fp32 for fp16/bf16/fp32 x, fp64 for fp64 x.
  All arithmetic is in that dtype (the long-row kernels take fp32, fp16 and bf16 rows only); stores
  cast to the destination pointer's element type.
* Absent weight/bias/dw/db arrive as None (a constexpr); every use is behind HAS_*/COMPUTE_*.
* ``eps`` is annotated ``tl.float64``: launches (Python Triton and tjit's C++ runtime alike) pass it
  as a double rather than the fp32 an unannotated float becomes, and the kernel converts it once to
  the accumulator dtype, so fp64 x uses eps unrounded, as aten does. ``tl.full`` rather than
  ``eps.to``: Triton's interpreter passes the kernel a Python float.
* ``INDEX_64``: True when any tensor has >= 2**31 elements (or row * stride can reach 2**31); row
  indices are then int64 before they meet a stride.
"""
