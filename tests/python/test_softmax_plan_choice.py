"""softmax's and softmax_backward's plans as measured choices (tjit/kit/plan_choice.h): every
candidate that fits computes the right result, on the CPU through Triton's interpreter (the split
forms, which need CUDA, in tests/python/operators/test_softmax.py's split tests and on the GPU); the
rules that only correctness and resources decide; the default rule where no table serves; forward
rows past the one-pass limit on CUDA go to the autotuned long-row kernel before any candidate."""

import pytest
import torch

import tjit  # noqa: F401  (the operators)
import tjit.plans as plans
from tjit import _C

FACTS = plans.device_facts(is_cuda=True, multiprocessors=7, memory_gbps=700, capability=75)  # no table
# fp64 rows are computed in fp64: a form that reduces in fp32 is off by ~1e-7.
TOLERANCE = {torch.bfloat16: dict(rtol=2e-2, atol=2e-3), torch.float32: dict(rtol=1e-5, atol=1e-6),
             torch.float64: dict(rtol=1e-10, atol=1e-13)}


@pytest.mark.parametrize("plan", ["softmax", "softmax_backward"])
def test_the_candidates_are_listed(plan):
    names = _C.plan_candidates(plan)
    assert len(names) == len(set(names)) >= 10 and plan in _C.plans_with_candidates()


@pytest.mark.parametrize("cols", [100, 300, 1000, 4096, 5000, 9000, 20000, 40000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_every_fitting_candidate_is_right(cols, dtype, forced_plan):
    rows = 3
    x = torch.randn(rows, cols, dtype=dtype) * 4
    x[1, cols // 2] = float("-inf")
    g = torch.randn(rows, cols, dtype=dtype)
    expected = torch.softmax(x.double(), -1)
    tolerance = TOLERANCE[dtype]
    for name in plans.plan("softmax", rows=rows, cols=cols, dtype=dtype, device="cpu")["fitting"]:
        forced_plan("softmax", name)
        torch.testing.assert_close(torch.ops.tjit.softmax(x, -1).double(), expected, **tolerance, msg=name)
    y = expected.to(dtype)
    want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64)
    for name in plans.plan("softmax_backward", rows=rows, cols=cols, dtype=dtype, device="cpu")["fitting"]:
        forced_plan("softmax_backward", name)
        got = torch.ops.tjit.softmax_backward(g, y, -1, dtype)
        torch.testing.assert_close(got.double(), want, **tolerance, msg=name)


def test_fits_rules():
    def fitting(cols, dtype=torch.float32, plan="softmax", device=FACTS, rows=4):
        return plans.plan(plan, rows=rows, cols=cols, dtype=dtype, device=device, tuner_available=0)["fitting"]

    assert "short_rows" in fitting(256) and "short_rows" not in fitting(257)
    assert "row_w32" in fitting(32768) and not any(n.startswith("row") for n in fitting(32769))
    assert not any(n.startswith("row") for n in fitting(16385, torch.float64, "softmax_backward"))
    # Split rows: CUDA only (their programs wait for each other), not fp64 (fp32 statistics).
    assert "split4096_w4" in fitting(40000) and "split4096_w4" not in fitting(40000, device="cpu")
    assert "split4096_w4" not in fitting(40000, torch.float64)
    assert "split4096_w4" not in fitting(4096 * 129)  # more chunks than a row's programs may be
    assert "persistent_w32" in fitting(20000) and "persistent_w32" not in fitting(20000, plan="softmax_backward")
    assert "split4096_w4_reread" in fitting(40000, plan="softmax_backward")
    assert "split4096_w4_reread" not in fitting(40000)
    assert not any(n.startswith("loop4096") for n in fitting(4096))  # one step: not a loop


def test_default_rule_without_a_table():
    for cols, expected in [(200, "short_rows"), (500, "row_w1"), (2048, "row_w4"), (4096, "row_w8"),
                           (16384, "row_w32")]:
        for plan in ("softmax", "softmax_backward"):
            p = plans.plan(plan, rows=100, cols=cols, dtype=torch.bfloat16, device=FACTS)
            assert (p["candidate"], p["source"]) == (expected, "default"), (plan, cols)
    # Past the one-pass limit: the forward's autotuned long-row kernel on CUDA (no candidate); steps
    # by default elsewhere and for the backward.
    assert plans.plan("softmax", rows=100, cols=40000, dtype=torch.bfloat16, device=FACTS)["kind"] == "long"
    for plan, device in (("softmax", "cpu"), ("softmax_backward", FACTS)):
        assert plans.plan(plan, rows=100, cols=40000, dtype=torch.bfloat16, device=device)["candidate"] == \
            "loop4096_w16"


def test_a_candidate_plan_is_what_its_name_says():
    def described(plan, name, cols, rows=64):
        index = _C.plan_candidates(plan).index(name)
        return plans.plan(plan, rows=rows, cols=cols, dtype=torch.bfloat16, device=FACTS, candidate=index)

    split = described("softmax_backward", "split8192_w8_reg80", 200000)
    launch = split["launches"][0]
    assert (launch["num_warps"], launch["maxnreg"], launch["constexprs"]["BLOCK_N"]) == (8, 80, 8192)
    assert launch["args"]["S"] == 25 and launch["constexprs"]["S_POW2"] == 32 and not launch["constexprs"]["REREAD"]
    assert split["workspace"]["row_exchange_words"] == 2 + 64 * 25
    assert described("softmax_backward", "split4096_w4_reread", 40000)["launches"][0]["constexprs"]["REREAD"]
    persistent = described("softmax", "persistent_w32", 20000, rows=100)["launches"][0]
    assert persistent["grid"] == [7, 1, 1] and persistent["constexprs"]["BLOCK_N"] == 32768
    loop = described("softmax", "loop8192_w32", 20000)["launches"][0]
    assert not loop["constexprs"]["SINGLE_PASS"] and loop["constexprs"]["BLOCK_N"] == 8192
    with pytest.raises(RuntimeError, match="does not fit"):
        described("softmax", "split4096_w4_reread", 40000)
