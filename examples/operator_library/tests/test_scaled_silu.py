"""myops::scaled_silu against torch: values for every dtype, odd sizes, non-contiguous and empty
inputs, autograd, gradcheck, opcheck, Meta, errors, and where its kernel files are found.

MYOPS_LIBRARY names the library to test (the build's or an installed libmyops.so). It is loaded with
torch.ops.load_library alone: tjit is never imported, the library's run path finds it.
"""

import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest
import torch

LIBRARY = os.environ.get("MYOPS_LIBRARY", "")
if not os.path.isfile(LIBRARY):
    raise RuntimeError(f"MYOPS_LIBRARY must name libmyops.so (got {LIBRARY!r})")
torch.ops.load_library(LIBRARY)
assert "tjit" not in sys.modules, "loading the library must not need `import tjit`"

SOURCE_KERNELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
TOLERANCE = {
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]


def reference(x, scale):
    # Computed in fp64 and rounded once, as the kernel does in fp32 (fp64 for fp64).
    return (scale * torch.nn.functional.silu(x.double())).to(x.dtype)


def check(x, scale):
    expected = reference(x, scale)
    got = torch.ops.myops.scaled_silu(x, scale)
    assert got.shape == x.shape and got.dtype == x.dtype and got.device == x.device
    assert got.is_contiguous()
    torch.testing.assert_close(got, expected, **TOLERANCE[x.dtype])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values(device, dtype):
    for shape in [(1, ), (17, ), (1024, ), (1025, ), (3, 5, 67)]:
        check(torch.randn(shape, device=device).mul(4).to(dtype), 1.75)
    check(torch.randn(33, device=device).to(dtype), -0.5)
    check(torch.randn(33, device=device).to(dtype), 1.0)  # the schema's default scale is 1.0
    torch.testing.assert_close(torch.ops.myops.scaled_silu(torch.ones(3, device=device, dtype=dtype)),
                               reference(torch.ones(3, device=device, dtype=dtype), 1.0), **TOLERANCE[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_and_empty(device):
    x = torch.randn(37, 129, device=device)
    check(x.t(), 2.0)
    check(x[:, ::3], 2.0)
    assert torch.ops.myops.scaled_silu(torch.empty(0, 5, device=device), 2.0).shape == (0, 5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward(device, dtype):
    x = torch.randn(7, 131, device=device).to(dtype).requires_grad_()
    ref = x.detach().clone().requires_grad_()
    grad = torch.randn(7, 131, device=device).to(dtype)
    torch.ops.myops.scaled_silu(x, 0.75).backward(grad)
    (0.75 * torch.nn.functional.silu(ref.double())).backward(grad.double())
    torch.testing.assert_close(x.grad, ref.grad.to(dtype), **TOLERANCE[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device):
    x = torch.randn(3, 19, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: torch.ops.myops.scaled_silu(t, 1.5), (x, ))
    assert torch.autograd.gradgradcheck(lambda t: torch.ops.myops.scaled_silu(t, 1.5), (x, ))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_func(device):
    # The operator's autograd works under torch.func's transforms, with torch's silu as reference.
    x = torch.randn(3, 19, device=device, dtype=torch.float64)
    t = torch.randn_like(x)
    ours = lambda a: torch.ops.myops.scaled_silu(a, 1.5)  # noqa: E731
    ref = lambda a: 1.5 * torch.nn.functional.silu(a)  # noqa: E731
    loss = lambda f: (lambda a: (f(a)**3).sum())  # noqa: E731
    for transform in (torch.func.grad, torch.func.hessian):
        torch.testing.assert_close(transform(loss(ours))(x[0]), transform(loss(ref))(x[0]))
    torch.testing.assert_close(torch.func.jvp(ours, (x, ), (t, )), torch.func.jvp(ref, (x, ), (t, )))
    torch.testing.assert_close(torch.func.jacrev(ours)(x[0]), torch.func.jacrev(ref)(x[0]))


@pytest.mark.parametrize("device", DEVICES)
def test_vmap(device):
    # Batching rules (the FuncTorchBatched kernels): the kernel runs once over the batch; torch's
    # per-sample fallback would warn, which fails the test.
    x = torch.randn(4, 3, 19, device=device, dtype=torch.float64)
    g = torch.randn_like(x)
    ours = lambda a: torch.ops.myops.scaled_silu(a, 1.5)  # noqa: E731
    ref = lambda a: 1.5 * torch.nn.functional.silu(a)  # noqa: E731
    backward = torch.ops.myops.scaled_silu_backward
    ref_backward = lambda gr, a: torch.func.vjp(ref, a)[1](gr)[0]  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for in_dims in (0, 1, 2):
            torch.testing.assert_close(torch.vmap(ours, in_dims=in_dims)(x), torch.vmap(ref, in_dims=in_dims)(x))
        torch.testing.assert_close(torch.vmap(torch.vmap(ours), in_dims=1)(x), torch.vmap(torch.vmap(ref), in_dims=1)(x))
        # The backward with both, and either one, batched.
        cases = [((0, 0), (g, x)), ((1, 1), (g, x)), ((0, None), (g, x[0])), ((None, 1), (g[:, 0], x))]
        for in_dims, args in cases:
            torch.testing.assert_close(torch.vmap(lambda gr, a: backward(gr, a, 1.5), in_dims=in_dims)(*args),
                                       torch.vmap(ref_backward, in_dims=in_dims)(*args))
        # Per-sample gradients and a Jacobian: vmap over the backward operator.
        torch.testing.assert_close(torch.vmap(torch.func.grad(lambda a: ours(a).sum()))(x[:, 0]),
                                   torch.vmap(torch.func.grad(lambda a: ref(a).sum()))(x[:, 0]))
        torch.testing.assert_close(torch.func.jacrev(ours)(x[0, 0]), torch.func.jacrev(ref)(x[0, 0]))
        torch.testing.assert_close(torch.func.hessian(lambda a: ours(a).pow(3).sum())(x[0, 0]),
                                   torch.func.hessian(lambda a: ref(a).pow(3).sum())(x[0, 0]))
    # Float32 and an empty batch.
    y = torch.randn(5, 7, 33, device=device)
    torch.testing.assert_close(torch.vmap(ours)(y), ref(y), **TOLERANCE[torch.float32])
    assert torch.vmap(ours)(torch.empty(3, 0, device=device)).shape == (3, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    x = torch.randn(5, 33, device=device)
    torch.library.opcheck(torch.ops.myops.scaled_silu.default, (x, 1.5))
    torch.library.opcheck(torch.ops.myops.scaled_silu.default, (x.clone().requires_grad_(), 1.5))
    torch.library.opcheck(torch.ops.myops.scaled_silu_backward.default, (torch.randn_like(x), x, 1.5))


def test_meta():
    x = torch.empty(4, 9, device="meta", dtype=torch.bfloat16)
    out = torch.ops.myops.scaled_silu(x, 2.0)
    assert out.device.type == "meta" and out.shape == (4, 9) and out.dtype == torch.bfloat16


def test_errors():
    with pytest.raises(RuntimeError, match=r"myops::scaled_silu: .*'x'.*Long"):
        torch.ops.myops.scaled_silu(torch.arange(4), 1.0)
    with pytest.raises(RuntimeError, match=r"myops::scaled_silu_backward: argument 'grad' has shape"):
        torch.ops.myops.scaled_silu_backward(torch.randn(3), torch.randn(4), 1.0)
    with pytest.raises(RuntimeError, match=r"myops::scaled_silu_backward: argument 'grad' has dtype"):
        torch.ops.myops.scaled_silu_backward(torch.randn(3).double(), torch.randn(3), 1.0)


# A fresh process: records a manifest (TJIT_RECORD) of one call and prints it.
_RECORD = """
import json, sys, torch
torch.ops.load_library(sys.argv[1])
x = torch.randn(40)
torch.testing.assert_close(torch.ops.myops.scaled_silu(x, 2.0), 2.0 * torch.nn.functional.silu(x))
"""


def recorded_files(tmp_path, env=None):
    manifest = tmp_path / "recorded.manifest.json"
    run_env = dict(os.environ, TJIT_RECORD=str(manifest), TJIT_CACHE="0", **(env or {}))
    proc = subprocess.run([sys.executable, "-c", _RECORD, LIBRARY], env=run_env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Files inside the manifest's folder are written relative to it.
    return {os.path.normpath(os.path.join(tmp_path, e["file"]))
            for e in json.loads(manifest.read_text())["entries"] if "args" in e}


def test_kernel_files_found_where_installed(tmp_path):
    # Installed: myops_kernels/ beside the library; a build that is not installed: the source tree.
    installed = os.path.join(os.path.dirname(os.path.realpath(LIBRARY)), "myops_kernels")
    expected_dir = installed if os.path.isdir(installed) else SOURCE_KERNELS
    assert recorded_files(tmp_path) == {os.path.join(os.path.realpath(expected_dir), "scaled_silu.py")}


def test_kernel_dir_environment_override(tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(SOURCE_KERNELS, copy)
    assert recorded_files(tmp_path, {"MYOPS_KERNEL_DIR": str(copy)}) == {str(copy / "scaled_silu.py")}
