"""tjit in distributed training (tjit.distributed: DTensor sharding strategies for every operator).

The two-process checks live in distributed_checks.py; each device runs them once, in two processes
(gloo on CPU, always; NCCL on two GPUs, where there are two), and each check is one test here:
every operator on sharded DTensors against aten, and a transformer block trained with tjit's
operators under DDP, FSDP2, tensor + sequence parallelism and torch.compile, against aten's.
On CPU the operators run through Triton's interpreter: sizes are small and the block trains for
TJIT_DIST_STEPS steps (3; 20 on GPUs)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

if not torch.distributed.is_available():
    pytest.skip("this torch is built without torch.distributed", allow_module_level=True)

import distributed_checks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

DEVICE_KINDS = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two CUDA GPUs (NCCL); runs on the 2-GPU machine (nvidia-h100-x2)"))]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Runs every check once per device kind, on two processes; {device: {check: result of rank 0
    and of rank 1}}."""
    done = {}

    def get(device):
        if device not in done:
            out = tmp_path_factory.mktemp(f"dist-{device}")
            proc = subprocess.run([sys.executable, os.path.join(HERE, "distributed_checks.py"), "--device", device,
                                   "--out", str(out)], capture_output=True, text=True, timeout=900)
            ranks = []
            for r in range(distributed_checks.WORLD):
                path = out / f"rank{r}.json"
                assert path.exists(), (f"rank {r} wrote no results (exit {proc.returncode}):\n"
                                       f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
                ranks.append(json.loads(path.read_text()))
            done[device] = ranks
        return done[device]

    return get


@pytest.mark.parametrize("device", DEVICE_KINDS)
@pytest.mark.parametrize("name", list(distributed_checks.CHECKS))
def test_two_processes(results, device, name):
    for rank, checks in enumerate(results(device)):
        result = checks.get(name)
        assert result is not None, f"rank {rank} did not run {name}"
        assert result["status"] == "ok", f"rank {rank}, {name} on {device}:\n{result['error']}"


def run_python(code):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_strategies_register_when_dtensor_is_imported_later():
    """import tjit leaves torch.distributed.tensor (a heavy import) alone; importing it later registers
    every operator's strategy."""
    out = run_python("""
        import sys, warnings
        import torch, tjit
        assert "torch.distributed.tensor" not in sys.modules, "import tjit imported DTensor"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from torch.distributed.tensor import DTensor
        assert not [w for w in caught if "tjit" in str(w.message)], [str(w.message) for w in caught]
        funcs = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
        names = [n for n in dir(torch.ops.tjit) if isinstance(getattr(torch.ops.tjit, n), torch._ops.OpOverloadPacket)]
        missing = [n for n in names if getattr(torch.ops.tjit, n).default not in funcs]
        assert not missing, missing
        assert sorted(tjit.distributed.register()) == sorted(names)
        print(len(names))
        """)
    assert int(out) >= 7


def test_strategies_register_when_dtensor_was_imported_first():
    run_python("""
        import warnings
        import torch
        from torch.distributed.tensor import DTensor
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import tjit
        assert not [w for w in caught if "tjit" in str(w.message)], [str(w.message) for w in caught]
        assert torch.ops.tjit.layer_norm_backward.default in DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
        """)


def test_a_rule_that_does_not_fit_the_schema_is_reported():
    """A table entry whose outputs disagree with the operator's schema warns and is left out (the
    operator test above then names it) instead of failing DTensor's import."""
    run_python("""
        import warnings
        import torch, tjit
        tjit.distributed.STRATEGIES["softmax"] = tjit.distributed._rows(tjit.distributed._softmax_dim, ("rows", "weight"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch.distributed.tensor
        text = " ".join(str(w.message) for w in caught)
        assert "tjit::softmax" in text and "2 outputs" in text, text
        assert "softmax" not in tjit.distributed.register()
        """)
