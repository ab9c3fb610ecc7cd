"""The kernels whose programs share a row (softmax.py's split kernels and autotuned long-row
forward, layer_norm's long-row forward and team backwards, rms_norm's team backward) under Triton's
interpreter, on CPU.

The operators launch them only on CUDA: their programs wait for each other, and the interpreter
runs programs one at a time. With ONE program a row (or a team) nothing waits for a later
program, and the rest of the logic runs as on a GPU: the ticket (layer_norm), each chunk's
statistics packed into one 64-bit word and read back (a statistic of exactly +0.0 must still count
as written), the merge, and for softmax the cut of rows that start off a 16-byte boundary into a
head, whole vectors and a tail (ALIGN). The softmax kernels also run rows of several chunks here:
a program that waits too long reads the missing chunks itself, which the interpreter's order (a
row's later programs not started) always calls for; likewise layer_norm's long-row forward and its
team backwards (teams of 2, 3 and 5 programs, STAGES = 1); rms_norm's teams of 3 give up (no
help path) and its rescue kernel does their rows. The GPU runs the multi-program cases at speed
(operators/test_softmax.py, operators/test_layer_norm.py, operators/test_rms_norm.py: *_cuda).

Run in a subprocess, since the interpreter must be chosen before triton is imported:
    TRITON_INTERPRET=1 python3 tests/python/test_row_sharing_interpreter.py
prints one JSON line of {case: max relative error}."""

import itertools
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))


def _jit(kernel):
    """The @triton.jit function under an @triton.autotune, to launch with a config of our own."""
    import triton
    while isinstance(kernel, triton.runtime.autotuner.Autotuner):
        kernel = kernel.fn
    return kernel


def _error(got, want):
    got, want = got.double(), want.double()
    assert not got.isnan().any(), "an output the kernel left unwritten (NaN poison)"
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def _softmax_cases(torch, triton, sm, alignment):
    errors = {}
    long_kernel = _jit(sm.softmax_fwd_long_kernel)
    # (dtype, columns, extra columns of the storage row: a row stride other than N)
    for dtype, n, extra in [(torch.float32, 1001, 0), (torch.float32, 1001, 4), (torch.bfloat16, 999, 8),
                            (torch.float32, 1000, 0), (torch.bfloat16, 3001, 1), (torch.float16, 7, 0)]:
        rows = 6
        x = (torch.randn(rows, n + extra, dtype=dtype) * 3)[:, :n]
        x[1, n // 3] = float("-inf")
        x[2] = -x[2].abs()
        x[2, n // 2] = 0.0  # the row's max is exactly +0.0
        ref = torch.softmax(x.double(), -1)
        block = triton.next_power_of_2(n)
        for name in ("split", "long"):
            y = torch.full((rows, n), float("nan"), dtype=dtype)
            align = alignment(n, x, y)
            sync = torch.zeros(2 + rows, dtype=torch.int64)
            if name == "split":
                sm.softmax_fwd_split_kernel[(rows, )](y, x, sync, rows, n, 1, x.stride(0), y.stride(0), block, 1,
                                                      align, False)
            elif n <= 4096:  # the long kernel's split configs with one 4096-column chunk a row
                long_kernel[(rows, )](y, x, sync, rows, n, x.stride(0), y.stride(0), 1, align, False, 4096, True)
            else:
                continue
            errors[f"softmax fwd {name} {dtype} {rows}x{n} stride {x.stride(0)} ALIGN {align}"] = _error(y, ref)
        # backward: grad_output a view with another row stride; a row of zero grad_output (dot +0.0)
        g = torch.randn(rows, n + 2 * extra, dtype=dtype)[:, :n]
        g[3] = 0.0
        out = ref.to(dtype)
        want = out.double() * (g.double() - (g.double() * out.double()).sum(-1, keepdim=True))
        for reread in (False, True):  # the chunk held across the wait, or read again after it
            grad_in = torch.full((rows, n), float("nan"), dtype=dtype)
            align = alignment(n, grad_in, g, out)
            sm.softmax_bwd_split_kernel[(rows, )](grad_in, g, out, torch.zeros(2 + rows, dtype=torch.int64), rows, n,
                                                  1, grad_in.stride(0), g.stride(0), out.stride(0), block, 1, align,
                                                  False, reread)
            errors[f"softmax bwd split {dtype} {rows}x{n} ALIGN {align} REREAD {reread}"] = _error(grad_in, want)
    return errors


def _softmax_helped_cases(torch, triton, sm, alignment):
    # Rows of several chunks: the interpreter runs a row's programs one after another, so the
    # first waits HELP_AFTER polls for chunks whose programs have not run, then reads them itself
    # (softmax.py's help path); the later ones find every word published. An odd row length cut
    # into head, vectors and tail (ALIGN 8), and 4-byte rows (ALIGN 4).
    errors = {}
    long_kernel = _jit(sm.softmax_fwd_long_kernel)
    for dtype, n in [(torch.bfloat16, 9001), (torch.float32, 10000)]:
        rows, block = 2, 4096
        chunks = triton.cdiv(n, block)
        x = torch.randn(rows, n, dtype=dtype) * 3
        x[1, :block] = float("-inf")  # a chunk of only -inf (its max shifts by 0)
        ref = torch.softmax(x.double(), -1)
        for name in ("split", "long"):
            y = torch.full((rows, n), float("nan"), dtype=dtype)
            align = alignment(n, x, y)
            sync = torch.zeros(2 + rows * chunks, dtype=torch.int64)
            if name == "split":
                sm.softmax_fwd_split_kernel[(rows * chunks, )](y, x, sync, rows, n, chunks, n, n, block,
                                                               triton.next_power_of_2(chunks), align, False)
            else:
                long_kernel[(rows * chunks, )](y, x, sync, rows, n, n, n, triton.next_power_of_2(chunks), align, False,
                                               block, True)
            errors[f"softmax fwd {name} helped {dtype} {rows}x{n} ALIGN {align}"] = _error(y, ref)
        g = torch.randn(rows, n, dtype=dtype)
        out = ref.to(dtype)
        want = out.double() * (g.double() - (g.double() * out.double()).sum(-1, keepdim=True))
        for reread in (False, True):
            grad_in = torch.full((rows, n), float("nan"), dtype=dtype)
            align = alignment(n, grad_in, g, out)
            sm.softmax_bwd_split_kernel[(rows * chunks, )](grad_in, g, out, torch.zeros(2 + rows * chunks,
                                                                                         dtype=torch.int64),
                                                           rows, n, chunks, n, n, n, block,
                                                           triton.next_power_of_2(chunks), align, False, reread)
            errors[f"softmax bwd split helped {dtype} {rows}x{n} ALIGN {align} REREAD {reread}"] = _error(grad_in,
                                                                                                        want)
    return errors


def _layer_norm_cases(torch, ln):
    errors = {}
    long_kernel = _jit(ln.layer_norm_fwd_long_kernel)
    for dtype, n in [(torch.float32, 3000), (torch.bfloat16, 4096), (torch.float32, 17)]:
        rows, eps = 9, 1e-5
        x = torch.randn(rows, n, dtype=dtype) + 0.5
        x[4] = 0.0  # a row whose chunk mean is exactly +0.0
        w = torch.randn(n, dtype=dtype)
        b = torch.randn(n, dtype=dtype)
        ref, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x.double(), [n], w.double(), b.double(), eps)
        y = torch.full((rows, n), float("nan"), dtype=dtype)
        mean = torch.full((rows, ), float("nan"))
        rstd = torch.full((rows, ), float("nan"))
        long_kernel[(rows, )](y, x, w, b, mean, rstd, torch.zeros(2 + rows, dtype=torch.int64), rows, n, n, n, eps,
                              True, True, False, 4096, True)
        errors[f"layer_norm fwd long {dtype} {rows}x{n}"] = max(_error(y, ref), _error(mean, ref_mean.flatten()))
        rel = (rstd.double() - ref_rstd.flatten()).abs() / ref_rstd.flatten()
        errors[f"layer_norm fwd long rstd {dtype} {rows}x{n}"] = rel.max().item()
        if n == 3000:
            # rows of 3 chunks of 1024 (the last ragged): every row's first program is helped
            rows2, n2 = 2, 2 * 1024 + 1000
            x2 = torch.randn(rows2, n2, dtype=dtype) + 0.5
            w2 = torch.randn(n2, dtype=dtype)
            b2 = torch.randn(n2, dtype=dtype)
            ref2, ref_mean2, _ = torch.ops.aten.native_layer_norm(x2.double(), [n2], w2.double(), b2.double(), eps)
            y2 = torch.full((rows2, n2), float("nan"), dtype=dtype)
            mean2 = torch.full((rows2, ), float("nan"))
            long_kernel[(rows2 * 3, )](y2, x2, w2, b2, mean2, None, torch.zeros(2 + rows2 * 3, dtype=torch.int64), rows2,
                                       n2, n2, n2, eps, True, True, False, 1024, True)
            errors[f"layer_norm fwd long helped {dtype} {rows2}x{n2}"] = max(_error(y2, ref2),
                                                                             _error(mean2, ref_mean2.flatten()))
        # team backward: teams of one program (S = 1), 4 rows a team; dy zero on one row (sums +0.0)
        dy = torch.randn(rows, n, dtype=dtype)
        dy[2] = 0.0
        mean32 = ref_mean.flatten().float()
        rstd32 = ref_rstd.flatten().float()
        per_team = 4
        teams = -(-rows // per_team)
        dx = torch.full((rows, n), float("nan"), dtype=dtype)
        dw_part = torch.full((teams, n), float("nan"))
        db_part = torch.full((teams, n), float("nan"))
        ln.layer_norm_bwd_team_kernel[(teams, )](dx, dw_part, db_part, dy, x, w, mean32, rstd32,
                                                 torch.zeros(2 + rows, dtype=torch.int64), rows, n, 1, per_team, n, n,
                                                 n, True, True, True, True, 4096, 1, 1, False)
        want = torch.ops.aten.native_layer_norm_backward(dy.double(), x.double(), [n], ref_mean, ref_rstd, w.double(),
                                                         b.double(), [True, True, True])
        errors[f"layer_norm bwd team dx {dtype} {rows}x{n}"] = _error(dx, want[0])
        errors[f"layer_norm bwd team dw {dtype} {rows}x{n}"] = _error(dw_part.sum(0), want[1])
        errors[f"layer_norm bwd team db {dtype} {rows}x{n}"] = _error(db_part.sum(0), want[2])
        # the lag team backward (dx one row after the row's sums), teams of one program likewise: with
        # the weight and every sum, and without the weight or dw
        dx = torch.full((rows, n), float("nan"), dtype=dtype)
        dw_part = torch.full((teams, n), float("nan"))
        db_part = torch.full((teams, n), float("nan"))
        sync = torch.zeros(2 + rows + teams, dtype=torch.int64)
        ln.norm_bwd_team_lag_kernel[(teams, )](dx, dw_part, db_part, dy, x, w, mean32, rstd32, None, sync, rows, n, 1,
                                               per_team, n, n, n, 0, True, True, True, 4096, 1, 1, False)
        dw, db = _lag_finalize(torch, ln, dx, dw_part, db_part, dy, x, w, mean32, rstd32, sync, 1, per_team)
        errors[f"layer_norm bwd team lag dx {dtype} {rows}x{n}"] = _error(dx, want[0])
        errors[f"layer_norm bwd team lag dw {dtype} {rows}x{n}"] = _error(dw, want[1])
        errors[f"layer_norm bwd team lag db {dtype} {rows}x{n}"] = _error(db, want[2])
        # a team of one program always runs: its mode word says so
        errors[f"layer_norm bwd team lag ran {dtype} {rows}x{n}"] = float(not bool((sync[2 + rows:] == 1).all()))
        dx = torch.full((rows, n), float("nan"), dtype=dtype)
        db_part = torch.full((teams, n), float("nan"))
        sync = torch.zeros(2 + rows + teams, dtype=torch.int64)
        ln.norm_bwd_team_lag_kernel[(teams, )](dx, None, db_part, dy, x, None, mean32, rstd32, None, sync, rows, n, 1,
                                               per_team, n, n, n, 0, False, False, True, 4096, 1, 1, False)
        _, db = _lag_finalize(torch, ln, dx, None, db_part, dy, x, None, mean32, rstd32, sync, 1, per_team)
        want_dx = torch.ops.aten.native_layer_norm_backward(dy.double(), x.double(), [n], ref_mean, ref_rstd, None,
                                                            None, [True, False, False])[0]
        errors[f"layer_norm bwd team lag no weight dx {dtype} {rows}x{n}"] = _error(dx, want_dx)
        errors[f"layer_norm bwd team lag no weight db {dtype} {rows}x{n}"] = _error(db, dy.double().sum(0))
    return errors


def _lag_finalize(torch, ln, dx, dw_part, db_part, dy, x, w, mean, rstd, sync, chunks, per_team, block_n=64,
                  dw=None, db=None):
    # layer_norm_bwd_team_lag_finalize_kernel after the lag kernel, as the operator launches it:
    # dw/db from the teams' partial rows, and the rows of teams that gave up (dx too). Returns
    # (dw, db) (fp32; poisoned first, None where not computed), or writes into the given ones.
    rows, n = dy.shape
    teams = (dw_part if dw_part is not None else db_part).shape[0]
    if dw is None and dw_part is not None:
        dw = torch.full((n, ), float("nan"))
    if db is None and db_part is not None:
        db = torch.full((n, ), float("nan"))
    block_g = 1 << max(0, (teams - 1).bit_length())
    ln.layer_norm_bwd_team_lag_finalize_kernel[(-(-n // block_n), )](
        dw, db, dw_part, db_part, dx, dy, x, w, mean, rstd, sync, rows, n, chunks, per_team, teams, dx.stride(0),
        dy.stride(0), x.stride(0), w is not None, dw is not None, db is not None, block_g, block_n, False)
    return dw, db


def _set_help_after(modules, value):
    """Sets HELP_AFTER in the kernel modules (the value their kernels read when compiled); returns the old one."""
    old = modules[0].HELP_AFTER
    for module in modules:
        module.HELP_AFTER = value
    return old


def _layer_norm_team_cases(torch, ln):
    # Teams of several programs (S = 2, 3, 5 chunks of 64 columns, the last one ragged), three rows a
    # team, both team kernels at STAGES = 1 (the interpreter runs no PTX): a team's programs run one
    # after another here, so the first waits HELP_AFTER polls on every row and then computes the
    # other chunks' sums itself (row_exchange's help path); the later ones find those words (their
    # own compare-and-swap loses) and must still write their dx with them and keep their own dw/db.
    # Without a help path the first program waits forever. x with a row stride, a row of zero dy
    # (sums of +0.0), with and without a weight, fp32 and bf16. The kernels' module waits
    # HELP_AFTER = 2 polls here (each poll is slow under the interpreter; the wait is the same code).
    import triton.language as tl
    modules = [sys.modules[k.fn.__module__] for k in (ln.layer_norm_bwd_team_kernel, ln.norm_bwd_team_lag_kernel)]
    help_after = _set_help_after(modules, tl.constexpr(2))
    try:
        return _layer_norm_team_launches(torch, ln)
    finally:
        _set_help_after(modules, help_after)


def _layer_norm_team_launches(torch, ln):
    errors = {}
    block, rows, per_team = 64, 7, 3
    teams = -(-rows // per_team)
    for chunks in (2, 3, 5):
        n = chunks * block - 17
        for dtype in (torch.float32, torch.bfloat16):
            x = (torch.randn(rows, n + 9, dtype=dtype) + 0.5)[:, 3:n + 3]
            dy = torch.randn(rows, n, dtype=dtype)
            dy[4] = 0.0
            w = torch.randn(n, dtype=dtype)
            _, mean, rstd = torch.ops.aten.native_layer_norm(x.double(), [n], None, None, 1e-5)
            for weight in (w, None):
                want = torch.ops.aten.native_layer_norm_backward(dy.double(), x.double(), [n], mean, rstd,
                                                                 None if weight is None else weight.double(), None,
                                                                 [True, False, False])
                for name, kernel in (("team", ln.layer_norm_bwd_team_kernel),
                                     ("team lag", ln.norm_bwd_team_lag_kernel)):
                    dx = torch.full((rows, n), float("nan"), dtype=dtype)
                    dw_part = torch.full((teams, n), float("nan"))
                    db_part = torch.full((teams, n), float("nan"))
                    sync = torch.zeros(2 + rows * chunks + teams, dtype=torch.int64)
                    mean32, rstd32 = mean.flatten().float(), rstd.flatten().float()
                    common = (dx, dw_part, db_part, dy, x, weight, mean32, rstd32, sync, rows, n, chunks, per_team, n,
                              n, x.stride(0), weight is not None)
                    if name == "team":
                        kernel[(teams * chunks, )](*common, True, True, True, block, 8, 1, False)
                        dw, db = dw_part.sum(0), db_part.sum(0)
                        case = f"layer_norm bwd team helped S={chunks} {dtype} {rows}x{n} weight {weight is not None}"
                    else:
                        # Its teams give up here (their programs run one after another) and the
                        # finalize does their rows.
                        # the family's kernel: no ds, its stride 0
                        kernel[(teams * chunks, )](*common[:8], None, *common[8:16], 0, *common[16:], True, True, block,
                                                   8, 1, False)
                        gave_up = bool((sync[2 + rows * chunks:] == 2).all()) and bool((sync[2:2 + rows * chunks] == 0).all())
                        dw, db = _lag_finalize(torch, ln, dx, dw_part, db_part, dy, x, weight, mean32, rstd32, sync,
                                               chunks, per_team)
                        case = f"layer_norm bwd team lag gave up S={chunks} {dtype} {rows}x{n} weight {weight is not None}"
                        errors[f"{case} gave up whole"] = float(not gave_up)
                    errors[f"{case} dx"] = _error(dx, want[0])
                    errors[f"{case} dw"] = _error(dw, dy.double().mul((x.double() - mean) * rstd).sum(0))
                    errors[f"{case} db"] = _error(db, dy.double().sum(0))
    return errors


GUARD = 256  # elements of poison either side of each buffer in the guarded cases


def _guarded(torch, shape, dtype, fill, poison):
    """A contiguous tensor of `shape` filled with `fill`, inside storage with GUARD elements of
    `poison` either side: (the tensor, the whole storage). A read past the tensor gets the poison
    (NaN for data, so it shows in the results); a write past it changes the guards."""
    count = 1
    for size in shape:
        count *= size
    whole = torch.full((GUARD + count + GUARD, ), poison, dtype=dtype)
    inner = whole[GUARD:GUARD + count].view(shape)
    if isinstance(fill, torch.Tensor):
        inner.copy_(fill)
    else:
        inner.fill_(fill)
    return inner, whole


def _guards_intact(torch, whole, poison):
    guards = torch.cat([whole[:GUARD], whole[-GUARD:]])
    if isinstance(poison, float) and poison != poison:
        return bool(guards.isnan().all())
    return bool((guards == poison).all())


def _layer_norm_lag_plan_cases(torch, ln):
    # The lag team backward and its finalize in the structure of the bf16 4096 x 12288 plan (S = 6
    # chunks of 2048, 88 teams of 47 rows, the last of 7) scaled down: S = 6 chunks of 64 columns,
    # N = 6 * 64 (no ragged chunk, like 12288), 23 rows in teams of 4 (the last of 3), and the same
    # with a ragged last chunk and a team of one row at the end. Every buffer inside poisoned
    # guards: inputs NaN past their ends (a read past them spoils a result), outputs and the
    # exchange words checked unchanged past theirs (a write past them). Every team gives up here
    # (HELP_AFTER = 2 polls, as in _layer_norm_team_cases; its programs run one after another), so
    # the finalize does every row.
    import triton.language as tl
    modules = [sys.modules[k.fn.__module__] for k in (ln.layer_norm_bwd_team_kernel, ln.norm_bwd_team_lag_kernel)]
    help_after = _set_help_after(modules, tl.constexpr(2))
    nan = float("nan")
    word_poison = 0x5A5A5A5A5A5A5A5A
    errors = {}
    try:
        block, chunks = 64, 6
        for dtype, n, rows, per_team in [(torch.bfloat16, chunks * block, 23, 4),
                                         (torch.float16, chunks * block - 5, 13, 3)]:
            teams = -(-rows // per_team)
            x, x_whole = _guarded(torch, (rows, n), dtype, torch.randn(rows, n, dtype=dtype) * 2 + 0.5, nan)
            dy, dy_whole = _guarded(torch, (rows, n), dtype, torch.randn(rows, n, dtype=dtype), nan)
            w, w_whole = _guarded(torch, (n, ), dtype, torch.randn(n, dtype=dtype), nan)
            _, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x.double(), [n], None, None, 1e-5)
            mean, mean_whole = _guarded(torch, (rows, ), torch.float32, ref_mean.flatten().float(), nan)
            rstd, rstd_whole = _guarded(torch, (rows, ), torch.float32, ref_rstd.flatten().float(), nan)
            dx, dx_whole = _guarded(torch, (rows, n), dtype, nan, -7.0)
            dw_part, dw_whole = _guarded(torch, (teams, n), torch.float32, nan, -7.0)
            db_part, db_whole = _guarded(torch, (teams, n), torch.float32, nan, -7.0)
            dw, dw_out_whole = _guarded(torch, (n, ), dtype, nan, -7.0)
            db, db_out_whole = _guarded(torch, (n, ), dtype, nan, -7.0)
            # the operator's workspace: 2 + rows * S words, then a mode word per team
            sync, sync_whole = _guarded(torch, (2 + rows * chunks + teams, ), torch.int64, 0, word_poison)
            ln.norm_bwd_team_lag_kernel[(teams * chunks, )](dx, dw_part, db_part, dy, x, w, mean, rstd, None, sync, rows,
                                                            n, chunks, per_team, n, n, n, 0, True, True, True, block,
                                                            8, 1, False)
            case = f"layer_norm bwd team lag plan-shaped S={chunks} {dtype} {rows}x{n} teams of {per_team}"
            assert int(sync[0]) == teams * chunks, f"{case}: {int(sync[0])} tickets handed out"
            assert bool((sync[2 + rows * chunks:] == 2).all()), f"{case}: a team did not give up whole"
            assert bool((sync[2:2 + rows * chunks] == 0).all()), f"{case}: a team that gave up published a word"
            _lag_finalize(torch, ln, dx, dw_part, db_part, dy, x, w, mean, rstd, sync, chunks, per_team, dw=dw, db=db)
            for name, whole, poison in [("dx", dx_whole, -7.0), ("dw partials", dw_whole, -7.0),
                                        ("db partials", db_whole, -7.0), ("dw", dw_out_whole, -7.0),
                                        ("db", db_out_whole, -7.0), ("sync", sync_whole, word_poison)]:
                assert _guards_intact(torch, whole, poison), f"{case}: a write past {name}"
            for name, whole in [("x", x_whole), ("dy", dy_whole), ("w", w_whole), ("mean", mean_whole),
                                ("rstd", rstd_whole)]:
                assert _guards_intact(torch, whole, nan), f"{case}: a write past {name}"
            want = torch.ops.aten.native_layer_norm_backward(dy.double(), x.double(), [n], ref_mean, ref_rstd,
                                                             w.double(), None, [True, False, False])[0]
            xhat = (x.double() - ref_mean) * ref_rstd
            errors[f"{case} dx"] = _error(dx, want)
            errors[f"{case} dw"] = _error(dw, (dy.double() * xhat).sum(0))
            errors[f"{case} db"] = _error(db, dy.double().sum(0))
    finally:
        _set_help_after(modules, help_after)
    return errors


def _rms_norm_team_cases(torch, rms, team):
    # rms_norm's team backward in both forms (held; the family's lag kernel, team.norm_bwd_team_lag_kernel,
    # in rms_norm's form) and its rescue kernel, as the operator
    # launches them: teams of one program run (S = 1: the team is whole at its first ticket), teams
    # of 3 give up here (their programs run one after another; team_runs waits HELP_AFTER = 2 polls)
    # and the rescue kernel does their rows. Three rows a team, v with a row stride, with and
    # without weight and ds.
    import triton.language as tl
    modules = [sys.modules[k.fn.__module__] for k in (rms.rms_norm_bwd_team_kernel, team.norm_bwd_team_lag_kernel)]
    help_after = _set_help_after(modules, tl.constexpr(2))
    errors = {}
    try:
        rows, per_team = 7, 3
        teams = -(-rows // per_team)
        n = 300
        for kernel, (block, chunks), dtype in itertools.product(
                (rms.rms_norm_bwd_team_kernel, team.norm_bwd_team_lag_kernel), ((512, 1), (128, 3)),
                (torch.float32, torch.bfloat16)):
            v = (torch.randn(rows, n + 5, dtype=dtype) + 0.5)[:, 2:n + 2]
            dy = torch.randn(rows, n, dtype=dtype)
            rstd = torch.rsqrt(v.float().pow(2).mean(-1) + 1e-6)
            for weight, ds in ((torch.randn(n, dtype=dtype), torch.randn(rows, n, dtype=dtype)), (None, None)):
                vd = v.double().requires_grad_()
                wd = None if weight is None else weight.double().requires_grad_()
                out = torch.nn.functional.rms_norm(vd, [n], wd, 1e-6)
                want = torch.autograd.grad((out * dy.double()).sum(), [t for t in (vd, wd) if t is not None])
                want_dx = want[0] + (0 if ds is None else ds.double())
                dx = torch.full((rows, n), float("nan"), dtype=dtype)
                partial = torch.full((teams, n), float("nan"))
                sync = torch.zeros(2 + rows * chunks + teams, dtype=torch.int64)
                common = (dx, partial, dy, v, weight, rstd, ds, sync, rows, n, chunks, per_team, n, n, v.stride(0),
                          n if ds is not None else 0, weight is not None, weight is not None)
                if kernel is team.norm_bwd_team_lag_kernel:  # no db, no mean (rms_norm's form)
                    kernel[(teams * chunks, )](dx, partial, None, dy, v, weight, None, *common[5:], False, block,
                                               max(chunks, 1), 1, False)
                else:
                    kernel[(teams * chunks, )](*common, block, max(chunks, 1), 1, False)
                mode = "ran" if chunks == 1 else "gave up"
                modes = sync[2 + rows * chunks:].tolist()
                case = f"{kernel.fn.__name__} {mode} S={chunks} {dtype} {rows}x{n} weight {weight is not None}"
                errors[f"{case} modes"] = float(modes != [1 if chunks == 1 else 2] * teams)
                rms.rms_norm_bwd_team_rescue_kernel[(teams, )](*common, 64, False)
                errors[f"{case} dx"] = _error(dx, want_dx)
                if weight is not None:
                    errors[f"{case} dw"] = _error(partial.sum(0), want[1])
    finally:
        _set_help_after(modules, help_after)
    return errors


def main():
    import torch
    import triton
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    # The benchmarks' Python mirror of the operators: the kernel files, loaded under the
    # interpreter, and ALIGN as softmax.cpp's split_alignment picks it.
    from triton_wrappers import (_split_alignment, layer_norm_k, norm_team_k, patch_interpreter_for_numpy, rms_norm_k,
                                 softmax_k)
    patch_interpreter_for_numpy()
    torch.manual_seed(0)
    errors = _softmax_cases(torch, triton, softmax_k, _split_alignment)
    errors.update(_softmax_helped_cases(torch, triton, softmax_k, _split_alignment))
    errors.update(_layer_norm_cases(torch, layer_norm_k))
    errors.update(_layer_norm_team_cases(torch, layer_norm_k))
    errors.update(_layer_norm_lag_plan_cases(torch, layer_norm_k))
    errors.update(_rms_norm_team_cases(torch, rms_norm_k, norm_team_k))
    print(json.dumps(errors))


def test_row_sharing_kernels_under_the_interpreter():
    from conftest import run_script_under_interpreter  # here, not at the top: the script itself needs no tjit

    errors = run_script_under_interpreter(__file__, 600, "a program waited forever: a published word read as not yet written")
    # the last three: lag teams that ran, and gave up whole; rms_norm's teams (held and lag forms)
    # that ran, and gave up
    assert len(errors) == 61 + 72 + 6 + 3 + 12 + 2 * 20, sorted(errors)
    for case, error in errors.items():
        # 2-byte outputs round to 8 (bf16) or 11 (fp16) bits; dw/db sum 9 rows of them
        limit = 2e-2 if ("bfloat16" in case or "float16" in case) else 1e-5
        assert error <= limit, (case, error)


if __name__ == "__main__":
    main()
