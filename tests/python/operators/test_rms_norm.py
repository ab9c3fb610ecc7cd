"""tjit.rms_norm, tjit.add_rms_norm (and their _forward operators and rms_norm_backward), through
both entry points (conftest's `ops`), against torch.nn.functional.rms_norm and float64 references:
every dtype, odd sizes covering every plan kind, strided and non-contiguous inputs, empty inputs,
with and without weight, several normalized dims, the residual sum and gradients of both outputs,
errors, Meta, opcheck, gradcheck, torch.compile, torch.export and CUDA graphs."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import poison_allocator, random_tensor, requires_cuda

import tjit
from tjit import plans

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {
    torch.float32: dict(rtol=1e-4, atol=1e-5),
    torch.float64: dict(rtol=1e-9, atol=1e-9),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
}


def default_eps(dtype):
    # torch's rms_norm takes the epsilon of the dtype it computes in: float32's for 2-byte inputs.
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


def reference(v, normalized, w, eps):
    """rms_norm of v in float64 (eps None as torch resolves it for v's dtype)."""
    eps = default_eps(v.dtype) if eps is None else eps
    return F.rms_norm(v.double(), normalized, None if w is None else w.double(), eps)


def assert_sum_equal(got, want):
    """add_rms_norm's sum is input + residual as torch rounds it, bit for bit; except that Triton's
    interpreter (CPU) rounds float32 to bfloat16 toward zero where GPUs round to nearest even: one
    bfloat16 step there."""
    if got.dtype == torch.bfloat16 and got.device.type == "cpu":
        torch.testing.assert_close(got, want, rtol=2**-7, atol=0)
    else:
        assert torch.equal(got, want), "the residual sum differs from input + residual"


def make(shape, normalized, dtype, device, weight=True):
    x = random_tensor(shape, dtype, device) * 2 + 0.5
    w = random_tensor(normalized, dtype, device) if weight else None
    return x, tuple(normalized), w


def check_forward(ops, x, normalized, w, eps=None, residual=None):
    """The operator's output (and, with a residual, the sum) against float64 and against torch in
    x's dtype, its memory poisoned first."""
    poison_allocator(3 * x.numel(), x.dtype, x.device)
    if residual is None:
        got = ops.rms_norm(x, normalized, w, eps)
        v = x
    else:
        got, s = ops.add_rms_norm(x, residual, normalized, w, eps)
        v = x + residual
        assert s.dtype == x.dtype and s.shape == x.shape
        assert_sum_equal(s, v)
    assert got.dtype == x.dtype and got.shape == x.shape and got.device == x.device
    tol = TOL[x.dtype]
    torch.testing.assert_close(got.double(), reference(v, normalized, w, eps), **tol)
    torch.testing.assert_close(got, F.rms_norm(v, normalized, w, eps), rtol=2 * tol["rtol"], atol=2 * tol["atol"])


def grads_against_double(ops, x, normalized, w, eps=None, residual=None):
    """Gradients of sum(out * g) (+ sum(sum_out * h) with a residual) through the operator, and the
    same through F.rms_norm in float64: (got, want) for (x[, residual][, w])."""
    leaves = [t.detach().requires_grad_() for t in (x, residual, w) if t is not None]
    ref_leaves = [t.detach().double().requires_grad_() for t in (x, residual, w) if t is not None]
    rw = ref_leaves[-1] if w is not None else None
    g = random_tensor(x.shape, x.dtype, x.device)
    e = default_eps(x.dtype) if eps is None else eps
    if residual is None:
        out = ops.rms_norm(leaves[0], normalized, leaves[-1] if w is not None else None, eps)
        loss = (out * g).sum()
        ref = (F.rms_norm(ref_leaves[0], normalized, rw, e) * g.double()).sum()
    else:
        h = random_tensor(x.shape, x.dtype, x.device)
        out, s = ops.add_rms_norm(leaves[0], leaves[1], normalized, leaves[-1] if w is not None else None, eps)
        loss = (out * g).sum() + (s * h).sum()
        rs = ref_leaves[0] + ref_leaves[1]
        ref = (F.rms_norm(rs, normalized, rw, e) * g.double()).sum() + (rs * h.double()).sum()
    return torch.autograd.grad(loss, leaves), torch.autograd.grad(ref, ref_leaves)


def check_backward(ops, x, normalized, w, eps=None, residual=None):
    got, want = grads_against_double(ops, x, normalized, w, eps, residual)
    tol = TOL[x.dtype]
    rows = x.numel() // max(1, math.prod(normalized))
    for a, b in zip(got, want):
        assert a.dtype == x.dtype and a.shape == b.shape
        scale = max(1.0, rows / 100) if a.dim() == len(normalized) else 1.0  # dw sums over rows
        torch.testing.assert_close(a.double(), b, rtol=10 * tol["rtol"], atol=10 * tol["atol"] * scale)


# Columns for each forward plan kind (plan.cpp): several rows a program up to 1024, one row a
# program in registers up to 32768 (float64: 16384; 10000: float32's 32 warps capped at 32
# registers), then looped in 4096-column steps. On CPU and high-bandwidth GPUs: 2-byte rows and fp32
# rms_norm rows filling <= 3/4 of an 8192-column block (5000) are read in 3 compile-time 2048-column
# steps, kept in L2, and 2-byte rows filling <= 3/4 of a 16384-column block (10000) looped; 2-byte
# rows of 4096 columns in 2 such steps; rows of whole 4096-column steps (8192, 12288, 16384;
# add_rms_norm's: 12288, 16384) are read twice in a compile-time number of steps, kept in L2; other
# 4-byte rows filling more than 3/4 of a 2048..8192-column block (2000: one step, 7000: a partial
# last step) and rows with a residual in an 8192-column block (5000: fp32 one compile-time step,
# 7000, 8192) are read twice with the row kept in L2.
FORWARD_COLS = [1, 5, 100, 1000, 1025, 2000, 3000, 4096, 5000, 7000, 8192, 10000, 12288, 16384, 16385, 32769]


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_sizes(device, ops, dtype):
    for n in FORWARD_COLS:
        x, normalized, w = make((3, n), (n, ), dtype, device)
        check_forward(ops, x, normalized, w)
        r = random_tensor((3, n), dtype, device)
        check_forward(ops, x, normalized, w, residual=r)


def test_forward_covers_every_plan_kind():
    kinds = {plans.plan("rms_norm_forward", rows=3, cols=n, dtype=dt)["kind"] for n in FORWARD_COLS for dt in DTYPES}
    assert kinds == {"short_rows", "row", "looped"}


@pytest.mark.parametrize("rows, cols", [(37, 100), (70, 256), (9, 1024), (1, 7), (129, 33)])
@pytest.mark.parametrize("weight", [True, False])
def test_short_rows(device, ops, rows, cols, weight):
    # Several rows a program: row counts that do not fill the last one, every dtype.
    for dtype in DTYPES:
        x, normalized, w = make((rows, cols), (cols, ), dtype, device, weight)
        check_forward(ops, x, normalized, w, eps=1e-5)
        check_forward(ops, x, normalized, w, eps=1e-6, residual=random_tensor((rows, cols), dtype, device))


@pytest.mark.parametrize("weight", [True, False])
def test_multi_dim_normalized_shape(device, ops, weight):
    for dtype in DTYPES:
        x, normalized, w = make((4, 6, 10), (6, 10), dtype, device, weight)
        check_forward(ops, x, normalized, w)
        check_forward(ops, x, normalized, w, residual=random_tensor((4, 6, 10), dtype, device))
        x, normalized, w = make((2, 3, 4, 5), (3, 4, 5), dtype, device, weight)
        check_forward(ops, x, normalized, w, eps=1e-3)
    x, normalized, w = make((4, 6, 10), (6, 10), torch.float32, device, weight)
    check_backward(ops, x, normalized, w)
    check_backward(ops, x, normalized, w, residual=random_tensor((4, 6, 10), torch.float32, device))


def test_layouts(device, ops):
    x = random_tensor((30, 50), torch.float32, device)
    r = random_tensor((30, 60), torch.float32, device)
    w = random_tensor((40, ), torch.float32, device)
    check_forward(ops, x[:, 5:45], (40, ), w)  # strided rows: no copy
    check_forward(ops, x.t()[:, :30], (30, ), None)  # non-contiguous: copied
    check_forward(ops, x[:, 5:45], (40, ), w, residual=r[:, 11:51])  # both strided, different strides
    check_forward(ops, x.t()[:, :30], (30, ), w[:30], residual=r.t()[:50, :30])
    check_forward(ops, x[::2, 5:45], (40, ), w, residual=r[1::2, :40])
    check_backward(ops, x[:, 5:45], (40, ), w)
    check_backward(ops, x.t()[:, :30], (30, ), w[:30], residual=r.t()[:50, :30])
    # a weight view that is not contiguous
    wide = random_tensor((80, ), torch.float32, device)
    check_forward(ops, x[:, 5:45], (40, ), wide[::2])


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_eps_is_torchs(device, ops, dtype):
    # Rows of tiny values, where eps decides the result: None means what torch's rms_norm uses.
    x = random_tensor((4, 64), dtype, device) * 1e-3
    w = random_tensor((64, ), dtype, device)
    got = ops.rms_norm(x, [64], w)
    torch.testing.assert_close(got, F.rms_norm(x, [64], w), **{k: 2 * v for k, v in TOL[dtype].items()})
    torch.testing.assert_close(got.double(), reference(x, (64, ), w, None), **TOL[dtype])
    got_sum, _ = ops.add_rms_norm(x, x, [64], w)
    torch.testing.assert_close(got_sum.double(), reference(x + x, (64, ), w, None), **TOL[dtype])


# Backward plan kinds: one fused pass up to 16384 columns (float64: 8192), else dx and dw apart.
# (9, 4100): 2-row tiles, a 4-column tail, the next tile prefetched; (2, 12000): an 8192 + 4096
# tile with w loaded per row (fp32/bf16; dx and dw apart for fp64).
BACKWARD_SHAPES = [(37, 100), (1, 300), (2000, 8), (5, 2000), (9, 4100), (2, 12000), (2, 16385)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols", BACKWARD_SHAPES + [(3, 8193)])
def test_backward_plans(device, ops, dtype, rows, cols):
    # (3, 8193): dx and dw apart for float64, one fused pass for the others.
    x, normalized, w = make((rows, cols), (cols, ), dtype, device)
    check_backward(ops, x, normalized, w)
    check_backward(ops, x, normalized, w, residual=random_tensor((rows, cols), dtype, device))


def test_backward_covers_every_plan_kind():
    kinds = set()
    for dt in DTYPES:
        for rows, cols in BACKWARD_SHAPES + [(3, 8193)]:
            kinds.add(plans.plan("rms_norm_backward", rows=rows, cols=cols, dtype=dt)["kind"])
    kinds.add(plans.plan("rms_norm_backward", rows=3, cols=8, want_dx=0, want_dw=0, dtype=torch.float32)["kind"])
    assert kinds == {"none", "fused", "dx_dw"}
    # On CUDA, rows past 8192 columns that want dx go to teams (test_llm_shapes_cuda, and the masks
    # test at 16385 columns, run them on the GPU); not float64, not without dx, not a team larger
    # than the GPU holds.
    # The lag form for 2-byte rms_norm rows on any card (less bandwidth an SM too): not add_rms_norm's
    # (has_grad_sum), not fp32.
    cuda = plans.device_facts(is_cuda=True, multiprocessors=132, memory_gbps=4800)
    lean_cuda = plans.device_facts(is_cuda=True, multiprocessors=132, memory_gbps=3352)
    for dtype, inputs, facts, form in [(torch.bfloat16, {}, cuda, "norm_bwd_team_lag_kernel"),
                                       (torch.float16, {}, cuda, "norm_bwd_team_lag_kernel"),
                                       (torch.bfloat16, {"has_grad_sum": 1}, cuda, "rms_norm_bwd_team_kernel"),
                                       (torch.float32, {}, cuda, "rms_norm_bwd_team_kernel"),
                                       (torch.bfloat16, {}, lean_cuda, "norm_bwd_team_lag_kernel")]:
        team = plans.plan("rms_norm_backward", rows=1000, cols=12288, dtype=dtype, device=facts, **inputs)
        assert team["kind"] == "team" and team["needs_occupancy"], (dtype, inputs)
        assert [launch["kernel"] for launch in team["launches"]] == [form, "rms_norm_bwd_team_rescue_kernel",
                                                                     "norm_bwd_sums_finalize_kernel"], (dtype, inputs)
        assert team["launches"][0]["maxnreg"] == (128 if "lag" in form else 0), (dtype, inputs)
    for dtype, cols, inputs, facts in [(torch.float64, 12288, {}, cuda), (torch.float32, 8192, {}, cuda),
                                       (torch.float32, 12288, {"want_dx": 0}, cuda),
                                       (torch.float32, 12288, {"resident_programs_per_sm": 1},
                                        dict(cuda, multiprocessors=2))]:
        plan = plans.plan("rms_norm_backward", rows=1000, cols=cols, dtype=dtype, device=facts, **inputs)
        assert plan["kind"] != "team", (dtype, cols, inputs)
    # Many rows of few columns: dw from several programs' partial sums and the finalize.
    fused = plans.plan("rms_norm_backward", rows=2000, cols=8, dtype=torch.float32)
    assert [launch["kernel"] for launch in fused["launches"]] == ["norm_bwd_fused_kernel",
                                                                  "norm_bwd_sums_finalize_kernel"]


@pytest.mark.parametrize("mask", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("rows, cols", [(37, 100), (3, 16385)])
def test_backward_op_output_masks_and_grad_sum(device, ops, mask, rows, cols):
    for dtype in (torch.float32, torch.bfloat16):
        x, normalized, w = make((rows, cols), (cols, ), dtype, device)
        dy = random_tensor((rows, cols), dtype, device)
        ds = random_tensor((rows, cols), dtype, device)
        _, rstd = ops.rms_norm_forward(x, [cols], w, 1e-5)
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        want = torch.autograd.grad((F.rms_norm(xd, [cols], wd, 1e-5) * dy.double()).sum(), (xd, wd))
        tol = dict(rtol=10 * TOL[dtype]["rtol"], atol=10 * TOL[dtype]["atol"] * max(1.0, rows / 100))
        for grad_sum in (None, ds):
            poison_allocator(3 * x.numel(), dtype, device)
            dx, dw = ops.rms_norm_backward(dy, x, [cols], rstd, w, list(mask), grad_sum)
            if mask[0]:
                expected = want[0] if grad_sum is None else want[0] + grad_sum.double()
                torch.testing.assert_close(dx.double(), expected, **tol)
            else:
                assert dx is None
            if mask[1]:
                torch.testing.assert_close(dw.double(), want[1], **tol)
            else:
                assert dw is None
        # Without a weight there is no dw, whatever the mask says.
        _, rstd = ops.rms_norm_forward(x, [cols], None, 1e-5)
        dx, dw = ops.rms_norm_backward(dy, x, [cols], rstd, None, list(mask))
        assert dw is None and (dx is not None) == mask[0]


def test_forward_stats(device, ops):
    for dtype in DTYPES:
        x, normalized, w = make((5, 7, 12), (12, ), dtype, device)
        r = random_tensor((5, 7, 12), dtype, device)
        out, rstd = ops.rms_norm_forward(x, [12], w, 1e-4)
        acc = torch.float64 if dtype == torch.float64 else torch.float32
        assert rstd.shape == (5, 7) and rstd.dtype == acc
        want = torch.rsqrt(x.double().pow(2).mean(-1) + 1e-4)
        torch.testing.assert_close(rstd.double(), want, rtol=1e-5 if acc == torch.float32 else 1e-12, atol=0)
        torch.testing.assert_close(out, ops.rms_norm(x, [12], w, 1e-4), rtol=0, atol=0)
        out2, s, rstd2 = ops.add_rms_norm_forward(x, r, [12], w, 1e-4)
        assert_sum_equal(s, x + r)
        torch.testing.assert_close(rstd2.double(), torch.rsqrt(s.double().pow(2).mean(-1) + 1e-4),
                                   rtol=1e-5 if acc == torch.float32 else 1e-12, atol=0)
        ref_out, ref_s = ops.add_rms_norm(x, r, [12], w, 1e-4)
        assert torch.equal(out2, ref_out) and torch.equal(s, ref_s)


def test_empty(device, ops):
    for shape, normalized in [((0, 8), (8, )), ((3, 0), (0, )), ((2, 0, 4), (4, ))]:
        x = torch.empty(shape, device=device)
        w = random_tensor(normalized, torch.float32, device)
        assert ops.rms_norm(x, normalized, w).shape == shape
        out, s = ops.add_rms_norm(x, x, normalized, w)
        assert out.shape == shape and s.shape == shape
        out, rstd = ops.rms_norm_forward(x, normalized, w)
        assert rstd.shape == shape[:len(shape) - len(normalized)]
        dx, dw = ops.rms_norm_backward(out, x, normalized, rstd, w, [True, True])
        assert dx.shape == shape
        torch.testing.assert_close(dw, torch.zeros_like(w))  # a sum of nothing
        leaf = x.clone().requires_grad_()
        ops.rms_norm(leaf, normalized, w).sum().backward()
        assert leaf.grad.shape == shape


def test_gradient_of_one_output_only(device, ops):
    # add_rms_norm's outputs used alone: only the sum (then d input = d residual = its gradient), or
    # only the normalised output.
    x, normalized, w = make((6, 20), (20, ), torch.float64, device)
    r = random_tensor((6, 20), torch.float64, device)
    leaves = [t.clone().requires_grad_() for t in (x, r, w)]
    _, s = ops.add_rms_norm(*leaves[:2], normalized, leaves[2])
    h = random_tensor((6, 20), torch.float64, device)
    dx, dr = torch.autograd.grad((s * h).sum(), leaves[:2])
    assert torch.equal(dx, h) and torch.equal(dr, h)
    out, _ = ops.add_rms_norm(*leaves[:2], normalized, leaves[2])
    got = torch.autograd.grad(out.sum(), leaves)
    ref = [t.detach().clone().requires_grad_() for t in (x, r, w)]
    want = torch.autograd.grad(F.rms_norm(ref[0] + ref[1], normalized, ref[2]).sum(),
                               ref)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    # Only the weight requires grad; only the residual does.
    wl = w.clone().requires_grad_()
    (dw, ) = torch.autograd.grad(ops.add_rms_norm(x, r, normalized, wl)[0].sum(), (wl, ))
    torch.testing.assert_close(dw, want[2])
    rl = r.clone().requires_grad_()
    (dr, ) = torch.autograd.grad(ops.add_rms_norm(x, rl, normalized, w)[0].sum(), (rl, ))
    torch.testing.assert_close(dr, want[1])


def test_rms_norm_forward_is_differentiable(device, ops):
    # The forward operators record a graph through their outputs (rstd too: test_higher_order
    # checks its gradient).
    x, normalized, w = make((5, 9), (9, ), torch.float64, device)
    leaves = [t.clone().requires_grad_() for t in (x, w)]
    out, rstd = ops.rms_norm_forward(leaves[0], normalized, leaves[1])
    assert out.requires_grad and rstd.requires_grad
    got = torch.autograd.grad(out.sum(), leaves)
    ref = [t.clone().requires_grad_() for t in (x, w)]
    want = torch.autograd.grad(F.rms_norm(ref[0], normalized, ref[1]).sum(), ref)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    r = random_tensor((5, 9), torch.float64, device).requires_grad_()
    out, s, rstd = ops.add_rms_norm_forward(leaves[0], r, normalized, leaves[1])
    assert out.requires_grad and s.requires_grad and rstd.requires_grad
    (dr, ) = torch.autograd.grad(out.sum() + s.sum(), (r, ))
    rr = r.detach().clone().requires_grad_()
    (want_dr, ) = torch.autograd.grad(F.rms_norm(x + rr, normalized, w).sum() + (x + rr).sum(), (rr, ))
    torch.testing.assert_close(dr, want_dr)


def test_errors(device, ops):
    x, _, w = make((4, 6), (6, ), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm: normalized_shape \[5\] does not match the trailing dims "
                       r"of input of shape \[4, 6\]"):
        ops.rms_norm(x, [5], None)
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm: normalized_shape \[3, 4, 6\] has 3 dims but input has "
                       r"only 2"):
        ops.rms_norm(x, [3, 4, 6])
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm: normalized_shape must name at least one dim"):
        ops.rms_norm(x, [])
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm: weight has shape \[3\] but normalized_shape is \[6\]"):
        ops.rms_norm(x, [6], w[:3])
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm: weight has dtype Double but input has dtype Float"):
        ops.rms_norm(x, [6], w.double())
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm: argument 'input' has dtype Int"):
        ops.rms_norm(x.int(), [6])
    with pytest.raises(RuntimeError, match=r"tjit::add_rms_norm: residual has shape \[4, 5\] but input has shape "
                       r"\[4, 6\]"):
        ops.add_rms_norm(x, x[:, :5], [6], w)
    with pytest.raises(RuntimeError, match=r"tjit::add_rms_norm: residual has dtype Half but input has dtype Float"):
        ops.add_rms_norm(x, x.half(), [6], w)
    with pytest.raises(RuntimeError, match=r"tjit::add_rms_norm: weight has shape"):
        ops.add_rms_norm(x, x, [6], w[:2])
    _, rstd = ops.rms_norm_forward(x, [6], w)
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm_backward: rstd must be the Float tensor the forward "
                       r"returned \(4 elements\)"):
        ops.rms_norm_backward(x, x, [6], rstd[:3], w, [True, True])
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm_backward: grad_out must have the input's dtype and shape"):
        ops.rms_norm_backward(x[:2], x, [6], rstd, w, [True, True])
    with pytest.raises(RuntimeError, match=r"tjit::rms_norm_backward: grad_sum must have the input's dtype and shape"):
        ops.rms_norm_backward(x, x, [6], rstd, w, [True, True], x.double())


def test_meta(ops):
    x = torch.empty(4, 5, 6, device="meta", dtype=torch.bfloat16)
    w = torch.empty(5, 6, device="meta", dtype=torch.bfloat16)
    out = ops.rms_norm(x, [5, 6], w)
    assert out.shape == (4, 5, 6) and out.dtype == torch.bfloat16 and out.device.type == "meta"
    out, rstd = ops.rms_norm_forward(x, [5, 6], w)
    assert rstd.shape == (4, ) and rstd.dtype == torch.float32
    out, s = ops.add_rms_norm(x, x, [6], None)
    assert out.shape == s.shape == (4, 5, 6) and s.dtype == torch.bfloat16
    out, s, rstd = ops.add_rms_norm_forward(x, x, [6], None)
    assert rstd.shape == (4, 5)
    dx, dw = ops.rms_norm_backward(x, x, [5, 6], torch.empty(4, device="meta"), w, [True, True], x)
    assert dx.shape == x.shape and dw.shape == w.shape and dw.dtype == torch.bfloat16
    dx, dw = ops.rms_norm_backward(x, x, [5, 6], torch.empty(4, device="meta"), None, [False, True])
    assert dx is None and dw is None
    real = ops.rms_norm(torch.randn(4, 5, 6).transpose(0, 2), [4], None)
    meta = ops.rms_norm(torch.empty(4, 5, 6, device="meta").transpose(0, 2), [4], None)
    assert meta.shape == real.shape and meta.stride() == real.stride()
    with pytest.raises(RuntimeError, match="tjit::add_rms_norm: residual has shape"):
        ops.add_rms_norm(x, x[:1], [6], None)


def test_gradcheck(device, ops):
    x, normalized, w = make((3, 5), (5, ), torch.float64, device)
    r = random_tensor((3, 5), torch.float64, device)
    torch.autograd.gradcheck(lambda a, b: ops.rms_norm(a, [5], b, 1e-5), (x.requires_grad_(), w.requires_grad_()))
    torch.autograd.gradcheck(lambda a, b: ops.rms_norm(a, [5], b), (x, w))
    torch.autograd.gradcheck(lambda a: ops.rms_norm(a, [5], None, 0.1), (x, ))
    torch.autograd.gradcheck(lambda a, c, b: ops.add_rms_norm(a, c, [5], b, 1e-5), (x, r.requires_grad_(), w))
    torch.autograd.gradcheck(lambda a, b: ops.rms_norm_forward(a, [5], b)[0], (x, w))
    torch.autograd.gradcheck(lambda a, c: ops.add_rms_norm_forward(a, c, [5], None)[:2], (x, r))
    x3 = random_tensor((2, 3, 4), torch.float64, device).requires_grad_()
    w3 = random_tensor((3, 4), torch.float64, device).requires_grad_()
    torch.autograd.gradcheck(lambda a, b: ops.rms_norm(a, [3, 4], b), (x3, w3))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck(device, requires_grad):
    x, _, w = make((4, 8), (8, ), torch.float32, device)
    r = random_tensor((4, 8), torch.float32, device)
    x, w, r = (t.requires_grad_(requires_grad) for t in (x, w, r))
    for args in [(x, [8], w, 1e-5), (x, [8], None), (x, [8], w)]:
        torch.library.opcheck(torch.ops.tjit.rms_norm.default, args)
        torch.library.opcheck(torch.ops.tjit.rms_norm_forward.default, args)
    for args in [(x, r, [8], w, 1e-5), (x, r, [8])]:
        torch.library.opcheck(torch.ops.tjit.add_rms_norm.default, args)
        torch.library.opcheck(torch.ops.tjit.add_rms_norm_forward.default, args)
    with torch.no_grad():
        _, rstd = torch.ops.tjit.rms_norm_forward(x, [8], w)
    dy = random_tensor((4, 8), torch.float32, device)
    torch.library.opcheck(torch.ops.tjit.rms_norm_backward.default,
                          (dy, x.detach(), [8], rstd, w.detach(), [True, True], None))
    torch.library.opcheck(torch.ops.tjit.rms_norm_backward.default,
                          (dy, x.detach(), [8], rstd, None, [True, False], dy))


def _block(x, r, w):
    h, s = tjit.add_rms_norm(x, r, [x.shape[-1]], w, 1e-6)
    return tjit.rms_norm(h * 2, [x.shape[-1]], w) + s


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile(device, backend):
    x, _, w = make((6, 24), (24, ), torch.float32, device)
    r = random_tensor((6, 24), torch.float32, device)
    leaves = [t.clone().requires_grad_() for t in (x, r, w)]
    compiled = torch.compile(_block, fullgraph=True, backend=backend)
    got = compiled(*leaves)
    eager_leaves = [t.clone().requires_grad_() for t in (x, r, w)]
    want = _block(*eager_leaves)
    torch.testing.assert_close(got, want)
    g = random_tensor(got.shape, got.dtype, device)
    for a, b in zip(torch.autograd.grad(got, leaves, g), torch.autograd.grad(want, eager_leaves, g)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # Another row count: dynamic shapes reach the Meta kernels.
    x2, _, _ = make((9, 24), (24, ), torch.float32, device)
    torch.testing.assert_close(compiled(x2, x2, w), _block(x2, x2, w))


def test_export(device):

    class Block(torch.nn.Module):

        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(random_tensor((16, ), torch.float32, device))

        def forward(self, x, r):
            return _block(x, r, self.weight)

    model = Block()
    x = random_tensor((3, 16), torch.float32, device)
    r = random_tensor((3, 16), torch.float32, device)
    program = torch.export.export(model, (x, r))
    targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert {"tjit.add_rms_norm.default", "tjit.rms_norm.default"} <= targets, targets
    x2, r2 = random_tensor((3, 16), torch.float32, device), random_tensor((3, 16), torch.float32, device)
    torch.testing.assert_close(program.module()(x2, r2), model(x2, r2))


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_graph(ops, dtype):
    # Forward and backward captured once, replayed on new inputs.
    for cols in (4096, 5120, 40000):
        x, normalized, w = make((64, cols), (cols, ), dtype, "cuda")
        r = random_tensor((64, cols), dtype, "cuda")
        dy = random_tensor((64, cols), dtype, "cuda")
        static = [t.clone() for t in (x, r, dy)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm: compiles and loads outside the capture
            out, s, rstd = ops.add_rms_norm_forward(static[0], static[1], normalized, w)
            ops.rms_norm_backward(static[2], s, normalized, rstd, w, [True, True], static[2])
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out, s, rstd = ops.add_rms_norm_forward(static[0], static[1], normalized, w)
            dx, dw = ops.rms_norm_backward(static[2], s, normalized, rstd, w, [True, True], static[2])
        new = [random_tensor((64, cols), dtype, "cuda") for _ in range(3)]
        for t, n in zip(static, new):
            t.copy_(n)
        for t in (out, s, dx, dw):
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        want_out, want_s = ops.add_rms_norm(new[0], new[1], normalized, w)
        assert torch.equal(s, want_s)
        torch.testing.assert_close(out, want_out)
        _, rstd_new = ops.rms_norm_forward(want_s, normalized, w)
        want_dx, want_dw = ops.rms_norm_backward(new[2], want_s, normalized, rstd_new, w, [True, True], new[2])
        torch.testing.assert_close(dx, want_dx)
        torch.testing.assert_close(dw, want_dw)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_llm_shapes_cuda(ops, dtype):
    # Hidden sizes of language models at many rows: forward, residual sum and gradients.
    for cols in (2048, 5120, 7168, 12288, 16384):
        x, normalized, w = make((1000, cols), (cols, ), dtype, "cuda")
        r = random_tensor((1000, cols), dtype, "cuda")
        check_forward(ops, x, normalized, w)
        check_forward(ops, x, normalized, w, residual=r)
        check_backward(ops, x, normalized, w, residual=r)


def test_direct_path_taken(device):
    # tjit.<op> reaches the C++ entry point through tjit._C (generated bindings) for plain arguments,
    # float? eps and bool[2] included, and returns what torch.ops.tjit does.
    x, _, w = make((3, 2, 11), (11, ), torch.float32, device)
    r = random_tensor((3, 2, 11), torch.float32, device)
    _, rstd = torch.ops.tjit.rms_norm_forward(x, [11], w)
    for name, args in [("rms_norm", (x, [11], w, None)), ("rms_norm", (x, (2, 11), None, 1e-3)),
                       ("rms_norm_forward", (x, [11], w, 0.5)), ("add_rms_norm", (x, r, [11], w, None)),
                       ("add_rms_norm_forward", (x, r, [11], None, 1e-6)),
                       ("rms_norm_backward", (r, x, [11], rstd, w, [True, False], None)),
                       ("rms_norm_backward", (r, x, [11], rstd, w, (False, True), x))]:
        direct = getattr(tjit._C, name)(*args)
        assert direct is not NotImplemented, f"tjit._C.{name} fell back to torch.ops for plain arguments"
        want = getattr(torch.ops.tjit, name)(*args)
        for got, expected in zip(direct if isinstance(direct, tuple) else (direct, ),
                                 want if isinstance(want, tuple) else (want, )):
            assert (got is None and expected is None) or torch.equal(got, expected)
