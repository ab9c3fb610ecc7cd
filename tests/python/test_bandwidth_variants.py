"""benchmarks/bandwidth_variants.py --smoke runs on CPU (Triton's interpreter): every variant of both
cases matches torch (outputs poisoned first), the long-row configs and candidate kernels are all
there (one of each kind: the interpreter is slow on split rows), and the layer_norm backward's launch variants really change the launch. The team kernel is
CUDA only (its programs wait for each other) and is absent here."""

import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
SCRIPT = os.path.join(ROOT, "benchmarks", "bandwidth_variants.py")


def test_smoke(tmp_path):
    out = tmp_path / "bv.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--rounds", "1", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [(r["case"], r["rows"], r["cols"]) for r in results] == [
        ("layer_norm_bwd_fp32", 37, 2048), ("layer_norm_bwd_fp32", 9, 5120), ("softmax_fwd_bf16", 1, 20500),
        ("softmax_fwd_bf16", 1, 50257)]
    for r in results:
        variants = {v["variant"]: v for v in r["variants"]}
        for name, v in variants.items():
            assert "error" not in v, (r["cols"], name, v)
            if name != "copy":
                assert v["ok"] and v["rel_err"] < 0.05, (r["cols"], name, v)
            assert v.get("gbps", 0) > 0, (r["cols"], name, v)
        if r["case"] == "softmax_fwd_bf16":
            expected = {"tjit", "plan", "untuned", "split_8192w8", "loop_8192w32", "split_2048w4", "peek_8192w8_r48",
                        "peek_off_8192w8", "copy"}
            assert expected == set(variants), sorted(variants)
            assert not any(name.startswith("team_") for name in variants)
        else:
            assert {"tjit", "plan", "gate_shut", "rows_x2", "two_per_sm", "copy"} <= set(variants), sorted(variants)
            launches = {name: variants[name]["launch"] for name in ("rows_x2", "two_per_sm")}
            assert "BLOCK_M=" in launches["rows_x2"] and launches["rows_x2"] != launches["two_per_sm"]
            assert "maxnreg" in launches["two_per_sm"]
