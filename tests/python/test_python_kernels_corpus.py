"""Issue 64's conformance corpus from Python: every kernel of tests/cpp/kernels/corpus_kernels.py
(modelled on Triton's tutorials) and tests/cpp/kernels/conformance_kernels.py, and the peers'
kernels tests/cpp/test_conformance_corpus.cpp loads from installed Liger-Kernel and FlagGems,
launched through `tjit.jit(kernel)[grid](...)` exactly as its own Python wrapper launches it (each
test says which wrapper), and through Python Triton's `kernel[grid](...)` on the same inputs: fresh
random inputs, outputs poisoned with NaN (integers with -1), the outputs equal bit for bit, and
close to torch's.

- CUDA: both launches in this process, on the same kernel objects.
- CPU: tjit.jit runs the kernel through Triton's interpreter. Python Triton's side is its own
  interpreted launch of the same file, in a process of its own under TRITON_INTERPRET=1
  (triton_interpreted.py says why and how), with one upstream interpreter bug fixed there as
  tjit's runtime fixes it (triton-lang/triton#9171: `range()` over an integer argument with
  NumPy >= 2.4), so descriptors, pointer arrays, autotuned and peers' kernels that the C++
  corpus compiles and skips on the CPU are compared here. A kernel the interpreter cannot run
  skips on the CPU, saying why: its tjit launch is tried, and the skip needs the interpreter's
  own error from it and from Python Triton's interpreted launch alike, so a kernel that starts
  to run there is compared from then on. GPU-only launches (PDL, FlagGems' operators, whose
  package refuses to load without a GPU) skip on the CPU, saying so.
- Autotuned kernels: tjit.jit launches the kernel's own autotuner, which tunes by itself, and the
  config it chose is not exposed in Python. So Python Triton launches each config the kernel's
  own prune keeps, alone (triton_interpreted.alone: a single-config autotuner over the same
  layers, which times nothing), and tjit's outputs must equal one of those bit for bit (that
  config's binary) besides being close to torch's; and tjit.jit of one such single-config
  autotuner must equal Python Triton's launch of it: the same config on both sides.
- Peers: a package that is not installed skips, saying so; $TJIT_CORPUS_LIGER_KERNEL and
  $TJIT_CORPUS_FLAG_GEMS name a package folder instead, as for the C++ corpus.
"""

import importlib
import importlib.util
import math
import os
import subprocess
import sys
import tempfile

import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import tjit
import triton_interpreted
from conftest import DEVICES
from triton_interpreted import PointerArray, alone, resolve

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.realpath(os.path.join(HERE, os.pardir, "cpp", "kernels"))
CORPUS = ("file", os.path.join(KERNELS, "corpus_kernels.py"))
CONFORMANCE = ("file", os.path.join(KERNELS, "conformance_kernels.py"))
NAN = float("nan")
TL_DTYPE = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
            torch.int32: tl.int32, torch.int64: tl.int64}

# --- Loading kernels ----------------------------------------------------------------------------

_modules = {}


def module_of(source):
    """The module of a kernel source: ("file", path) imported by path, under a name of its own in
    sys.modules (tjit.jit loads a kernel by its file and its module-level name, and Triton reads
    the source through the module); ("module", dotted name, folder) imported by name, as its
    package imports it (`folder` goes on sys.path first when the package is found only there)."""
    if source not in _modules:
        if source[0] == "module":
            _, dotted, folder = source
            if folder and folder not in sys.path:
                sys.path.insert(0, folder)
            _modules[source] = importlib.import_module(dotted)
        else:
            path = source[1]
            name = f"tjit_corpus_{os.path.splitext(os.path.basename(path))[0]}_{len(_modules)}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            _modules[source] = module
    return _modules[source]


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


@pytest.fixture(autouse=True)
def _device_memory_for_triton():
    # Descriptors made on the device need global scratch memory, which Python Triton asks
    # triton.set_allocator for (tjit takes it from torch's caching allocator).
    if torch.cuda.is_available():
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    yield


# === tests/cpp/kernels/conformance_kernels.py =======================================================


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_with_string_activation_dtype_and_defaults(device):
    # Triton's matmul tutorial, as tests/cpp/test_conformance.cpp calls it: the activation by name
    # and the output's dtype (a tl dtype) as constexprs, the block sizes left to the defaults.
    kernel = kernel_of(CONFORMANCE, "matmul_kernel")
    M, N, K = (200, 150, 300) if device == "cuda" else (70, 50, 90)
    a, b = randn(M, K, dtype=torch.float16, device=device), randn(K, N, dtype=torch.float16, device=device)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))

    def args(c, activation, out_dtype):
        return (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                activation, TL_DTYPE[out_dtype])

    cases, launches = [], []
    for activation in ("leaky_relu", "relu", "none"):
        for out_dtype in (torch.bfloat16, torch.float16, torch.float32):
            mine, theirs = poisoned((M, N), out_dtype, device), poisoned((M, N), out_dtype, device)
            tjit.jit(kernel)[grid](*args(mine, activation, out_dtype))
            launches.append(call(grid, *args(theirs, activation, out_dtype)))
            cases.append((activation, out_dtype, mine, theirs))
    python_triton(device, CONFORMANCE, "matmul_kernel", launches)
    product = a.float() @ b.float()
    for activation, out_dtype, mine, theirs in cases:
        assert torch.equal(mine, theirs), (activation, out_dtype)
        expected = {"leaky_relu": torch.where(product >= 0, product, product * 0.01), "relu": product.relu(),
                    "none": product}[activation]
        torch.testing.assert_close(mine.float(), expected, rtol=2e-2, atol=5e-2, msg=f"{activation} {out_dtype}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 1000, 5003])
def test_tuple_arguments(device, n):
    # Tensors and scalars in (nested) tuples, None in one, BLOCK's default or given by position.
    kernel = kernel_of(CONFORMANCE, "axpby_kernel")
    x, y = randn(n, device=device), randn(n, device=device)
    grid = (triton.cdiv(n, 256),)
    mine = [poisoned((n,), torch.float32, device) for _ in range(2)]
    theirs = [poisoned((n,), torch.float32, device) for _ in range(2)]
    tjit.jit(kernel)[grid]((x, y), mine[0], (2.0, (-0.5, 1.25)), n)
    tjit.jit(kernel)[grid]((x, y), mine[1], (2.0, (-0.5, None)), n, 256)
    python_triton(device, CONFORMANCE, "axpby_kernel", [call(grid, (x, y), theirs[0], (2.0, (-0.5, 1.25)), n),
                                                        call(grid, (x, y), theirs[1], (2.0, (-0.5, None)), n, 256)])
    assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1], theirs[1])
    torch.testing.assert_close(mine[0], x * 2.0 + y * -0.5 + 1.25)
    torch.testing.assert_close(mine[1], x * 2.0 + y * -0.5)


@pytest.mark.parametrize("device", DEVICES)
def test_persistent_matmul_with_host_descriptors(device):
    # Host tensor descriptors (TensorDescriptor.from_tensor) for A, B^T and C; ragged sizes: the
    # descriptors zero-fill and clip at the edges; persistent programs stride over the tiles.
    cuda_sm90(device, "TMA for host tensor descriptors")
    kernel = kernel_of(CONFORMANCE, "persistent_matmul_tma_kernel")
    if device == "cuda":
        (M, N, K), (BM, BN, BK), sms, options = (777, 520, 504), (128, 128, 64), 132, {"num_warps": 8, "num_stages": 3}
    else:
        (M, N, K), (BM, BN, BK), sms, options = (150, 72, 48), (64, 32, 32), 3, {"num_warps": 8, "num_stages": 3}
    a, b_t = randn(M, K, dtype=torch.float16, device=device), randn(N, K, dtype=torch.float16, device=device)
    mine, theirs = poisoned((M, N), torch.float16, device), poisoned((M, N), torch.float16, device)
    grid = (min(sms, triton.cdiv(M, BM) * triton.cdiv(N, BN)),)

    def args(c):
        return (TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b_t, [BN, BK]),
                TensorDescriptor.from_tensor(c, [BM, BN]), M, N, K, BM, BN, BK, sms)

    tjit.jit(kernel)[grid](*args(mine), **options)
    python_triton(device, CONFORMANCE, "persistent_matmul_tma_kernel", [call(grid, *args(theirs), **options)])
    assert torch.equal(mine, theirs)
    torch.testing.assert_close(mine.float(), a.float() @ b_t.float().t(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_forward_with_host_descriptors(device):
    cuda_sm90(device, "TMA for host tensor descriptors")
    kernel = kernel_of(CONFORMANCE, "attention_fwd_tma_kernel")
    heads, n_ctx, BM, BN = (6, 256, 128, 64) if device == "cuda" else (2, 128, 64, 32)
    head_dim, sm_scale, options = 64, 0.125, {"num_warps": 8, "num_stages": 3}
    q, k, v = (randn(heads * n_ctx, head_dim, dtype=torch.float16, device=device) for _ in range(3))
    mine, theirs = poisoned(q.shape, torch.float16, device), poisoned(q.shape, torch.float16, device)
    grid = (n_ctx // BM, heads)

    def args(o):
        return (TensorDescriptor.from_tensor(q, [BM, head_dim]), TensorDescriptor.from_tensor(k, [BN, head_dim]),
                TensorDescriptor.from_tensor(v, [BN, head_dim]), TensorDescriptor.from_tensor(o, [BM, head_dim]),
                sm_scale, n_ctx, head_dim, BM, BN)

    tjit.jit(kernel)[grid](*args(mine), **options)
    python_triton(device, CONFORMANCE, "attention_fwd_tma_kernel", [call(grid, *args(theirs), **options)])
    assert torch.equal(mine, theirs)
    qh, kh, vh = (t.float().view(heads, n_ctx, head_dim) for t in (q, k, v))
    expected = torch.softmax(qh @ kh.transpose(1, 2) * sm_scale, -1) @ vh
    torch.testing.assert_close(mine.float().view(heads, n_ctx, head_dim), expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("m, n, row", [(300, 200, 200), (37, 50, 56)])
def test_device_side_descriptors(device, dtype, m, n, row):
    # Descriptors made on the device (tl.make_tensor_descriptor), over rows inside padded rows too:
    # the whole buffers, padding included, must match (poisoned with -7, comparable with equal).
    cuda_sm90(device, "TMA for device-side tensor descriptors")
    kernel = kernel_of(CONFORMANCE, "scale_rows_device_desc_kernel")
    BM = BN = 64
    x = randn(m, row, dtype=dtype, device=device)[:, :n]
    mine_full, theirs_full = (torch.full((m, row), -7.0, dtype=dtype, device=device) for _ in range(2))
    mine, theirs = mine_full[:, :n], theirs_full[:, :n]
    grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
    tjit.jit(kernel)[grid](x, mine, m, n, row, 0.75, BM, BN)
    python_triton(device, CONFORMANCE, "scale_rows_device_desc_kernel",
                  [call(grid, x, theirs, m, n, row, 0.75, BM, BN)])
    assert torch.equal(mine_full, theirs_full)
    assert torch.equal(mine, (x * 0.75).to(dtype))


# === tests/cpp/kernels/corpus_kernels.py (Triton's tutorials) =========================================


def _placeholder(t):
    # The tutorials make host descriptors with a placeholder block shape; a config's pre_hook sets it.
    return TensorDescriptor.from_tensor(t, [1, 1])


@pytest.mark.parametrize("device", DEVICES)
def test_attention_forward_config_pre_hook_and_prune_by_name(device):
    # Triton's attention tutorial: descriptors with a placeholder block shape, which each config's
    # pre_hook sets; configs pruned by N_CTX and STAGE, read by name (passed by keyword).
    #   attn_fwd_kernel[lambda META: (triton.cdiv(N_CTX, META["BLOCK_M"]), Z * H)](
    #       sm_scale, M, Z, H, desc_q, desc_k, desc_v, desc_o, N_CTX=N_CTX, HEAD_DIM=64, STAGE=1)
    cuda_sm90(device, "TMA for host tensor descriptors")
    kernel = kernel_of(CORPUS, "attn_fwd_kernel")
    Z, H, N_CTX = (2, 3, 256) if device == "cuda" else (1, 2, 128)
    HEAD_DIM, STAGE, sm_scale = 64, 1, 0.125
    q, k, v = (randn(Z * H * N_CTX, HEAD_DIM, dtype=torch.float16, device=device) for _ in range(3))
    grid = lambda META: (triton.cdiv(N_CTX, META["BLOCK_M"]), Z * H)  # noqa: E731
    keywords = {"N_CTX": N_CTX, "HEAD_DIM": HEAD_DIM, "STAGE": STAGE}

    def launch(config=None):
        o = poisoned(q.shape, torch.float16, device)
        m = poisoned((Z * H * N_CTX,), torch.float32, device)
        args = (sm_scale, m, Z, H, _placeholder(q), _placeholder(k), _placeholder(v), _placeholder(o))
        return call(grid, *args, config=config, **keywords), (o, m)

    mine, mine_outputs = launch()
    tjit.jit(kernel)[grid](*mine["args"], **mine["kwargs"])
    candidates = kept_configs(kernel, mine["args"], keywords)
    pinned, pinned_outputs = launch()
    tjit.jit(alone_cached(kernel, candidates[0]))[grid](*pinned["args"], **pinned["kwargs"])
    theirs = {i: launch(i) for i in candidates}
    python_triton(device, CORPUS, "attn_fwd_kernel", [launch for launch, _ in theirs.values()])
    python_outputs = {i: outputs for i, (_, outputs) in theirs.items()}
    assert all(torch.equal(a, b) for a, b in zip(pinned_outputs, python_outputs[candidates[0]]))
    one_config_matches(mine_outputs, python_outputs, "attn_fwd_kernel")
    o, m = mine_outputs
    qh, kh, vh = (t.float().view(Z * H, N_CTX, HEAD_DIM) for t in (q, k, v))
    scores = qh @ kh.transpose(1, 2) * sm_scale
    torch.testing.assert_close(o.float().view(Z * H, N_CTX, HEAD_DIM), torch.softmax(scores, -1) @ vh,
                               rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(m.view(Z * H, N_CTX), torch.logsumexp(scores, -1) * 1.4426950408889634,
                               rtol=1e-2, atol=1e-2)


# Its tensors are all inside host descriptors: the launch's device comes from their bases (an
# autotuned kernel's call on CPU tensors runs in the interpreter, not on CUDA).
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_tma_config_pre_hook(device):
    # The autotuned TMA matmul: descriptors with a placeholder block shape, set by the configs'
    # pre_hook; ragged sizes (TMA zero-fills and clips).
    #   matmul_tma_kernel[lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)](
    #       a_desc, b_desc, c_desc, M, N, K)
    cuda_sm90(device, "TMA for host tensor descriptors")
    kernel = kernel_of(CORPUS, "matmul_tma_kernel")
    M, N, K = (777, 520, 504) if device == "cuda" else (150, 136, 104)
    a, b = randn(M, K, dtype=torch.float16, device=device), randn(N, K, dtype=torch.float16, device=device)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)  # noqa: E731

    def launch(config=None):
        c = poisoned((M, N), torch.float16, device)
        return call(grid, _placeholder(a), _placeholder(b), _placeholder(c), M, N, K, config=config), (c,)

    mine, mine_outputs = launch()
    tjit.jit(kernel)[grid](*mine["args"])
    candidates = kept_configs(kernel, mine["args"], {})
    pinned, pinned_outputs = launch()
    tjit.jit(alone_cached(kernel, candidates[-1]))[grid](*pinned["args"])
    theirs = {i: launch(i) for i in candidates}
    python_triton(device, CORPUS, "matmul_tma_kernel", [launch for launch, _ in theirs.values()])
    python_outputs = {i: outputs for i, (_, outputs) in theirs.items()}
    assert torch.equal(pinned_outputs[0], python_outputs[candidates[-1]][0])
    one_config_matches(mine_outputs, python_outputs, "matmul_tma_kernel")
    torch.testing.assert_close(mine_outputs[0].float(), a.float() @ b.float().t(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flatten", [False, True])
def test_persistent_matmul_device_descriptors_pruned_by_name(device, flatten):
    # The tutorial's descriptor-persistent matmul: descriptors made on the device; the prune reads
    # FLATTEN by keyword and drops the split epilogue when it is False (outputs cannot tell
    # whether tjit's choice respected that: the split stores the same values).
    #   matmul_descriptor_persistent_kernel[lambda META: (min(NUM_SMS, triton.cdiv(M, META["BLOCK_M"]) *
    #       triton.cdiv(N, META["BLOCK_N"])),)](a, b, c, M, N, K, NUM_SMS=NUM_SMS, FLATTEN=flatten)
    cuda_sm90(device, "TMA for device-side tensor descriptors")
    kernel = kernel_of(CORPUS, "matmul_descriptor_persistent_kernel")
    if device == "cuda":
        (M, N, K), sms = (300, 520, 256), torch.cuda.get_device_properties(0).multi_processor_count
    else:
        (M, N, K), sms = (100, 136, 64), 4
    a, b = randn(M, K, dtype=torch.float16, device=device), randn(N, K, dtype=torch.float16, device=device)
    grid = lambda META: (min(sms, triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])),)  # noqa: E731
    keywords = {"NUM_SMS": sms, "FLATTEN": flatten}

    def launch(config=None):
        c = poisoned((M, N), torch.float16, device)
        return call(grid, a, b, c, M, N, K, config=config, **keywords), (c,)

    mine, mine_outputs = launch()
    tjit.jit(kernel)[grid](*mine["args"], **mine["kwargs"])
    candidates = kept_configs(kernel, mine["args"], keywords)
    if not flatten:
        assert not any(kernel.configs[i].kwargs["EPILOGUE_SUBTILE"] for i in candidates)
    pinned, pinned_outputs = launch()
    tjit.jit(alone_cached(kernel, candidates[0]))[grid](*pinned["args"], **pinned["kwargs"])
    theirs = {i: launch(i) for i in candidates}
    python_triton(device, CORPUS, "matmul_descriptor_persistent_kernel", [launch for launch, _ in theirs.values()])
    python_outputs = {i: outputs for i, (_, outputs) in theirs.items()}
    assert torch.equal(pinned_outputs[0], python_outputs[candidates[0]][0])
    one_config_matches(mine_outputs, python_outputs, "matmul_descriptor_persistent_kernel")
    torch.testing.assert_close(mine_outputs[0].float(), a.float() @ b.float().t(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 1000, 2048])
def test_keys_naming_tensors_and_missing_names_with_heuristics_and_tuples(device, n):
    # The key names a tensor (out), a parameter a config sets (BLOCK) and, before Triton 3.9, a
    # name that is no parameter; a heuristic (EVEN) reads the config's BLOCK; tuples of tensors
    # and of coefficients.
    #   axpb_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)]((x, y), out, (alpha, beta), n)
    kernel = kernel_of(CORPUS, "axpb_kernel")
    x, y = randn(n, device=device), randn(n, device=device)
    grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)  # noqa: E731

    def launch(config=None):
        out = poisoned((n,), torch.float32, device)
        return call(grid, (x, y), out, (2.0, -0.5), n, config=config), (out,)

    mine, mine_outputs = launch()
    tjit.jit(kernel)[grid](*mine["args"])
    candidates = kept_configs(kernel, mine["args"], {})
    pinned, pinned_outputs = launch()
    tjit.jit(alone_cached(kernel, candidates[-1]))[grid](*pinned["args"])
    theirs = {i: launch(i) for i in candidates}
    python_triton(device, CORPUS, "axpb_kernel", [launch for launch, _ in theirs.values()])
    python_outputs = {i: outputs for i, (_, outputs) in theirs.items()}
    assert torch.equal(pinned_outputs[0], python_outputs[candidates[-1]][0])
    one_config_matches(mine_outputs, python_outputs, "axpb_kernel")
    torch.testing.assert_close(mine_outputs[0], x * 2.0 + y * -0.5)


@pytest.mark.parametrize("device", DEVICES)
def test_key_naming_a_tensor(device):
    # square_kernel's key names the tensor x (Python Triton keys on the tensor object): each new
    # tensor may be tuned again.
    #   square_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, out, n)
    kernel = kernel_of(CORPUS, "square_kernel")
    n = 3001
    grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)  # noqa: E731
    for _ in range(2):
        x = randn(n, device=device)

        def launch(config=None):
            out = poisoned((n,), torch.float32, device)
            return call(grid, x, out, n, config=config), (out,)

        mine, mine_outputs = launch()
        tjit.jit(kernel)[grid](*mine["args"])
        theirs = {i: launch(i) for i in kept_configs(kernel, mine["args"], {})}
        python_triton(device, CORPUS, "square_kernel", [launch for launch, _ in theirs.values()])
        one_config_matches(mine_outputs, {i: outputs for i, (_, outputs) in theirs.items()}, "square_kernel")
        assert torch.equal(mine_outputs[0], x * x)


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_gemm_over_pointer_arrays(device):
    # Triton's grouped GEMM tutorial: int64 tensors of the operands' data_ptr()s, autotuned on the
    # group's size, the grid the config's NUM_SM.
    #   grouped_matmul_kernel[lambda META: (META["NUM_SM"],)](a_ptrs, b_ptrs, c_ptrs, sizes, lds, group_size)
    kernel = kernel_of(CORPUS, "grouped_matmul_kernel")
    shapes = [(200, 150, 96), (64, 64, 64), (37, 300, 130)] if device == "cuda" else \
        [(50, 40, 32), (16, 16, 16), (37, 70, 30)]
    a = [randn(m, k, dtype=torch.float16, device=device) for m, n, k in shapes]
    b = [randn(k, n, dtype=torch.float16, device=device) for m, n, k in shapes]
    sizes = torch.tensor([v for shape in shapes for v in shape], dtype=torch.int32, device=device)
    lds = torch.tensor([v for m, n, k in shapes for v in (k, n, n)], dtype=torch.int32, device=device)
    grid = lambda META: (META["NUM_SM"],)  # noqa: E731

    def outputs():
        return [poisoned((m, n), torch.float16, device) for m, n, k in shapes]

    mine = outputs()
    tjit.jit(kernel)[grid](PointerArray(a).tensor(), PointerArray(b).tensor(), PointerArray(mine).tensor(), sizes, lds,
                           len(shapes))
    theirs = {i: outputs() for i in kept_configs(kernel, (), {})}
    python_triton(device, CORPUS, "grouped_matmul_kernel",
                  [call(grid, PointerArray(a), PointerArray(b), PointerArray(c), sizes, lds, len(shapes), config=i)
                   for i, c in theirs.items()])
    one_config_matches(mine, theirs, "grouped_matmul_kernel")
    for g, (c, a_g, b_g) in enumerate(zip(mine, a, b)):
        torch.testing.assert_close(c.float(), a_g.float() @ b_g.float(), rtol=1e-2, atol=5e-2, msg=f"group {g}")


@pytest.mark.parametrize("device", DEVICES)
def test_programmatic_dependent_launch(device):
    # Triton's PDL tutorial: two dependent kernels on one stream, the second launched with
    # launch_pdl and waiting (gdc_wait) for what the first wrote.
    #   pdl_add_kernel[grid](x, y, out, n, BLOCK=1024, USE_GDC=True, launch_pdl=True)
    gpu_only(device, "programmatic dependent launch (Triton's interpreter cannot run tl.extra.cuda.gdc_wait / "
                     "gdc_launch_dependents; Python Triton's interpreted launch fails the same way)")
    cuda_sm90(device, "programmatic dependent launch (with a CUDA 12.3+ driver)")
    kernel = kernel_of(CORPUS, "pdl_add_kernel")
    n, block = (1 << 22) + 17, 1024
    x, y = randn(n, device=device), randn(n, device=device)
    grid = (triton.cdiv(n, block),)
    first, second = [poisoned((n,), torch.float32, device) for _ in range(2)], \
        [poisoned((n,), torch.float32, device) for _ in range(2)]
    pdl = {"BLOCK": block, "USE_GDC": True, "launch_pdl": True}
    tjit.jit(kernel)[grid](x, y, first[0], n, **pdl)
    tjit.jit(kernel)[grid](first[0], y, second[0], n, **pdl)
    python_triton(device, CORPUS, "pdl_add_kernel", [call(grid, x, y, first[1], n, **pdl),
                                                     call(grid, first[1], y, second[1], n, **pdl)])
    assert torch.equal(first[0], first[1]) and torch.equal(second[0], second[1])
    assert torch.equal(second[0], (x + y) + y)


# === Liger-Kernel ===================================================================================

ROWS = {"cpu": 5, "cuda": 67}  # the interpreter is slow: fewer rows on the CPU
EPS_TO_FLOAT = "'float' object has no attribute 'to'"


@pytest.mark.parametrize("device", DEVICES)
def test_liger_rms_norm_forward(device):
    # liger_kernel.ops.rms_norm.rms_norm_forward's row-mode launch: every casting mode (an int
    # constexpr: 0 llama, 1 gemma, -1 none), with and without a weight (None then).
    source = liger("ops/rms_norm.py")
    module = module_of(source)
    kernel = module._rms_norm_forward_kernel
    from liger_kernel.ops.utils import calculate_settings
    n_rows, n_cols, eps = ROWS[device], 1000, 1e-6
    block, warps = calculate_settings(n_cols)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for casting_mode in (0, 1, -1):
            for affine in (True, False):
                what = f"{dtype} casting_mode {casting_mode} {'affine' if affine else 'no weight'}"
                offset = 1.0 if casting_mode == 1 else 0.0  # Gemma's (1 + w)
                x, w = randn(n_rows, n_cols, dtype=dtype, device=device), randn(n_cols, dtype=dtype, device=device)
                rstd_dtype = dtype if casting_mode == -1 else torch.float32
                y = [poisoned(x.shape, dtype, device) for _ in range(2)]
                rstd = [poisoned((n_rows,), rstd_dtype, device) for _ in range(2)]

                def args(side):
                    return (y[side], y[side].stride(0), x, x.stride(0), w if affine else None,
                            w.stride(0) if affine else 0, rstd[side], rstd[side].stride(0), n_cols, eps, offset,
                            casting_mode)

                keywords = {"elementwise_affine": affine, "BLOCK_SIZE": block, "num_warps": warps}
                launch_both(device, lambda: tjit.jit(kernel)[(n_rows,)](*args(0), **keywords),
                            lambda: python_triton(device, source, "_rms_norm_forward_kernel",
                                                  [call((n_rows,), *args(1), **keywords)]),
                            EPS_TO_FLOAT, "eps.to() on a float argument")
                assert torch.equal(y[0], y[1]) and torch.equal(rstd[0], rstd[1]), what
                xf = x.float()
                expected_rstd = torch.rsqrt((xf * xf).mean(1) + eps)
                expected = xf * expected_rstd[:, None]
                if affine:
                    expected = expected * (w.float() + offset)
                tol = 1e-4 if dtype == torch.float32 else 1e-1 if casting_mode == -1 else 3e-2
                torch.testing.assert_close(rstd[0].float(), expected_rstd, rtol=tol, atol=tol, msg=what)
                torch.testing.assert_close(y[0].float(), expected, rtol=tol, atol=tol, msg=what)


@pytest.mark.parametrize("device", DEVICES)
def test_liger_layer_norm_forward(device):
    # liger_kernel.ops.layer_norm.layer_norm_forward's launch.
    source = liger("ops/layer_norm.py")
    kernel = module_of(source)._layer_norm_forward_kernel
    from liger_kernel.ops.utils import calculate_settings
    n_rows, n_cols, eps = ROWS[device], 777, 1e-5
    block, warps = calculate_settings(n_cols)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, w, b = (randn(*shape, dtype=dtype, device=device) for shape in ((n_rows, n_cols), (n_cols,), (n_cols,)))
        y = [poisoned(x.shape, dtype, device) for _ in range(2)]
        mean = [poisoned((n_rows,), torch.float32, device) for _ in range(2)]
        rstd = [poisoned((n_rows,), torch.float32, device) for _ in range(2)]

        def args(side):
            return (y[side], y[side].stride(0), x, x.stride(0), w, w.stride(0), b, b.stride(0), mean[side],
                    mean[side].stride(0), rstd[side], rstd[side].stride(0), n_cols, eps)

        keywords = {"BLOCK_SIZE": block, "num_warps": warps}
        launch_both(device, lambda: tjit.jit(kernel)[(n_rows,)](*args(0), **keywords),
                    lambda: python_triton(device, source, "_layer_norm_forward_kernel",
                                          [call((n_rows,), *args(1), **keywords)]),
                    EPS_TO_FLOAT, "eps.to() on a float argument")
        assert torch.equal(y[0], y[1]) and torch.equal(mean[0], mean[1]) and torch.equal(rstd[0], rstd[1]), dtype
        var, mu = torch.var_mean(x.float(), 1, correction=0, keepdim=True)
        expected = (x.float() - mu) * torch.rsqrt(var + eps) * w.float() + b.float()
        tol = 1e-4 if dtype == torch.float32 else 5e-2
        torch.testing.assert_close(mean[0], mu.squeeze(1), rtol=tol, atol=tol)
        torch.testing.assert_close(y[0].float(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_liger_swiglu_forward(device):
    # liger_kernel.ops.swiglu.swiglu_forward's launch (n_cols a constexpr, passed by keyword).
    source = liger("ops/swiglu.py")
    kernel = module_of(source)._swiglu_forward_kernel
    from liger_kernel.ops.utils import calculate_settings
    n_rows, n_cols, gate_multiplier = ROWS[device], 1500, 1.0
    block, warps = calculate_settings(n_cols)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a, b = randn(n_rows, n_cols, dtype=dtype, device=device), randn(n_rows, n_cols, dtype=dtype, device=device)
        c = [poisoned(a.shape, dtype, device) for _ in range(2)]
        keywords = {"n_cols": n_cols, "BLOCK_SIZE": block, "num_warps": warps}
        launch_both(device,
                    lambda: tjit.jit(kernel)[(n_rows,)](a, b, c[0], c[0].stride(-2), float(gate_multiplier), **keywords),
                    lambda: python_triton(device, source, "_swiglu_forward_kernel",
                                          [call((n_rows,), a, b, c[1], c[1].stride(-2), float(gate_multiplier),
                                                **keywords)]),
                    EPS_TO_FLOAT, "gate_multiplier.to() on a float argument")
        assert torch.equal(c[0], c[1]), dtype
        af = a.float()
        expected = (af * torch.sigmoid(af)).to(dtype).float() * b.float()
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(c[0].float(), expected, rtol=tol, atol=tol)


CROSS_ENTROPY_CASES = [
    # reduction, weighted, softcap, label_smoothing, lse_square_scale, z_loss, accuracy, predicted, gradients, dtype
    ("mean", False, None, 0.0, 0.0, False, False, False, True, torch.float32),
    ("sum", True, 30.0, 0.1, 1e-4, True, True, True, True, torch.float32),
    ("mean", False, None, 0.0, 0.0, True, False, True, True, torch.bfloat16),
    ("none", True, None, 0.05, 0.0, False, True, False, False, torch.float32),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CROSS_ENTROPY_CASES, ids=lambda c: f"{c[0]}-{c[9]}".replace("torch.", ""))
def test_liger_cross_entropy_forward(device, case):
    # liger_kernel.ops.cross_entropy.cross_entropy_forward's launch: 28 arguments by keyword, None
    # for the pointers a call does not use and for softcap (a runtime parameter), float and string
    # constexprs (label_smoothing, reduction), the gradient written over the logits in place.
    reduction, weighted, softcap, label_smoothing, lse_square_scale, z_loss, accuracy, predicted, gradients, dtype = case
    source = liger("ops/cross_entropy.py")
    kernel = module_of(source).liger_cross_entropy_kernel
    n_rows, V, ignore_index = ROWS[device], 5000, -100
    block = min(65536 // 2, triton.next_power_of_2(V))
    warps = 32  # cross_entropy_forward's num_warps below Blackwell
    x = randn(n_rows, V, dtype=dtype, device=device)
    target = torch.randint(V, (n_rows,), device=device)
    target[0] = ignore_index
    weight = torch.rand(V, device=device) + 0.5
    kept = target != ignore_index
    n_non_ignore = int(kept.sum().item())
    # As the wrapper computes them: an int without a weight, floats with one.
    sum_non_ignore_weight = torch.gather(weight, 0, target.masked_select(kept)).sum().item() if weighted \
        else n_non_ignore
    weight_sum = weight.sum().item() if weighted else 0.0
    # The outputs as the wrapper makes them: zeros (a row at ignore_index is never written), and -1
    # for the predicted tokens.
    sides = []
    for _ in range(2):
        side = {"logits": x.clone(), "loss": torch.zeros(n_rows, dtype=dtype, device=device),
                "z": torch.zeros(n_rows, dtype=dtype, device=device) if z_loss else None,
                "accuracy": torch.zeros(n_rows, dtype=torch.float32, device=device) if accuracy else None,
                "predicted": torch.full((n_rows,), -1, dtype=torch.int64, device=device) if predicted else None}
        side["kwargs"] = dict(
            X_ptr=side["logits"], X_stride=side["logits"].stride(-2), Y_ptr=target, Y_stride=target.stride(-1),
            weight_ptr=weight if weighted else None, loss_ptr=side["loss"], z_loss_ptr=side["z"],
            loss_stride=side["loss"].stride(-1), token_accuracy_ptr=side["accuracy"],
            token_accuracy_stride=1 if accuracy else 0, predicted_tokens_ptr=side["predicted"],
            predicted_tokens_stride=1 if predicted else 0, n_cols=V, n_non_ignore=n_non_ignore,
            sum_non_ignore_weight=sum_non_ignore_weight, ignore_index=ignore_index, weight_sum=weight_sum,
            lse_square_scale=lse_square_scale, label_smoothing=label_smoothing, reduction=reduction, softcap=softcap,
            RETURN_Z_LOSS=z_loss, RETURN_TOKEN_ACCURACY=accuracy, RETURN_PREDICTED_TOKENS=predicted,
            BLOCK_SIZE=block, HAS_WEIGHT=weighted, HAS_SOFTCAPPING=softcap is not None, HAS_GRADIENTS=gradients,
            num_warps=warps)
        sides.append(side)
    launch_both(device, lambda: tjit.jit(kernel)[(n_rows,)](**sides[0]["kwargs"]),
                lambda: python_triton(device, source, "liger_cross_entropy_kernel",
                                      [call((n_rows,), **sides[1]["kwargs"])]),
                EPS_TO_FLOAT, ".to() on a float argument (softcap, sum_non_ignore_weight)")
    mine, theirs = sides
    for name in ("logits", "loss", "z", "accuracy", "predicted"):
        if mine[name] is not None:
            assert torch.equal(mine[name], theirs[name]), name
    if predicted and dtype == torch.float32:  # bfloat16 logits tie often, and ties may break either way
        assert torch.equal(mine["predicted"][kept], x.argmax(-1)[kept])
    if not weighted and softcap is None and label_smoothing == 0.0 and dtype == torch.float32:
        # Plain mean cross entropy: the loss, and its gradient, which the kernel left in the logits.
        torch.testing.assert_close(mine["loss"].sum(), torch.nn.functional.cross_entropy(
            x, target, ignore_index=ignore_index), rtol=1e-4, atol=1e-4)
        onehot = torch.nn.functional.one_hot(target.clamp_min(0), V).float()
        grad = (torch.softmax(x, -1) - onehot) / n_non_ignore * kept[:, None].float()
        torch.testing.assert_close(mine["logits"], grad, rtol=1e-4, atol=1e-6)


# === FlagGems =======================================================================================


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_flag_gems_moe_sum_autotuned(device, dtype):
    # flag_gems.fused.moe_sum: @triton.autotune (key: hidden_size, topk), a grid from META.
    #   moe_sum_kernel[lambda meta: (num_tokens, triton.cdiv(hidden_size, meta["BLOCK_SIZE"]))](
    #       input, output, num_tokens, topk, hidden_size, *input.stride(), *output.stride())
    source = flag_gems_file("fused/moe_sum.py")
    kernel = kernel_of(source, "moe_sum_kernel")
    tokens, topk, hidden = ROWS[device], 3, 1100
    grid = lambda meta: (tokens, triton.cdiv(hidden, meta["BLOCK_SIZE"]))  # noqa: E731
    x = randn(tokens, topk, hidden, dtype=dtype, device=device)

    def launch(config=None):
        out = poisoned((tokens, hidden), dtype, device)
        return call(grid, x, out, tokens, topk, hidden, *x.stride(), *out.stride(), config=config), (out,)

    mine, mine_outputs = launch()
    tjit.jit(kernel)[grid](*mine["args"])
    theirs = {i: launch(i) for i in kept_configs(kernel, mine["args"], {})}
    python_triton(device, source, "moe_sum_kernel", [launch for launch, _ in theirs.values()])
    one_config_matches(mine_outputs, {i: outputs for i, (_, outputs) in theirs.items()}, "moe_sum_kernel")
    torch.testing.assert_close(mine_outputs[0].float(), x.float().sum(1), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_flag_gems_repetition_penalty(device):
    # flag_gems.fused.apply_repetition_penalties: bool masks, in place, BLOCK_SIZE by keyword.
    #   _repetition_penalty_kernel[(num_seqs, triton.cdiv(vocab_size, 1024))](
    #       logits, prompt_mask, output_mask, penalties, num_seqs, vocab_size, BLOCK_SIZE=1024)
    source = flag_gems_file("fused/apply_repetition_penalties.py")
    kernel = kernel_of(source, "_repetition_penalty_kernel")
    seqs, vocab, block = (9 if device == "cuda" else 3), 3001, 1024
    logits = randn(seqs, vocab, device=device)
    prompt = torch.rand(seqs, vocab, device=device) < 0.2
    output = torch.rand(seqs, vocab, device=device) < 0.2
    penalties = torch.rand(seqs, device=device) + 1.0
    mine, theirs = logits.clone(), logits.clone()
    grid = (seqs, triton.cdiv(vocab, block))
    tjit.jit(kernel)[grid](mine, prompt, output, penalties, seqs, vocab, BLOCK_SIZE=block)
    python_triton(device, source, "_repetition_penalty_kernel",
                  [call(grid, theirs, prompt, output, penalties, seqs, vocab, BLOCK_SIZE=block)])
    assert torch.equal(mine, theirs)
    p = penalties[:, None]
    expected = torch.where(prompt | output, torch.where(logits > 0, logits / p, logits * p), logits)
    torch.testing.assert_close(mine, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("renormalize", [False, True])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_flag_gems_topk_gating_softmax(device, renormalize, index_dtype):
    # flag_gems.fused.topk_softmax: every argument by keyword, None for an unused pointer, a bool and
    # a tl.dtype constexpr, num_warps; the block sizes flag_gems.fused.topk_softmax picks for 60
    # experts.
    source = flag_gems_file("fused/topk_softmax.py")
    kernel = kernel_of(source, "topk_gating_softmax_kernel")
    tokens, experts, k = (77 if device == "cuda" else 6), 60, 4
    block_experts = min(((triton.next_power_of_2(experts) + 31) // 32) * 32, 1024)
    block_rows = max(1024 // block_experts, 1)
    grid = (triton.cdiv(tokens, block_rows),)
    gating = randn(tokens, experts, device=device)
    sides = []
    for _ in range(2):
        weights = poisoned((tokens, k), torch.float32, device)
        indices = poisoned((tokens, k), index_dtype, device)
        sources = poisoned((tokens, k), torch.int32, device)
        sides.append(((weights, indices, sources), dict(
            input_ptr=gating, finished_ptr=None, output_ptr=weights, indices_ptr=indices, source_rows_ptr=sources,
            num_rows=tokens, k=k, num_experts=experts, start_expert=0, end_expert=experts, renormalize=renormalize,
            INDEX_TY=TL_DTYPE[index_dtype], BLOCK_SIZE_ROWS=block_rows, BLOCK_SIZE_EXPERTS=block_experts,
            num_warps=4)))
    tjit.jit(kernel)[grid](**sides[0][1])
    python_triton(device, source, "topk_gating_softmax_kernel", [call(grid, **sides[1][1])])
    (weights, indices, sources), (their_weights, their_indices, their_sources) = sides[0][0], sides[1][0]
    assert torch.equal(weights, their_weights) and torch.equal(indices, their_indices)
    assert torch.equal(sources, their_sources)
    top, top_indices = torch.topk(torch.softmax(gating, -1), k)
    if renormalize:
        top = top / top.sum(-1, keepdim=True)
    torch.testing.assert_close(weights, top, rtol=1e-4, atol=1e-5)
    assert torch.equal(indices.long(), top_indices)
    assert torch.equal(sources, (torch.arange(k, device=device)[None, :] * tokens +
                                 torch.arange(tokens, device=device)[:, None]).int())


# FlagGems' own operators (flag_gems.ops) wrap their kernels in @libentry() (a launch cache of
# FlagGems'); tjit.jit takes @triton.jit kernels and @triton.autotune / @triton.heuristics layers,
# not LibEntry, so tjit.jit launches what is under @libentry() (`.fn`), as the C++ corpus does,
# and Python Triton launches the LibEntry object as FlagGems does.


def flag_gems_module(device, dotted):
    gpu_only(device, f"{dotted} imports flag_gems, which refuses to load without one")
    root = peer_folder("flag_gems", "TJIT_CORPUS_FLAG_GEMS")
    return ("module", dotted, os.path.dirname(root))


@pytest.mark.parametrize("device", DEVICES)
def test_flag_gems_libentry_rms_norm(device):
    # flag_gems.ops.rms_norm for rows that fit one block:
    #   rms_norm_kernel[M,](y, inv_rms, x, weight, N, 1, N, 1, N, eps, BLOCK_SIZE)
    source = flag_gems_module(device, "flag_gems.ops.rms_norm")
    libentry = kernel_of(source, "rms_norm_kernel")
    M, N, eps = 67, 1000, 1e-5
    block = triton.next_power_of_2(N)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, w = randn(M, N, dtype=dtype, device=device), randn(N, dtype=dtype, device=device)
        y = [poisoned(x.shape, dtype, device) for _ in range(2)]
        inv = [poisoned((M,), torch.float32, device) for _ in range(2)]
        tjit.jit(libentry.fn)[M, ](y[0], inv[0], x, w, N, 1, N, 1, N, eps, block)
        python_triton(device, source, "rms_norm_kernel", [call((M, ), y[1], inv[1], x, w, N, 1, N, 1, N, eps, block)])
        assert torch.equal(y[0], y[1]) and torch.equal(inv[0], inv[1]), dtype
        xf = x.float()
        expected = xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + eps) * w.float()
        torch.testing.assert_close(y[0].float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_flag_gems_relative_imports_logspace(device):
    # flag_gems.ops.logspace: a kernel file that imports its package's helpers by relative import
    # (`from ..utils import libentry`), a float constexpr (log2_base):
    #   logspace_kernel[grid](out, out.stride(0), start, step_size, steps, log2_base=..., BLOCK_SIZE=256)
    source = flag_gems_module(device, "flag_gems.ops.logspace")
    libentry = kernel_of(source, "logspace_kernel")
    start, end, steps, block = -2.0, 3.0, 1000, 256
    step_size = (end - start) / (steps - 1)
    out = [poisoned((steps,), torch.float32, device) for _ in range(2)]
    grid = (triton.cdiv(steps, block),)
    keywords = {"log2_base": math.log2(10.0), "BLOCK_SIZE": block}
    tjit.jit(libentry.fn)[grid](out[0], out[0].stride(0), start, step_size, steps, **keywords)
    python_triton(device, source, "logspace_kernel", [call(grid, out[1], out[1].stride(0), start, step_size, steps,
                                                           **keywords)])
    assert torch.equal(out[0], out[1])
    exponents = torch.arange(steps, device=device, dtype=torch.float64) * step_size + start
    torch.testing.assert_close(out[0].double(), 10.0 ** exponents, rtol=1e-4, atol=0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_flag_gems_libentry_autotuned_rms_norm_loop(device):
    # flag_gems.ops.rms_norm's long-row kernel, @libentry() over @triton.autotune (FlagGems' tuned
    # configs, key N): rms_norm_loop_kernel[M,](y, inv_rms, x, weight, N, eps). tjit.jit launches
    # the autotuner under @libentry(); Python Triton each config alone, under the same layers.
    source = flag_gems_module(device, "flag_gems.ops.rms_norm")
    tuner = kernel_of(source, "rms_norm_loop_kernel").fn
    M, N, eps = 33, 5000, 1e-5
    x, w = randn(M, N, dtype=torch.float16, device=device), randn(N, dtype=torch.float16, device=device)

    def launch(config=None):
        y, inv = poisoned(x.shape, torch.float16, device), poisoned((M,), torch.float32, device)
        return call((M, ), y, inv, x, w, N, eps, config=config), (y, inv)

    mine, mine_outputs = launch()
    tjit.jit(tuner)[M, ](*mine["args"])
    theirs = {i: launch(i) for i in kept_configs(tuner, mine["args"], {})}
    for i, (launch_i, _) in theirs.items():
        alone_cached(tuner, i)[launch_i["grid"]](*launch_i["args"])
    torch.cuda.synchronize()
    one_config_matches(mine_outputs, {i: outputs for i, (_, outputs) in theirs.items()}, "rms_norm_loop_kernel")
    xf = x.float()
    expected = xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + eps) * w.float()
    torch.testing.assert_close(mine_outputs[0].float(), expected, rtol=2e-2, atol=2e-2)
