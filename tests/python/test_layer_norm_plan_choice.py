"""layer_norm's forward plan as a measured choice (tjit/kit/plan_choice.h; test_plan_choice.py tests
the machinery with rms_norm's): every candidate computes the right result wherever it fits, on the
CPU through Triton's interpreter; the rules that only correctness and resources decide; the default
rule where no table serves; rows past the one-pass limit on CUDA go to the autotuned long-row kernel
before any candidate."""

import pytest
import torch

import tjit  # noqa: F401  (the operators)
import tjit.plans as plans
from tjit import _C

PLAN = "layer_norm_forward"
FACTS = plans.device_facts(is_cuda=True, multiprocessors=7, memory_gbps=700, capability=75)  # no table


@pytest.fixture
def forced(forced_plan):
    return lambda name: forced_plan(PLAN, name)


def test_the_candidates_are_listed():
    names = _C.plan_candidates(PLAN)
    assert len(names) == len(set(names)) >= 10 and PLAN in _C.plans_with_candidates()


# Widths that give every candidate a size it fits: short rows, one block, head and tail blocks,
# whole and partial steps, the persistent form.
@pytest.mark.parametrize("cols", [100, 1000, 1500, 4096, 4353, 6000, 8700, 20480])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_every_fitting_candidate_is_right(cols, dtype, affine, forced):
    rows = 5
    fitting = plans.plan(PLAN, rows=rows, cols=cols, dtype=dtype, device="cpu")["fitting"]
    assert fitting
    x = torch.randn(rows, cols, dtype=dtype) * 3 + 1
    w = torch.randn(cols, dtype=dtype) if affine else None
    b = torch.randn(cols, dtype=dtype) if affine else None
    expected = torch.nn.functional.layer_norm(x.double(), [cols], None if w is None else w.double(),
                                              None if b is None else b.double(), 1e-5)
    mean_ref = x.double().mean(-1)
    rstd_ref = torch.rsqrt(x.double().var(-1, unbiased=False) + 1e-5)
    # fp64 rows are computed in fp64: a form that reduces in fp32 is off by ~1e-7.
    tolerance = {torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float32: dict(rtol=1e-5, atol=1e-5),
                 torch.float64: dict(rtol=1e-10, atol=1e-10)}[dtype]
    stats_tolerance = tolerance if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    for name in fitting:
        forced(name)
        y, mean, rstd = torch.ops.tjit.layer_norm_forward(x, [cols], w, b, 1e-5)
        torch.testing.assert_close(y.double(), expected, **tolerance, msg=name)
        torch.testing.assert_close(mean.double(), mean_ref, **stats_tolerance, msg=name)
        torch.testing.assert_close(rstd.double(), rstd_ref, **stats_tolerance, msg=name)


def test_a_forced_candidate_that_does_not_fit_is_refused(forced):
    forced("short_rows")
    with pytest.raises(RuntimeError, match="forced candidate 'short_rows' does not fit"):
        torch.ops.tjit.layer_norm(torch.randn(2, 5000), [5000], None, None, 1e-5)


def test_fits_rules():
    def fitting(cols, dtype=torch.float32):
        return plans.plan(PLAN, rows=4, cols=cols, dtype=dtype, device="cpu")["fitting"]

    assert "short_rows" in fitting(1024) and "short_rows" not in fitting(1025)
    assert "row_w32" in fitting(32768) and not any(n.startswith("row") for n in fitting(32769))
    assert not any(n.startswith("row") for n in fitting(16385, torch.float64))  # fp64 holds half
    # A tail block only past its head and smaller than it: 4097..6144 for a 4096-column head.
    assert "tail4096_w4" in fitting(4097) and "tail4096_w4" in fitting(6144) and "tail4096_w4" not in fitting(6145)
    assert "tail4096_w4" not in fitting(4096) and "persistent4096" in fitting(5120)
    assert "keep2048_w8" not in fitting(40000)  # 20 steps: more than a compile-time count unrolls
    assert "loop2048_w8" in fitting(40000)
    assert not any(n.startswith(("loop4096", "keep4096")) for n in fitting(4096))  # one step: not a loop


def test_default_rule_without_a_table():
    for cols, expected in [(512, "short_rows"), (2048, "row_w4"), (4096, "row_w8"), (5120, "row_w16"),
                           (16384, "row_w32")]:
        p = plans.plan(PLAN, rows=100, cols=cols, dtype=torch.bfloat16, device=FACTS)
        assert (p["candidate"], p["source"]) == (expected, "default"), cols
    # Past the one-pass limit: the autotuned long-row kernel on CUDA (no candidate), steps elsewhere.
    assert plans.plan(PLAN, rows=100, cols=40000, dtype=torch.bfloat16, device=FACTS)["kind"] == "long"
    cpu = plans.plan(PLAN, rows=100, cols=40000, dtype=torch.bfloat16, device="cpu")
    assert cpu["candidate"] == "loop4096_w16"
    no_tuner = plans.plan(PLAN, rows=100, cols=40000, dtype=torch.bfloat16, device=FACTS, tuner_available=0)
    assert no_tuner["candidate"] == "loop4096_w16"


def test_a_candidate_plan_is_what_its_name_says():
    names = _C.plan_candidates(PLAN)

    def described(name, cols, **extra):
        return plans.plan(PLAN, rows=64, cols=cols, dtype=torch.bfloat16, device=FACTS, candidate=names.index(name),
                          **extra)["launches"][0]

    tail = described("tail8192_w8", 10000)
    assert (tail["num_warps"], tail["constexprs"]["BLOCK_N"], tail["constexprs"]["BLOCK_TAIL"]) == (8, 8192, 2048)
    keep = described("keep4096_w16", 12288)
    assert keep["constexprs"]["KEEP_ROW"] and keep["constexprs"]["ROW_STEPS"] == 3
    assert not keep["constexprs"]["SINGLE_PASS"] and keep["constexprs"]["BLOCK_N"] == 4096
    assert described("row_w8_preload", 3000)["constexprs"]["PRELOAD"]
    persistent = described("persistent8192_reg168", 9000, resident_programs_per_sm=3)
    assert persistent["maxnreg"] == 168 and persistent["grid"] == [21, 1, 1]  # 3 an SM x 7 SMs
    with pytest.raises(RuntimeError, match="does not fit"):
        described("tail4096_w4", 4096)
