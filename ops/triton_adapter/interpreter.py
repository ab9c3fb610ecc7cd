"""Running a kernel through Triton's interpreter (run_interpreted), inside a process that also
compiles: what Triton's interpreter changes process-wide (triton.language, JITFunction calls) is
confined to the run, and where releases' interpreters fail it is mended."""

import os
import threading
from types import ModuleType

import numpy
from triton import knobs
from triton.runtime.jit import JITFunction

from . import state
from .autotune import without_front_end
from .loading import import_file
from .values import python_value
from .version import TRITON_VERSION


_interpreting = threading.local()
_original_jit_call = JITFunction.__call__


def _call_jit_function(self, *args, **kwargs):
    # Triton's own library (tl.sum, tl.max, ...) was decorated in compiled mode; inside an
    # interpreted kernel, run such helpers through the interpreter too, as TRITON_INTERPRET=1 would.
    if getattr(_interpreting, "active", False):
        from triton.runtime.interpreter import InterpretedFunction
        interpreted = self.__dict__.get("_tjit_interpreted")
        if interpreted is None:
            interpreted = InterpretedFunction(self.fn)
            self._tjit_interpreted = interpreted
        return interpreted(*args, **kwargs)
    return _original_jit_call(self, *args, **kwargs)


JITFunction.__call__ = _call_jit_function


def _restore_language_after_device_calls():
    # Triton 3.6 to 3.9: InterpretedFunction.__call__ (a @jit helper called from an interpreted
    # kernel) patches triton.language for the interpreter and drops the scope that would undo it:
    # harmless when the whole process interprets, fatal here, where later compiles would see the
    # patched language. (3.4 and 3.5 have no such scope: _LanguageSnapshot covers them.)
    from triton.runtime import interpreter

    def call(self, *args, **kwargs):
        scope = interpreter._patch_lang(self.fn)
        try:
            fn = self.rewrite()
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                raise interpreter.InterpreterError(repr(e)) from e
        finally:
            scope.restore()

    interpreter.InterpretedFunction.__call__ = call


class _LanguageSnapshot:
    """Triton 3.4 and 3.5 patch triton.language in place for every interpreted run (the grid and
    each @jit helper call) and never undo it (3.6 added a restorable scope). This saves the
    attributes of each object their _patch_lang writes to (checked against both releases) and
    puts them back after the run, so later compiles in the process see the real language."""

    def __init__(self):
        import triton.language as tl
        objects = (tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype, tl.core.tensor_descriptor_base)
        self._saved = [(obj, dict(vars(obj))) for obj in objects]

    def restore(self):
        missing = object()
        for obj, saved in self._saved:
            current = vars(obj)
            # Added attributes go, except submodules first imported during the run: the parent's
            # attribute is how they are reached, and a second import would not set it again.
            for name in [n for n, v in current.items() if n not in saved and not isinstance(v, ModuleType)]:
                delattr(obj, name)
            for name, value in saved.items():
                if current.get(name, missing) is not value:
                    setattr(obj, name, value)


def fix_interpreter_scalar_index():
    # Triton 3.4 to 3.6: the interpreter turns a scalar tensor into a Python int with int(array) on
    # a 1-element array (e.g. `for i in range(0, N, BLOCK)` with a runtime N); NumPy >= 2.4 rejects
    # that (triton-lang/triton#9171; 3.7 squeezes the array first). Convert through the element.
    if TRITON_VERSION >= (3, 7):
        return
    try:
        int(numpy.array([1]))
        return
    except TypeError:
        pass
    from triton.runtime import interpreter
    original = interpreter._patch_lang_tensor

    def patched(tensor, *scope):  # 3.6 passes the run's patch scope; 3.4 and 3.5 patch in place
        original(tensor, *scope)
        index = lambda self: int(self.handle.data.reshape(-1)[0])  # noqa: E731
        if scope:
            scope[0].set_attr(tensor, "__index__", index)
        else:
            tensor.__index__ = index

    interpreter._patch_lang_tensor = patched


class _InterpretedKernelError(RuntimeError):
    """A kernel failed in Triton's interpreter; the message says where in the kernel's source."""


def _interpreter_failure(error, path):
    """What went wrong, and the line of the kernel's file it went wrong at (the interpreter's own
    message names neither the parameter nor the line; the compile path's does)."""
    cause = error
    while isinstance(cause.__cause__, Exception) and type(cause).__name__ == "InterpreterError":
        cause = cause.__cause__
    text = f"{type(cause).__name__}: {cause}"
    location = None
    seen = set()
    for e in (error, cause):
        tb = e.__traceback__
        while tb is not None and id(tb) not in seen:
            seen.add(id(tb))
            if os.path.realpath(tb.tb_frame.f_code.co_filename) == os.path.realpath(path):
                location = tb
            tb = tb.tb_next
    if location is not None:
        import linecache
        line = linecache.getline(location.tb_frame.f_code.co_filename, location.tb_lineno).strip()
        text += f" (at {path}:{location.tb_lineno}, in {location.tb_frame.f_code.co_name}: {line})"
    return text


def run_interpreted(handle, grid, num_warps, args):
    """Runs the kernel through Triton's interpreter; tensors arrive as DLPack capsules."""
    interpreted = state.interpreted.get(handle)
    if interpreted is None:
        if not state.interpreted:
            if TRITON_VERSION >= (3, 6):
                _restore_language_after_device_calls()
            fix_interpreter_scalar_index()
        path, _, fn = state.kernels[handle]
        # By the function's own name: tjit.jit may have registered the kernel under another.
        interpreted = _unwrap_interpreted(getattr(import_file(path, interpreted=True), fn.__name__))
        state.interpreted[handle] = interpreted
    path = state.kernels[handle][0]
    values = [python_value(a) for a in args]
    with state.mode_lock:
        saved = knobs.runtime.interpret
        snapshot = _LanguageSnapshot() if TRITON_VERSION < (3, 6) else None
        knobs.runtime.interpret = True
        _interpreting.active = True
        try:
            # Masked lanes compute with -inf and NaN as they do on a GPU (a row's max over padding,
            # say), where nothing warns; numpy would print RuntimeWarnings for values never stored.
            with numpy.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
                try:
                    interpreted[tuple(grid)](*values, num_warps=num_warps)
                except Exception as e:
                    raise _InterpretedKernelError(_interpreter_failure(e, path)) from e
        finally:
            _interpreting.active = False
            knobs.runtime.interpret = saved
            if snapshot is not None:
                snapshot.restore()


def _unwrap_interpreted(obj):
    from triton.runtime.interpreter import InterpretedFunction
    obj = without_front_end(obj)
    while not isinstance(obj, InterpretedFunction) and hasattr(obj, "fn"):
        obj = without_front_end(obj.fn)
    return obj
