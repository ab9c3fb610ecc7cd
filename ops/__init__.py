"""tjit: PyTorch operators written in Triton and launched from C++.

`import tjit` loads tjit's C++ library, which registers the operators as `torch.ops.tjit.*`:

    import torch, tjit
    out = torch.ops.tjit.add(x, y, alpha=2)   # or tjit.add(x, y, alpha=2)

They run on CUDA tensors (compiled Triton kernels) and on CPU tensors (the same kernels through
Triton's interpreter: slow, for machines without a GPU), and support Meta/fake tensors, so
torch.compile and torch.library.opcheck work with them.

Compiled kernels persist in tjit's kernel store (TJIT_CACHE_DIR, else ~/.cache/tjit): a later
process runs them without importing triton. `tjit.kernel_store` reads it; `python -m tjit cache
{info,list,clear}` inspects and clears it.
"""

import importlib.util
import os

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

ops = torch.ops.tjit


def add(self: torch.Tensor, other: torch.Tensor, *, alpha=1) -> torch.Tensor:
    """self + alpha * other, with broadcasting (`torch.ops.tjit.add`).

    Both tensors must have the same dtype (float32, float16, bfloat16, float64, int32, int64)
    and be on the same device; the result is contiguous.
    """
    return torch.ops.tjit.add(self, other, alpha=alpha)


from . import kernel_store  # noqa: E402  (reads the store; `python -m tjit cache` is its command line)

__all__ = ["add", "ops", "kernel_store", "cmake_prefix_path", "LIBRARY_PATH", "KERNEL_DIR", "DEMO_BINARY"]
