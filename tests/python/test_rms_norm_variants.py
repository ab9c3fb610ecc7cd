"""benchmarks/rms_norm_variants.py --smoke runs on CPU (Triton's interpreter): every variant of both
operators and passes matches torch, the base commit's kernel is read from git (or the run says why
not), and the backward's candidates really differ from the plan they derive from."""

import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
SCRIPT = os.path.join(ROOT, "benchmarks", "rms_norm_variants.py")


def test_smoke(tmp_path):
    out = tmp_path / "rms.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--rounds", "1", "--passes", "fwd,bwd", "--skip",
                           "warps_half,warps_double", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [(r["op"], r["pass"], r["dtype"], r["cols"]) for r in results] == [
        (op, pas, dtype, cols) for dtype, _, cols in (("bfloat16", 5, 2000), ("float32", 5, 4100), ("bfloat16", 2, 12000))
        for op in ("rms_norm", "add_rms_norm") for pas in ("fwd", "bwd")]
    assert any(v["variant"] == "programs_x2" and "same_as" not in v for r in results for v in r["variants"])
    for r in results:
        variants = {v["variant"]: v for v in r["variants"]}
        expected = {"tjit", "new", "aten", "copy"}
        if r["pass"] == "bwd":
            expected |= {"prefetch_flip", "preload_w_flip", "programs_x2"}
        assert expected <= set(variants), (r["op"], r["pass"], r["cols"], sorted(variants))
        assert "main" in variants or "pass --base-kernel" in r["skipped"]["main"]
        for name, v in variants.items():
            if name != "copy" and "same_as" not in v:
                assert v["ok"], (r["op"], r["pass"], r["cols"], name, v)
        if r["pass"] == "bwd":
            new = variants["new"]["plan"]["launches"][0]
            flip = variants["prefetch_flip"]["plan"]["launches"][0]
            assert flip["constexprs"]["PREFETCH"] != new["constexprs"]["PREFETCH"]
            x2 = variants["programs_x2"]
            assert x2.get("same_as") == "new" or x2["plan"]["launches"][0]["grid"][0] > new["grid"][0]
            if r["cols"] == 12000:  # 8192 + 4096: the tail and its padded counterpart
                assert new["constexprs"]["BLOCK_TAIL"] == 4096 and not new["constexprs"]["PRELOAD_W"]
                assert variants["no_tail"]["plan"]["launches"][0]["constexprs"]["BLOCK_N"] == 16384
                assert "CUDA only" in r["skipped"]["team"]


def test_sm90_report_without_gpu(tmp_path):
    # --sm90 compiles every variant's launches for sm_90 here and reads their resources back.
    out = tmp_path / "sm90.json"
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, SCRIPT, "--sm90", "--shapes", "bfloat16:1024x12288", "--ops", "rms_norm",
                           "--passes", "bwd", "--skip", "warps_half,warps_double,programs_x2,preload_w_flip",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (case, ) = json.loads(out.read_text())["results"]
    plans = {v["variant"]: v["plan"] for v in case["variants"]}
    assert {"new", "fused", "team_held", "prefetch_flip", "no_tail"} <= set(plans), sorted(plans)
    for name, plan in plans.items():
        first = plan["launches"][0]
        assert first["n_regs"] > 0 and first["n_spills"] >= 0 and first["resident_programs_per_sm"] >= 1, (name, first)
    # A GPU's 12288 columns go to the team backward, rms_norm's 2-byte rows in its lag form
    # (2048-column chunks at 128 registers: four programs an SM), add_rms_norm's held (4096-column
    # chunks, two an SM); neither spills. The flips derive from the fused pass it replaced (8192 +
    # 4096 columns).
    lag, held = plans["new"]["launches"][0], plans["team_held"]["launches"][0]
    assert lag["kernel"] == "rms_norm_bwd_team_lag_kernel" and lag["n_spills"] == 0, lag
    assert lag["resident_programs_per_sm"] == 4 and lag["n_regs"] <= 128, lag
    assert held["kernel"] == "rms_norm_bwd_team_kernel" and held["n_spills"] == 0, held
    assert held["resident_programs_per_sm"] == 2, held
    assert plans["fused"]["launches"][0]["constexprs"]["BLOCK_TAIL"] == 4096
