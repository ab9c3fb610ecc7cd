"""The peers' kernels of issue 64's conformance corpus from Python (Liger-Kernel, FlagGems), as
test_python_kernels_corpus.py launches the tutorial-like ones: through tjit.jit and through Python
Triton on the same inputs, equal bit for bit and close to torch. A package that is not installed
skips, saying so; $TJIT_CORPUS_LIGER_KERNEL and $TJIT_CORPUS_FLAG_GEMS name a package folder instead."""

import math
import os

import pytest
import torch
import triton
import triton.language as tl

import tjit
from conftest import DEVICES
from triton_interpreted import alone

from corpus_support import (TL_DTYPE, alone_cached, call, flag_gems_file, gpu_only, kept_configs, kernel_of,
                            launch_both, liger, module_of, one_config_matches, peer_folder, poisoned,
                            python_triton, randn)


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
# FlagGems'); tjit.jit looks through it and launches what is under it (`.fn`), as the C++ corpus
# does, and Python Triton launches the LibEntry object as FlagGems does.


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
    assert tjit.jit(libentry).kernel is libentry.fn
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
