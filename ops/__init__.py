"""tjit: PyTorch operators written in Triton and launched from C++.

`import tjit` loads tjit's C++ library, which registers the operators as `torch.ops.tjit.*`:

    import torch, tjit
    out = torch.ops.tjit.add(x, y, alpha=2)   # or tjit.add(x, y, alpha=2)

They run on CUDA tensors (compiled Triton kernels) and on CPU tensors (the same kernels through
Triton's interpreter: slow, for machines without a GPU), and support Meta/fake tensors, so
torch.compile and torch.library.opcheck work with them.

tjit.add, tjit.sum, tjit.softmax and tjit.layer_norm (and the backward operators softmax_backward,
layer_norm_forward, layer_norm_backward) call the operators with torch's argument names and defaults.

Compiled kernels persist in tjit's kernel store (TJIT_CACHE_DIR, else ~/.cache/tjit): a later
process runs them without importing triton. `tjit.kernel_store` reads it; `python -m tjit cache
{info,list,clear}` inspects and clears it.
"""

import importlib.util
import os
from typing import Optional, Sequence, Tuple, Union

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_PATH = os.path.join(_HERE, "lib", "liboperators.so")
KERNEL_DIR = os.path.join(_HERE, "kernels_py")
DEMO_BINARY = os.path.join(_HERE, "bin", "tjit_demo")
# A CMake prefix for C++ programs: `cmake -DCMAKE_PREFIX_PATH=<this> ...` then `find_package(tjit)`
# (headers, libraries, kernels and the CMake package are inside the Python package).
cmake_prefix_path = _HERE

if not os.path.exists(LIBRARY_PATH):
    raise ImportError(f"tjit's C++ library is missing ({LIBRARY_PATH}); build it with "
                      "`pip install --no-build-isolation -e .` from the tjit checkout")
# The kernel store checks its entries against the Triton this Python would compile with. Tell the
# runtime where that is without importing it (a warm store then never imports triton).
if not os.environ.get("TJIT_TRITON_DIR"):
    _triton = importlib.util.find_spec("triton")
    if _triton is not None and _triton.submodule_search_locations:
        os.environ["TJIT_TRITON_DIR"] = list(_triton.submodule_search_locations)[0]
torch.ops.load_library(LIBRARY_PATH)

from torch.compiler import is_compiling as _is_compiling  # noqa: E402

from . import _C  # noqa: E402  (after liboperators is loaded: _C links it)

ops = torch.ops.tjit


# The functions below mirror the operators' schemas (and torch's own functions of the same name):
# same arguments, names and defaults. Each runs on CUDA tensors (compiled kernels), CPU tensors
# (Triton's interpreter: slow) and Meta/fake tensors, and records autograd where it has a gradient.
# `sum` shadows the builtin in this module's namespace: code below it that needs the builtin must
# call builtins.sum.
#
# Each calls the C++ operator directly through tjit._C (ops/csrc/bindings/direct_calls.cpp: the
# dispatcher entry points of tjit/operators.h, without torch.ops' schema parsing and boxing), and
# takes torch.ops.tjit.* where that could behave differently: while torch.compile/torch.export
# trace (Dynamo sees this branch, so graphs hold torch.ops.tjit.*), and wherever _C returns
# NotImplemented (a TorchFunctionMode, a tensor subclass or FX proxy with __torch_function__,
# functorch transforms, an argument of another type than the plain ones).


def add(self: torch.Tensor, other: torch.Tensor, *, alpha: Union[int, float] = 1) -> torch.Tensor:
    """self + alpha * other, with broadcasting (`torch.ops.tjit.add`).

    Both tensors must have the same dtype (float32, float16, bfloat16, float64, int32, int64)
    and be on the same device; the result is contiguous.
    """
    if not _is_compiling():
        out = _C.add(self, other, alpha)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.add(self, other, alpha=alpha)


def sum(self: torch.Tensor, dim: Optional[Union[int, Sequence[int]]] = None, keepdim: bool = False, *,
        dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Sum of `self` over `dim` (`torch.ops.tjit.sum`), as `torch.sum`.

    `dim` is one dim or several (negative ones count from the end); None or an empty sequence sums
    over every dim. `keepdim` keeps the reduced dims with size 1. With `dtype` the input is converted
    to it first and the result has it. Inputs and `dtype`: float32, float16, bfloat16, float64;
    float16 and bfloat16 accumulate in float32. Differentiable with respect to `self`.
    """
    if not _is_compiling():
        out = _C.sum(self, dim, keepdim, dtype)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.sum(self, dim, keepdim, dtype=dtype)


def softmax(self: torch.Tensor, dim: int, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Softmax of `self` along `dim` (`torch.ops.tjit.softmax`), as `torch.softmax`.

    `self`: float32, float16, bfloat16 or float64; with `dtype` (a floating type) the input is
    converted to it first and the result has it. Rows of any length. Differentiable with respect
    to `self` (the backward is `softmax_backward`).
    """
    if not _is_compiling():
        out = _C.softmax(self, dim, dtype)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.softmax(self, dim, dtype)


def softmax_backward(grad_output: torch.Tensor, output: torch.Tensor, dim: int,
                     input_dtype: torch.dtype) -> torch.Tensor:
    """Gradient of `softmax` with respect to its input, from its output and the output's gradient
    (`torch.ops.tjit.softmax_backward`; aten's `_softmax_backward_data`).

    `grad_output` and `output`: the same shape and device, float32, float16, bfloat16 or float64;
    `input_dtype` (a floating type) is the dtype of softmax's input, which the result has.
    """
    if not _is_compiling():
        out = _C.softmax_backward(grad_output, output, dim, input_dtype)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.softmax_backward(grad_output, output, dim, input_dtype)


def layer_norm(input: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """Layer normalisation over the trailing `normalized_shape` dims (`torch.ops.tjit.layer_norm`),
    as `torch.nn.functional.layer_norm`: (input - mean) / sqrt(var + eps) * weight + bias, biased
    variance.

    `input`, and `weight`/`bias` when given (shape `normalized_shape`), share one dtype (float32,
    float16, bfloat16, float64) and device. Statistics are computed in float32, in float64 for
    float64 input, which also uses `eps` unrounded. Differentiable with respect to input, weight and
    bias (the backward is `layer_norm_backward`).
    """
    if not _is_compiling():
        out = _C.layer_norm(input, normalized_shape, weight, bias, eps)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.layer_norm(input, normalized_shape, weight, bias, eps)


def layer_norm_forward(input: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor] = None,
                       bias: Optional[torch.Tensor] = None,
                       eps: float = 1e-5) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`layer_norm` that also returns the statistics its backward needs: (out, mean, rstd)
    (`torch.ops.tjit.layer_norm_forward`; aten's `native_layer_norm`).

    mean and rstd = 1 / sqrt(var + eps) have the input's leading dims as shape (aten's keep a
    trailing 1 per normalized dim) and dtype float32, float64 for float64 input. Not differentiable.
    """
    if not _is_compiling():
        out = _C.layer_norm_forward(input, normalized_shape, weight, bias, eps)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.layer_norm_forward(input, normalized_shape, weight, bias, eps)


def layer_norm_backward(grad_out: torch.Tensor, input: torch.Tensor, normalized_shape: Sequence[int],
                        mean: torch.Tensor, rstd: torch.Tensor, weight: Optional[torch.Tensor],
                        bias: Optional[torch.Tensor],
                        output_mask: Sequence[bool]) -> Tuple[Optional[torch.Tensor], ...]:
    """Gradients of `layer_norm` for (input, weight, bias) (`torch.ops.tjit.layer_norm_backward`;
    aten's `native_layer_norm_backward`), from `mean` and `rstd` as `layer_norm_forward` returned
    them.

    `output_mask` (three bools) says which to compute; an entry is None where it is False or the
    parameter is absent. Tensors as for `layer_norm`; `grad_out` has the input's shape and dtype.
    """
    if not _is_compiling():
        out = _C.layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
        if out is not NotImplemented:
            return out
    return torch.ops.tjit.layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)


from . import kernel_store  # noqa: E402  (reads the store; `python -m tjit cache` is its command line)

__all__ = [
    "add", "sum", "softmax", "softmax_backward", "layer_norm", "layer_norm_forward", "layer_norm_backward", "ops",
    "kernel_store", "cmake_prefix_path", "LIBRARY_PATH", "KERNEL_DIR", "DEMO_BINARY"
]
