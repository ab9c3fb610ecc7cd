"""The benchmark suite runs end to end: benchmarks/run_benchmarks.py --smoke on CPU (tiny sizes,
Triton's interpreter) writes its JSON and Markdown with the expected structure, and refuses to
write smoke results into benchmarks/results. The peers (FlagGems, Liger-Kernel) are skipped on CPU
with a note and their targets are N/A there; the targets against peers and copy are evaluated on
small synthetic results, and the bandwidth runner measures stand-in peers (torch functions), records
a peer's exception and goes on."""

import json
import math
import os
import statistics
import subprocess
import sys
import textwrap

import pytest
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
BENCH = os.path.join(ROOT, "benchmarks")
SCRIPT = os.path.join(BENCH, "run_benchmarks.py")
OPS = ("add", "sum", "softmax", "layer_norm")
PEERS = ("flaggems", "liger")
PEER_TARGET_IDS = ("add_fwd_peers", "sum_fwd_peers", "softmax_fwd_peers", "softmax_bwd_peers", "layer_norm_fwd_peers",
                   "layer_norm_bwd_peers", "py_host_vs_flaggems")
TARGET_IDS = ("cpp_add_vs_aten", "cpp_bare_vs_raw", "py_add_vs_aten", "py_add_vs_triton", "add_bw", "sum_bw",
              "softmax_fwd_bw", "softmax_bwd_bw", "softmax_fwd_copy", "softmax_bwd_copy", "layer_norm_fwd_bw",
              "layer_norm_bwd_bw", "cold_cpp_warm_store", "cold_py_warm_store", "cold_store_vs_jit", "autotune_host",
              "autotune_cost", "cold_cpp_bundle") + PEER_TARGET_IDS + ("softmax_fwd_copy_128k", "layer_norm_fwd_copy",
                                                                       "layer_norm_bwd_copy",
                                                                       "py_direct_vs_torch", "py_direct_vs_flaggems",
                                                                       "py_torch_ops_unchanged", "llm_peers",
                                                                       "llm_softmax_copy", "llm_layer_norm_fwd_copy",
                                                                       "llm_layer_norm_bwd_copy", "sum_fwd_flaggems",
                                                                       "llm_rms_norm_peers", "llm_rms_norm_fwd_copy",
                                                                       "llm_rms_norm_bwd_copy",
                                                                       "py_jit_vs_triton", "py_jit_vs_floor",
                                                                       "py_jit_vs_cpp", "first_call_warm_store",
                                                                       "tuned_vs_table_llm",
                                                                       "dense_peers_every_point", "dense_peers_median",
                                                                       "decode_peers_every_point")


def import_bench(name):
    """A module of benchmarks/ (report, peers: neither loads kernels at import)."""
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return __import__(name)


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
        # Every wrapper that ran was timed: a launch that raises (a kernel gained a constexpr the
        # wrapper does not pass) is recorded in "errors" and would drop its column silently.
        assert not entry.get("errors"), (op, entry.get("errors"))
        if results["meta"]["tjit_ops_present"].get(op):
            # Both entry points: tjit.<op> (the direct path) and torch.ops.tjit.<op>.
            assert "tjit" in entry["us_per_call"] and "tjit/aten" in entry["ratios"], op
            assert "tjit_torch_ops" in entry["us_per_call"] and "tjit_torch_ops/aten" in entry["ratios"], op
            assert entry["checks"]["tjit"] and entry["checks"]["tjit_torch_ops"], op
    assert "tjit/aten" in python["ops"]["add"]["ratios"]
    assert "tjit/python_triton" in python["ops"]["add"]["ratios"]
    # The C++ part either ran or says why not (here: no CUDA, or the binary is not built).
    cpp = results["overhead"]["cpp"]
    assert cpp.get("skipped") is True and cpp.get("reason")
    # Own kernels through tjit.jit (own_kernels.py) time launches on CUDA only: on CPU the part says why
    # it skipped, and both kernels still ran once through Triton's interpreter, correct.
    own = results["overhead"]["own_kernels"]
    assert own["skipped"] is True and "CUDA" in own["reason"], own
    assert own["interpreter_checks"] == {case: {"triton": True, "tjit_jit": True} for case in ("4_args", "14_args")}
    assert "Own kernels through tjit.jit: skipped" in stdout

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

    # The LLM part: softmax, layer_norm, rms_norm and add_rms_norm, both passes and dtypes, at its own
    # (not power-of-two) shapes; torch.compile is a peer on CUDA only.
    llm = results["llm"]["records"]
    assert {(r["op"], r["pass"]) for r in llm} == {(op, pas) for op in ("softmax", "layer_norm", "rms_norm",
                                                                         "add_rms_norm") for pas in ("fwd", "bwd")}
    for op in ("rms_norm", "add_rms_norm"):
        for pas in ("fwd", "bwd"):
            ran = {r["impl"] for r in llm if r["op"] == op and r["pass"] == pas and r.get("gbps", 0) > 0}
            assert {"tjit", "aten", "copy"} <= ran, (op, pas, ran)
            assert all(r.get("skipped") for r in llm if r["op"] == op and r["impl"] == "compile")
    assert {r["dtype"] for r in llm} == {"float32", "bfloat16"}
    assert {tuple(r["shape"]) for r in llm if r["op"] == "softmax"} == {(3, 500), (2, 1000)}
    assert any(r["impl"] == "tjit" and r.get("gbps", 0) > 0 for r in llm)
    assert any(r["impl"] == "copy" and r.get("gbps", 0) > 0 for r in llm)
    assert not [r for r in llm if r.get("ok") is False]

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

    # First calls with plan choices are timed on CUDA only.
    assert results["first_call"]["skipped"] is True and "CUDA" in results["first_call"]["reason"]

    # Autotuning is timed on CUDA only: tjit's tuning and launch against Python Triton's autotuner.
    # (The smoke run's device is the CPU even on a CUDA machine.)
    tuned = results["autotune"]
    if results["meta"]["device"] == "cuda":
        assert tuned.get("host_ratio", 0) > 0 and tuned.get("tuning_ratio", 0) > 0, tuned
        assert set(tuned["tjit"]["tuning_ms"]) == set(tuned["python_triton"]["tuning_ms"]), tuned
    else:
        assert tuned["skipped"] is True and "CUDA" in tuned["reason"], tuned

    targets = results["targets"]
    assert tuple(t["id"] for t in targets) == TARGET_IDS
    for t in targets:
        assert {"target", "ratio", "status", "worst_at"} <= set(t)
        assert t["status"] in ("PASS", "MISS", "N/A")

    md = (folder / "results.md").read_text()
    for heading in ("## Targets", "## Host overhead per call, Python", "## Host overhead per call, C++",
                    "## Host overhead per launch, own kernels (tjit.jit)",
                    "## Bandwidth (GB/s)", "### softmax fwd", "### layer_norm bwd", "## Cold start (fresh processes)",
                    "## Autotuning (benchmarks/autotune.py)", "## Bandwidth at LLM shapes (GB/s)"):
        assert heading in md, heading
    # The summary table comes last.
    assert stdout.strip().splitlines()[-1].startswith("targets: ")


def test_smoke_skips_peers_on_cpu(smoke_run):
    """On CPU FlagGems and Liger-Kernel are skipped, never imported: every peer record is a skipped one
    with its note, the notes and the Markdown say why, and every target against them is N/A."""
    folder, stdout = smoke_run
    with open(folder / "results.json") as f:
        results = json.load(f)
    records = results["bandwidth"]["records"]
    for peer in PEERS:
        recs = [r for r in records if r["impl"] == peer]
        # one per case: every op, pass, dtype and size
        assert len(recs) == len([r for r in records if r["impl"] == "aten"]), peer
        for r in recs:
            assert r.get("skipped") is True and "gbps" not in r, r
            assert "skipped on cpu" in r["note"] and "CUDA-only" in r["note"], r
        info = results["bandwidth"]["config"]["peers"][peer]
        assert info["available"] is False and "skipped on cpu" in info["note"], info
        assert any(n.startswith(f"{peer}: skipped on cpu") for n in results["bandwidth"]["notes"]), peer
        python = results["overhead"]["python"]
        assert any(n.startswith(f"{peer}: skipped on cpu") for n in python["notes"]), peer
        assert all(peer not in e["us_per_call"] for e in python["ops"].values()), peer
    assert "flag_gems" not in sys.modules and "liger_kernel" not in sys.modules
    targets = {t["id"]: t for t in results["targets"]}
    for tid in PEER_TARGET_IDS + ("py_direct_vs_flaggems", ):
        assert targets[tid]["status"] == "N/A" and targets[tid]["ratio"] is None, targets[tid]
        assert "skipped on cpu" in targets[tid]["note"], targets[tid]
    # Smoke sizes (128, 256 columns) are below the copy targets' ranges.
    for tid in ("softmax_fwd_copy_128k", "layer_norm_fwd_copy", "layer_norm_bwd_copy"):
        assert targets[tid]["status"] == "N/A", targets[tid]
    md = (folder / "results.md").read_text()
    assert "## Peers (FlagGems, Liger-Kernel)" in md
    assert "| flaggems | " in md and "| liger | " in md
    # no column for a peer skipped everywhere
    assert "| flaggems |" not in md.split("## Bandwidth (GB/s)")[1].split("Notes:")[0]


def _rec(op, pas, dtype, shape, impl, gbps=None, **extra):
    rec = {"op": op, "pass": pas, "dtype": dtype, "shape": list(shape), "numel": math.prod(shape),
           "bytes": 1, "impl": impl, **extra}
    if gbps is None:
        rec["skipped"] = True
    else:
        rec.update(gbps=gbps, ms=1.0, ok=extra.get("ok", True), timing=extra.get("timing", "graph"))
    return rec


def _softmax_results(liger_gbps, flaggems_ok=True):
    """softmax fwd at two sizes and both dtypes: tjit 100 GB/s, aten 90, flaggems 95 (or 500 with
    wrong results), liger `liger_gbps` at 4096x1024 float32, 50 elsewhere, copy 110."""
    records = []
    for dtype in ("float32", "bfloat16"):
        for cols in (1024, 131072):
            shape = (4096, cols)
            liger = liger_gbps if (dtype, cols) == ("float32", 1024) else 50.0
            records += [_rec("softmax", "fwd", dtype, shape, "tjit", 100.0),
                        _rec("softmax", "fwd", dtype, shape, "aten", 90.0),
                        _rec("softmax", "fwd", dtype, shape, "flaggems", 95.0 if flaggems_ok else 500.0,
                             ok=flaggems_ok),
                        _rec("softmax", "fwd", dtype, shape, "liger", liger) if cols <= 65536 else
                        _rec("softmax", "fwd", dtype, shape, "liger", note="more than 65536 columns"),
                        _rec("softmax", "fwd", dtype, shape, "copy", 110.0)]
    return {"bandwidth": {"records": records, "notes": []}}


def test_peer_targets_synthetic():
    report = import_bench("report")

    def target(results, tid):
        return next(t for t in report.evaluate_targets(results) if t["id"] == tid)

    # A peer faster than tjit somewhere: MISS, naming the case and the peer.
    t = target(_softmax_results(liger_gbps=125.0), "softmax_fwd_peers")
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(100 / 125), t
    assert t["worst_at"] == "float32 4096x1024 vs liger", t
    # tjit faster than every peer and aten everywhere: PASS; the worst case is against flaggems.
    t = target(_softmax_results(liger_gbps=60.0), "softmax_fwd_peers")
    assert t["status"] == "PASS" and t["ratio"] == pytest.approx(100 / 95), t
    assert t["worst_at"].endswith("vs flaggems"), t
    # A peer's wrong results are not compared, and the note says so.
    t = target(_softmax_results(liger_gbps=60.0, flaggems_ok=False), "softmax_fwd_peers")
    assert t["status"] == "PASS" and t["ratio"] == pytest.approx(100 / 90), t
    assert "wrong results not compared: flaggems" in t["note"], t
    # tjit wrong anywhere: MISS however fast.
    results = _softmax_results(liger_gbps=60.0)
    results["bandwidth"]["records"][0]["ok"] = False
    assert target(results, "softmax_fwd_peers")["status"] == "MISS"
    # Peers only skipped: N/A, with their notes.
    results = _softmax_results(liger_gbps=60.0)
    for r in results["bandwidth"]["records"]:
        if r["impl"] in PEERS:
            r.pop("gbps", None)
            r.update(skipped=True, note=f"{r['impl']} not installed")
    t = target(results, "softmax_fwd_peers")
    assert t["status"] == "N/A" and "flaggems: flaggems not installed" in t["note"], t
    # A pass not run at all: N/A.
    assert target(results, "layer_norm_bwd_peers")["status"] == "N/A"

    # Copy: 100 / 110 = 0.91 >= 0.85 over 1024..131072 columns; one slow dtype makes it MISS.
    t = target(_softmax_results(liger_gbps=60.0), "softmax_fwd_copy_128k")
    assert t["status"] == "PASS" and t["ratio"] == pytest.approx(100 / 110), t
    results = _softmax_results(liger_gbps=60.0)
    for r in results["bandwidth"]["records"]:
        if r["impl"] == "copy" and r["dtype"] == "bfloat16" and r["shape"][-1] == 131072:
            r["gbps"] = 200.0
    t = target(results, "softmax_fwd_copy_128k")
    assert t["status"] == "MISS" and t["worst_at"] == "bfloat16 4096x131072", t
    # The existing 0.80x copy target stops at 65536 columns: that slow case is outside it.
    assert target(results, "softmax_fwd_copy")["status"] == "PASS"

    # layer_norm copy targets: fwd >= 0.85x, bwd >= 0.70x, 512..65536 columns only.
    records = []
    for pas, tjit in (("fwd", 80.0), ("bwd", 75.0)):
        for cols in (256, 512, 65536, 131072):
            slow = cols in (256, 131072)  # outside the range: never counted
            records += [_rec("layer_norm", pas, "float32", (4096, cols), "tjit", 10.0 if slow else tjit),
                        _rec("layer_norm", pas, "float32", (4096, cols), "copy", 100.0)]
    results = {"bandwidth": {"records": records}}
    t = target(results, "layer_norm_fwd_copy")
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(0.80), t
    t = target(results, "layer_norm_bwd_copy")
    assert t["status"] == "PASS" and t["ratio"] == pytest.approx(0.75), t


def test_llm_shapes():
    """The LLM part's shapes: every vocabulary and hidden size of the issue, rows so that one bf16
    tensor holds at least 256 MiB (and not a multiple of 64 rows more than that needs)."""
    bandwidth = import_bench("bandwidth")
    shapes = bandwidth.llm_shapes(smoke=False)
    assert [n for _, n in shapes["softmax"]] == [32000, 50257, 128256, 151936, 262144]
    assert [n for _, n in shapes["layer_norm"]] == [2048, 4096, 5120, 7168, 8192, 12288, 16384]
    for rows, cols in shapes["softmax"] + shapes["layer_norm"]:
        assert rows % 64 == 0 and rows * cols * 2 >= 256 * 2**20 > (rows - 64) * cols * 2, (rows, cols)


def test_llm_targets_synthetic():
    report = import_bench("report")

    def target(results, tid):
        return next(t for t in report.evaluate_targets(results) if t["id"] == tid)

    records = []
    for op, pas, cols in (("softmax", "fwd", 128256), ("softmax", "bwd", 128256), ("layer_norm", "fwd", 5120),
                          ("layer_norm", "bwd", 12288)):
        for dtype in ("float32", "bfloat16"):
            shape = (1024, cols)
            slow = (op, pas, dtype) == ("layer_norm", "bwd", "bfloat16")
            records += [_rec(op, pas, dtype, shape, "tjit", 70.0 if slow else 90.0),
                        _rec(op, pas, dtype, shape, "aten", 60.0),
                        _rec(op, pas, dtype, shape, "flaggems", 80.0),
                        _rec(op, pas, dtype, shape, "liger", None),
                        _rec(op, pas, dtype, shape, "copy", 100.0)]
    results = {"llm": {"records": records}}
    t = target(results, "llm_peers")  # the worst case against the best peer: 70 / 80
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(70 / 80), t
    assert t["worst_at"] == "bfloat16 1024x12288 vs flaggems", t
    assert target(results, "llm_softmax_copy")["status"] == "PASS"  # 0.90 >= 0.85
    assert target(results, "llm_layer_norm_fwd_copy")["status"] == "PASS"
    t = target(results, "llm_layer_norm_bwd_copy")  # 0.70 < 0.75
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(0.70), t
    # The sweep's records never count for the LLM targets, nor the LLM part's for the sweep's.
    assert target({"bandwidth": {"records": records}}, "llm_peers")["status"] == "N/A"
    assert target(results, "softmax_fwd_peers")["status"] == "N/A"
    # sum fwd against FlagGems alone, every size.
    sums = [_rec("sum", "fwd", "float32", (n, ), impl, gbps) for n in (2**16, 2**24)
            for impl, gbps in (("tjit", 95.0 if n == 2**16 else 120.0), ("flaggems", 100.0), ("aten", 50.0))]
    t = target({"bandwidth": {"records": sums}}, "sum_fwd_flaggems")
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(0.95) and t["worst_at"] == "float32 2^16", t


def test_host_vs_flaggems_target_synthetic():
    report = import_bench("report")

    def overhead(us):
        ops = {op: {"shape": [1024], "us_per_call": v, "ratios": {}, "checks": {}} for op, v in us.items()}
        peers = {"flaggems": {"available": False, "note": "flag_gems not installed"}}
        return {"overhead": {"python": {"ops": ops, "peers": peers}}}

    def target(results):
        return next(t for t in report.evaluate_targets(results) if t["id"] == "py_host_vs_flaggems")

    t = target(overhead({"add": {"tjit": 5.0, "flaggems": 50.0}, "softmax": {"tjit": 6.0, "flaggems": 50.0}}))
    assert t["status"] == "PASS" and t["ratio"] == pytest.approx(6.0 / 50.0) and t["worst_at"].startswith("softmax")
    t = target(overhead({"add": {"tjit": 5.0, "flaggems": 40.0}, "sum": {"tjit": 6.0, "flaggems": 20.0}}))
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(0.30) and t["worst_at"].startswith("sum"), t
    t = target(overhead({"add": {"tjit": 5.0, "aten": 4.0}}))
    assert t["status"] == "N/A" and t["note"] == "flag_gems not installed", t


def test_direct_path_targets_synthetic():
    """py_direct_vs_torch takes the worst tjit.<op> / torch's; py_torch_ops_unchanged compares
    torch.ops.tjit.<op> / torch's with the run before the direct path; py_direct_vs_flaggems
    takes the worst tjit.<op> / FlagGems."""
    report = import_bench("report")

    def results(ops):
        return {"overhead": {"python": {"ops": {
            op: {"shape": [1024], "us_per_call": us, "checks": {},
                 "ratios": {f"{k}/aten": v / us["aten"] for k, v in us.items() if k != "aten"}}
            for op, us in ops.items()}}}}

    def target(res, tid):
        return next(t for t in report.evaluate_targets(res) if t["id"] == tid)

    before = report.TORCH_OPS_BEFORE
    res = results({"add": {"tjit": 5.0, "tjit_torch_ops": 7.0, "aten": 7.0},
                   "softmax": {"tjit": 7.2, "tjit_torch_ops": 10.0, "aten": 8.0}})
    t = target(res, "py_direct_vs_torch")
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(0.9) and t["worst_at"].startswith("softmax"), t
    t = target(res, "py_torch_ops_unchanged")
    assert t["ratio"] == pytest.approx(10.0 / 8.0 / before["softmax"]) and t["status"] == "MISS", t
    res = results({"add": {"tjit": 5.0, "tjit_torch_ops": 7.0, "aten": 7.5}})
    assert target(res, "py_direct_vs_torch")["status"] == "PASS"
    assert target(res, "py_torch_ops_unchanged")["status"] == "PASS"
    assert target(results({"add": {"tjit": 5.0, "aten": 7.0}}), "py_torch_ops_unchanged")["status"] == "N/A"
    res = results({"add": {"tjit": 5.0, "aten": 7.0, "flaggems": 25.0}, "sum": {"tjit": 6.0, "aten": 7.0,
                                                                               "flaggems": 20.0}})
    t = target(res, "py_direct_vs_flaggems")
    assert t["status"] == "MISS" and t["ratio"] == pytest.approx(0.3) and t["worst_at"].startswith("sum"), t


def test_peers_absent_have_notes(monkeypatch):
    """peers.load_peer never raises: not installed, CPU and an import error each give a note."""
    peers = import_bench("peers")
    for name in PEERS:
        peer = peers.load_peer(name, "cpu")
        assert not peer.available and peer.note.startswith("skipped on cpu"), peer.note
        assert peer.why_not("softmax", "fwd", [4, 128]) == peer.note
    monkeypatch.setattr(peers, "_installed", lambda name: False)
    assert peers.load_peer("flaggems", "cuda").note == "flag_gems not installed"
    monkeypatch.setattr(peers, "_installed", lambda name: True)

    def broken(peer):
        raise RuntimeError("No device were detected on your machine ! \n Please check that your driver is complete.")

    monkeypatch.setitem(peers._LOADERS, "liger", broken)
    note = peers.load_peer("liger", "cuda").note
    assert note == "import failed: RuntimeError: No device were detected on your machine !", note


def test_cold_start_runs_scenarios_in_rounds(monkeypatch):
    """run_cold_start runs every (kind, scenario) once per round, so a drift of the host's speed
    reaches every scenario alike; each scenario's medians come from its own processes."""
    cold_start = import_bench("cold_start")
    calls = []

    def fake_run(cmd, store, timeout, jit=True):
        kind = "cpp" if cmd == ["tjit_bench_cold_start"] else "python_triton" if cold_start.HERE in cmd else "python"
        scenario = "bundle" if not jit else "jit" if store is None else "warm_store" if "warm" in store else "cold_store"
        ms = 2.0 + len(calls)  # each process slower than the last: a drifting host
        calls.append((kind, scenario, ms))
        return {"context_ms": ms, "first_call_ms": {op: ms for op in cold_start.OPS},
                "correct": {op: True for op in cold_start.OPS}, "bundles": []}

    monkeypatch.setattr(cold_start, "_run", fake_run)
    monkeypatch.setattr(cold_start, "find_cpp_binary", lambda binary, name: "tjit_bench_cold_start")
    results = cold_start.run_cold_start("cuda", smoke=False, runs=3, log=lambda line: None)
    untimed = 4  # filling Triton's cache and the warm store (python, cpp, python_triton), the bundle probe
    timed = [(kind, scenario) for kind, scenario, _ in calls[untimed:]]
    steps = {(k, s) for k in ("cpp", "python") for s in cold_start.SCENARIOS} | {("python_triton", "jit")}
    assert len(timed) == 3 * len(steps) and set(timed[:len(steps)]) == steps, timed
    assert timed == timed[:len(steps)] * 3, timed  # the same order in every round
    for kind, scenario in steps:
        got = results[kind] if kind == "python_triton" else results[kind][scenario]
        own = [ms for k, s, ms in calls[untimed:] if (k, s) == (kind, scenario)]
        assert got["context_ms"] == statistics.median(own), (kind, scenario, got, own)


def test_first_call_scenarios_stores_and_target(monkeypatch):
    """run_first_call fills each warm scenario's store with a process of the scenario it names, then
    runs every scenario once per round with the environment it describes (tables hidden, tuning off,
    fresh store and Triton cache for the cold ones); the target is the slowest warm-store first call."""
    first_call = import_bench("first_call")
    report = import_bench("report")
    runs = []

    def fake_run(scenario, store, triton_cache, timeout):
        env = first_call._env(scenario, store, triton_cache)
        runs.append((scenario, store, triton_cache, env.get("TJIT_PLAN_TABLES"), env.get("TJIT_TUNE")))
        ms = {"table": 900.0, "tuned": 9000.0, "default": 800.0, "tuned_store": 12.0, "table_store": 9.0}[scenario]
        return {"calls": [{"ms": ms + i, "correct": True, "candidate": f"c{i}"} for i in range(len(first_call.CALLS))]}

    monkeypatch.setattr(first_call, "_run", fake_run)
    part = first_call.run_first_call("cuda", smoke=False, runs=2, log=lambda line: None)
    fills, timed = runs[:2], runs[2:]
    assert [r[0] for r in fills] == ["tuned", "table"]
    assert {r[1] for r in fills} == {r[1] for r in timed if r[0] in first_call.FILLED_BY}  # the filled stores
    assert [r[0] for r in timed] == list(first_call.SCENARIOS) * 2
    tables = {r[0]: r[3] for r in timed}
    assert tables["tuned"] == tables["default"] == tables["tuned_store"] == "0" and tables["table"] is None
    assert [r[0] for r in timed if r[4] == "0"] == ["default", "default"]
    cold = [r for r in timed if r[0] not in first_call.FILLED_BY]
    assert len({r[1] for r in cold}) == len(cold) and len({r[2] for r in cold}) == len(cold)  # all fresh
    last = len(first_call.CALLS) - 1
    assert part["scenarios"]["tuned"]["ms"][last] == 9000.0 + last
    targets = {t["id"]: t for t in report.evaluate_targets({"first_call": part})}
    t = targets["first_call_warm_store"]
    assert t["status"] == "PASS" and t["ratio"] == 12.0 + last and t["worst_at"].startswith("tuned_store")
    part["scenarios"]["table_store"]["ms"][0] = 60.0
    assert {t["id"]: t for t in report.evaluate_targets({"first_call": part})}["first_call_warm_store"]["status"] == \
        "MISS"
    lines = first_call.markdown(part, report._table)
    assert any(line.startswith("| first call, ms | table | tuned |") for line in lines), lines
    assert first_call.target({"skipped": True, "reason": "no GPU"})[0] is None


RUNNER_SCRIPT = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    import torch
    import torch.nn.functional as F
    import tjit
    import python_baselines
    python_baselines.patch_interpreter_for_numpy()
    import bandwidth
    import peers

    # Stand-ins for the peers, made of torch functions: one op raises, one has a column limit.
    fake = peers.Peer("flaggems", "0-test")
    fake.ops[("softmax", "fwd")] = lambda x: (lambda: torch.softmax(x, -1))
    def broken(dy, y, dtype):
        def call():
            raise RuntimeError("peer failure on purpose")
        return call
    fake.ops[("softmax", "bwd")] = broken
    fake.ops[("layer_norm", "fwd")] = lambda x, w, b, eps: (lambda: F.layer_norm(x, (x.shape[-1], ), w, b, eps))
    def ln_bwd(x, w, b, dy, eps):
        n = x.shape[-1]
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, eps)
        return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [n], mean, rstd, w, b, [True, True, True])
    fake.ops[("layer_norm", "bwd")] = ln_bwd
    fake.max_cols, fake.max_cols_why = {"layer_norm": 128}, "test limit"
    absent = peers.Peer("liger", None, "liger_kernel not installed")
    stand_ins = {"flaggems": fake, "liger": absent}

    timer = bandwidth.Timer("cpu", True)
    runner = bandwidth.Runner("cpu", True, timer, dtypes=["float32"], log=lambda *a: None, peers=stand_ins)
    sizes = bandwidth.sweep(True)
    shapes = [[sizes["rows"], n] for n in sizes["cols"]]
    runner.run_softmax(shapes)
    runner.run_layer_norm(shapes)

    # A timer whose captures "fail": every record says it was timed plainly, and the notes say where.
    class PlainTimer:
        cuda = False
        last_timing = last_capture_error = None
        def __call__(self, fn):
            fn()
            self.last_timing, self.last_capture_error = "plain", "RuntimeError: not capturable on purpose"
            return 1.0
    plain = bandwidth.Runner("cpu", True, PlainTimer(), dtypes=["float32"], log=lambda *a: None, peers=stand_ins)
    plain.run_add([1024])
    plain.capture_notes()
    print(json.dumps({"records": runner.records, "notes": runner.notes, "plain_records": plain.records,
                      "plain_notes": plain.notes}))
""")


def test_bandwidth_runner_with_stand_in_peers():
    env = dict(os.environ, TRITON_INTERPRET="1", TJIT_LOG_COMPILES="0")
    proc = subprocess.run([sys.executable, "-c", RUNNER_SCRIPT, BENCH], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    records = out["records"]
    index = {(r["op"], r["pass"], r["shape"][-1], r["impl"]): r for r in records}
    # measured like the others, checked against the same reference, timed the same way
    for key in (("softmax", "fwd", 128, "flaggems"), ("softmax", "fwd", 256, "flaggems"),
                ("layer_norm", "fwd", 128, "flaggems"), ("layer_norm", "bwd", 128, "flaggems")):
        r = index[key]
        assert r.get("gbps", 0) > 0 and r["ok"] is True and r["timing"] == "perf_counter", r
        assert r["bytes"] == index[key[:3] + ("aten", )]["bytes"], r
    # the raising peer is recorded; the run goes on (layer_norm afterwards, and the other impls)
    for cols in (128, 256):
        r = index[("softmax", "bwd", cols, "flaggems")]
        assert r["error"] == "RuntimeError: peer failure on purpose" and "gbps" not in r, r
        assert index[("softmax", "bwd", cols, "aten")].get("gbps", 0) > 0
    # over its column limit, and the absent peer: skipped with the reason
    r = index[("layer_norm", "fwd", 256, "flaggems")]
    assert r["skipped"] is True and "more than 128 columns (test limit)" in r["note"], r
    assert any(n.startswith("flaggems layer_norm fwd: more than 128 columns") for n in out["notes"]), out["notes"]
    assert all(r.get("skipped") and r["note"] == "liger_kernel not installed" for r in records if r["impl"] == "liger")
    assert "liger: liger_kernel not installed; skipped in every case" in out["notes"]
    # every timed record says how; plain timings are named in the notes (copy excepted)
    assert all(r["timing"] == "plain" for r in out["plain_records"] if "gbps" in r)
    assert all(r["capture_error"] == "RuntimeError: not capturable on purpose" for r in out["plain_records"]
               if "gbps" in r and r["impl"] != "copy")
    for impl in ("tjit", "aten", "python_triton"):
        assert any(n.startswith(f"{impl} add fwd: not capturable in a CUDA graph, timed with do_bench at float32 1024")
                   for n in out["plain_notes"]), (impl, out["plain_notes"])
    assert not any(n.startswith("copy ") for n in out["plain_notes"])


def test_markdown_marks_plain_timings_and_peer_ratios(tmp_path):
    report = import_bench("report")
    results = _softmax_results(liger_gbps=60.0)
    results["bandwidth"]["records"][2]["timing"] = "plain"  # flaggems float32 4096x1024
    results["bandwidth"]["config"] = {"timer": "test"}
    md = open(report.write_markdown(results, str(tmp_path / "results.md"))).read()
    assert ("| dtype | size | tjit | aten | flaggems | liger | copy | tjit/aten | tjit/flaggems | tjit/liger "
            "| tjit/copy |") in md
    assert "| float32 | 4096x1024 | 100.0 | 90.0 | 95.0 † | 60.0 | 110.0 | 1.11 | 1.05 | 1.67 | 0.91 |" in md
    assert "† not capturable in a CUDA graph" in md


def test_smoke_refuses_benchmarks_results():
    proc = run(["--smoke", "--device", "cpu", "--out", os.path.join(ROOT, "benchmarks", "results")], timeout=120)
    assert proc.returncode == 2
    assert "must not go into" in proc.stderr
