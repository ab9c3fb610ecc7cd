"""Two GPUs: operators on a device other than the current one (both ways), backward there, and two
threads compiling new specialisations on the two devices at once with one kernel store between them.
Skips where fewer than two GPUs are visible; runs on the 2-GPU CUDA machine (nvidia-h200-x2)."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn.functional as F

import tjit  # noqa: F401

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2,
                                reason="needs two CUDA GPUs; runs on the 2-GPU CUDA machine (nvidia-h200-x2)")


def run_all_ops(device, rows, cols, dtype=torch.float32):
    """Every operator forward and backward on `device`, checked against aten; returns nothing."""
    x = torch.randn(rows, cols, device=device, dtype=dtype, requires_grad=True)
    y = torch.randn(rows, cols, device=device, dtype=dtype)
    w = torch.randn(cols, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(cols, device=device, dtype=dtype, requires_grad=True)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    cases = [
        ("add", lambda t: torch.ops.tjit.add(t, y, alpha=3), lambda t: torch.add(t, y, alpha=3)),
        ("sum", lambda t: torch.ops.tjit.sum(t, [1]), lambda t: t.sum(1)),
        ("softmax", lambda t: torch.ops.tjit.softmax(t, 1), lambda t: torch.softmax(t, 1)),
        ("layer_norm", lambda t: torch.ops.tjit.layer_norm(t, [cols], w, b), lambda t: F.layer_norm(t, [cols], w, b)),
    ]
    for name, mine, reference in cases:
        out = mine(x)
        assert out.device == torch.device(device), name
        expected = reference(x)
        torch.testing.assert_close(out, expected, **tol, msg=f"{name} forward on {device}")
        grad = torch.randn_like(out)
        got = torch.autograd.grad(out, (x, w, b) if name == "layer_norm" else (x, ), grad)
        want = torch.autograd.grad(expected, (x, w, b) if name == "layer_norm" else (x, ), grad)
        for g, e in zip(got, want):
            assert g.device == torch.device(device)
            torch.testing.assert_close(g, e, **tol, msg=f"{name} backward on {device}")


@pytest.mark.parametrize("current, target", [(0, 1), (1, 0)])
def test_operators_on_a_device_that_is_not_current(current, target):
    with torch.cuda.device(current):
        run_all_ops(f"cuda:{target}", 37, 1000)
        torch.cuda.synchronize(target)
        assert torch.cuda.current_device() == current, "an operator changed the current device"


def test_two_threads_compile_new_specialisations_on_two_devices_at_once():
    """Shapes no other test uses (new constexprs and plans), on both devices at the same moment."""
    shapes = [(5, 3000), (300, 70), (3, 40000)]
    barrier = threading.Barrier(2)
    errors = []

    def work(device):
        try:
            torch.cuda.set_device(device)
            barrier.wait()
            for rows, cols in shapes:
                run_all_ops(f"cuda:{device}", rows, cols)
                run_all_ops(f"cuda:{device}", rows, cols, torch.bfloat16)
            torch.cuda.synchronize(device)
        except BaseException as e:  # reported from the main thread
            errors.append((device, e))

    threads = [threading.Thread(target=work, args=(d, )) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    # The store they shared serves both devices in a new process, without Python's Triton.
    script = textwrap.dedent(f"""\
        import sys, torch, tjit
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from test_multi_gpu import run_all_ops
        for device in ("cuda:1", "cuda:0"):
            for rows, cols in {shapes!r}:
                run_all_ops(device, rows, cols)
                run_all_ops(device, rows, cols, torch.bfloat16)
        print("triton imported:", "triton" in sys.modules)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TJIT_LOG_COMPILES": "1"})
    assert done.returncode == 0, done.stderr
    assert "triton imported: False" in done.stdout, done.stdout + done.stderr
    assert "[tjit] compiled" not in done.stderr, done.stderr
