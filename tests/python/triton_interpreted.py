"""Python Triton's own launches, for test_python_kernels_corpus.py to compare tjit.jit's with.

On CUDA the test launches Python Triton in its own process. CPU tensors take Triton's interpreter,
which needs triton.language itself imported in interpreted mode (TRITON_INTERPRET=1 before Triton
is imported: tl.zeros, tl.sum, tl.cdiv are @triton.jit functions of Triton's own); a process that
imported Triton to compile cannot run them interpreted. So the CPU launches run here, as a script
in a process of its own under TRITON_INTERPRET=1, as a user of the interpreter runs them:

    TRITON_INTERPRET=1 python triton_interpreted.py LAUNCHES.pt RESULT.pt

LAUNCHES.pt (torch.save) holds a list of launches, each a dict: "source" (("file", path) or
("module", dotted name, folder for sys.path or None)), "name" (the kernel's name in it), "grid"
(a tuple), "args", "kwargs", "config" (the index of the only config an autotuned kernel keeps, or
None: Python Triton's autotuner times its configs on a GPU only, and the tests compare the same
config on both sides). Arguments are what a Python caller passes (CPU tensors, host tensor
descriptors, tuples, tl dtypes, ...) and PointerArray for an int64 tensor of other tensors'
addresses, which mean nothing in another process. torch.save keeps tensors that share memory
sharing it, so one launch may read what an earlier one wrote. RESULT.pt gets every launch's
arguments as they are afterwards (the outputs written): the caller copies them back
(copy_back).
"""

import importlib
import importlib.util
import os
import sys

import torch


class PointerArray:
    """An int64 tensor of the tensors' data pointers (Triton's grouped GEMM tutorial passes one per
    operand), made where the kernel runs: `resolve` turns it into the tensor."""

    def __init__(self, tensors):
        self.tensors = list(tensors)

    def tensor(self):
        device = self.tensors[0].device
        return torch.tensor([t.data_ptr() for t in self.tensors], dtype=torch.int64, device=device)


def resolve(value):
    """`value` (an argument) with each PointerArray made into its tensor."""
    if isinstance(value, PointerArray):
        return value.tensor()
    if isinstance(value, tuple):
        return tuple(resolve(v) for v in value)
    if isinstance(value, list):
        return [resolve(v) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v) for k, v in value.items()}
    return value


def _tensors(value):
    """The tensors in `value`, in a fixed order (descriptors' bases and pointer arrays' tensors too)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, TensorDescriptor):
        yield value.base
    elif isinstance(value, PointerArray):
        yield from value.tensors
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for k in sorted(value):
            yield from _tensors(value[k])


def copy_back(launches, result):
    """Copies what the script's launches wrote (RESULT.pt's arguments) into the caller's tensors:
    the whole memory of each, so what a kernel wrote past a view's elements comes back too."""
    mine = list(_tensors([(launch["args"], launch["kwargs"]) for launch in launches]))
    theirs = list(_tensors(result))
    assert len(mine) == len(theirs)
    with torch.no_grad():
        for dst, src in zip(mine, theirs):
            dst.untyped_storage().copy_(src.untyped_storage())


def alone(kernel, index):
    """`kernel` (an @triton.autotune object) as a new autotuner that keeps config `index` only, over
    the same layers below it: Python Triton then launches that config without timing any. Its
    prune_configs_by is left out (a prune may drop the one config; callers choose among the configs
    the kernel's own prune keeps)."""
    import triton
    from triton.runtime.autotuner import Autotuner
    assert isinstance(kernel, Autotuner), kernel
    return triton.autotune(configs=[kernel.configs[index]], key=list(kernel.keys),
                           reset_to_zero=kernel.reset_to_zero or None,
                           restore_value=kernel.restore_value or None)(kernel.fn)


def fix_scalar_index():
    """triton-lang/triton#9171 (Triton 3.4 to 3.6 with NumPy >= 2.4): the interpreter turns a scalar
    tensor into a Python int with int() of a one-element array, which NumPy 2.4 refuses, so
    `range(n)` over a kernel's integer argument fails in the interpreter. Triton 3.7 takes the
    element (the fix applied here); everything else stays Triton's own."""
    import numpy
    import triton
    from triton.runtime import interpreter
    major, minor = (int(p) for p in triton.__version__.split(".")[:2])
    if (major, minor) >= (3, 7):
        return
    try:
        int(numpy.array([1]))
        return
    except TypeError:
        pass
    original = interpreter._patch_lang_tensor

    def patched(tensor, *scope):  # 3.6 passes the run's patch scope; 3.4 and 3.5 patch in place
        original(tensor, *scope)
        index = lambda self: int(self.handle.data.reshape(-1)[0])  # noqa: E731
        if scope:
            scope[0].set_attr(tensor, "__index__", index)
        else:
            tensor.__index__ = index

    interpreter._patch_lang_tensor = patched


_modules = {}


def module_of(source, prefix="triton_interpreted"):
    """The module of a kernel source: ("file", path) imported by path, under a name of its own
    (`prefix`_stem_N) in sys.modules (Triton reads the source through the module, and tjit.jit
    loads a kernel by its file and module-level name); ("module", dotted name, folder) imported by
    name, as its package imports it (`folder` goes on sys.path first when the package is found only
    there)."""
    if source not in _modules:
        if source[0] == "module":
            _, dotted, folder = source
            if folder and folder not in sys.path:
                sys.path.insert(0, folder)
            _modules[source] = importlib.import_module(dotted)
        else:
            path = source[1]
            stem = os.path.splitext(os.path.basename(path))[0]
            spec = importlib.util.spec_from_file_location(f"{prefix}_{stem}_{len(_modules)}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            _modules[source] = module
    return _modules[source]


def main(launches_path, result_path):
    assert os.environ.get("TRITON_INTERPRET") == "1", "run under TRITON_INTERPRET=1"
    import numpy
    fix_scalar_index()
    launches = torch.load(launches_path, weights_only=False)
    for launch in launches:
        kernel = getattr(module_of(launch["source"]), launch["name"])
        if launch["config"] is not None:
            kernel = alone(kernel, launch["config"])
        # Masked lanes compute with -inf and NaN, as on a GPU, where nothing warns.
        with numpy.errstate(all="ignore"):
            kernel[tuple(launch["grid"])](*resolve(launch["args"]), **resolve(launch["kwargs"]))
    torch.save([(launch["args"], launch["kwargs"]) for launch in launches], result_path)


if __name__ == "__main__":
    # As the module the test imports, so PointerArray is one class on both sides of the pickle.
    import triton_interpreted
    triton_interpreted.main(sys.argv[1], sys.argv[2])
