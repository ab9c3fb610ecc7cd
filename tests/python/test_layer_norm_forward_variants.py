"""benchmarks/layer_norm_forward_variants.py --smoke runs on CPU (Triton's interpreter): every variant
matches torch's layer_norm, the PRELOAD flip really negates PRELOAD, and a6daa4a's kernel is read
from git (or the run says why not)."""

import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
SCRIPT = os.path.join(ROOT, "benchmarks", "layer_norm_forward_variants.py")


def test_smoke(tmp_path):
    out = tmp_path / "lnf.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--rounds", "1", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [(r["dtype"], r["cols"]) for r in results] == [("bfloat16", 2048), ("bfloat16", 4608), ("float32", 5120)]
    for r in results:
        variants = {v["variant"]: v for v in r["variants"]}
        assert {"tjit", "main", "warps_half", "warps_double", "gate_shut", "gate_open", "copy"} <= set(variants), r
        for name, v in variants.items():
            if name != "copy" and "same_as" not in v:
                assert v["ok"] and v["rel_err"] < 0.05, (r["cols"], name, v)
        if "preload_flip" in variants:
            main, flip = variants["main"]["launch"], variants["preload_flip"]["launch"]
            assert main.replace("PRELOAD=1", "PRELOAD=0") == flip or main.replace("PRELOAD=0", "PRELOAD=1") == flip
            assert main != flip
        assert "a6daa4a" in variants or "pass --old-kernel" in r["skipped"]["a6daa4a"]
    assert "preload_flip" not in {v["variant"] for v in results[1]["variants"]}  # persistent: no PRELOAD
