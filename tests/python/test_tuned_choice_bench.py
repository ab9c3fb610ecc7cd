"""The benchmark of a card without a plan table (benchmarks/tuned_choice.py): it reads the tuning log the
runtime writes, covers every operator and pass, and judges the tuned choice against the table's."""

import os
import re
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
BENCH = os.path.join(ROOT, "benchmarks")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import targets  # noqa: E402
import tuned_choice  # noqa: E402


def test_the_log_pattern_reads_the_runtimes_tuning_line():
    # The line as ops/csrc/kit/plan_choice.cpp prints it (its format string, filled in).
    source = open(os.path.join(ROOT, "ops", "csrc", "kit", "plan_choice.cpp")).read()
    fmt = re.search(r'"\[tjit\] tuned plan (.*?)"\s*"(.*?)"', source, re.S)
    assert fmt, "plan_choice.cpp no longer prints the tuned-plan line tuned_choice.py reads"
    c_format = ("[tjit] tuned plan " + fmt.group(1) + fmt.group(2)).replace("\\n", "\n")
    line = re.sub(r"%(ll|z)", "%", c_format) % (
        "rms_norm_backward", "bf16", 16384, 16384, 4096, 7, 3, 812.0, "team_lag2048", 0.1234)
    [m] = list(tuned_choice._TUNED.finditer(line))
    assert m.groups() == ("rms_norm_backward", "bf16", "16384", "4096", "7", "3", "812", "team_lag2048")


def test_the_log_reader_takes_each_tuned_lines_timings():
    # The timings line as plan_choice.cpp prints it, after its tuned-plan line.
    source = open(os.path.join(ROOT, "ops", "csrc", "kit", "plan_choice.cpp")).read()
    fmt = re.search(r'"(\[tjit\]   timings ms[^"]*)"', source)
    assert fmt, "plan_choice.cpp no longer prints the timings line tuned_choice.py reads"
    timings = '{"a":[0.5,0.7],"b":[0.55]}'
    text = "\n".join([
        "[tjit] tuned plan softmax for bf16, 100 rows (class 128) of 4096 columns, flags 0: 2 candidates in 9 ms; "
        "best a at 0.6000 ms", fmt.group(1).replace("\\n", "").replace("%s", timings),
        "[tjit] tuned plan softmax for fp32, 3 rows (class 4) of 50 columns, flags 1: 1 candidates in 2 ms; "
        "best c at 0.0100 ms"])
    got = tuned_choice.parse_tuning_log(text)
    assert got[("softmax", 0, "bf16", 100, 4096)] == {"candidate": "a", "tuning_ms": 9, "candidates": 2,
                                                       "timings_ms": {"a": [0.5, 0.7], "b": [0.55]}}
    assert got[("softmax", 1, "fp32", 3, 50)]["timings_ms"] == {}


def test_points_cover_every_operator_and_pass_in_both_dtypes():
    pts = tuned_choice.points(smoke=True)
    plans = {(p[0], p[1]) for p in pts}
    assert plans == set(tuned_choice.PLANS.values())
    assert {p[2] for p in pts} == {"bfloat16", "float32"}
    only = tuned_choice.points(smoke=True, ops_filter=["softmax"], dtypes=["float32"])
    assert {(p[0], p[2]) for p in only} == {("softmax", "float32"), ("softmax_backward", "float32")}


def record(ratio, tuned="a", table="b"):
    return {"plan": "softmax", "flags": 0, "dtype": "bfloat16", "shape": [1088, 128256], "tuned": tuned,
            "table": table, "ratio": ratio}


@pytest.mark.parametrize("ratios, status", [([1.0, 1.019], "PASS"), ([1.0, 1.03, 0.97], "MISS")])
def test_the_target_takes_the_worst_point(ratios, status):
    untuned = dict(record(1.0), note="not tuned")
    untuned.pop("ratio")
    result = {"config": {"rounds": 3, "limit": 1.02, "hidden_table_process_s": 12.0},
              "records": [record(r) for r in ratios] + [untuned]}
    verdict = {t["id"]: t for t in targets.evaluate_targets({"tuned_choice": result})}["tuned_vs_table_llm"]
    assert verdict["status"] == status
    assert verdict["ratio"] == pytest.approx(max(ratios))
    lines = tuned_choice.markdown(result)
    assert sum(line.startswith("| softmax |") for line in lines) == len(ratios) + 1


def test_not_run_or_cpu_only_is_not_judged():
    for part in (None, {"skipped": "CUDA only"}):
        verdict = {t["id"]: t for t in targets.evaluate_targets({"tuned_choice": part})}["tuned_vs_table_llm"]
        assert verdict["status"] == "N/A"
    assert tuned_choice.run_tuned_choice("cpu", smoke=True)["skipped"]
