"""tjit: PyTorch operators written in Triton and launched from C++.

`import tjit` loads tjit's C++ library, which registers the operators as `torch.ops.tjit.*`:

    import torch, tjit
    out = torch.ops.tjit.add(x, y, alpha=2)   # or tjit.add(x, y, alpha=2)

They run on CUDA tensors (compiled Triton kernels) and on CPU tensors (the same kernels through
Triton's interpreter: slow, for machines without a GPU), and support Meta/fake tensors, so
torch.compile and torch.library.opcheck work with them.

`tjit.<name>` calls operator `<name>` with torch's argument names and defaults (one function per
operator, generated from its schema: `tjit.add`, `tjit.sum`, `tjit.softmax`, `tjit.layer_norm`, and
the operators their gradients use).

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


from . import _C  # noqa: E402  (after liboperators is loaded: _C links it)

ops = torch.ops.tjit


# One Python function per operator (`tjit.add`, `tjit.softmax`, ...), generated from its schema:
# torch's argument names, defaults and keyword-only markers, and the documentation the operator
# was defined with (ops/csrc/ops/<op>/). Each runs on CUDA tensors (compiled kernels), CPU tensors
# (Triton's interpreter: slow) and Meta/fake tensors, and records autograd where it has a gradient.
#
# Each calls the C++ operator directly through tjit._C (ops/csrc/bindings/direct_calls.cpp: the
# dispatcher entry points of tjit/operators.h, without torch.ops' schema parsing and boxing), and
# takes torch.ops.tjit.* where that could behave differently: while torch.compile/torch.export
# trace (Dynamo sees this branch, so graphs hold torch.ops.tjit.*), and wherever _C returns
# NotImplemented (a TorchFunctionMode, a tensor subclass or FX proxy with __torch_function__,
# functorch transforms, an argument of another type than the plain ones). `sum` shadows the
# builtin in this module's namespace.
from . import _functions  # noqa: E402

_OPERATORS = _functions.define_all(_C, torch.ops.tjit, globals())

# torch.vmap runs the operators' own kernels over a batch (batching rules, not torch's per-sample
# fallback); grad, vjp, jvp, jacrev, jacfwd and hessian need nothing more than their autograd.
from . import _vmap  # noqa: E402

_vmap.install()



def operator_doc(op) -> str:
    """The documentation an operator was defined with through tjit's kit (`kit::define`): tjit's
    own and those of operator libraries built on the kit (`docs/writing_operators.md`), whose
    `torch.ops.<namespace>.<name>.__doc__` torch leaves empty. `op` is `"namespace::name"`, a
    `torch.ops` operator (`torch.ops.myops.scaled_silu`, its `.default` or another overload:
    `"tjit::add.Scalar"`, `torch.ops.tjit.add.Scalar`) or one of tjit's functions; '' where none
    was given."""
    if isinstance(op, str):
        return _C.operator_doc(op)
    schema = getattr(op, "_schema", None)
    name = getattr(op, "_qualified_op_name", None)
    if name is None and schema is not None:
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    if name is None and getattr(op, "__module__", None) == "tjit":
        name = f"tjit::{op.__name__}"
    if name is None:
        raise TypeError(f"tjit.operator_doc: expected an operator or 'namespace::name', got {op!r}")
    return _C.operator_doc(name)


def prepare(op, *args, **kwargs):
    """Gets `op(*args, **kwargs)` ready for a CUDA graph capture without running it.

    `op` is a tjit operator (`tjit.softmax`, `torch.ops.tjit.softmax`, ...) or any function that
    calls them. Every kernel the call would launch is compiled (or read from a bundle or the kernel
    store), loaded into the current CUDA context and autotuned for these arguments (timing launches
    its configs; an operator whose plan is a measured choice times its candidates, where no table
    decides), and none is launched: the call's outputs are left unwritten and it returns None.
    A capture afterwards records the tuned kernels. Without it, a first call inside a capture still
    works: it compiles and loads there, and launches an untuned fallback where tuning was needed.
    C++: `tjit::PrepareOnlyScope` (tjit/prepare.h) around the call.
    """
    _C.prepare(op, *args, **kwargs)


# tjit.jit: users' own Triton kernels launched through the runtime (imports Triton when first used).
from .python_kernels import JitKernel, jit  # noqa: E402

from . import kernel_store  # noqa: E402  (reads the store; `python -m tjit cache` is its command line)

from . import plans  # noqa: E402  (tjit.plans.plan: the launch plan a call makes, on any device's facts)

# DTensor sharding strategies for the operators (tjit.distributed), registered once
# torch.distributed.tensor is imported; tjit does not import it (heavy) itself.
from . import distributed  # noqa: E402

distributed.install()

__all__ = [*_OPERATORS, "ops", "operator_doc", "prepare", "jit", "JitKernel", "kernel_store", "plans", "distributed",
           "cmake_prefix_path", "LIBRARY_PATH", "KERNEL_DIR", "DEMO_BINARY"]
