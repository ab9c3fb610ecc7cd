"""sum's rows and add as measured choices (tjit/kit/plan_choice.h): every candidate that fits computes
the right result, on the CPU through Triton's interpreter (and on the GPU in the CUDA run of this
file); the rules that only correctness and resources decide; the default rule where no table
serves; one choice per size class, read from a table by nearest measured neighbour."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tjit  # noqa: F401  (the operators)
import tjit.plans as plans
from tjit import _C, tune

FACTS = plans.device_facts(is_cuda=True, multiprocessors=7, memory_gbps=700, capability=75)  # no table
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("plan", ["sum_rows", "add"])
def test_the_candidates_are_listed(plan):
    names = _C.plan_candidates(plan)
    assert len(names) == len(set(names)) >= 6 and plan in _C.plans_with_candidates()


# Rows and columns where every form fits on the CPU's facts (4 SMs): few long rows take the two-stage
# forms; short rows the blocked one.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,cols", [(1, 9000), (3, 20001), (5, 300), (37, 4097)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
def test_every_fitting_sum_candidate_is_right(device, rows, cols, dtype, forced_plan):
    if dtype.is_floating_point:
        x = torch.randn(rows, cols, dtype=dtype, device=device)
    else:
        x = torch.randint(-1000, 1000, (rows, cols), dtype=dtype, device=device)
    facts = plans.device_facts(torch.device(device))
    fitting = plans.plan("sum_rows", rows=rows, cols=cols, dtype=dtype, device=facts)["fitting"]
    if rows <= 3 and cols > 4 * 4096:
        assert {"strided4096_w8_reg32", "chunk4096_w8"} <= set(fitting)
    for name in fitting:
        forced_plan("sum_rows", name)
        got = torch.ops.tjit.sum(x, [1])
        if dtype.is_floating_point:
            # fp32 accumulation in another order than float64's: about eps x sqrt(cols) x |partial sums|.
            # fp64 sums in fp64: fp32 accumulation would be off by ~1e-7 relative.
            tolerance = {torch.bfloat16: dict(rtol=2e-2, atol=2e-2 * cols ** 0.5),
                         torch.float32: dict(rtol=1e-5, atol=1e-6 * cols),
                         torch.float64: dict(rtol=1e-11, atol=1e-12 * cols)}[dtype]
            torch.testing.assert_close(got.double(), x.double().sum(1).to(dtype).double(), **tolerance, msg=name)
        else:
            assert torch.equal(got, x.sum(1)), name


def test_sum_fits_rules():
    def fitting(rows, cols, device=FACTS):
        return plans.plan("sum_rows", rows=rows, cols=cols, dtype=torch.float32, device=device)["fitting"]

    # A two-stage form needs two parts a row: rows fewer than its programs, a row longer than a block.
    assert "chunk4096_w8" in fitting(2, 20000) and "chunk4096_w8" not in fitting(2, 4096)
    assert "chunk4096_w8" not in fitting(4 * 7, 20000)  # 4 programs an SM, 7 SMs: one part a row
    assert "chunk8192_w8_p16" not in fitting(1, 8 * 8192) and "chunk8192_w8_p16" in fitting(1, 16 * 8192)
    # One program a row holds at most 64 elements a thread and gives each lane one.
    assert "rows_w1" in fitting(100, 2048) and "rows_w1" not in fitting(100, 4096)
    assert "rows_w16" in fitting(100, 4096) and "rows_w16" not in fitting(100, 256)
    assert "blocked_w4" in fitting(100, 100000)


def test_sum_default_rule_without_a_table():
    for rows, cols, expected in [(1, 100000, "chunk4096_w8"), (100, 100000, "rows_w8"), (4096, 100, "blocked_w4"),
                                 (4096, 1024, "rows_w2"), (4096, 600, "rows_w2"), (4096, 2048, "rows_w4"),
                                 (20, 16384, "rows_w8")]:
        p = plans.plan("sum_rows", rows=rows, cols=cols, dtype=torch.bfloat16, device=FACTS)
        assert (p["candidate"], p["source"]) == (expected, "default"), (rows, cols)


def test_a_sum_candidate_plan_is_what_its_name_says():
    def described(name, rows, cols, dtype=torch.float32, device=FACTS):
        index = _C.plan_candidates("sum_rows").index(name)
        return plans.plan("sum_rows", rows=rows, cols=cols, dtype=dtype, device=device, candidate=index)

    strided = described("strided4096_w8_reg32", 1, 100000)
    first, second = strided["launches"]
    assert first["kernel"] == "sum_partial_strided_kernel" and (first["num_warps"], first["maxnreg"]) == (8, 32)
    assert first["args"]["splits"] == 25 and strided["workspace"]["partial"] == [1, 25]  # 25 blocks < 8 x 7
    assert second["kernel"] == "sum_rows_kernel" and second["args"]["N"] == 25
    chunked = described("chunk8192_w8_p16", 1, 10 ** 7)
    assert chunked["launches"][0]["args"]["chunk"] % 8192 == 0
    splits = chunked["workspace"]["partial"][1]
    assert splits == -(-10 ** 7 // chunked["launches"][0]["args"]["chunk"]) and 2 <= splits <= 16 * 7
    blocked = described("blocked_w4", 4096, 100)["launches"][0]
    assert (blocked["constexprs"]["BLOCK_M"], blocked["constexprs"]["BLOCK_N"], blocked["grid"]) == (32, 128, [128, 1, 1])
    rows = described("rows_w4", 300, 100000)["launches"][0]
    assert (rows["constexprs"]["BLOCK_N"], rows["num_warps"], rows["grid"]) == (4096, 4, [300, 1, 1])
    # Dependent launches where the device has them (Hopper), for both stages.
    hopper = dict(FACTS, dependent_launch=True)
    assert all(launch["launch_pdl"] for launch in described("chunk4096_w8", 1, 100000, device=hopper)["launches"])
    assert not any(launch["launch_pdl"] for launch in described("chunk4096_w8", 1, 100000)["launches"])
    with pytest.raises(RuntimeError, match="does not fit"):
        described("chunk4096_w8", 1000, 100000)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_every_add_candidate_is_right(device, dtype, forced_plan):
    def rand(*shape):
        if dtype.is_floating_point:
            return torch.randn(*shape, dtype=dtype, device=device)
        return torch.randint(-1000, 1000, shape, dtype=dtype, device=device)

    flat = (rand(3, 5001), rand(3, 5001))
    strided = (rand(5001, 3).t(), rand(3, 1))
    materialised = (rand(2, 1, 3, 1, 5, 1, 7), rand(1, 2, 1, 3, 1, 5, 1).expand(2, 2, 3, 3, 5, 5, 1))
    for name in _C.plan_candidates("add"):
        forced_plan("add", name)
        for x, y in (flat, strided, materialised):
            for alpha in (1, 3):
                out = torch.ops.tjit.add(x, y, alpha=alpha)
                # Half precision computes in float32, rounded once (docs/operators.md, add).
                want = torch.add(x.float(), y.float(), alpha=alpha).to(dtype) if dtype.is_floating_point else \
                    torch.add(x, y, alpha=alpha)
                assert out.dtype == dtype, name
                torch.testing.assert_close(out, want, msg=lambda m: f"{name}: {m}")


def test_add_describes_its_candidates():
    def described(name=None, **inputs):
        index = -1 if name is None else _C.plan_candidates("add").index(name)
        return plans.plan("add", dtype=torch.float32, device=FACTS, candidate=index, **inputs)

    default = described(numel=1000)
    assert (default["candidate"], default["source"]) == ("b1024_w4", "default")
    assert default["fitting"] == _C.plan_candidates("add")  # every candidate is right at any size
    launch = described("b8192_w8", numel=100000)["launches"][0]
    assert (launch["constexprs"]["BLOCK"], launch["num_warps"], launch["grid"]) == (8192, 8, [13, 1, 1])
    # 64-bit offsets where the last block's can reach 2**31: that depends on the block.
    assert described("b1024_w4", numel=2 ** 31 - 1025)["launches"][0]["constexprs"]["INDEX_64"] is False
    assert described("b8192_w8", numel=2 ** 31 - 1025)["launches"][0]["constexprs"]["INDEX_64"] is True
    strided = described("b4096_w4", numel=1000, same_shape_contiguous=0)
    assert strided["kind"] == "strided" and strided["launches"][0]["kernel"] == "add_strided_kernel"


_DESCRIBE = textwrap.dedent("""\
    import json, sys, torch, tjit.plans as plans
    facts = json.loads(sys.argv[1])
    out = []
    for plan, inputs in json.loads(sys.argv[2]):
        p = plans.plan(plan, dtype=torch.float32, device=facts, **inputs)
        out.append([p["candidate"], p["source"]])
    print(json.dumps(out))
    """)


def test_a_table_serves_a_size_class(tmp_path):
    # A sum's choice serves columns up to the next power of two and an add's outputs of up to the
    # next power of two elements (65536 at least); between measured classes the nearest measured one
    # decides.
    card = {"name": "test card", "capability": FACTS["capability"], "multiprocessors": FACTS["multiprocessors"],
            "memory_gbps": FACTS["memory_gbps"]}
    table = {"format": tune.FORMAT, "card": card, "plans": {
        "sum_rows": {"float32": {"0": [[256, 4096, "rows_w4"], [256, 8192, "rows_w16"]]}},
        "add": {"float32": {"0": [[1, 65536, "b2048_w8"], [1, 1048576, "b8192_w8"]], "1": [[1, 65536, "b4096_w4"]]}}}}
    (tmp_path / "card.json").write_text(json.dumps(table))
    queries = [["sum_rows", {"rows": 200, "cols": 4097}], ["sum_rows", {"rows": 200, "cols": 4096}],
               ["sum_rows", {"rows": 200, "cols": 3000}], ["add", {"numel": 1000}], ["add", {"numel": 800000}],
               ["add", {"numel": 1000, "same_shape_contiguous": 0}]]
    env = dict(os.environ, TJIT_PLAN_TABLES=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", _DESCRIBE, json.dumps(FACTS), json.dumps(queries)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = [tuple(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])]
    assert got == [("rows_w16", "table"), ("rows_w4", "table"), ("rows_w4", "table"), ("b2048_w8", "table"),
                   ("b8192_w8", "table"), ("b4096_w4", "table")]


def test_the_tuner_measures_each_class_once():
    tuned = tune._plans()
    assert tuned["add"].point(4, 1000) == tuned["add"].point(1, 4096) == (1, 65536)  # small outputs: one class
    assert tuned["add"].point(3, 100000) == (1, 524288)
    assert tuned["add"].sizes(4, 1000) == {"numel": 4000}
    assert tuned["sum_rows"].point(300, 5000) == (300, 8192)
    assert tuned["softmax"].point(300, 5000) == (300, 5000)
