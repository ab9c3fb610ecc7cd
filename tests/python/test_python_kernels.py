"""tjit.jit: users' own Triton kernels launched from Python through tjit's runtime, against what the
same computation gives in torch (fresh random inputs, poisoned outputs), on each device (CPU through
Triton's interpreter, CUDA where there is a GPU)."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import triton

import jit_kernels as jk
import tjit
from conftest import DEVICES

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton compiles for one)")


def poisoned(like, dtype=None):
    return torch.full_like(like, float("nan"), dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 100, 1000, 4097])
def test_add_grid_forms_and_constexprs(device, n):
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    blocks = triton.cdiv(n, 128)
    launches = [
        lambda out: jk.add_kernel[(blocks,)](x, y, out, n),  # BLOCK's default
        lambda out: jk.add_kernel[blocks](x, y, out, n, 128),  # an int grid, BLOCK by position
        lambda out: jk.add_kernel[[triton.cdiv(n, 64)]](x, y, out, n, BLOCK=64, num_warps=2),
        lambda out: jk.add_kernel[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n=n, BLOCK=256),
        lambda out: jk.add_kernel.run(x, y, out, n, grid=(blocks,)),
    ]
    for launch in launches:
        out = poisoned(x)
        launch(out)
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_call_form_on_a_plain_kernel(device):
    # A kernel imported from elsewhere, wrapped where it is used; wrapping twice is the same kernel.
    scale = tjit.jit(tjit.jit(jk.scale_kernel))
    assert scale.kernel is jk.scale_kernel and scale.__name__ == "scale_kernel"
    x = torch.randn(3000, device=device)
    out = poisoned(x)
    scale[(triton.cdiv(3000, 512),)](x, out, 3000, 1.5, BLOCK=512)
    torch.testing.assert_close(out, x * 1.5)
    half = torch.randn(77, device=device).half()  # another specialisation of the same kernel
    out = poisoned(half)
    scale[(1,)](half, out, 77, -2.0, BLOCK=128)
    torch.testing.assert_close(out, half * -2.0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_bound_launch_is_reusable_and_names_match_by_text(device):
    # k[grid] kept and called twice; keyword names built at run time (not interned) match by text.
    scale = tjit.jit(jk.scale_kernel)
    launch = scale[(triton.cdiv(1000, 256),)]
    names = {"".join(["BLO", "CK"]): 256, "".join(["num_", "warps"]): 2}
    for factor in (0.5, -3.0):
        x = torch.randn(1000, device=device)
        out = poisoned(x)
        launch(x, out, 1000, factor, **names)
        torch.testing.assert_close(out, x * factor)


class LaunchCache(triton.runtime.jit.KernelInterface):
    """A launcher around the kernel in `.fn` that is not Triton's, as FlagGems' @libentry() is."""

    def __init__(self, fn):
        self.fn = fn

    def run(self, *args, **kwargs):
        return self.fn.run(*args, **kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_a_launch_wrapper_is_looked_through(device):
    # tjit.jit launches the kernel under such a wrapper, plain or autotuned.
    plain = tjit.jit(LaunchCache(jk.scale_kernel))
    assert plain.kernel is jk.scale_kernel
    x = torch.randn(1000, device=device)
    out = poisoned(x)
    plain[(triton.cdiv(1000, 256),)](x, out, 1000, 3.0, BLOCK=256)
    torch.testing.assert_close(out, x * 3.0)
    tuned = tjit.jit(LaunchCache(LaunchCache(jk.autotuned_scale)))
    assert tuned.kernel is jk.autotuned_scale
    out = poisoned(x)
    tuned[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000, -0.5)
    torch.testing.assert_close(out, x * -0.5)
    with pytest.raises(TypeError, match="takes a @triton.jit kernel"):
        tjit.jit(LaunchCache(lambda: None))


def test_a_dropped_kernel_is_freed():
    # The launcher refers back to its JitKernel (the fallback); the garbage collector breaks that cycle.
    import gc
    import weakref
    kernel = tjit.jit(jk.scale_kernel)
    x = torch.randn(10)
    out = poisoned(x)
    kernel[(1,)](x, out, 10, 2.0, BLOCK=16)
    torch.testing.assert_close(out, x * 2.0)
    dropped = weakref.ref(kernel)
    del kernel
    gc.collect()
    assert dropped() is None


def grid_of_block(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


@pytest.mark.parametrize("device", DEVICES)
def test_autotuned_kernel(device):
    scale = tjit.jit(jk.autotuned_scale)
    for n in (1000, 5000):
        x = torch.randn(n, device=device)
        out = poisoned(x)
        scale[grid_of_block(n)](x, out, n, 3.0)
        torch.testing.assert_close(out, x * 3.0)
    with pytest.raises(TypeError, match="autotuned_scale.*num_warps comes from the autotune config"):
        scale[grid_of_block(10)](x, out, 10, 3.0, num_warps=8)


@pytest.mark.parametrize("device", DEVICES)
def test_autotune_layer_made_at_run_time(device):
    # An autotune layer the program builds around a module-level kernel: the runtime loads it under
    # a name of its own, and the plain kernel stays what it is.
    tuned = tjit.jit(triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})],
                                     key=["n"])(jk.scale_kernel))
    x = torch.randn(999, device=device)
    out = poisoned(x)
    tuned[grid_of_block(999)](x, out, 999, 0.5)
    torch.testing.assert_close(out, x * 0.5)
    plain = tjit.jit(jk.scale_kernel)
    out = poisoned(x)
    plain[(8,)](x, out, 999, 0.25, BLOCK=128)
    torch.testing.assert_close(out, x * 0.25)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [512, 500])
def test_heuristics_kernel(device, n):
    add = tjit.jit(jk.heuristic_add)
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    out = poisoned(x)
    add[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["relu", "none"])
@pytest.mark.parametrize("out_dtype", [torch.float16, "tl.bfloat16"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_string_dtype_and_none_arguments(device, activation, out_dtype, with_bias):
    import triton.language as tl
    kernel = tjit.jit(jk.activation_kernel)
    torch_dtype = out_dtype if isinstance(out_dtype, torch.dtype) else torch.bfloat16
    dtype_arg = out_dtype if isinstance(out_dtype, torch.dtype) else tl.bfloat16
    x = torch.randn(300, device=device)
    bias = torch.randn(300, device=device) if with_bias else None
    out = poisoned(x, torch_dtype)
    kernel[(3,)](x, bias, out, 300, activation, dtype_arg, BLOCK=128)
    expected = x + bias if with_bias else x
    if activation == "relu":
        expected = expected.relu()
    torch.testing.assert_close(out, expected.to(torch_dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("count", [1, 3])
def test_tuple_argument(device, count):
    kernel = tjit.jit(jk.tuple_sum_kernel)
    inputs = tuple(torch.randn(200, device=device) for _ in range(count))
    out = poisoned(inputs[0])
    kernel[(2,)](inputs, out, 200, BLOCK=128)
    torch.testing.assert_close(out, sum(inputs))


@pytest.mark.parametrize("device", DEVICES)
def test_do_not_specialize_and_empty_grid(device):
    fill = tjit.jit(jk.fill_kernel)
    for n in (1, 16, 37):
        out = torch.zeros(64, device=device)
        fill[(1,)](out, n, 2.5, BLOCK=64)
        assert torch.equal(out[:n], torch.full((n,), 2.5, device=device)) and not out[n:].any()
    out = torch.zeros(4, device=device)
    fill[(0,)](out, 4, 1.0, BLOCK=64)  # no programs: nothing written
    assert not out.any()


@pytest.mark.parametrize("device", DEVICES)
def test_refusals_name_the_kernel_and_the_argument(device):
    x = torch.randn(10, device=device)
    add = jk.add_kernel
    with pytest.raises(TypeError, match="add_kernel is missing argument n"):
        add[(1,)](x, x, x)
    with pytest.raises(TypeError, match="add_kernel has no parameter BLOK"):
        add[(1,)](x, x, x, 10, BLOK=64)
    with pytest.raises(TypeError, match="add_kernel got argument n twice"):
        add[(1,)](x, x, x, 10, n=10)
    with pytest.raises(TypeError, match="argument y_ptr is a list"):
        add[(1,)](x, [1.0], x, 10)
    with pytest.raises(TypeError, match="takes 5 arguments here, but 6 were given"):
        add[(1,)](x, x, x, 10, 128, 7)
    with pytest.raises(TypeError, match="grid must be an int, a tuple"):
        add["one"](x, x, x, 10)
    with pytest.raises(ValueError, match="one to three dimensions"):
        add[(1, 1, 1, 1)](x, x, x, 10)
    with pytest.raises(TypeError, match="tjit.jit takes a @triton.jit kernel"):
        tjit.jit(lambda: None)


@pytest.mark.parametrize("device", DEVICES)
def test_launches_from_threads(device):
    results = {}

    def work(i):
        x, y = torch.randn(1000 + i, device=device), torch.randn(1000 + i, device=device)
        out = poisoned(x)
        jk.add_kernel[(triton.cdiv(1000 + i, 128),)](x, y, out, 1000 + i)
        results[i] = torch.equal(out, x + y)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: True for i in range(4)}


def test_fake_tensors_take_the_traceable_path():
    # Tensor subclasses are not launched: wrap_triton records the kernel for fake tensors.
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.randn(100)
        out = torch.empty_like(x)
        jk.add_kernel[(1,)](x, x, out, 100)
        assert out.shape == (100,)


@pytest.mark.parametrize("device", DEVICES)
def test_inside_a_custom_op(device):
    @torch.library.custom_op("tjit_test_jit::scaled_add", mutates_args=())
    def scaled_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        jk.add_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel())
        return out * 2

    @scaled_add.register_fake
    def _(x, y):
        return torch.empty_like(x)

    x, y = torch.randn(513, device=device), torch.randn(513, device=device)
    torch.testing.assert_close(scaled_add(x, y), (x + y) * 2)
    torch.library.opcheck(scaled_add, (x, y))


@cuda_only
def test_torch_compile_traces_the_triton_kernel():
    def f(x, y):
        out = torch.empty_like(x)
        jk.add_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel())
        return out.relu()

    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), (x + y).relu())


@cuda_only
def test_inside_a_triton_op_under_compile():
    @torch.library.triton_op("tjit_test_jit::add_op", mutates_args=())
    def add_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        jk.add_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel())
        return out

    x, y = torch.randn(700, device="cuda"), torch.randn(700, device="cuda")
    torch.testing.assert_close(add_op(x, y), x + y)
    torch.testing.assert_close(torch.compile(lambda a, b: add_op(a, b) * 3, fullgraph=True)(x, y), (x + y) * 3)


@cuda_only
def test_cuda_graph_capture_and_same_result_as_triton():
    x, y = torch.randn(4097, device="cuda"), torch.randn(4097, device="cuda")
    out = poisoned(x)
    expected = poisoned(x)
    jk.add_kernel.kernel[(33,)](x, y, expected, 4097)  # Python Triton's own launch
    jk.add_kernel[(33,)](x, y, out, 4097)
    assert torch.equal(out, expected)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        jk.add_kernel[(33,)](x, y, out, 4097)
    x.copy_(torch.randn_like(x))
    out.fill_(float("nan"))
    graph.replay()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@cuda_only
def test_a_second_process_launches_from_the_kernel_store(tmp_path):
    script = textwrap.dedent(f"""
        import sys, torch, triton
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import jit_kernels as jk
        x = torch.randn(1000, device="cuda")
        out = torch.empty_like(x)
        jk.add_kernel[(8,)](x, x, out, 1000)
        torch.cuda.synchronize()
        assert torch.equal(out, x + x)
    """)
    env = {**os.environ, "TJIT_CACHE_DIR": str(tmp_path / "store"), "TJIT_LOG_COMPILES": "1"}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "[tjit] compiled add_kernel" in first.stderr
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "[tjit] compiled" not in second.stderr


@pytest.mark.parametrize("device", DEVICES)
def test_prepare_compiles_without_launching(device):
    x = torch.randn(300, device=device)
    out = poisoned(x)
    tjit.prepare(lambda: jk.add_kernel[(3,)](x, x, out, 300))
    assert out.isnan().all()
    jk.add_kernel[(3,)](x, x, out, 300)
    torch.testing.assert_close(out, x + x)


def test_recorded_launches_build_a_bundle(tmp_path):
    # TJIT_RECORD records tjit.jit's launches as it records the operators' (CPU launches specialise
    # as CUDA ones do); the bundle builder then compiles them for a GPU from the kernel's file, as a
    # C++ deployment would load them, and tuned kernels carry their choice.
    script = textwrap.dedent(f"""
        import sys, torch, triton, tjit
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import jit_kernels as jk
        x = torch.randn(1000)
        out = torch.empty_like(x)
        jk.add_kernel[(8,)](x, x, out, 1000)
        tjit.jit(jk.autotuned_scale)[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000, 2.0)
    """)
    manifest, bundle = tmp_path / "m.json", tmp_path / "k.tjb"
    env = {**os.environ, "TJIT_RECORD": str(manifest), "TJIT_CACHE_DIR": str(tmp_path / "store")}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    import json
    entries = json.loads(manifest.read_text())["entries"]
    assert {e["function"] for e in entries} == {"add_kernel", "autotuned_scale"}
    assert {os.path.basename(e["file"]) for e in entries} == {"jit_kernels.py"}
    build = subprocess.run([sys.executable, "-m", "tjit", "aot", "build", "--manifest", str(manifest), "--target",
                            "cuda:90", "-o", str(bundle), "-j", "1"], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    listing = subprocess.run([sys.executable, "-m", "tjit", "aot", "list", str(bundle)], capture_output=True,
                             text=True, timeout=300)
    assert listing.returncode == 0, listing.stderr
    assert "add_kernel" in listing.stdout and "autotuned_scale" in listing.stdout
