"""`./run.sh demo` (python -m tjit.demo): it runs every section and agrees with aten, on the
device the suite runs on (CPU through the interpreter in CI; CUDA on the GPU machine)."""

import os
import re
import subprocess
import sys

import torch


def test_demo_runs_every_section_and_agrees_with_aten(tmp_path):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = dict(os.environ, TJIT_CACHE_DIR=str(tmp_path / "store"))
    env.pop("TJIT_CACHE", None)
    run = subprocess.run([sys.executable, "-m", "tjit.demo", "--device", device], capture_output=True, text=True,
                         env=env, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    for header in ("1. Operators against aten", "2. Host time per call from Python", "3. Host time per call from C++",
                   "4. Memory bandwidth", "5. A fresh process's first call", "6. The kernel store"):
        assert header in out, out
    assert "DIFFERS" not in out and out.rstrip().endswith("demo passed"), out
    # Every operator, in the Python and the C++ tables.
    for op in ("add", "sum", "softmax", "layer_norm"):
        assert len(re.findall(rf"^  {op} ", out, re.MULTILINE)) >= 3, out
    assert "empty store" in out and "warm store" in out
    if device == "cuda":
        assert "warm store   import tjit" in out and "triton imported: no" in out, out
