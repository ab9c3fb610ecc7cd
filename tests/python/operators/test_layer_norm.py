"""tjit.layer_norm (and layer_norm_forward/backward) and torch.ops.tjit.layer_norm (both entry
points: conftest's `ops`) against torch's layer_norm: shapes, optional weight/bias, single-pass and
looped rows, the dw/db plans, errors, Meta, autograd, gradcheck, opcheck."""

import pytest
import torch
import torch.nn.functional as F
from conftest import kernels_helping_at_once, poison_allocator, random_tensor, requires_cuda

TOL = {
    torch.float32: dict(rtol=1e-4, atol=1e-5),
    torch.float64: dict(rtol=1e-9, atol=1e-9),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
}


def make(shape, normalized, dtype, device, affine=(True, True)):
    x = random_tensor(shape, dtype, device) * 3 + 1
    w = random_tensor(normalized, dtype, device) if affine[0] else None
    b = random_tensor(normalized, dtype, device) if affine[1] else None
    return x, tuple(normalized), w, b


def check_forward(ops, x, normalized, w, b, eps=1e-5):
    expected = F.layer_norm(x, normalized, w, b, eps)
    poison_allocator(expected.numel(), expected.dtype, x.device)
    got = ops.layer_norm(x, normalized, w, b, eps)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, **TOL[x.dtype])


def check_backward(ops, x, normalized, w, b, eps=1e-5):
    leaves = [t.detach().requires_grad_() if t is not None else None for t in (x, w, b)]
    inputs = [t for t in leaves if t is not None]
    out = ops.layer_norm(leaves[0], normalized, leaves[1], leaves[2], eps)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, g)
    ref_leaves = [t.detach().double().requires_grad_() if t is not None else None for t in (x, w, b)]
    ref = F.layer_norm(ref_leaves[0], normalized, ref_leaves[1], ref_leaves[2], eps)
    want = torch.autograd.grad(ref, [t for t in ref_leaves if t is not None], g.double())
    tol = TOL[x.dtype]
    for a, e in zip(got, want):
        scale = max(1.0, x.numel() / max(1, x.shape[-1]) / 1000)  # dw/db sum over rows
        torch.testing.assert_close(a.double(), e, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10 * scale)


def backward_against_double(ops, x, dy, w, b, mask):
    """tjit's layer_norm_backward over the last dim (its outputs' memory poisoned first) and aten's
    in float64 with float64 statistics: (got, want), want holding None where w or b is None."""
    cols = x.shape[-1]
    _, mean, rstd = ops.layer_norm_forward(x, [cols], w, b, 1e-5)
    poison_allocator(3 * x.numel(), x.dtype, x.device)
    got = ops.layer_norm_backward(dy, x, [cols], mean, rstd, w, b, list(mask))
    xd, wd, bd = (None if t is None else t.double() for t in (x, w, b))
    _, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(xd, [cols], wd, bd, 1e-5)
    want = torch.ops.aten.native_layer_norm_backward(dy.double(), xd, [cols], ref_mean, ref_rstd, wd, bd,
                                                     [True, w is not None, b is not None])
    return got, want


def assert_gradients(got, want, mask, dtype, tol):
    # Each gradient asked for (and with a weight/bias to have one) against float64; None otherwise.
    for asked, g, e in zip(mask, got, want):
        if not asked or e is None:
            assert g is None
            continue
        assert g.dtype == dtype and g.shape == e.shape
        torch.testing.assert_close(g.double(), e, **tol)


def summed_tol(dtype, rows):
    # dw/db sum over rows: the fused backward's checks allow 10x TOL, and more absolute error with rows.
    return dict(rtol=TOL[dtype]["rtol"] * 10, atol=TOL[dtype]["atol"] * 10 * max(1.0, rows / 10))


def team_tol(dtype):
    # Rows shared by a team (past 8192 columns): fp32 to 1e-3, 2-byte types to TOL.
    return dict(rtol=1e-3, atol=1e-3) if dtype == torch.float32 else TOL[dtype]


def check_forward_stats(ops, x, w, b, eps=1e-5):
    # The training forward's output, mean and rstd against aten's in float64 (x: [rows, cols]).
    rows, cols = x.shape
    poison_allocator(3 * x.numel(), x.dtype, x.device)
    out, mean, rstd = ops.layer_norm_forward(x, [cols], w, b, eps)
    ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x.double(), [cols], w.double(), b.double(), eps)
    torch.testing.assert_close(out.double(), ref_out, **TOL[x.dtype])
    torch.testing.assert_close(mean.double(), ref_mean.reshape(rows), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd.double(), ref_rstd.reshape(rows), rtol=1e-4, atol=1e-5)


def columns(device):
    # One row in registers up to 32768 columns (fp64: 16384); past that the looped kernel (CPU,
    # fp64: 16385 ends in a partial step, 20480 in a full one) or, on CUDA, the autotuned one.
    return [1, 5, 128, 1000, 16385, 20480, 32769] + ([65536] if device == "cuda" else [])


def test_forward_shapes_and_dtypes(device, ops):
    for dtype in TOL:
        for n in columns(device):
            check_forward(ops, *make((3, n), (n, ), dtype, device), eps=1e-5)


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
def test_optional_weight_bias(device, ops, affine):
    x, _, w, b = make((4, 6, 10), (6, 10), torch.float32, device, affine)
    check_forward(ops, x, (6, 10), w, b)
    check_backward(ops, x, (6, 10), w, b)


def test_layouts(device, ops):
    x = random_tensor((30, 50), torch.float32, device)
    w = random_tensor((40, ), torch.float32, device)
    check_forward(ops, x[:, 5:45], (40, ), w, None)   # strided rows: no copy
    check_forward(ops, x.t()[:, :30], (30, ), None, None)  # non-contiguous: copied
    check_backward(ops, x[:, 5:45], (40, ), w, None)


def test_eps_and_constant_rows(device, ops):
    x = torch.ones(3, 64, device=device)
    x[1] = 5.0
    check_forward(ops, x, (64, ), None, None, eps=1e-3)
    check_forward(ops, random_tensor((3, 64), torch.float32, device), (64, ), None, None, eps=0.5)


@pytest.mark.parametrize("rows, cols", [(20, 1024), (200, 8), (1, 7), (64, 16385)])
def test_backward_plans(device, ops, rows, cols):
    # Few rows: dw/db straight; many rows of few columns: row groups with partial sums.
    check_backward(ops, *make((rows, cols), (cols, ), torch.float32, device))


@pytest.mark.parametrize("rows, cols", [(37, 100), (70, 256), (9, 1024), (5, 1025)])
def test_forward_short_rows(device, ops, rows, cols):
    # Up to 1024 columns several rows share a program: row counts that do not fill the last one,
    # a row stride, mean/rstd of every row, each dtype.
    for dtype in TOL:
        x, normalized, w, b = make((rows, cols), (cols, ), dtype, device)
        check_forward(ops, x, normalized, w, b)
        wide = random_tensor((rows, cols + 3), dtype, device)
        check_forward(ops, wide[:, 2:cols + 2], normalized, None, b)
        check_forward_stats(ops, x, w, b)


def forced_forward_candidates(prefix, rows, cols, dtype, device):
    """Each layer_norm forward candidate named prefix... that fits rows x cols on `device`, forced in
    turn (the plan's choice is a card's table or a measurement, which may pick any of them)."""
    import tjit.plans as plans
    from tjit import _C
    facts = plans.device_facts(torch.device(device))
    fitting = plans.plan("layer_norm_forward", rows=rows, cols=cols, dtype=dtype, device=facts)["fitting"]
    names = [n for n in fitting if n.startswith(prefix)]
    assert names, (prefix, cols, fitting)
    for name in names:
        _C.force_plan_candidate("layer_norm_forward", name)
        try:
            yield name
        finally:
            _C.force_plan_candidate("layer_norm_forward", None)


def team_forms(rows, cols, dtype, want_dx=True):
    """None (the plan's own choice: a card's table or a first call's measurement, which may be any
    form), then each backward team form that fits rows x cols on the GPU, forced in turn."""
    import tjit.plans as plans
    from tjit import _C
    yield None
    facts = plans.device_facts(torch.device("cuda"))
    fitting = plans.plan("layer_norm_backward", rows=rows, cols=cols, dtype=dtype, device=facts,
                         want_dx=int(want_dx))["fitting"]
    for name in [n for n in fitting if n.startswith("team")]:
        _C.force_plan_candidate("layer_norm_backward", name)
        try:
            yield name
        finally:
            _C.force_plan_candidate("layer_norm_backward", None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_forward_tail_block(device, ops, dtype):
    # Rows just past a power of two as that block plus a tail block (the tail* candidates), each
    # that fits: the smallest and largest tails, a row count that is not a power of two, a strided
    # view without weight, and the mean/rstd the training forward stores.
    for cols in [4097, 5120, 5121, 6144, 8193, 12288, 16385, 20480, 20481]:
        rows = 3
        for _ in forced_forward_candidates("tail", rows, cols, dtype, device):
            x, normalized, w, b = make((rows, cols), (cols, ), dtype, device)
            check_forward(ops, x, normalized, w, b)
            wide = random_tensor((rows, cols + 8), dtype, device)
            check_forward(ops, wide[:, 8:], normalized, None, b)
            check_forward_stats(ops, x, w, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_forward_persistent(device, ops, dtype):
    # The persistent candidates: as many programs as the GPU holds (CPU: 4) walk the rows. Fewer rows
    # than programs, and so many that each program's pipelined loop takes several (CUDA: up to 7
    # programs of 132 SMs), at the ends of both heads' ranges, a row stride, and mean/rstd.
    many = 7001 if device == "cuda" else 11
    for rows, cols in [(many, 4097), (5, 5120), (many, 6144), (many, 8193), (7, 9216), (many, 12287)]:
        for _ in forced_forward_candidates("persistent", rows, cols, dtype, device):
            x, normalized, w, b = make((rows, cols), (cols, ), dtype, device)
            check_forward(ops, x, normalized, w, b)
            check_forward_stats(ops, x, w, b)
            wide = random_tensor((rows, cols + 8), dtype, device)
            check_forward(ops, wide[:, 8:], normalized, None, None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_forward_row_steps(device, ops, dtype):
    # One program a row reading it twice in steps (loop*, keep*: the step count a compile-time
    # constant with KEEP_ROW) at 12288 columns. One row and many, a row stride, with and without
    # weight and bias, and mean/rstd.
    cols = 12288
    for rows in (1, 7001 if device == "cuda" else 5):
        for _ in forced_forward_candidates(("loop", "keep"), rows, cols, dtype, device):
            x, normalized, w, b = make((rows, cols), (cols, ), dtype, device)
            check_forward(ops, x, normalized, w, b)
            check_forward_stats(ops, x, w, b)
            wide = random_tensor((rows, cols + 8), dtype, device)
            check_forward(ops, wide[:, 8:], normalized, None, None)
            check_forward(ops, x, normalized, w, None)


@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True), (False, True, False),
                                  (False, False, True), (False, False, False)])
def test_backward_output_masks(device, ops, mask):
    # The fused backward (up to 8192 columns) computes only what the mask asks for; its per-program
    # dw/db partials are summed in a second launch, or stored directly when one program has every row.
    for dtype in TOL:
        for rows, cols in [(37, 100), (1, 300), (70, 2000)]:
            x, _, w, b = make((rows, cols), (cols, ), dtype, device)
            dy = random_tensor((rows, cols), dtype, device)
            got, want = backward_against_double(ops, x, dy, w, b, mask)
            assert_gradients(got, want, mask, dtype, summed_tol(dtype, rows))


@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True)])
def test_backward_tail_tile(device, ops, mask):
    # Rows of 4609..5120 columns (not fp64): the fused backward's 4096-column tile plus a
    # 1024-column tail tile; each side of both switches, row counts that leave the last program
    # short, with and without weight, only some gradients asked for, a strided input view.
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for rows, cols, affine in [(37, 5120, True), (5, 4609, True), (9, 4608, False), (3, 5121, True)]:
            x, _, w, b = make((rows, cols), (cols, ), dtype, device, (affine, affine))
            if cols == 5120:
                x = random_tensor((rows, cols + 16), dtype, device)[:, 16:] * 3 + 1  # a row stride
            dy = random_tensor((rows, cols), dtype, device)
            got, want = backward_against_double(ops, x, dy, w, b, mask)
            assert_gradients(got, want, mask, dtype, summed_tol(dtype, rows))


def test_backward_many_rows_cuda(device, ops):
    if device != "cuda":
        pytest.skip("the large-M dw/db plan runs at CUDA size only (the interpreter would take minutes)")
    check_backward(ops, *make((1 << 16, 128), (128, ), torch.float32, device))
    check_backward(ops, *make((4096, 4096), (4096, ), torch.bfloat16, device))


@requires_cuda
def test_long_row_forward_help_path_cuda():
    # The long-row forward's split programs read a row's missing chunks themselves after HELP_AFTER
    # polls, which does not happen at GPU speed on its own. A private copy of layer_norm/forward.py with
    # HELP_AFTER = 1 makes every program whose first poll misses a chunk do it at once, racing that
    # chunk's own program: the first word in each slot must win, and every program of a row must
    # normalise with the same mean and rstd. A ragged last chunk, no weight, 2-byte rows.
    import triton
    ln = kernels_helping_at_once("layer_norm.forward")
    kernel = ln.layer_norm_fwd_long_kernel.fn  # launched with a config of our own, not tuned
    for dtype, rows, n, block, warps, affine in [(torch.float32, 300, 65536 + 3000, 4096, 4, True),
                                                 (torch.bfloat16, 97, 131072, 8192, 8, True),
                                                 (torch.float16, 64, 40000, 8192, 16, False)]:
        chunks = triton.cdiv(n, block)
        x, _, w, b = make((rows, n), (n, ), dtype, "cuda", (affine, affine))
        y = torch.full_like(x, float("nan"))
        mean = torch.full((rows, ), float("nan"), device="cuda")
        rstd = torch.full((rows, ), float("nan"), device="cuda")
        kernel[(rows * chunks, )](y, x, w, b, mean, rstd, torch.zeros(2 + rows * chunks, dtype=torch.int64,
                                                                      device="cuda"),
                                  rows, n, n, n, 1e-5, HAS_WEIGHT=affine, HAS_BIAS=affine, INDEX_64=False,
                                  BLOCK_N=block, SPLIT=True, num_warps=warps)
        ref, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x.double(), [n], None if w is None else w.double(),
                                                                   None if b is None else b.double(), 1e-5)
        torch.testing.assert_close(y.double(), ref, **TOL[dtype])
        torch.testing.assert_close(mean.double(), ref_mean.flatten(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rstd.double(), ref_rstd.flatten(), rtol=1e-4, atol=1e-5)


@requires_cuda
def test_backward_team_help_path_cuda():
    # Neither way out of a team's wait happens at GPU speed on its own. A private copy of
    # layer_norm/backward.py with HELP_AFTER = 1: in the team kernel every warp whose first poll
    # misses a word computes the missing chunks' sums itself (row_exchange's help path, in PTX, each
    # warp on its own), racing the chunks' own programs and the other warps: the first word in each
    # slot must win and every program of a row must use the same sums. In the lag kernel a program
    # whose one poll of the ticket count finds its team incomplete gives the team up, unless a
    # teammate that saw it complete got there first (row_exchange.team_runs): some teams run, some
    # give up, and the finalize does the rows of those (dx, dw, db). Both kernels at their plans'
    # stages, a ragged last chunk, no weight, a row stride.
    import triton
    ln = kernels_helping_at_once("layer_norm.backward")
    family = kernels_helping_at_once("norm_team")  # the lag form: the norm family's kernel
    for name, dtype, rows, n, block, stages, weight, per_team in [
            ("team", torch.float32, 300, 4 * 4096 + 1000, 4096, 3, True, 7),
            ("team", torch.float32, 45, 9000, 4096, 3, False, 5),
            ("team lag", torch.bfloat16, 97, 12288, 2048, 2, True, 9),
            ("team lag", torch.float16, 64, 20000, 2048, 2, False, 4)]:
        chunks = triton.cdiv(n, block)
        teams = triton.cdiv(rows, per_team)
        x = (random_tensor((rows, n + 8), dtype, "cuda") * 2 + 1)[:, 8:]
        dy = random_tensor((rows, n), dtype, "cuda")
        w = random_tensor((n, ), dtype, "cuda") if weight else None
        _, mean, rstd = torch.ops.aten.native_layer_norm(x.float(), [n], None, None, 1e-5)
        dx = torch.full((rows, n), float("nan"), dtype=dtype, device="cuda")
        dw_part = torch.full((teams, n), float("nan"), device="cuda")
        db_part = torch.full((teams, n), float("nan"), device="cuda")
        sync = torch.zeros(2 + rows * chunks + teams, dtype=torch.int64, device="cuda")
        args = (dx, dw_part, db_part, dy, x, w, mean.flatten(), rstd.flatten(), sync, rows, n, chunks, per_team, n, n,
                x.stride(0), weight)
        s_pow2 = triton.next_power_of_2(chunks)
        if name == "team":
            ln.layer_norm_bwd_team_kernel[(teams * chunks, )](*args, True, True, True, block, s_pow2, stages, False,
                                                             num_warps=4)
            dw, db = dw_part.sum(0), db_part.sum(0)
        else:
            # no ds (add_rms_norm's), its stride 0
            family.norm_bwd_team_lag_kernel[(teams * chunks, )](*args[:8], None, *args[8:16], 0, *args[16:], True, True,
                                                               block, s_pow2, stages, False, num_warps=4, maxnreg=128)
            modes = sync[2 + rows * chunks:]
            assert bool(((modes == 1) | (modes == 2)).all()), f"{name}: a team without a mode"
            dw = torch.full((n, ), float("nan"), device="cuda")
            db = torch.full((n, ), float("nan"), device="cuda")
            ln.layer_norm_bwd_team_lag_finalize_kernel[(triton.cdiv(n, 64), )](
                dw, db, dw_part, db_part, dx, dy, x, w, mean.flatten(), rstd.flatten(), sync, rows, n, chunks, per_team,
                teams, n, n, x.stride(0), weight, True, True, triton.next_power_of_2(teams), 64, False, num_warps=4)
        xd = x.double()
        want_dx = torch.ops.aten.native_layer_norm_backward(dy.double(), xd, [n], mean.double(), rstd.double(),
                                                            None if w is None else w.double(), None,
                                                            [True, False, False])[0]
        xhat = (xd - mean.double()) * rstd.double()
        torch.testing.assert_close(dx.double(), want_dx, **team_tol(dtype), msg=f"{name} dx")
        torch.testing.assert_close(dw.double(), (dy.double() * xhat).sum(0), **summed_tol(dtype, rows),
                                   msg=f"{name} dw")
        torch.testing.assert_close(db.double(), dy.double().sum(0), **summed_tol(dtype, rows), msg=f"{name} db")


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_backward_teams_cuda(ops, dtype):
    # Past 8192 columns on CUDA a team of programs shares each row (layer_norm_bwd_team_kernel:
    # 4096-column chunks, up to 32; the row loop 3 stages deep), exchanging the rows' sums;
    # dw/db per team, then added up. fp16/bf16 rows of up to 32 2048-column chunks take
    # the norm family's norm_bwd_team_lag_kernel (dx one row after the row's sums). Both sides of 8192, of the
    # lag kernel's 65536 and of the 32-chunk limit, chunk counts that are not powers of two, a
    # ragged last chunk, odd row counts, one row (one team: dw/db stored directly, and for the lag
    # kernel a loop of one row and one dx), teams of fewer rows than stages and of many (2001 rows:
    # ~23 a team, the stages' buffers reused many times), a row stride, no weight or bias.
    # Each team form is forced in turn, and the plan's own choice runs too.
    limit = 4096 * 32
    for rows, cols in [(37, 8192), (37, 8193), (300, 12288), (2001, 12288), (1, 16384), (129, 20000), (7, 65536),
                       (7, 65537), (5, limit), (3, limit + 1)]:
        for _ in team_forms(rows, cols, dtype):
            check_backward(ops, *make((rows, cols), (cols, ), dtype, "cuda"))
    for _ in team_forms(45, 12288, dtype):
        x, normalized, w, b = make((45, 12288 + 40), (12288, ), dtype, "cuda")
        check_backward(ops, x[:, 7:12288 + 7], normalized, w, b)
        check_backward(ops, *make((45, 9000), (9000, ), dtype, "cuda", affine=(False, False)))
        check_backward(ops, *make((45, 9000), (9000, ), dtype, "cuda", affine=(True, False)))


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_teams_zero_sums_cuda(ops, dtype):
    # A row's programs exchange their chunk sums as one word that is 0 until written, so a sum of
    # exactly +0.0 must still count as written: rows of dy that are zero (whole rows and one chunk),
    # and a zero weight chunk, give sums of +0.0 (fp32: the team kernel; bf16: the lag kernel).
    rows, cols = 41, 12288
    x, _, w, b = make((rows, cols), (cols, ), dtype, "cuda")
    w[4096:8192] = 0.0
    dy = random_tensor((rows, cols), dtype, "cuda")
    dy[3] = 0.0
    dy[7, :4096] = 0.0
    for _ in team_forms(rows, cols, dtype):
        got, want = backward_against_double(ops, x, dy, w, b, (True, True, True))
        assert_gradients(got, want, (True, True, True), dtype, team_tol(dtype))


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", [(True, False, False), (False, True, True), (False, True, False), (True, True, False)])
def test_backward_teams_output_masks_cuda(ops, mask, dtype):
    # The team kernels compute only what the mask asks for (without dx its programs exchange
    # nothing; bf16 with dx: the lag kernel, without: the team kernel).
    rows, cols = 70, 12000
    x, _, w, b = make((rows, cols), (cols, ), dtype, "cuda")
    dy = random_tensor((rows, cols), dtype, "cuda")
    for _ in team_forms(rows, cols, dtype, want_dx=mask[0]):
        got, want = backward_against_double(ops, x, dy, w, b, mask)
        assert_gradients(got, want, mask, dtype, team_tol(dtype))


def test_stats_and_backward_op(device, ops):
    x, _, w, b = make((5, 7, 12), (12, ), torch.float64, device)
    out, mean, rstd = ops.layer_norm_forward(x, [12], w, b, 1e-5)
    ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x, [12], w, b, 1e-5)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(mean, ref_mean.reshape(5, 7))
    torch.testing.assert_close(rstd, ref_rstd.reshape(5, 7), rtol=1e-7, atol=0)
    g = torch.randn_like(x)
    dx, dw, db = ops.layer_norm_backward(g, x, [12], mean, rstd, w, b, [True, False, True])
    assert dw is None
    rdx, _, rdb = torch.ops.aten.native_layer_norm_backward(g, x, [12], ref_mean, ref_rstd, w, b, [True, True, True])
    torch.testing.assert_close(dx, rdx, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(db, rdb)


def test_layer_norm_forward_is_differentiable(device, ops):
    # layer_norm_forward records a graph through its outputs, as aten's native_layer_norm does
    # (mean and rstd too: test_higher_order checks their gradients). (Without its Autograd kernel,
    # autograd's fallback warned and left the inputs without gradients.)
    import warnings
    x, _, w, b = make((5, 3, 8), (3, 8), torch.float64, device)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # autograd's "silently incorrect" warning fails the test
        out, mean, rstd = ops.layer_norm_forward(leaves[0], [3, 8], leaves[1], leaves[2], 1e-5)
        assert out.requires_grad and mean.requires_grad and rstd.requires_grad
        g = random_tensor(out.shape, out.dtype, device)
        got = torch.autograd.grad(out, leaves, g)
    ref = [t.clone().requires_grad_() for t in (x, w, b)]
    want = torch.autograd.grad(F.layer_norm(ref[0], (3, 8), ref[1], ref[2], 1e-5), ref, g)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e)
    leaf = x.clone().requires_grad_()
    out, _, _ = ops.layer_norm_forward(leaf, [3, 8])
    out.sum().backward()
    torch.testing.assert_close(leaf.grad, torch.autograd.grad(F.layer_norm(ref[0], (3, 8)).sum(), ref[0])[0])
    torch.autograd.gradcheck(lambda a, c: ops.layer_norm_forward(a, [8], c, None, 1e-5)[0],
                             (x[0].clone().requires_grad_(), w[0].clone().requires_grad_()))


def test_empty(device, ops):
    x, _, w, b = make((0, 8), (8, ), torch.float32, device)
    assert ops.layer_norm(x, [8], w, b).shape == (0, 8)
    out, mean, rstd = ops.layer_norm_forward(x, [8], w, b)
    dx, dw, db = ops.layer_norm_backward(out, x, [8], mean, rstd, w, b, [True, True, True])
    assert dx.shape == (0, 8)
    torch.testing.assert_close(dw, torch.zeros_like(w))
    torch.testing.assert_close(db, torch.zeros_like(b))


def test_errors(device, ops):
    x, _, w, b = make((4, 6), (6, ), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"normalized_shape \[5\] does not match the trailing dims of input of shape \[4, 6\]"):
        ops.layer_norm(x, [5], None, None)
    with pytest.raises(RuntimeError, match=r"tjit::layer_norm: weight has shape \[3\] but normalized_shape is \[6\]"):
        ops.layer_norm(x, [6], w[:3], None)
    with pytest.raises(RuntimeError, match=r"tjit::layer_norm: bias has dtype Double but input has dtype Float"):
        ops.layer_norm(x, [6], w, b.double())
    with pytest.raises(RuntimeError, match=r"normalized_shape \[3, 4, 6\] has 3 dims but input has only 2"):
        ops.layer_norm(x, [3, 4, 6])
    with pytest.raises(RuntimeError, match=r"tjit::layer_norm: argument 'input' has dtype Int"):
        ops.layer_norm(x.int(), [6])


def test_meta(ops):
    x = torch.empty(4, 5, 6, device="meta")
    w = torch.empty(5, 6, device="meta")
    out, mean, rstd = ops.layer_norm_forward(x, [5, 6], w, None)
    assert out.shape == (4, 5, 6) and mean.shape == (4, ) and rstd.dtype == torch.float32
    real = ops.layer_norm(torch.randn(4, 5, 6), [5, 6], torch.randn(5, 6), None)
    assert ops.layer_norm(x, [5, 6], w, None).stride() == real.stride()


def test_gradcheck(device, ops):
    x, _, w, b = make((3, 5), (5, ), torch.float64, device)
    torch.autograd.gradcheck(lambda *t: ops.layer_norm(t[0], [5], t[1], t[2]),
                             (x.requires_grad_(), w.requires_grad_(), b.requires_grad_()))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck(device, requires_grad):
    x, _, w, b = make((4, 8), (8, ), torch.float32, device)
    args = (x.requires_grad_(requires_grad), [8], w.requires_grad_(requires_grad), b)
    torch.library.opcheck(torch.ops.tjit.layer_norm.default, args)
    # With inputs that require grad too. (opcheck alone passes without an Autograd kernel: autograd's
    # fallback gives the outputs a grad_fn; test_layer_norm_forward_is_differentiable catches that.)
    torch.library.opcheck(torch.ops.tjit.layer_norm_forward.default, args)


def assert_close_fp64(got, want, what):
    # Far tighter than TOL: float64 kernels agree with aten to ~1e-13 here, while eps rounded to
    # float32 (1e-5 -> 1e-5 * (1 - 2.5e-8)) moves rstd, and everything after it, by ~1e-8.
    # atol is relative to the largest value, at least 1: aten's gradients for rows of one
    # element (exactly 0) carry ~1e-14 of rounding.
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12 * max(1.0, want.abs().max().item()),
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("eps", [1e-5, 1e-3, 0.1])  # none exactly representable in float32
@pytest.mark.parametrize("shape", [(5, 1), (7, 33), (3, 16385)])  # N=1: var 0; single pass; looped
def test_float64_eps_is_not_rounded(device, ops, eps, shape):
    """float64 layer_norm uses eps in float64, as aten does: rows whose variance is comparable to
    eps (std = sqrt(eps) / 2), forward, statistics and gradients against aten in float64."""
    n = shape[-1]
    x = random_tensor(shape, torch.float64, device) * (eps**0.5 / 2) + 1
    w = random_tensor((n, ), torch.float64, device)
    b = random_tensor((n, ), torch.float64, device)

    out, mean, rstd = ops.layer_norm_forward(x, [n], w, b, eps)
    ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, eps)
    assert_close_fp64(rstd, ref_rstd.reshape(rstd.shape), "rstd")
    assert_close_fp64(mean, ref_mean.reshape(mean.shape), "mean")
    assert_close_fp64(out, ref_out, "layer_norm_forward output")

    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    got = ops.layer_norm(leaves[0], [n], leaves[1], leaves[2], eps)
    assert_close_fp64(got.detach(), ref_out, "layer_norm output")
    ref_leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    ref = F.layer_norm(ref_leaves[0], (n, ), ref_leaves[1], ref_leaves[2], eps)
    g = random_tensor(shape, torch.float64, device)
    for name, a, e in zip(("input", "weight", "bias"), torch.autograd.grad(got, leaves, g),
                          torch.autograd.grad(ref, ref_leaves, g)):
        assert_close_fp64(a, e, f"gradient of {name}")


@requires_cuda
def test_long_rows_autotuned_cuda(ops):
    # Past 32768 columns, CUDA rows of fp32/fp16/bf16 go to layer_norm_fwd_long_kernel, which tunes
    # between looped and split configs at the first call of each row length: every config must
    # give the same answer, so several lengths, dtypes, strides and the chunk limit are checked
    # (4096 * 128 columns: the last tuned length; one more: the hand-written looped plan).
    # (24577 and 16385 columns: the single pass just below, 32768 columns wide.)
    shapes = [((300, 40000), torch.float32), ((5, 24577), torch.float16), ((5, 36865), torch.float16),
              ((7, 70001), torch.bfloat16),
              ((2, 4096 * 128), torch.float32), ((1, 4096 * 128 + 1), torch.float32), ((3, 16385), torch.bfloat16)]
    for (rows, cols), dtype in shapes:
        for affine in [(True, True), (False, False), (True, False)]:
            x, normalized, w, b = make((rows, cols), (cols, ), dtype, "cuda", affine)
            check_forward(ops, x, normalized, w, b)
        # mean and rstd as aten has them (layer_norm_forward stores them; inference does not)
        x, normalized, w, b = make((rows, cols), (cols, ), dtype, "cuda")
        out, mean, rstd = ops.layer_norm_forward(x, [cols], w, b, 1e-5)
        ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x.float(), [cols], w.float(), b.float(), 1e-5)
        torch.testing.assert_close(out, ref_out.to(dtype), **TOL[dtype])
        torch.testing.assert_close(mean, ref_mean.reshape(rows), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rstd, ref_rstd.reshape(rows), rtol=1e-4, atol=1e-6)
    wide = random_tensor((6, 2 * 40000), torch.float32, "cuda")
    check_forward(ops, wide[:, :40000], (40000, ), None, None)  # rows with a row stride
    check_backward(ops, *make((9, 50000), (50000, ), torch.float32, "cuda"))


@requires_cuda
def test_long_rows_in_a_cuda_graph(ops):
    # A row length never tuned cannot be timed inside a capture: the capture records the
    # hand-written looped plan (and is correct). Once tuned, the capture records the tuned kernel.
    # The looped kernel's binary is loaded first (a row past the tuned range with the same
    # specialisation), so nothing compiles during the capture.
    ops.layer_norm(*make((64, 4096 * 128 + 1), (4096 * 128 + 1, ), torch.bfloat16, "cuda"), 1e-5)
    for cols, tuned_first in ((45001, False), (45000, True)):
        x, normalized, w, b = make((64, cols), (cols, ), torch.bfloat16, "cuda")
        static_in = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        if tuned_first:
            with torch.cuda.stream(side):
                ops.layer_norm(static_in, normalized, w, b, 1e-5)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = ops.layer_norm(static_in, normalized, w, b, 1e-5)
        new = random_tensor(x.shape, x.dtype, "cuda")
        static_in.copy_(new)
        static_out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, F.layer_norm(new, normalized, w, b, 1e-5), **TOL[x.dtype])
