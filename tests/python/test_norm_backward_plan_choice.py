"""The norm family's backward plans as measured choices (norm_backward_forms.h; test_plan_choice.py
tests the machinery): every candidate of rms_norm's (and add_rms_norm's) and layer_norm's backward
computes the right gradients wherever it fits (on the CPU through Triton's interpreter; the team
forms, which only CUDA runs, on the GPU), for every set of gradients asked; the rules that only
correctness and resources decide; the default rule where no table serves; a team the GPU cannot hold
at once becomes another form."""

import pytest
import torch

import tjit  # noqa: F401  (the operators)
import tjit.plans as plans
from tjit import _C

RMS = "rms_norm_backward"
LN = "layer_norm_backward"
FACTS = plans.device_facts(is_cuda=True, multiprocessors=7, memory_gbps=700, capability=75)  # no table
TOLERANCE = {torch.bfloat16: dict(rtol=3e-2, atol=3e-2), torch.float32: dict(rtol=2e-4, atol=2e-4),
             torch.float64: dict(rtol=1e-9, atol=1e-9)}


def _rms_reference(dy, x, w, ds, eps=1e-6):
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_() if w is not None else None
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    if wd is not None:
        y = y * wd
    grads = torch.autograd.grad(y, [xd] + ([wd] if wd is not None else []), dy.double())
    dx = grads[0] + (ds.double() if ds is not None else 0)
    return dx, grads[1] if wd is not None else None


def _ln_reference(dy, x, w, b, eps=1e-5):
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    bd = b.detach().double().requires_grad_()
    y = torch.nn.functional.layer_norm(xd, [x.shape[-1]], wd, bd, eps)
    return torch.autograd.grad(y, [xd, wd, bd], dy.double())


def _check_rms(device, rows, cols, dtype, mask, grad_sum, names, forced):
    torch.manual_seed(cols + rows)
    x = torch.randn(rows, cols, dtype=dtype, device=device) * 2 + 0.5
    w = torch.randn(cols, dtype=dtype, device=device)
    dy = torch.randn_like(x)
    ds = torch.randn_like(x) if grad_sum else None
    _, rstd = torch.ops.tjit.rms_norm_forward(x, [cols], w, 1e-6)
    dx_ref, dw_ref = _rms_reference(dy, x, w, ds)
    for name in names:
        forced(RMS, name)
        dx, dw = torch.ops.tjit.rms_norm_backward(dy, x, [cols], rstd, w, list(mask), ds)
        if mask[0]:
            torch.testing.assert_close(dx.double(), dx_ref, **TOLERANCE[dtype], msg=name)
        else:
            assert dx is None
        if mask[1]:
            # dw sums `rows` products: its error grows with them.
            torch.testing.assert_close(dw.double(), dw_ref, rtol=TOLERANCE[dtype]["rtol"],
                                       atol=TOLERANCE[dtype]["atol"] * rows, msg=name)


def _check_ln(device, rows, cols, dtype, mask, names, forced):
    torch.manual_seed(cols + rows + 1)
    x = torch.randn(rows, cols, dtype=dtype, device=device) * 3 + 1
    w = torch.randn(cols, dtype=dtype, device=device)
    b = torch.randn(cols, dtype=dtype, device=device)
    dy = torch.randn_like(x)
    _, mean, rstd = torch.ops.tjit.layer_norm_forward(x, [cols], w, b, 1e-5)
    refs = _ln_reference(dy, x, w, b)
    for name in names:
        forced(LN, name)
        got = torch.ops.tjit.layer_norm_backward(dy, x, [cols], mean, rstd, w, b, list(mask))
        for i, (g, ref) in enumerate(zip(got, refs)):
            if not mask[i]:
                assert g is None
                continue
            atol = TOLERANCE[dtype]["atol"] * (1 if i == 0 else rows)
            torch.testing.assert_close(g.double(), ref, rtol=TOLERANCE[dtype]["rtol"], atol=atol, msg=name)


def _fitting(plan, device, **inputs):
    return plans.plan(plan, device=device, **inputs)["fitting"]


def test_the_candidates_are_listed():
    for plan in (RMS, LN):
        names = _C.plan_candidates(plan)
        assert len(names) == len(set(names)) >= 10 and plan in _C.plans_with_candidates()


# Widths that give every form a size it fits: small tiles of many rows, one block, a head and a tail
# (layer_norm 4097..6144, rms_norm 8193..12288), past the fused limits (dx then columns).
@pytest.mark.parametrize("cols", [100, 1000, 3000, 4353, 9000, 20000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_every_fitting_rms_norm_candidate_is_right(cols, dtype, forced_plan):
    rows = 5
    for mask, grad_sum in [((True, True), False), ((True, True), True), ((True, False), False), ((False, True), False)]:
        names = _fitting(RMS, "cpu", rows=rows, cols=cols, dtype=dtype, want_dx=int(mask[0]), want_dw=int(mask[1]),
                         has_grad_sum=int(grad_sum))
        assert names
        _check_rms("cpu", rows, cols, dtype, mask, grad_sum, names, forced_plan)


@pytest.mark.parametrize("cols", [100, 1000, 3000, 4353, 9000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_every_fitting_layer_norm_candidate_is_right(cols, dtype, forced_plan):
    rows = 5
    for mask in [(True, True, True), (True, False, False), (False, True, True), (True, True, False)]:
        names = _fitting(LN, "cpu", rows=rows, cols=cols, dtype=dtype, want_dx=int(mask[0]), want_dw=int(mask[1]),
                         want_db=int(mask[2]))
        assert names
        _check_ln("cpu", rows, cols, dtype, mask, names, forced_plan)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the team forms run only on CUDA (co-resident programs)")
@pytest.mark.parametrize("cols", [1000, 5000, 9000, 12288, 20480])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 37, 3000])
def test_every_fitting_candidate_is_right_cuda(rows, cols, dtype, forced_plan):
    device = torch.device("cuda")
    facts = plans.device_facts(device)
    for mask, grad_sum in [((True, True), False), ((True, True), True), ((False, True), False)]:
        names = _fitting(RMS, facts, rows=rows, cols=cols, dtype=dtype, want_dx=int(mask[0]), want_dw=int(mask[1]),
                         has_grad_sum=int(grad_sum))
        _check_rms(device, rows, cols, dtype, mask, grad_sum, names, forced_plan)
    for mask in [(True, True, True), (False, True, True)]:
        names = _fitting(LN, facts, rows=rows, cols=cols, dtype=dtype, want_dx=int(mask[0]), want_dw=int(mask[1]),
                         want_db=int(mask[2]))
        _check_ln(device, rows, cols, dtype, mask, names, forced_plan)


def test_fits_rules():
    def rms(cols, dtype=torch.float32, device=FACTS, **inputs):
        return _fitting(RMS, device, rows=64, cols=cols, dtype=dtype, **inputs)

    def ln(cols, dtype=torch.float32, device=FACTS, **inputs):
        return _fitting(LN, device, rows=64, cols=cols, dtype=dtype, **inputs)

    # Teams only where programs run at once (CUDA), in fp32 sums (not fp64), of at least two chunks.
    assert "team4096" in rms(9000) and "team4096" not in rms(9000, device="cpu")
    assert "team4096" not in rms(9000, torch.float64) and "team4096" not in rms(4096)
    assert "team_lag2048" in rms(4097) and "team_lag2048" not in rms(2048)
    assert "team_lag2048" not in rms(2048 * 33)  # 33 chunks: more than a team's 32
    # rms_norm's team kernels always write dx; layer_norm's plain team kernel need not, its lag one does.
    assert not any(n.startswith("team") for n in rms(9000, want_dx=0))
    assert "team4096" in ln(9000, want_dx=0) and "team_lag2048" not in ln(9000, want_dx=0)
    # The fused pass: rms_norm up to 16384 columns (fp64 8192), layer_norm 8192; a tile holds the row.
    assert "fused16384_p1" in rms(16384) and not any(n.startswith("fused") for n in rms(16385))
    assert not any(n.startswith("fused") for n in rms(8193, torch.float64))
    assert "fused8192_p1" in ln(8192, torch.float64) and not any(n.startswith("fused") for n in ln(8193))
    assert "fused2048_p1" not in rms(4096) and "fused4096_p1" in rms(4096)
    # Two programs an SM times their warps within 32 (64 registers a thread): no 32-warp pair.
    assert "fused8192_p2" in rms(8192) and not any(n.endswith("_p2") for n in rms(16384))
    # A tail only past its head, at most half of it, not for fp64.
    assert "tail8192_w32_p1" in rms(8193) and "tail8192_w32_p1" in rms(12288)
    assert "tail8192_w32_p1" not in rms(12289) and "tail8192_w32_p1" not in rms(8192)
    assert "tail8192_w32_p1" not in rms(9000, torch.float64)
    assert "tail4096_w4_p2" in ln(4097) and "tail4096_w4_p2" in ln(6144) and "tail4096_w4_p2" not in ln(6145)
    # Dx then columns serves every size.
    assert "dx_columns" in rms(100) and "dx_columns" in ln(200000)


def test_default_rule_without_a_table():
    def rms(cols, dtype, device=FACTS, **inputs):
        p = plans.plan(RMS, rows=1000, cols=cols, dtype=dtype, device=device, **inputs)
        assert p["source"] == "default"
        return p["candidate"]

    def ln(cols, dtype, device=FACTS, **inputs):
        p = plans.plan(LN, rows=1000, cols=cols, dtype=dtype, device=device, **inputs)
        assert p["source"] == "default"
        return p["candidate"]

    assert rms(100, torch.bfloat16) == "fused2048_p1"
    assert rms(1024, torch.bfloat16) == "fused4096_p2"
    assert rms(1024, torch.float32) == "fused4096_p2_reload"  # two 4-byte programs hold no w
    assert rms(4096, torch.float32) == "fused8192_p1"
    assert rms(4096, torch.float32, has_grad_sum=1) == "fused8192_p1_reload"
    assert rms(12288, torch.bfloat16) == "team_lag2048"
    assert rms(12288, torch.bfloat16, has_grad_sum=1) == "team4096"
    assert rms(12288, torch.bfloat16, device="cpu") == "tail8192_w32_p1"
    assert rms(12288, torch.bfloat16, want_dx=0) == "tail8192_w32_p1"
    assert rms(16384, torch.float64, device="cpu") == "dx_columns"
    assert ln(1024, torch.bfloat16) == "fused2048_p2"
    assert ln(1024, torch.float32) == "fused4096_p1"
    assert ln(12288, torch.bfloat16) == "team_lag2048"
    assert ln(12288, torch.bfloat16, want_dx=0) == "team4096"
    assert ln(12288, torch.float32) == "team4096"
    assert ln(12288, torch.float32, device="cpu") == "dx_columns"


def test_a_candidate_plan_is_what_its_name_says():
    def described(plan, name, cols, dtype=torch.bfloat16, rows=64, **extra):
        return plans.plan(plan, rows=rows, cols=cols, dtype=dtype, device=FACTS,
                          candidate=_C.plan_candidates(plan).index(name), **extra)

    reload = described(RMS, "fused4096_p2_reload", 1024, rows=1000)["launches"][0]
    # Two programs an SM on 7 SMs, each a run of whole 4-row tiles.
    assert (reload["num_warps"], reload["constexprs"]["BLOCK_M"], reload["grid"]) == (8, 4, [14, 1, 1])
    assert reload["args"]["rows_per_program"] == 72
    assert not reload["constexprs"]["PREFETCH"] and not reload["constexprs"]["PRELOAD_W"]
    held = described(RMS, "fused4096_p2", 1024)["launches"][0]
    assert held["constexprs"]["PREFETCH"] and held["constexprs"]["PRELOAD_W"]
    tail = described(RMS, "tail8192_w32_p1", 12288)["launches"][0]
    assert (tail["num_warps"], tail["constexprs"]["BLOCK_N"], tail["constexprs"]["BLOCK_TAIL"]) == (32, 8192, 4096)
    assert not tail["constexprs"]["PREFETCH"] and not tail["constexprs"]["PRELOAD_W"]  # past the registers' room
    whole = described(RMS, "fused16384_p1", 16384)["launches"][0]
    assert not whole["constexprs"]["PREFETCH"] and whole["constexprs"]["PRELOAD_W"]
    ln_tail = described(LN, "tail4096_w4_p2", 5000)["launches"][0]
    assert (ln_tail["num_warps"], ln_tail["constexprs"]["BLOCK_N"], ln_tail["constexprs"]["BLOCK_TAIL"]) == (4, 4096,
                                                                                                         1024)
    fp64 = described(LN, "fused8192_p1", 8192, torch.float64)["launches"][0]
    assert (fp64["num_warps"], fp64["constexprs"]["BLOCK_M"]) == (16, 1)  # fp64 tiles hold half the elements
    team = described(LN, "team4096", 12288, rows=1000)
    # Two programs an SM on 7 SMs hold 4 teams of 3.
    assert team["kind"] == "team" and team["launches"][0]["grid"] == [12, 1, 1]
    lag = described(LN, "team_lag2048", 12288, rows=1000)
    assert lag["kind"] == "team_lag" and lag["needs_occupancy"] and lag["launches"][0]["maxnreg"] == 128
    with pytest.raises(RuntimeError, match="does not fit"):
        described(LN, "tail4096_w4_p2", 4096)


def test_a_team_the_gpu_cannot_hold_becomes_another_form():
    def described(resident):
        return plans.plan(RMS, rows=1000, cols=40000, dtype=torch.bfloat16, device=FACTS,
                          candidate=_C.plan_candidates(RMS).index("team_lag2048"),
                          resident_programs_per_sm=resident)

    # 20 chunks a team: 7 SMs at 4 programs hold one, at 1 they do not.
    held = described(4)
    assert held["kind"] == "team" and held["launches"][0]["grid"] == [20, 1, 1]
    fallback = described(1)
    assert fallback["candidate"] == "team_lag2048" and fallback["kind"] == "dx_dw"


def test_a_forced_candidate_that_does_not_fit_is_refused(forced_plan):
    forced_plan(RMS, "fused2048_p1")
    x = torch.randn(2, 5000)
    _, rstd = torch.ops.tjit.rms_norm_forward(x, [5000], None, 1e-6)
    with pytest.raises(RuntimeError, match="forced candidate 'fused2048_p1' does not fit"):
        torch.ops.tjit.rms_norm_backward(torch.randn_like(x), x, [5000], rstd, None, [True, False], None)
