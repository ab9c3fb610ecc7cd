"""Kernel files: importing them (a lone file, or a module of a kernel package with its relative
imports), compiled or interpreted, from the very bytes that are fingerprinted, and load_kernel,
which gives the runtime a kernel's handle, parameters, source files and tuning description."""

import difflib
import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys

import triton
from triton import knobs
from triton import language as tl
from triton.runtime.jit import JITFunction

from . import state
from .autotune import tuning_description, unwrap, without_front_end
from .sources import source_files, source_fingerprint
from .values import constexpr_json, is_element_dtype


def _package_of(path):
    """(root folder, dotted module name below the root's parent) of a kernel file inside a package
    (folders with __init__.py, walking up from the file's), or (None, None) for a lone file."""
    folder = os.path.dirname(path)
    root = None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        root = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if root is None:
        return None, None
    relative = os.path.splitext(os.path.relpath(path, os.path.dirname(root)))[0]
    return root, relative.replace(os.sep, ".")


_PACKAGE_PREFIXES = ("tjit_kernels_", "tjit_kernels_interpreted_")  # import_file's names of kernel packages


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Runs a module of a kernel package from its source bytes, never from a cached .pyc (one
    written in the same second as an edit of the same size passes as fresh), and records the
    fingerprint of the bytes it ran (compiled mode), which source_files then reports."""

    def get_code(self, fullname):
        data = self.get_data(self.path)
        if not fullname.startswith("tjit_kernels_interpreted_"):
            state.fingerprints[os.path.realpath(self.path)] = source_fingerprint(data)
        return compile(data, self.path, "exec", dont_inherit=True)


class _KernelPackageFinder:
    """Finds the modules that kernel files import from their own package (relative imports) as
    Python would, loaded by _SourceLoader."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if path is None or not fullname.startswith(_PACKAGE_PREFIXES):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _SourceLoader(fullname, spec.origin)
        return spec


def _package(name, folder):
    """sys.modules[name], a package whose modules are found in `folder`; its __init__.py is not run
    (up the tree lies code that is no kernel's: tjit's own __init__.py loads its C++ libraries)."""
    module = sys.modules.get(name)
    if module is None:
        if _KernelPackageFinder not in sys.meta_path:
            sys.meta_path.insert(0, _KernelPackageFinder)
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [folder]
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    return module


def _run_module(name, path, data):
    """Executes `data` (the bytes of `path`) as the new module sys.modules[name]. Call with
    state.mode_lock held and the interpreter knob set: the modules its relative imports import run
    then, in the same mode."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel file {path}")
    module = importlib.util.module_from_spec(spec)
    code = compile(data, path, "exec", dont_inherit=True)
    sys.modules[name] = module  # inspect.getsource (used by Triton) looks modules up here
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def import_file(path, interpreted=False):
    """Imports a kernel file once per mode. In interpreted mode every @triton.jit of the file
    (helpers too) becomes Triton's InterpretedFunction, as under TRITON_INTERPRET=1.
    A file inside a package (a folder with __init__.py, walking up) is imported as a module of
    that package, under a name private to the package's top folder and the mode, so its relative
    imports work and import the package's helpers in the same mode. The packages' __init__.py
    files are not run (_package).
    The module runs from the bytes that were fingerprinted, so a stored kernel never records a
    fingerprint of other source than the one it was compiled from (so do the modules it imports
    from its package: _SourceLoader)."""
    with state.lock:
        module = state.modules.get((path, interpreted))
        if module is not None:
            return module
        prefix = f"tjit_kernels{'_interpreted' if interpreted else ''}"
        root, dotted = _package_of(path)
        with open(path, "rb") as f:
            data = f.read()
        with state.mode_lock:
            saved = knobs.runtime.interpret
            knobs.runtime.interpret = interpreted  # read by @triton.jit when the file runs
            try:
                if root is None:
                    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
                    stem = os.path.splitext(os.path.basename(path))[0]
                    module = _run_module(f"{prefix}.{stem}_{digest}", path, data)
                else:
                    # The top package's name is replaced by one that names its folder: two copies
                    # of a kernel package (another checkout, a test's) never share modules.
                    top, _, below = dotted.partition(".")
                    name = f"{prefix}_{top}_{hashlib.sha256(root.encode()).hexdigest()[:12]}"
                    folder = root
                    _package(name, folder)
                    for part in below.split(".")[:-1]:
                        name, folder = f"{name}.{part}", os.path.join(folder, part)
                        _package(name, folder)
                    name = f"{name}.{below.rpartition('.')[2]}"
                    module = sys.modules.get(name)  # imported already, by another kernel file
                    if module is None:
                        module = _run_module(name, path, data)
                        setattr(sys.modules[name.rpartition(".")[0]], name.rpartition(".")[2], module)
                    elif os.path.realpath(path) in state.fingerprints:  # the bytes _SourceLoader ran
                        data = None
                    else:
                        with open(module.__file__, "rb") as f:
                            data = f.read()
            finally:
                knobs.runtime.interpret = saved
        if not interpreted:
            state.fingerprints[path] = (state.fingerprints[os.path.realpath(path)] if data is None
                                        else source_fingerprint(data))
        state.modules[(path, interpreted)] = module
        return module


def _default_of(param):
    """A parameter's default as tjit passes values: (True, value as JSON: None, bool, int, float, str,
    {"dtype": name}), or (False, None) when it has none, or one no C++ argument could give (a tuple,
    an object): callers must then pass it."""
    default = param._param.default
    if default is inspect.Parameter.empty:
        return False, None
    if isinstance(default, tl.constexpr):
        default = default.value
    if isinstance(default, int) and not isinstance(default, bool) and not -2**63 <= default < 2**63:
        return False, None
    if default is None or isinstance(default, (bool, int, float, str)) or is_element_dtype(default):
        return True, constexpr_json(default)
    return False, None


def _no_such_kernel(path, module, name):
    """The error for a kernel name `path` does not define: the closest names it does define first
    (a misspelling), then every kernel it defines."""
    kernels = sorted(n for n, v in vars(module).items()
                     if not n.startswith("__") and isinstance(unwrap(v), JITFunction))
    close = difflib.get_close_matches(name, kernels, n=3, cutoff=0.6)
    text = f"{path} defines no function named {name!r}"
    if close:
        text += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if kernels:
        text += f" (its @triton.jit kernels: {', '.join(kernels)})"
    else:
        text += " (it defines no @triton.jit kernel)"
    return text


def _registered_kernel(path, name):
    """The kernel object tjit.jit registered as `name` of `path` (the user's own object: importing the
    file again would make another), or None."""
    front_end = sys.modules.get("tjit.python_kernels")
    return None if front_end is None else front_end.registered_kernel(path, name)


def load_kernel(path, name):
    """Returns (handle, [(name, is_constexpr, is_const, dns, dns_on_alignment, annotation,
    (has_default, default))],
    [(source path, fingerprint)], triton version, tuning description (autotune.tuning_description))."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"kernel file {path} does not exist")
    wrapped = _registered_kernel(path, name)
    if wrapped is not None:
        module = sys.modules.get(unwrap(wrapped).__module__)
        with state.lock:
            if path not in state.fingerprints:
                with open(path, "rb") as f:
                    state.fingerprints[path] = source_fingerprint(f.read())
    else:
        module = import_file(path)
        if not hasattr(module, name):
            raise AttributeError(_no_such_kernel(path, module, name))
        wrapped = without_front_end(getattr(module, name))
    fn = unwrap(wrapped)
    if not isinstance(fn, JITFunction):
        raise TypeError(f"{name!r} in {path} is not a @triton.jit function")
    params = [(p.name, bool(p.is_constexpr), bool(p.is_const), bool(p.do_not_specialize),
               bool(p.do_not_specialize_on_alignment), "" if p.is_constexpr else p.annotation_type, _default_of(p))
              for p in fn.params]
    try:
        tuning = tuning_description(wrapped, fn)
    except TypeError as e:  # the kernel still runs with every argument given (operator()), not through run()
        tuning = json.dumps({"unsupported": str(e)})
    sources = source_files(path, module)
    with state.lock:
        state.kernels.append((path, name, fn))
        state.wrapped[len(state.kernels) - 1] = wrapped
        return len(state.kernels) - 1, params, sources, triton.__version__, tuning
