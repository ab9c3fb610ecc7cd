"""Python half of tjit's embedded Triton runtime.

The C++ runtime (libtjit_python) executes this module inside its embedded interpreter and calls
three functions: load_kernel, compile and run_interpreted (tjit's tests also call
triton_specialization). Everything that depends on Triton's Python API lives here, so a new
Triton release means changing this file only.

Supported: Triton 3.4 to 3.9 (tests/compat/triton_compat.sh runs the version-sensitive tests
against each). Where releases differ, the code says which versions need what, checked against
each release's sources; _TRITON_VERSION is the installed one as (major, minor).
"""

import ast
import builtins
import contextlib
import difflib
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
import site
import sys
import sysconfig
import threading
from types import ModuleType

import numpy

import triton

_SUPPORTED = "3.4 to 3.9"
_match = re.match(r"(\d+)\.(\d+)", triton.__version__)
_TRITON_VERSION = (int(_match[1]), int(_match[2])) if _match else (0, 0)
# Checked before anything else is imported from triton: an older release lacks some of it (3.3 has
# no triton.knobs), and the user should read this rather than an ImportError about a name.
if _TRITON_VERSION < (3, 4):
    raise ImportError(f"tjit supports Triton {_SUPPORTED}, but the Triton found is {triton.__version__} "
                      f"({os.path.dirname(triton.__file__)}); install a supported one, e.g. "
                      "pip install triton==3.6.0")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.compiler.errors import CompilationError  # noqa: E402
from triton import knobs  # noqa: E402
from triton import language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

_lock = threading.Lock()
# Interpreted runs and interpreted imports flip process-wide Triton state
# (knobs.runtime.interpret), so they never overlap a compile: all of them hold this lock.
_mode_lock = threading.Lock()
_kernels = []  # handle -> (path, name, JITFunction)
_interpreted = {}  # handle -> InterpretedFunction
_modules = {}  # (absolute path, interpreted) -> module


def source_fingerprint(data):
    """The git blob id of a file's bytes: what tjit's kernel store records per source file (the
    C++ runtime computes the same to check a stored kernel against the files on disk)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


_fingerprints = {}  # absolute path -> fingerprint of the bytes this process executed


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


_PACKAGE_PREFIXES = ("tjit_kernels_", "tjit_kernels_interpreted_")  # _import_file's names of kernel packages


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Runs a module of a kernel package from its source bytes, never from a cached .pyc (one
    written in the same second as an edit of the same size passes as fresh), and records the
    fingerprint of the bytes it ran (compiled mode), which _source_files then reports."""

    def get_code(self, fullname):
        data = self.get_data(self.path)
        if not fullname.startswith("tjit_kernels_interpreted_"):
            _fingerprints[os.path.realpath(self.path)] = source_fingerprint(data)
        return builtins.compile(data, self.path, "exec", dont_inherit=True)


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
    _mode_lock held and the interpreter knob set: the modules its relative imports import run then,
    in the same mode."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel file {path}")
    module = importlib.util.module_from_spec(spec)
    code = builtins.compile(data, path, "exec", dont_inherit=True)  # this module defines compile()
    sys.modules[name] = module  # inspect.getsource (used by Triton) looks modules up here
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_file(path, interpreted=False):
    """Imports a kernel file once per mode. In interpreted mode every @triton.jit of the file
    (helpers too) becomes Triton's InterpretedFunction, as under TRITON_INTERPRET=1.
    A file inside a package (a folder with __init__.py, walking up) is imported as a module of
    that package, under a name private to the package's top folder and the mode, so its relative
    imports work and import the package's helpers in the same mode. The packages' __init__.py
    files are not run (_package).
    The module runs from the bytes that were fingerprinted, so a stored kernel never records a
    fingerprint of other source than the one it was compiled from (so do the modules it imports
    from its package: _SourceLoader)."""
    with _lock:
        module = _modules.get((path, interpreted))
        if module is not None:
            return module
        prefix = f"tjit_kernels{'_interpreted' if interpreted else ''}"
        root, dotted = _package_of(path)
        with open(path, "rb") as f:
            data = f.read()
        with _mode_lock:
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
                    elif os.path.realpath(path) in _fingerprints:  # the bytes _SourceLoader ran
                        data = None
                    else:
                        with open(module.__file__, "rb") as f:
                            data = f.read()
            finally:
                knobs.runtime.interpret = saved
        if not interpreted:
            _fingerprints[path] = _fingerprints[os.path.realpath(path)] if data is None else source_fingerprint(data)
        _modules[(path, interpreted)] = module
        return module


def _without_front_end(obj):
    """The kernel a tjit.jit object (tjit.python_kernels.JitKernel) launches, else `obj`: a kernel
    file may decorate its kernels with tjit.jit on top of @triton.jit."""
    while getattr(type(obj), "__tjit_jit__", False):
        obj = obj.kernel
    return obj


def _registered_kernel(path, name):
    """The kernel object tjit.jit registered as `name` of `path` (the user's own object: importing the
    file again would make another), or None."""
    front_end = sys.modules.get("tjit.python_kernels")
    return None if front_end is None else front_end.registered_kernel(path, name)


def _unwrap(obj):
    # triton.autotune / triton.heuristics wrap the JITFunction in `.fn`.
    obj = _without_front_end(obj)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = _without_front_end(obj.fn)
    return obj


def _wrappers(obj):
    """The @triton.autotune / @triton.heuristics layers around a kernel, outermost first."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    layers = []
    obj = _without_front_end(obj)
    while not isinstance(obj, JITFunction):
        if not isinstance(obj, (Autotuner, Heuristics)):
            raise TypeError(f"{type(obj).__name__} wraps the kernel; tjit runs @triton.jit kernels under "
                            "@triton.autotune and @triton.heuristics only")
        layers.append(obj)
        obj = obj.fn
    return layers


def _is_element_dtype(value):
    """A tl.dtype of an element type (tl.bfloat16), not a pointer or block type."""
    return isinstance(value, tl.dtype) and type(value) is tl.dtype


def _constexpr_value(name, value, what):
    if value is None or isinstance(value, (bool, int, float, str)) or _is_element_dtype(value):
        return value
    raise TypeError(f"{what} sets {name} to {value!r} ({type(value).__name__}); tjit passes None, bool, int, "
                    "float, str and tl.dtype meta-parameters")


def _constexpr_json(value):
    """A constexpr value as tjit's JSON holds it: a tl.dtype as {"dtype": name}."""
    return {"dtype": value.name} if _is_element_dtype(value) else value


def _tuning_description(obj, fn):
    """JSON text of what @triton.autotune and @triton.heuristics add to `fn` (empty when neither):
    the configs, the tuning key, reset_to_zero / restore_value, whether configs are pruned, the
    timing budget, and the parameters heuristics set (and whether they see the config)."""
    import json
    from triton.runtime.autotuner import Autotuner
    layers = _wrappers(obj)
    if not layers:
        return ""
    name = fn.__name__
    description = {"configs": [], "key": [], "reset_to_zero": [], "restore_value": [], "prune": False,
                   "warmup_ms": 25.0, "rep_ms": 100.0, "heuristics": [], "heuristics_see_config": False,
                   "autotuned": False}
    for layer in layers:
        if isinstance(layer, Autotuner):
            if description["autotuned"]:
                raise TypeError(f"{name} has two @triton.autotune decorators; tjit supports one")
            # Its own pre_hook / post_hook (around each timed run): named, for the runtime's error
            # when tuning needs them and no C++ ones were supplied (set_autotune_hooks).
            if layer.user_defined_pre_hook:
                description["tuner_pre_hook"] = _hook_name(layer.pre_hook)
            if layer.user_defined_post_hook:
                description["tuner_post_hook"] = _hook_name(layer.post_hook)
            if layer._do_bench is not None and layer.num_warmups is None and layer.num_reps is None \
                    and not layer.use_cuda_graph:
                raise TypeError(f"@triton.autotune of {name} has its own do_bench; tjit times configs itself")
            description["autotuned"] = True
            for config in layer.configs:
                if getattr(config, "ir_override", None):
                    raise TypeError(f"a config of {name} ({config}) has an ir_override, which tjit does not support")
                what = f"a config of {name}"
                description["configs"].append({
                    "kwargs": {k: _constexpr_json(_constexpr_value(k, v, what)) for k, v in config.kwargs.items()},
                    "num_warps": int(config.num_warps), "num_stages": int(config.num_stages),
                    "num_ctas": int(config.num_ctas), "maxnreg": int(config.maxnreg) if config.maxnreg else 0,
                    # Its pre_hook's name: the runtime records what the hook does to descriptors
                    # (descriptor_hook) and names it in errors.
                    **({"pre_hook": _hook_name(config.pre_hook)} if config.pre_hook is not None else {}),
                })
            description["key"] = list(layer.keys)
            description["reset_to_zero"] = list(layer.reset_to_zero)
            description["restore_value"] = list(layer.restore_value)
            description["prune"] = bool(layer.early_config_prune or layer.perf_model)
            if layer.num_warmups is not None:
                description["warmup_ms"] = float(layer.num_warmups)
            if layer.num_reps is not None:
                description["rep_ms"] = float(layer.num_reps)
        else:
            description["heuristics"] += list(layer.values)
            if description["autotuned"]:
                description["heuristics_see_config"] = True
    return json.dumps(description)  # configs keep their meta-parameters in source order, as Triton prints them


def _hook_name(hook):
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


@functools.lru_cache(maxsize=None)
def _installed_roots():
    """Folders of the standard library and of installed packages (not the user's own code)."""
    paths = sysconfig.get_paths()
    stdlib = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    packages = {os.path.realpath(paths[k]) for k in ("purelib", "platlib") if paths.get(k)}
    try:
        packages.update(os.path.realpath(p) for p in site.getsitepackages())
        packages.add(os.path.realpath(site.getusersitepackages()))
    except AttributeError:  # some virtual environments' site module lacks these
        pass
    return stdlib, packages


def _under(path, roots):
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _imported_module_names(source, package):
    """Absolute names of the modules an import statement of `source` names, parents included
    (`import a.b` runs a/__init__.py too; `from a import b` may import the submodule a.b)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except (ImportError, ValueError):
                    continue
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return names


_sources = {}  # kernel file -> its _source_files result (a file's imports do not depend on the function)


def _source_files(path, module):
    """[(path, fingerprint)] of the kernel file and of every source file whose change can change
    what it compiles to: the modules it imports (its @triton.jit helpers and the globals it
    reads), followed through the user's own files. Installed packages are recorded where a user
    file imports them but not followed; the standard library is left out, and Triton is covered
    by its version."""
    with _lock:
        if path in _sources:
            return _sources[path]
    stdlib, packages = _installed_roots()
    found = {path: _fingerprints[path]}
    pending = [(path, module)]
    while pending:
        current, current_module = pending.pop()
        try:
            with open(current, "rb") as f:
                names = _imported_module_names(f.read(), getattr(current_module, "__package__", None) or "")
        except (OSError, SyntaxError):
            continue
        for name in sorted(names):
            imported = sys.modules.get(name)
            file = getattr(imported, "__file__", None)
            if not file or name == "triton" or name.startswith("triton."):
                continue
            file = os.path.realpath(file)
            if file in found or not os.path.isfile(file):
                continue
            in_packages = _under(file, packages)
            if not in_packages and _under(file, stdlib):
                continue
            if file in _fingerprints:  # the bytes a kernel package's module ran from
                found[file] = _fingerprints[file]
            else:
                with open(file, "rb") as f:
                    found[file] = source_fingerprint(f.read())
            if not in_packages:
                pending.append((file, imported))
    result = sorted(found.items(), key=lambda item: (item[0] != path, item[0]))
    with _lock:
        _sources[path] = result
    return result


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
    if default is None or isinstance(default, (bool, int, float, str)) or _is_element_dtype(default):
        return True, _constexpr_json(default)
    return False, None


def _no_such_kernel(path, module, name):
    """The error for a kernel name `path` does not define: the closest names it does define first
    (a misspelling), then every kernel it defines."""
    kernels = sorted(n for n, v in vars(module).items()
                     if not n.startswith("__") and isinstance(_unwrap(v), JITFunction))
    close = difflib.get_close_matches(name, kernels, n=3, cutoff=0.6)
    text = f"{path} defines no function named {name!r}"
    if close:
        text += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if kernels:
        text += f" (its @triton.jit kernels: {', '.join(kernels)})"
    else:
        text += " (it defines no @triton.jit kernel)"
    return text


def load_kernel(path, name):
    """Returns (handle, [(name, is_constexpr, is_const, dns, dns_on_alignment, annotation,
    (has_default, default))],
    [(source path, fingerprint)], triton version, tuning description (_tuning_description))."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"kernel file {path} does not exist")
    wrapped = _registered_kernel(path, name)
    if wrapped is not None:
        module = sys.modules.get(_unwrap(wrapped).__module__)
        with _lock:
            if path not in _fingerprints:
                with open(path, "rb") as f:
                    _fingerprints[path] = source_fingerprint(f.read())
    else:
        module = _import_file(path)
        if not hasattr(module, name):
            raise AttributeError(_no_such_kernel(path, module, name))
        wrapped = _without_front_end(getattr(module, name))
    fn = _unwrap(wrapped)
    if not isinstance(fn, JITFunction):
        raise TypeError(f"{name!r} in {path} is not a @triton.jit function")
    params = [(p.name, bool(p.is_constexpr), bool(p.is_const), bool(p.do_not_specialize),
               bool(p.do_not_specialize_on_alignment), "" if p.is_constexpr else p.annotation_type, _default_of(p))
              for p in fn.params]
    try:
        tuning = _tuning_description(wrapped, fn)
    except TypeError as e:  # the kernel still runs with every argument given (operator()), not through run()
        import json
        tuning = json.dumps({"unsupported": str(e)})
    sources = _source_files(path, module)
    with _lock:
        _kernels.append((path, name, fn))
        _wrapped[len(_kernels) - 1] = wrapped
        return len(_kernels) - 1, params, sources, triton.__version__, tuning


_wrapped = {}  # handle -> the module's object: the kernel under its autotune / heuristics layers


class _DtypeOnly:
    """What a heuristic sees of a tensor argument: its dtype. tjit remembers a heuristic's values per
    scalar argument values and tensor dtypes, so a heuristic that read anything else of a tensor
    could be silently wrong for the next call; it fails instead."""

    def __init__(self, name, dtype):
        self._name, self.dtype = name, dtype

    def __getattr__(self, attribute):
        raise AttributeError(f"a @triton.heuristics function read {self._name}.{attribute}; under tjit a heuristic "
                             f"sees only the dtype of a tensor argument (its values are remembered per scalar "
                             f"argument values and tensor dtypes): pass what it needs as a scalar argument")


def _python_value(a, dtype_only_name=None):
    """A value from the runtime as Python Triton's caller would pass it: tensors arrive as DLPack
    capsules (shared memory), host tensor descriptors as dicts, tuples as tuples. With
    dtype_only_name, a tensor (in a tuple or under a descriptor too) is only its dtype (_DtypeOnly)."""
    import torch
    if isinstance(a, tuple):
        return tuple(_python_value(e, dtype_only_name) for e in a)
    if isinstance(a, dict):  # a host tensor descriptor
        base = _python_value(a["tensordesc"], dtype_only_name)
        if dtype_only_name is not None:  # what a heuristic may read of it: no data pointer
            import types
            return types.SimpleNamespace(base=base, shape=a["shape"], strides=a["strides"],
                                         block_shape=a["block_shape"], padding=a["padding"])
        from triton.tools.tensor_descriptor import TensorDescriptor
        padding = {"padding": a["padding"]} if a["padding"] != "zero" else {}  # Triton 3.4 has no padding
        return TensorDescriptor(base, a["shape"], a["strides"], a["block_shape"], **padding)
    if type(a).__name__ == "PyCapsule":
        tensor = torch.from_dlpack(a)
        return _DtypeOnly(dtype_only_name, tensor.dtype) if dtype_only_name is not None else tensor
    return a


def _named_args(handle, args, tensors_as_dtype):
    names = _caller_parameter_names(handle)
    return {name: _python_value(value, name if tensors_as_dtype else None) for name, value in zip(names, args)}


@functools.lru_cache(maxsize=None)
def _caller_parameter_names(handle):
    """The parameters a caller passes: those no config and no heuristic sets."""
    from triton.runtime.autotuner import Autotuner
    _, _, fn = _kernels[handle]
    set_by_layers = set()
    for layer in _wrappers(_wrapped[handle]):
        if isinstance(layer, Autotuner):
            for config in layer.configs:
                set_by_layers.update(config.kwargs)
        else:
            set_by_layers.update(layer.values)
    return [p.name for p in fn.params if p.name not in set_by_layers]


def heuristic_values(handle, args, config_index):
    """The values @triton.heuristics set for a call with `args` (the caller's arguments, in order)
    and the chosen config (-1: none), as [(parameter index, value)], evaluated layer by layer as
    Python Triton's run() does."""
    from triton.runtime.autotuner import Autotuner
    _, _, fn = _kernels[handle]
    nargs = _named_args(handle, args, tensors_as_dtype=True)
    kwargs = {}
    set_by_heuristics = []
    for layer in _wrappers(_wrapped[handle]):
        if isinstance(layer, Autotuner):
            if config_index >= 0:
                kwargs.update(layer.configs[config_index].all_kwargs())
        else:
            for name, heuristic in layer.values.items():
                kwargs[name] = heuristic({**nargs, **kwargs})
                set_by_heuristics.append(name)
    index = {p.name: i for i, p in enumerate(fn.params)}
    return [(index[name], _constexpr_value(name, kwargs[name], f"the heuristic for {name} of {fn.__name__}"))
            for name in set_by_heuristics]


def _keywords_accepted(function, named):
    """The entries of `named` that `function` takes as keyword arguments: all of them when it has
    **kwargs, else those it names."""
    import inspect
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return dict(named)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(named)
    names = {p.name for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                       inspect.Parameter.KEYWORD_ONLY)}
    return {k: v for k, v in named.items() if k in names}


def prune_configs(handle, args):
    """Indices of the configs @triton.autotune's prune_configs_by keeps for a call with `args` (the
    caller's arguments, in order), in the order it ranks them, as Autotuner.prune_configs does.

    A C++ caller passes every argument by position, where a Python caller may pass some by keyword
    (`kernel[grid](a, b, N_CTX=n, FLATTEN=True)`), and prune functions read those from **kwargs.
    So early_config_prune gets every argument both ways: `named_args` and, as far as its signature
    takes them, keyword arguments; perf_model gets them with each config's values."""
    from triton.runtime.autotuner import Autotuner
    AutotunerError = getattr(triton.runtime.autotuner, "AutotunerError", RuntimeError)  # Triton 3.4: none
    tuner = next(layer for layer in _wrappers(_wrapped[handle]) if isinstance(layer, Autotuner))
    nargs = _named_args(handle, args, tensors_as_dtype=False)
    name = _kernels[handle][2].__name__
    kept = tuner.configs
    if tuner.early_config_prune:
        kept = tuner.early_config_prune(tuner.configs, nargs, **_keywords_accepted(tuner.early_config_prune, nargs))
        if not kept:
            raise AutotunerError(f"No valid autotuner configs after pruning {name}: `early_config_prune` should "
                                 "return at least one config.")
    if tuner.perf_model:
        top_k = tuner.configs_top_k
        if isinstance(top_k, float) and top_k <= 1.0:
            top_k = int(len(tuner.configs) * top_k)
        elif not isinstance(top_k, int):
            raise TypeError(f"prune_configs_by of {name}: top_k must be a float <= 1.0 or an int")
        if len(kept) > top_k:
            estimate = {config: tuner.perf_model(**_keywords_accepted(tuner.perf_model,
                                                                      {**nargs, **config.all_kwargs()}))
                        for config in kept}
            kept = sorted(estimate, key=estimate.get)[:top_k]
    positions = {id(config): i for i, config in enumerate(tuner.configs)}
    result = []
    for config in kept:
        if id(config) not in positions:
            raise TypeError(f"prune_configs_by of {name} returned a config that is not one of its configs; tjit "
                            "can only run the listed ones")
        result.append(positions[id(config)])
    return result


def _with_reason(error):
    # Triton 3.4: a call that fails inside a kernel (tl.arange(0, 3), a failing @jit helper) raises
    # a CompilationError with no message of its own, the reason only in __cause__, which the C++
    # side never shows. 3.5 and later put str(cause) into the message; do the same, down the chain.
    cause = error.__cause__
    if not isinstance(error, CompilationError) or error.error_message or cause is None:
        return error
    cause = _with_reason(cause)
    explained = CompilationError(error.src, error.node, str(cause))
    explained.__cause__ = cause
    return explained


class _SourceKeyedAST(ASTSource):
    """Triton 3.4: the compile cache key (ASTSource.hash) leaves out the values of globals a kernel
    reads from other modules (3.5 adds them), so after such a constant was edited triton.compile
    returned the old binary from Triton's cache. Key on the fingerprints of every source file too."""

    def __init__(self, fn, signature, constexprs, attrs, fingerprints):
        super().__init__(fn, signature, constexprs, attrs)
        self._fingerprints = fingerprints

    def hash(self):
        return hashlib.sha256((super().hash() + self._fingerprints).encode("utf-8")).hexdigest()


def _ast_source(path, fn, signature, consts, attrs):
    if _TRITON_VERSION >= (3, 5):
        return ASTSource(fn, signature, consts, attrs)
    fingerprints = "-".join(blob for _, blob in _sources.get(path, ()))
    return _SourceKeyedAST(fn, signature, consts, attrs, fingerprints)


def tuple_type(text):
    """Triton's type of a tuple argument from its text: "[*fp32,[i32,constexpr]]" ->
    ("*fp32", ("i32", "constexpr")); any other type text is returned as it is."""
    if not text.startswith("["):
        return text
    stack = [[]]
    token = ""
    for c in text:
        if c in "[],":
            if token:
                stack[-1].append(token)
                token = ""
            if c == "[":
                stack.append([])
            elif c == "]":
                done = tuple(stack.pop())
                stack[-1].append(done)
        else:
            token += c
    return stack[0][0]


def _python_constexpr(value):
    return tl.dtype(value["dtype"]) if isinstance(value, dict) else value  # JSON writes a dtype so


def compile(handle, types, constexprs, divisible, target, options, tuple_constexprs=(), tuple_divisible=()):
    """triton.compile for one specialisation; returns (cubin, metadata dict). Tuple parameters have
    their type as text ("[*fp32,i32]"), their constexpr and divisible elements by path."""
    path, _, fn = _kernels[handle]
    backend_name, arch, warp_size = target
    gpu_target = GPUTarget(backend_name, arch, warp_size)
    backend = make_backend(gpu_target)
    signature = {p.name: tuple_type(t) for p, t in zip(fn.params, types)}
    consts = {(i, ): _python_constexpr(v) for i, v in constexprs}
    consts.update({tuple(p): _python_constexpr(v) for p, v in tuple_constexprs})
    attrs = {(i, ): backend.parse_attr("D") for i in divisible}
    attrs.update({tuple(p): backend.parse_attr("D") for p in tuple_divisible})
    opts = backend.parse_options(dict(options))
    with _mode_lock:
        try:
            kernel = triton.compile(_ast_source(path, fn, signature, consts, attrs), target=gpu_target,
                                    options=opts.__dict__)
        except CompilationError as e:
            if _TRITON_VERSION >= (3, 5):
                raise
            raise _with_reason(e) from e.__cause__
    md = kernel.metadata
    return kernel.asm["cubin"], {
        "name": md.name,
        "shared": int(md.shared),
        "num_warps": int(md.num_warps),
        "num_ctas": int(md.num_ctas),
        "global_scratch_size": int(getattr(md, "global_scratch_size", 0) or 0),
        "global_scratch_align": int(getattr(md, "global_scratch_align", 1) or 1),
        "profile_scratch_size": int(getattr(md, "profile_scratch_size", 0) or 0),
        "profile_scratch_align": int(getattr(md, "profile_scratch_align", 1) or 1),
        "launch_cooperative_grid": bool(getattr(md, "launch_cooperative_grid", False)),
        "launch_pdl": bool(getattr(md, "launch_pdl", False)),
        "tensor_descriptors": _descriptor_launches(types, getattr(md, "tensordesc_meta", None)),
    }


@functools.lru_cache(maxsize=None)
def _decomposed_descriptor_flags():
    """How many i1 flags Triton's launcher passes after a decomposed tensor descriptor's base,
    shape and strides (none in 3.4; padding == "nan" from 3.5; also round_f32_to_tf32 in 3.9),
    read off Triton's own decomposition of a one-dimensional stand-in."""
    import types as _types
    stand_in = _types.SimpleNamespace(base=0, shape=[1], strides=[1], block_shape=[1], padding="zero",
                                      round_f32_to_tf32=False)
    try:
        from triton.backends.driver import decompose_descriptor  # Triton 3.9+
        parts = decompose_descriptor(stand_in)
    except ImportError:
        from triton.backends.nvidia.driver import make_tensordesc_arg
        parts = make_tensordesc_arg(stand_in, None)
    return len(parts) - 5  # base, shape, strides, flags..., shape, strides


def _descriptor_launches(types, tensordesc_meta):
    """How each tensor-descriptor parameter reaches the compiled kernel (CompiledKernel's
    tensor_descriptors): the TMA metadata Triton compiled it with, element type as the host's
    CUtensorMapDataType; or, without metadata (no TMA below sm_90), the decomposition's flags."""
    count = sum(1 for t in types if t.startswith("tensordesc"))
    if count == 0:
        return []
    if not tensordesc_meta:
        flags = _decomposed_descriptor_flags()
        return [{"tma": False, "flags": flags} for _ in range(count)]
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST
    if len(tensordesc_meta) != count:
        raise RuntimeError(f"Triton compiled {len(tensordesc_meta)} tensor descriptors for {count} parameters")
    return [{"tma": True, "swizzle": int(m["swizzle"]), "elem_size": int(m["elem_size"]),
             "elem_type": int(TMA_DTYPE_DEVICE_TO_HOST[m["elem_type"]]),
             "block_size": [int(b) for b in m["block_size"]], "fp4_padded": bool(m["fp4_padded"])}
            for m in tensordesc_meta]


@contextlib.contextmanager
def _active_driver(stand_in):
    from triton.runtime.driver import driver
    # Triton 3.4 keeps the active driver in the attribute `active`; 3.5 and later in `_active`,
    # behind a property whose first read creates the default driver (which fails without a GPU):
    # save and restore the slot itself.
    slot = "_active" if "_active" in vars(driver) else "active"
    saved = vars(driver)[slot]
    driver.set_active(stand_in)
    try:
        yield
    finally:
        setattr(driver, slot, saved)


def triton_specialization(fn, args, target):
    """What Python Triton itself derives for the launch fn[grid](*args) on target (backend, arch,
    warp_size), as tjit's Specialization holds it: (types, [(index, constexpr value)], [indices
    divisible by 16], [(path, constexpr value)] and [paths divisible by 16] inside tuples). Runs Triton's own JITFunction.run (its binder, then the packing that feeds
    triton.compile) with a stand-in driver that names the target, and stops it through
    knobs.runtime.jit_cache_hook before it compiles, so no GPU is needed. tjit's tests compare the
    C++ runtime's classification with it."""
    gpu_target = GPUTarget(*target)

    class TargetDriver:

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return gpu_target

    captured = {}

    def stop_before_compiling(*, compile, **_):
        captured.update(compile)
        return True  # run() returns without compiling

    saved_hook = knobs.runtime.jit_cache_hook
    with _mode_lock, _active_driver(TargetDriver()):
        knobs.runtime.jit_cache_hook = stop_before_compiling
        try:
            fn.run(*args, grid=(1, ), warmup=True)
        finally:
            knobs.runtime.jit_cache_hook = saved_hook
    if not captured:
        raise RuntimeError(f"{fn.__name__}: Triton's run() never reached its jit_cache_hook")
    signature, constants, attrs = captured["signature"], captured["constants"], captured["configs"][0]
    types = [_type_text(signature[p.name]) for p in fn.params]
    constexprs = sorted((path[0], value) for path, value in constants.items() if len(path) == 1)
    divisible = sorted(path[0] for path, values in attrs.items()
                       if len(path) == 1 and ["tt.divisibility", 16] in values)
    tuple_constexprs = sorted((list(path), value) for path, value in constants.items() if len(path) > 1)
    tuple_divisible = sorted(list(path) for path, values in attrs.items()
                             if len(path) > 1 and ["tt.divisibility", 16] in values)
    return types, constexprs, divisible, tuple_constexprs, tuple_divisible


def _type_text(t):
    """A signature type as tjit writes it: a tuple's as "[*fp32,i32]"."""
    return "[" + ",".join(_type_text(e) for e in t) + "]" if isinstance(t, tuple) else t


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


def _fix_interpreter_scalar_index():
    # Triton 3.4 to 3.6: the interpreter turns a scalar tensor into a Python int with int(array) on
    # a 1-element array (e.g. `for i in range(0, N, BLOCK)` with a runtime N); NumPy >= 2.4 rejects
    # that (triton-lang/triton#9171; 3.7 squeezes the array first). Convert through the element.
    import numpy as np
    if _TRITON_VERSION >= (3, 7):
        return
    try:
        int(np.array([1]))
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
    interpreted = _interpreted.get(handle)
    if interpreted is None:
        if not _interpreted:
            if _TRITON_VERSION >= (3, 6):
                _restore_language_after_device_calls()
            _fix_interpreter_scalar_index()
        path, _, fn = _kernels[handle]
        # By the function's own name: tjit.jit may have registered the kernel under another.
        interpreted = _unwrap_interpreted(getattr(_import_file(path, interpreted=True), fn.__name__))
        _interpreted[handle] = interpreted
    path = _kernels[handle][0]
    values = [_python_value(a) for a in args]
    with _mode_lock:
        saved = knobs.runtime.interpret
        snapshot = _LanguageSnapshot() if _TRITON_VERSION < (3, 6) else None
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
    obj = _without_front_end(obj)
    while not isinstance(obj, InterpretedFunction) and hasattr(obj, "fn"):
        obj = _without_front_end(obj.fn)
    return obj


class _NotRecordable(Exception):
    """A config pre_hook did something whose effect tjit cannot record as descriptor fields."""


def _refuse(what):
    def refuse(self, *args, **kwargs):
        raise _NotRecordable(f"it {what} {object.__getattribute__(self, '_tjit_name')}")
    return refuse


class _Opaque:
    """What a recorded pre_hook sees of an argument whose value the recording does not key on (a
    tensor, a runtime scalar, a heuristic's value): any use of it makes the hook not recordable."""

    def __init__(self, name):
        object.__setattr__(self, "_tjit_name", name)

    __getattr__ = _refuse("reads an attribute of")
    __setattr__ = _refuse("sets an attribute of")
    __call__ = _refuse("calls")
    __bool__ = __int__ = __index__ = __float__ = _refuse("reads the value of")
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse("compares")
    __hash__ = __len__ = __iter__ = __getitem__ = __setitem__ = __contains__ = _refuse("uses")
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse("computes with")
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = __and__ = __or__ = __xor__ = _refuse("computes with")
    __str__ = __repr__ = __format__ = _refuse("prints")


def _descriptor_mirror_class():
    from triton.tools.tensor_descriptor import TensorDescriptor

    class DescriptorMirror(TensorDescriptor):
        """A host tensor descriptor argument as a recorded pre_hook sees it: a TensorDescriptor
        (isinstance holds) whose block_shape and padding the hook may set (and read back once set);
        reading the call's own fields (base, shape, strides) makes the hook not recordable."""

        def __init__(self, name):  # noqa: the dataclass's fields are the call's, never read here
            object.__setattr__(self, "_tjit_name", name)
            object.__setattr__(self, "_tjit_set", {})

        def __setattr__(self, attribute, value):
            name = object.__getattribute__(self, "_tjit_name")
            if attribute == "block_shape":
                value = list(value)
                if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    raise TypeError(f"a config pre_hook set {name}.block_shape to {value!r}; it takes a list of ints")
            elif attribute == "padding":
                if value not in ("zero", "nan"):
                    raise TypeError(f"a config pre_hook set {name}.padding to {value!r}; it is 'zero' or 'nan'")
            else:
                raise _NotRecordable(f"it sets {name}.{attribute} (tjit records block_shape and padding)")
            object.__getattribute__(self, "_tjit_set")[attribute] = value

        def __getattribute__(self, attribute):
            if attribute.startswith("__") or attribute.startswith("_tjit"):
                return object.__getattribute__(self, attribute)
            set_fields = object.__getattribute__(self, "_tjit_set")
            if attribute in set_fields:
                return set_fields[attribute]
            raise _NotRecordable(f"it reads {object.__getattribute__(self, '_tjit_name')}.{attribute}")

        __eq__ = _refuse("compares")
        __hash__ = object.__hash__
        __repr__ = _refuse("prints")

    return DescriptorMirror


_DescriptorMirror = None


def descriptor_hook(handle, config_index, arguments_json):
    """What config `config_index`'s pre_hook does to the host tensor descriptors of a call, as JSON
    text: {"descriptors": {name: {"block_shape": [...], "padding": "zero"}}} (the fields it set), or
    {"unsupported": why} when its effect is not only that.

    The hook gets what Python Triton's autotuner gives it ({**named arguments, **config kwargs}),
    mirrored from the runtime's description of the call (arguments_json: {"constexprs": {name:
    value}, "descriptors": [names], "others": [names]}): the caller's constexpr values as they are,
    each host descriptor as a TensorDescriptor that records the block_shape and padding set on it,
    and every other argument (tensors, runtime scalars, heuristics' values) as a stand-in whose use
    makes the hook unrecordable. So the effect depends only on the config, the caller's constexprs
    and which arguments are descriptors: the runtime's key for the recorded decision."""
    import json
    from triton.runtime.autotuner import Autotuner
    global _DescriptorMirror
    if _DescriptorMirror is None:
        _DescriptorMirror = _descriptor_mirror_class()
    arguments = json.loads(arguments_json)
    tuner = next(layer for layer in _wrappers(_wrapped[handle]) if isinstance(layer, Autotuner))
    config = tuner.configs[config_index]
    if config.pre_hook is None:
        return json.dumps({"descriptors": {}})
    mirrors = {name: _DescriptorMirror(name) for name in arguments["descriptors"]}
    nargs = {name: _Opaque(name) for name in arguments["others"]}
    nargs.update({name: _python_constexpr(value) for name, value in arguments["constexprs"].items()})
    nargs.update(mirrors)
    nargs.update(config.all_kwargs())
    try:
        config.pre_hook(nargs)
    except _NotRecordable as e:
        return json.dumps({"unsupported": f"{_hook_name(config.pre_hook)} is not descriptor-only: {e}"})
    set_fields = {name: object.__getattribute__(m, "_tjit_set") for name, m in mirrors.items()}
    return json.dumps({"descriptors": {name: fields for name, fields in set_fields.items() if fields}})
