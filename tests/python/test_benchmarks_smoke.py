"""The benchmark suite runs end to end: benchmarks/run_benchmarks.py --smoke on CPU (tiny sizes,
Triton's interpreter) writes its JSON and Markdown with the expected structure, and refuses to
write smoke results into benchmarks/results."""

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
SCRIPT = os.path.join(ROOT, "benchmarks", "run_benchmarks.py")
OPS = ("add", "sum", "softmax", "layer_norm")


def run(args, timeout):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = run(["--smoke", "--device", "cpu", "--no-build", "--out", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folders = [d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d))]
    assert folders == ["cpu-smoke"], folders
    return out / "cpu-smoke", proc.stdout


def test_smoke_writes_json_and_markdown(smoke_run):
    folder, stdout = smoke_run
    with open(folder / "results.json") as f:
        results = json.load(f)
    assert {"meta", "overhead", "bandwidth", "targets"} <= set(results)
    assert results["meta"]["smoke"] is True and results["meta"]["device"] == "cpu"

    python = results["overhead"]["python"]
    assert set(python["ops"]) == set(OPS)
    for op, entry in python["ops"].items():
        assert {"aten", "python_triton"} <= set(entry["us_per_call"]), op
        assert all(v > 0 for v in entry["us_per_call"].values()), op
        if results["meta"]["tjit_ops_present"].get(op):
            assert "tjit" in entry["us_per_call"] and "tjit/aten" in entry["ratios"], op
    assert "tjit/aten" in python["ops"]["add"]["ratios"]
    assert "tjit/python_triton" in python["ops"]["add"]["ratios"]
    # The C++ part either ran or says why not (here: no CUDA, or the binary is not built).
    cpp = results["overhead"]["cpp"]
    assert cpp.get("skipped") is True and cpp.get("reason")

    records = results["bandwidth"]["records"]
    assert {(r["op"], r["pass"]) for r in records} == {("add", "fwd"), ("sum", "fwd"), ("softmax", "fwd"),
                                                        ("softmax", "bwd"), ("layer_norm", "fwd"),
                                                        ("layer_norm", "bwd")}
    assert {r["dtype"] for r in records} == {"float32", "bfloat16"}
    for r in records:
        assert {"op", "pass", "dtype", "shape", "bytes", "impl"} <= set(r), r
        assert "gbps" in r or r.get("error") or r.get("skipped"), r
    for impl in ("aten", "python_triton", "copy"):
        assert any(r["impl"] == impl and r.get("gbps", 0) > 0 for r in records), impl
    assert any(r["impl"] == "tutorial" and r.get("gbps", 0) > 0 for r in records)
    # Every implementation that ran agrees with the reference.
    wrong = [r for r in records if r.get("ok") is False]
    assert not wrong, wrong

    # Cold start is measured on CUDA only; the C++ program still runs once: it says it skipped where
    # there is no GPU, and measures correct first calls where there is one.
    cold = results["cold_start"]
    assert cold["skipped"] is True and "CUDA" in cold["reason"]
    check = cold["cpp_check"]
    if torch.cuda.is_available():
        assert check.get("correct") and all(check["correct"].values()), check
        assert set(check["first_call_ms"]) >= {"add", "sum", "softmax", "layer_norm"}, check
    else:
        assert check.get("skipped") is True, check

    # Autotuning is timed on CUDA only: tjit's tuning and launch against Python Triton's autotuner.
    tuned = results["autotune"]
    if torch.cuda.is_available():
        assert tuned.get("host_ratio", 0) > 0 and tuned.get("tuning_ratio", 0) > 0, tuned
        assert set(tuned["tjit"]["tuning_ms"]) == set(tuned["python_triton"]["tuning_ms"]), tuned
    else:
        assert tuned["skipped"] is True and "CUDA" in tuned["reason"], tuned

    targets = results["targets"]
    assert len(targets) == 18
    for t in targets:
        assert {"target", "ratio", "status", "worst_at"} <= set(t)
        assert t["status"] in ("PASS", "MISS", "N/A")

    md = (folder / "results.md").read_text()
    for heading in ("## Targets", "## Host overhead per call, Python", "## Host overhead per call, C++",
                    "## Bandwidth (GB/s)", "### softmax fwd", "### layer_norm bwd", "## Cold start (fresh processes)",
                    "## Autotuning (benchmarks/autotune.py)"):
        assert heading in md, heading
    # The summary table comes last.
    assert stdout.strip().splitlines()[-1].startswith("targets: ")


def test_smoke_refuses_benchmarks_results():
    proc = run(["--smoke", "--device", "cpu", "--out", os.path.join(ROOT, "benchmarks", "results")], timeout=120)
    assert proc.returncode == 2
    assert "must not go into" in proc.stderr
