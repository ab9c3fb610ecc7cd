"""The dense and decode benchmark parts: their grids follow the rules they state (benchmarks/grids.py),
their verdicts find the worst point against the best peer (benchmarks/grid_report.py), and
run_benchmarks.py runs them end to end on CPU, merging shards into one results.json."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
BENCH = os.path.join(ROOT, "benchmarks")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import grid_report  # noqa: E402
import grids  # noqa: E402


def test_dense_grid_follows_its_rules():
    hidden = grids.hidden_sizes()
    assert set(range(512, 16385, 256)) <= set(hidden) and set(grids.ODD_HIDDEN_SIZES) <= set(hidden)
    vocab = grids.vocab_sizes()
    assert set(range(32000, 262145, 8192)) <= set(vocab) and set(grids.ODD_VOCAB_SIZES) <= set(vocab)
    flat = grids.flat_sizes()
    assert all(n % 2 for n in flat) and flat[0] <= 2**10 < flat[1] and 2**27 < flat[-1] <= 2**28
    for cols in hidden + vocab:
        rows = grids.dense_rows(cols)
        assert rows % 64 and rows % 2, (cols, rows)
        assert 0.5 < rows * cols * 2 / grids.DENSE_TENSOR_BYTES < 2, (cols, rows)


@pytest.mark.parametrize("make", [grids.dense_grid, grids.decode_grid])
def test_shards_split_the_grid_exactly(make):
    whole = make()
    shards = [make(False, i, 3) for i in range(3)]
    for op, sizes in whole.items():
        parts = [s for shard in shards for s in shard[op]]
        assert sorted(map(str, parts)) == sorted(map(str, sizes)), op
        # Interleaved: every shard spans the range rather than one end of it.
        assert all(shard[op][0] in sizes[:3] for shard in shards), op
    with pytest.raises(ValueError, match="I/N"):
        grids.parse_shard("2")
    with pytest.raises(ValueError, match="0..2"):
        grids.parse_shard("3/3")


def test_decode_grid_is_every_row_count_at_every_hidden_size():
    grid = grids.decode_grid()
    assert set(grid) == {"softmax", "layer_norm", "rms_norm", "add_rms_norm"}
    assert sorted(map(tuple, grid["rms_norm"])) == sorted((m, n) for m in grids.DECODE_ROWS
                                                          for n in grids.DECODE_HIDDEN_SIZES)


def record(impl, ms, shape=(7, 1000), op="rms_norm", pas="fwd", dtype="bfloat16", ok=True):
    nbytes = 4 * shape[0] * shape[1]
    return {"op": op, "pass": pas, "dtype": dtype, "shape": list(shape), "numel": shape[0] * shape[1],
            "bytes": nbytes, "impl": impl, "ms": ms, "gbps": nbytes / ms / 1e6, "ok": ok}


def test_grid_report_takes_the_best_right_peer_and_lists_points_below():
    records = [
        # tjit faster than every peer
        record("tjit", 1.0, (7, 1000)), record("aten", 1.5, (7, 1000)), record("liger", 1.2, (7, 1000)),
        record("copy", 0.9, (7, 1000)),
        # the best peer is faster than tjit: 0.9 / 1.0; python_triton (tjit's kernels) is no peer;
        # a peer with wrong results is left out
        record("tjit", 1.0, (9, 2048)), record("flaggems", 0.9, (9, 2048)), record("python_triton", 0.5, (9, 2048)),
        record("compile", 0.1, (9, 2048), ok=False),
        record("tjit", 1.0, (11, 4096)), record("aten", 1.05, (11, 4096)),
    ]
    [group] = grid_report.summary(records, grid_report.DENSE_EVERY_POINT)
    assert group["n"] == 3 and group["min"] == pytest.approx(0.9) and "9x2048 (vs flaggems)" == group["min_at"]
    assert group["median"] == pytest.approx(1.05)
    assert [p["shape"] for p in group["below"]] == [[9, 2048]]
    assert group["copy_min"] == pytest.approx(0.9)

    verdicts = {t["id"]: t for t in grid_report.evaluate({"dense": {"records": records}})}
    assert verdicts["dense_peers_every_point"]["status"] == "MISS"
    assert verdicts["dense_peers_every_point"]["ratio"] == pytest.approx(0.9)
    assert verdicts["dense_peers_median"]["status"] == "PASS"
    assert verdicts["decode_peers_every_point"]["status"] == "N/A"

    # Decode compares times: tjit 1.0 us against a best peer at 0.9 is 1.11x.
    verdicts = {t["id"]: t for t in grid_report.evaluate({"decode": {"records": records}})}
    assert verdicts["decode_peers_every_point"]["ratio"] == pytest.approx(1 / 0.9)
    assert verdicts["decode_peers_every_point"]["status"] == "MISS"

    # tjit's wrong result fails the part, whatever its speed.
    wrong = [record("tjit", 0.5, ok=False), record("aten", 1.0)]
    verdicts = {t["id"]: t for t in grid_report.evaluate({"dense": {"records": wrong}})}
    assert verdicts["dense_peers_median"]["status"] == "MISS" and "wrong" in verdicts["dense_peers_median"]["note"]


def run(args):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, os.path.join(BENCH, "run_benchmarks.py"), *args], capture_output=True,
                          text=True, timeout=600, env=env, cwd=ROOT)


def test_dense_and_decode_parts_run_and_merge_their_shards(tmp_path):
    common = ["--smoke", "--device", "cpu", "--no-build", "--out", str(tmp_path), "--ops", "add,rms_norm",
              "--dtypes", "float32"]
    for args in (["--only", "dense", "--shard", "0/2"], ["--only", "dense", "--shard", "1/2", "--merge"],
                 ["--only", "decode", "--merge"]):
        proc = run(common + args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = tmp_path / "cpu-smoke"
    results = json.loads((folder / "results.json").read_text())
    dense = {(r["op"], r["pass"], tuple(r["shape"])) for r in results["dense"]["records"] if r["impl"] == "tjit"}
    expected = ({("add", "fwd", (n, )) for n in grids.flat_sizes(True)} |
                {("rms_norm", p, (grids.dense_rows(n, True), n)) for n in grids.hidden_sizes(True) for p in ("fwd", "bwd")})
    assert dense == expected
    assert all(r.get("ok", True) for r in results["dense"]["records"] + results["decode"]["records"])
    decode = {(r["op"], r["pass"], tuple(r["shape"])) for r in results["decode"]["records"] if r["impl"] == "tjit"}
    assert decode == {("rms_norm", "fwd", tuple(s)) for s in grids.decode_grid(True)["rms_norm"]}
    # Decode times every implementation in three rounds and keeps the median; dense times once.
    assert results["decode"]["config"]["rounds"] == 3 and results["dense"]["config"]["rounds"] == 1
    for r in results["decode"]["records"]:
        if "ms" in r and r["impl"] != "copy":
            assert len(r["ms_rounds"]) == 3 and r["ms"] == sorted(r["ms_rounds"])[1], r
    assert not any("ms_rounds" in r for r in results["dense"]["records"])
    ids = {t["id"]: t["status"] for t in results["targets"]}
    assert {"dense_peers_every_point", "dense_peers_median", "decode_peers_every_point"} <= set(ids)
    markdown = (folder / "results.md").read_text()
    assert "## Dense grid" in markdown and "## Decode rows" in markdown
