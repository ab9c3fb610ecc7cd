"""tjit.jit: your own Triton kernels launched from Python through tjit's C++ runtime.

    @tjit.jit
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...

    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)

`tjit.jit(kernel)` wraps a @triton.jit kernel, or the @triton.autotune / @triton.heuristics
object around one (a kernel imported from a library too), and launches it as Triton does, with
Triton's specialisation, binaries and autotune choices, from the C++ runtime (kernel_launcher.cpp):
the arguments are read from the Python objects in C++ and the launch runs without Python, with
the kernel store, TJIT_RECORD manifests and bundles, first-call tuning and CUDA graphs as for
tjit's own operators. Calls the runtime must not take go to Triton's own launch: inside
torch.compile's tracing (Dynamo traces the Triton kernel itself) and with tensor subclasses (fake,
functional, distributed tensors: through torch.library.wrap_triton, which traces or dispatches).
docs/python_kernels.md is the user's guide.
"""

import functools
import inspect
import os
import sys
import threading

import torch

from . import _C

# Looked up once (a launch pays no attribute lookups for it); Dynamo answers a call of this function
# object wherever it is named.
_dynamo_compiling = torch.compiler.is_dynamo_compiling

__all__ = ["jit", "JitKernel"]

_lock = threading.Lock()
# (file, name) -> the kernel object tjit.jit launches under that name: the embedded runtime's
# Python half reads kernels from here (triton_adapter.loading) instead of importing the
# file again, so the launch runs the user's own objects.
_registered = {}
_names_of = {}  # id(kernel object) -> (file, name) it is registered under


def registered_kernel(path, name):
    """The kernel object tjit.jit launches as `name` of `path`, or None (read by the runtime)."""
    return _registered.get((path, name))


def _unwrapped(kernel):
    """`kernel` without the launchers around it that are not Triton's: JitKernel, and a Triton
    KernelInterface holding the kernel it launches in `.fn` (FlagGems' @libentry(), a launch cache),
    whose launch tjit.jit's replaces."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction, KernelInterface
    triton_own = (JITFunction, Autotuner, Heuristics, InterpretedFunction)
    while True:
        if isinstance(kernel, JitKernel):
            kernel = kernel.kernel
        elif (isinstance(kernel, KernelInterface) and not isinstance(kernel, triton_own)
              and isinstance(getattr(kernel, "fn", None), KernelInterface)):
            kernel = kernel.fn
        else:
            return kernel


def _innermost(kernel):
    """The @triton.jit function under `kernel`'s @triton.autotune / @triton.heuristics layers (an
    InterpretedFunction under TRITON_INTERPRET=1), and whether there are layers. Raises TypeError
    for anything else."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    fn = kernel
    while not isinstance(fn, (JITFunction, InterpretedFunction)):
        if isinstance(fn, (Autotuner, Heuristics)):
            fn = fn.fn
            continue
        raise TypeError(f"tjit.jit takes a @triton.jit kernel, or @triton.autotune / @triton.heuristics around "
                        f"one, not {type(fn).__module__}.{type(fn).__qualname__}")
    return fn, fn is not kernel


def _register(kernel, fn):
    """(file, name) under which the runtime loads `kernel`: the kernel's source file and its own name
    where the file's module holds `kernel` under that name (a deployment finds it there too), else
    a name of its own in this process (an autotune layer made at run time, say)."""
    with _lock:
        known = _names_of.get(id(kernel))
        if known is not None and _registered.get(known) is kernel:
            return known
        path = inspect.getsourcefile(fn.fn) or fn.fn.__code__.co_filename
        if not path or not os.path.isfile(path):
            raise TypeError(f"tjit.jit: kernel {fn.__name__}: its source file ({path!r}) cannot be read; tjit "
                            "compiles kernels from their files, so define them in a .py file")
        path = os.path.realpath(path)
        name = fn.__name__
        module = sys.modules.get(fn.__module__)
        at_module_level = getattr(module, name, None)
        while isinstance(at_module_level, JitKernel):
            at_module_level = at_module_level.kernel
        if at_module_level is not kernel:
            taken = {n for (p, n) in _registered if p == path}
            k = 1
            while f"{name}_tjit_jit{k}" in taken:
                k += 1
            name = f"{name}_tjit_jit{k}"
        _registered[(path, name)] = kernel
        _names_of[id(kernel)] = (path, name)
        return path, name


class JitKernel:
    """A Triton kernel launched through tjit's runtime: `kernel[grid](*args, **kwargs)` as Triton's.

    The grid is an int, a tuple of one to three ints, or a callable taking the call's meta-parameters
    by name (with @triton.autotune: the chosen config's) and returning one. Launch options as keywords
    (plain kernels): num_warps, num_stages, num_ctas, maxnreg, enable_fp_fusion,
    launch_cooperative_grid, launch_pdl. The launch goes to torch's current stream of the tensors'
    device; CPU tensors run through Triton's interpreter. Other attributes are the wrapped kernel's.
    """

    __tjit_jit__ = True  # triton_adapter looks through it to the kernel it launches

    def __init__(self, kernel):
        self.kernel = kernel = _unwrapped(kernel)
        self._fn, self._wrapped = _innermost(kernel)
        self._interpreted = type(self._fn).__name__ == "InterpretedFunction"
        # The plain kernel's parameters with defaults, for the traced launch (an autotuned kernel's
        # configs set theirs).
        self._defaults = () if self._wrapped else tuple(
            (i, p.name, p.default) for i, p in enumerate(inspect.signature(self._fn.fn).parameters.values())
            if p.default is not inspect.Parameter.empty)
        self._launcher = None
        self._launcher_lock = threading.Lock()
        functools.update_wrapper(self, self._fn.fn, updated=())  # name, doc, module, __wrapped__

    def __getitem__(self, grid):
        if _dynamo_compiling():
            # Dynamo traces Triton's kernel into the graph (given every defaulted constexpr, which
            # torch's tracing of user kernels does not fill in). Other tracing (a triton_op's body
            # under torch.compile) hands the launcher fake or functional tensors: the fallback.
            return functools.partial(self._traced_launch, grid)
        launcher = self._launcher
        if launcher is None:
            return self._first_subscript(grid)
        return launcher[grid]  # a BoundLaunch: its call launches through the C++ runtime

    def _first_subscript(self, grid):
        if self._interpreted:
            # An interpreted kernel (TRITON_INTERPRET=1, or tjit's own interpreted import of the file)
            # is Triton's to run; it never gets a launcher.
            return self.kernel[grid]
        with self._launcher_lock:
            if self._launcher is None:
                path, name = _register(self.kernel, self._fn)
                self._launcher = _C.kernel_launcher(path, name, self._fn.__name__, self._wrapped, self._fallback)
        return self._launcher[grid]

    def _with_defaults(self, args, kwargs):
        for index, name, default in self._defaults:
            if index >= len(args) and name not in kwargs:
                kwargs[name] = default
        return kwargs

    def _traced_launch(self, grid, *args, **kwargs):
        return self.kernel[grid](*args, **self._with_defaults(args, kwargs))

    def _fallback(self, grid, *args, **kwargs):
        # Tensor subclasses: torch.library.wrap_triton traces or dispatches the launch as torch does
        # for Triton kernels (it takes plain and autotuned kernels; Triton launches the rest).
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
        if isinstance(self.kernel, (JITFunction, Autotuner)):
            return torch.library.wrap_triton(self.kernel)[grid](*args, **self._with_defaults(args, kwargs))
        return self.kernel[grid](*args, **kwargs)

    def run(self, *args, grid, **kwargs):
        """Triton's `kernel.run(*args, grid=grid, **kwargs)`: the same launch as kernel[grid](...)."""
        return self[grid](*args, **kwargs)

    @property
    def fn(self):
        """The kernel this launches (what @triton.autotune's `.fn` is to the kernel it tunes)."""
        return self.kernel

    def __getattr__(self, name):
        if name == "kernel":  # before __init__ set it (copy, pickle)
            raise AttributeError(name)
        return getattr(self.kernel, name)

    def __repr__(self):
        return f"tjit.jit({self.kernel!r})"


def jit(kernel=None):
    """Launch a Triton kernel through tjit's C++ runtime: `tjit.jit(kernel)`, or `@tjit.jit` above
    `@triton.jit` (and above @triton.autotune / @triton.heuristics). Returns a JitKernel, launched
    as `kernel[grid](*args, **kwargs)`; see docs/python_kernels.md."""
    if kernel is None:
        return jit
    return JitKernel(kernel)
