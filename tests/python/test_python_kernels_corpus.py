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


import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import tjit
from conftest import DEVICES
from triton_interpreted import PointerArray

from corpus_support import (CONFORMANCE, CORPUS, TL_DTYPE, autotuned_against_triton, call, cuda_sm90, gpu_only,
                            kept_configs, kernel_of, one_config_matches, poisoned, python_triton, randn)


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

    mine_outputs, _ = autotuned_against_triton(device, kernel, "attn_fwd_kernel", grid, launch, keywords, pin=0)
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

    mine_outputs, _ = autotuned_against_triton(device, kernel, "matmul_tma_kernel", grid, launch)
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

    mine_outputs, candidates = autotuned_against_triton(device, kernel, "matmul_descriptor_persistent_kernel", grid,
                                                        launch, keywords, pin=0)
    if not flatten:
        assert not any(kernel.configs[i].kwargs["EPILOGUE_SUBTILE"] for i in candidates)
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

    mine_outputs, _ = autotuned_against_triton(device, kernel, "axpb_kernel", grid, launch)
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
