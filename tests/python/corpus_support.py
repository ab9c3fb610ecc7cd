"""What test_python_kernels_corpus.py and test_python_kernels_peers.py share: loading the corpus's
and the peers' kernels, Python Triton's own launches to compare with, tensors and skips."""

import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile

import pytest
import torch
import triton
import triton.language as tl

import tjit
import triton_interpreted
from triton_interpreted import alone, resolve

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.realpath(os.path.join(HERE, os.pardir, "cpp", "kernels"))
CORPUS = ("file", os.path.join(KERNELS, "corpus_kernels.py"))
CONFORMANCE = ("file", os.path.join(KERNELS, "conformance_kernels.py"))
NAN = float("nan")
TL_DTYPE = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
            torch.int32: tl.int32, torch.int64: tl.int64}

# --- Loading kernels ----------------------------------------------------------------------------

def module_of(source):
    """The module of a kernel source (triton_interpreted.module_of), under names of this test's own."""
    return triton_interpreted.module_of(source, "tjit_corpus")


def kernel_of(source, name):
    return getattr(module_of(source), name)


def peer_folder(package, env):
    """The folder of installed `package` (found, not imported: FlagGems' package refuses to load
    without a GPU), or $env; skips the test when there is neither."""
    root = os.environ.get(env)
    if not root:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            root = list(spec.submodule_search_locations)[0]
    if not root or not os.path.isdir(root):
        pytest.skip(f"{package} is not installed here (pip install it, or set {env} to its package folder): its "
                    "kernels are a peer's, never copied here")
    return root


def liger(relative):
    """A Liger-Kernel module by name (its files import their package's helpers by absolute name)."""
    root = peer_folder("liger_kernel", "TJIT_CORPUS_LIGER_KERNEL")
    dotted = "liger_kernel." + relative.replace("/", ".").removesuffix(".py")
    return ("module", dotted, os.path.dirname(root))


def flag_gems_file(relative):
    """A FlagGems kernel file whose module imports nothing of flag_gems: loaded by path, without
    importing the package (which needs a GPU), as the C++ corpus loads it."""
    path = os.path.join(peer_folder("flag_gems", "TJIT_CORPUS_FLAG_GEMS"), relative)
    if not os.path.isfile(path):
        pytest.skip(f"this FlagGems has no {relative}")
    return ("file", path)


# --- Python Triton's own launches -------------------------------------------------------------


def call(grid, *args, config=None, **kwargs):
    """One launch `kernel[grid](*args, **kwargs)` for python_triton; config: the index of the only
    config an autotuned kernel keeps (triton_interpreted.alone)."""
    return {"grid": grid, "args": args, "kwargs": kwargs, "config": config}


_alone = {}


def alone_cached(kernel, index):
    """triton_interpreted.alone, one object per (kernel, config): tjit.jit registers each new
    autotune layer under a name of its own, and the same layer launches the same binary again."""
    key = (id(kernel), index)
    if key not in _alone:
        _alone[key] = (kernel, alone(kernel, index))
    return _alone[key][1]


def _meta(kernel, launch):
    """What Python Triton gives a grid callable: the arguments by name, the config's values."""
    from triton.runtime.jit import JITFunction
    fn = kernel
    while not isinstance(fn, JITFunction):
        fn = fn.fn
    meta = dict(zip(fn.arg_names, launch["args"]))
    meta.update(launch["kwargs"])
    if launch["config"] is not None:
        meta.update(kernel.configs[launch["config"]].all_kwargs())
    return meta


def python_triton(device, source, name, launches):
    """Python Triton's launches of kernel `name` of `source`, in order (see the module's notes): on
    CUDA here, on the same kernel object tjit.jit wraps; on the CPU in a process of its own under
    TRITON_INTERPRET=1 (triton_interpreted.py), whose outputs are copied back into the tensors
    the launches were given."""
    kernel = kernel_of(source, name)
    if device == "cuda":
        for launch in launches:
            k = kernel if launch["config"] is None else alone_cached(kernel, launch["config"])
            k[launch["grid"]](*resolve(launch["args"]), **resolve(launch["kwargs"]))
        torch.cuda.synchronize()
        return
    for launch in launches:
        if callable(launch["grid"]):
            launch["grid"] = launch["grid"](_meta(kernel, launch))
    with tempfile.TemporaryDirectory(prefix="tjit-corpus-") as folder:
        given, result = os.path.join(folder, "launches.pt"), os.path.join(folder, "result.pt")
        torch.save([{**launch, "source": source, "name": name} for launch in launches], given)
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        run = subprocess.run([sys.executable, triton_interpreted.__file__, given, result], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"Python Triton's interpreted launch of {name} failed:\n{run.stderr[-4000:]}"
        triton_interpreted.copy_back(launches, torch.load(result, weights_only=False))


def one_config_matches(tjit_outputs, python_outputs, what):
    """tjit's outputs from a kernel's own autotuner equal, bit for bit, Python Triton's from one of
    the configs it could choose (python_outputs: config index -> outputs); returns that index."""
    matching = [i for i, outputs in python_outputs.items()
                if all(torch.equal(mine, theirs) for mine, theirs in zip(tjit_outputs, outputs))]
    assert matching, f"{what}: tjit's outputs equal Python Triton's for none of configs {list(python_outputs)}"
    return matching[0]


def kept_configs(kernel, args, kwargs):
    """Indices of the configs @triton.autotune's early_config_prune keeps for a call (all of them
    without one), as Autotuner.prune_configs calls it: positional arguments by name, keywords as
    keywords."""
    if not kernel.early_config_prune:
        return list(range(len(kernel.configs)))
    from triton.runtime.jit import JITFunction
    fn = kernel
    while not isinstance(fn, JITFunction):
        fn = fn.fn
    kept = kernel.early_config_prune(kernel.configs, dict(zip(fn.arg_names, args)), **kwargs)
    return [i for i, config in enumerate(kernel.configs) if any(config is k for k in kept)]


# --- Tensors and devices ------------------------------------------------------------------------


def poisoned(shape, dtype, device):
    if dtype.is_floating_point:
        return torch.full(shape, NAN, dtype=dtype, device=device)
    return torch.full(shape, -1, dtype=dtype, device=device)


def randn(*shape, dtype=torch.float32, device):
    return torch.randn(*shape, device=device).to(dtype)


def cuda_sm90(device, what):
    """Skips a CUDA case on a GPU below sm_90, which `what` needs."""
    if device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        major, minor = torch.cuda.get_device_capability()
        pytest.skip(f"{what} needs sm_90+; this GPU is sm_{major}{minor}")


def gpu_only(device, why):
    if device == "cpu":
        pytest.skip(f"needs a CUDA GPU: {why}")


def launch_both(device, mine, theirs, interpreter_error, why):
    """tjit's launch `mine()`, then Python Triton's `theirs()`. On the CPU, where tjit's launch fails
    in Triton's interpreter with `interpreter_error` in its message, Python Triton's interpreted
    launch must fail the same way, and the test skips, saying why; any other error fails it."""
    try:
        mine()
    except RuntimeError as error:
        if device != "cpu" or "Triton's interpreter failed" not in str(error) or interpreter_error not in str(error):
            raise
        try:
            theirs()
        except AssertionError as python_error:
            if interpreter_error not in str(python_error):
                raise
            pytest.skip(f"Triton's interpreter cannot run this kernel ({why}; Python Triton's interpreted launch "
                        f"fails the same way): {str(error).splitlines()[0][:300]}")
        pytest.fail(f"tjit's interpreted launch failed where Python Triton's ran: {error}")
    theirs()


def autotuned_against_triton(device, kernel, name, grid, launch, keywords=None, pin=-1):
    """tjit.jit's launch of autotuned `kernel`, and one pinned to its kept config `pin`, against
    Python Triton's launch of each config it keeps: `launch(config)` makes a call (corpus_support.call)
    and its poisoned outputs. Asserts the pinned launch equals Triton's with that config and the
    autotuned one equals Triton's with one of them; returns tjit.jit's outputs and the kept configs."""
    mine, mine_outputs = launch()
    tjit.jit(kernel)[grid](*mine["args"], **mine["kwargs"])
    candidates = kept_configs(kernel, mine["args"], keywords or {})
    pinned, pinned_outputs = launch()
    tjit.jit(alone_cached(kernel, candidates[pin]))[grid](*pinned["args"], **pinned["kwargs"])
    theirs = {i: launch(i) for i in candidates}
    python_triton(device, CORPUS, name, [make for make, _ in theirs.values()])
    python_outputs = {i: outputs for i, (_, outputs) in theirs.items()}
    assert all(torch.equal(a, b) for a, b in zip(pinned_outputs, python_outputs[candidates[pin]]))
    one_config_matches(mine_outputs, python_outputs, name)
    return mine_outputs, candidates
