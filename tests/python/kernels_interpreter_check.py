#!/usr/bin/env python3
"""Check every tjit Triton kernel (ops/kernels_py/) against torch, without a GPU.

Not a pytest file: run it directly (test_kernels_compile.py runs part 2 in the suite).

    TRITON_INTERPRET=1 python3 tests/python/kernels_interpreter_check.py     # CPU, interpreter
    python3 tests/python/kernels_interpreter_check.py --device cuda          # compiled, on a GPU

Part 1 runs the kernels through benchmarks/triton_wrappers.py under Triton's interpreter (or compiled
with --device cuda) on fresh torch.randn inputs with odd shapes, outputs pre-filled with NaN, every
kernel path (single pass / looped, direct / split reductions, INDEX_64 on and off, strided rows), and
compares with torch computed in float64 from the same inputs. Relative error is max|got - ref| /
max|ref| per output; limits: 1e-5 for fp32, 1e-10 for fp64 (1e-2 for fp16/bf16 on cuda).

Part 2 (a subprocess, interpreter off) compiles every kernel for an sm_90 target with no GPU present
via triton.compile(ASTSource(...)), for fp32/bf16(/fp64) pointers, SINGLE_PASS both ways, INDEX_64
both ways, None pointers and ints specialised to 1 the way the C++ runtime passes them.

Prints one PASS/FAIL line per case and a summary; exits 1 if anything failed.
"""

import argparse
import inspect
import math
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))

_args_parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
_args_parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                          help="cpu: Triton interpreter (default); cuda: compiled kernels on the GPU")
_args_parser.add_argument("--skip-compile", action="store_true", help="skip the sm_90 compile check")
_args_parser.add_argument("--compile-only", action="store_true", help=argparse.SUPPRESS)
ARGS = _args_parser.parse_args()

# The interpreter must be chosen before triton is imported (triton.jit reads it at decoration time).
if ARGS.compile_only or ARGS.device == "cuda":
    os.environ.pop("TRITON_INTERPRET", None)
else:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

RESULTS = {"PASS": 0, "FAIL": 0}


def report(ok, name, detail=""):
    status = "PASS" if ok else "FAIL"
    RESULTS[status] += 1
    print(f"{status} {name}{'  ' + detail if detail else ''}", flush=True)


# ------------------------------------------------------------------------------------- part 1: run

TOL = {torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-10}
ROWS = (1, 7, 33)
COLS = (1, 3, 17, 1000, 4097)


def rel_err(got, ref, floor=0.0):
    """max|got - ref| / max(max|ref|, floor) (absolute when that is 0); inf if got has NaN where ref
    doesn't. `floor` is the output's natural magnitude where the reference can be pure rounding noise
    (layer_norm backward with N=1: xhat is 0 up to rounding)."""
    got = got.detach().to("cpu", torch.float64)
    ref = ref.detach().to("cpu", torch.float64)
    if got.shape != ref.shape:
        return float("inf")
    if (torch.isnan(got) & ~torch.isnan(ref)).any():
        return float("inf")
    if got.numel() == 0:
        return 0.0
    scale = max(ref.abs().max().item(), floor)
    return (got - ref).abs().max().item() / (scale if scale > 0 else 1.0)


def check(name, pairs, tol):
    """pairs: list of (label, got, ref[, floor]). One PASS/FAIL line for the case."""
    worst, worst_label = 0.0, ""
    try:
        for label, got, ref, *floor in pairs:
            err = rel_err(got, ref, *floor)
            if not err <= worst:
                worst, worst_label = err, label
        ok = worst <= tol
        detail = f"err={worst:.2e}" + (f" ({worst_label})" if worst_label and not ok else "") + f" tol={tol:.0e}"
    except Exception as exc:  # report and carry on with the other cases
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    report(ok, name, detail)


def run_case(name, fn, tol):
    try:
        pairs = fn()
    except Exception as exc:
        report(False, name, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return
    check(name, pairs, tol)


def small_block(n):
    """A BLOCK_N well below next_pow2(n), so the looped path runs several (partly masked) chunks."""
    return max(1, triton.next_power_of_2(n) // 4)


def sum_cases(W, dt, dev, m, n, tag):
    # Scale floors: a sum of k randn values has magnitude ~sqrt(k); a small |sum| from cancellation
    # should not turn ordinary rounding into a large relative error.
    tol = TOL[dt]
    x = torch.randn(m, n, dtype=dt, device=dev)
    x64 = x.double()
    ref_rows = x64.sum(-1)
    f_rows, f_cols, f_all = math.sqrt(n), math.sqrt(m), math.sqrt(m * n)
    default_blocked = n < 512
    run_case(f"sum_rows(default:{'blocked' if default_blocked else 'rows'}) {tag}",
             lambda: [("out", W.sum_dim_last(x), ref_rows, f_rows)], tol)
    # The other last-dim kernel, small blocks so it loops, INDEX_64 on.
    run_case(f"sum_rows({'rows' if default_blocked else 'blocked'},looped,i64) {tag}",
             lambda: [("out", W.sum_dim_last(x, block_n=small_block(n), index_64=True, blocked=not default_blocked),
                       ref_rows, f_rows)], tol)
    bn = small_block(n)
    run_case(f"sum_partial+sum_rows(chunk={2 * bn}) {tag}",
             lambda: [("out", W.sum_rows_two_stage(x, chunk=2 * bn, block_n=bn, index_64=(n % 2 == 1)), ref_rows,
                       f_rows)],
             tol)
    run_case(f"sum_partial_strided+sum_rows(block={bn}) {tag}",
             lambda: [("out", W.sum_rows_two_stage(x, block_n=bn, index_64=(n % 2 == 0), strided=True), ref_rows,
                       f_rows)],
             tol)
    run_case(f"sum_all(two-stage) {tag}", lambda: [("out", W.sum_all(x, chunk=64, block_n=16), x64.sum(), f_all)], tol)
    run_case(f"sum_all(two-stage,strided) {tag}",
             lambda: [("out", W.sum_all(x, block_n=16, strided=True), x64.sum(), f_all)], tol)
    run_case(f"sum_mid(dim0) {tag}", lambda: [("out", W.sum_dim(x, 0, splits=1), x64.sum(0), f_cols)], tol)
    run_case(f"sum_mid_split+sum_mid(dim0,i64) {tag}",
             lambda: [("out", W.sum_dim(x, 0, splits=3, block_r=2, block_k=small_block(n), index_64=True),
                       x64.sum(0), f_cols)], tol)


def softmax_cases(W, dt, dev, m, n, tag, x=None):
    tol = TOL[dt]
    if x is None:
        x = torch.randn(m, n, dtype=dt, device=dev)
    x64 = x.double()
    ref = torch.softmax(x64, -1)
    run_case(f"softmax_fwd(default) {tag}", lambda: [("out", W.softmax(x), ref)], tol)
    run_case(f"softmax_fwd(looped,i64) {tag}",
             lambda: [("out", W.softmax(x, block_n=small_block(n), single_pass=False, index_64=True), ref)], tol)
    out = torch.softmax(x, -1)  # the forward result at the tested dtype
    go = torch.randn(x.shape, dtype=dt, device=dev)
    ref_bwd = torch.ops.aten._softmax_backward_data(go.double(), out.double(), -1, torch.float64)
    run_case(f"softmax_bwd(default) {tag}", lambda: [("grad_in", W.softmax_backward(go, out), ref_bwd)], tol)
    run_case(f"softmax_bwd(looped,i64) {tag}",
             lambda: [("grad_in", W.softmax_backward(go, out, block_n=small_block(n), single_pass=False,
                                                     index_64=True), ref_bwd)], tol)


def layer_norm_cases(W, dt, dev, m, n, tag, x=None, eps=1e-5, tol=None):
    tol = tol or TOL[dt]
    if x is None:
        x = torch.randn(m, n, dtype=dt, device=dev)
    w = torch.randn(n, dtype=dt, device=dev)
    b = torch.randn(n, dtype=dt, device=dev)
    x64, w64, b64 = x.double(), w.double(), b.double()
    loop = dict(block_n=small_block(n), single_pass=False, index_64=True)

    for wb in ("wb", "w", "none"):
        wt = w if wb in ("wb", "w") else None
        bs = b if wb == "wb" else None
        ref = torch.ops.aten.native_layer_norm(x64, [n], None if wt is None else w64, None if bs is None else b64, eps)
        # Persistent: 3 programs walk the rows; the head block half the row (a power of two), the
        # rest in the tail block.
        head = max(1, triton.next_power_of_2(n) // 2)
        persistent = dict(persistent=(head, triton.next_power_of_2(max(1, n - head)), 3), index_64=True)
        for mode, kw in (("default", {}), ("looped,i64", loop), ("persistent,i64", persistent)):
            if wb == "w" and mode == "default":
                continue  # weight-only needs one path, not two

            def fwd(wt=wt, bs=bs, kw=kw, ref=ref):
                y, mean, rstd = W.layer_norm(x, wt, bs, eps, **kw)
                return [("y", y, ref[0]), ("mean", mean, ref[1]), ("rstd", rstd, ref[2])]

            run_case(f"layer_norm_fwd({wb},{mode}) {tag}", fwd, tol)

    # Backward, fed aten's forward statistics at the tested dtype.
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, eps)
    _, mean64, rstd64 = torch.ops.aten.native_layer_norm(x64, [n], w64, b64, eps)
    dy = torch.randn(x.shape, dtype=dt, device=dev)
    ref = torch.ops.aten.native_layer_norm_backward(dy.double(), x64, [n], mean64, rstd64, w64, b64,
                                                    [True, True, True])
    variants = (
        ("default", dict()),
        ("dx looped,i64; dwdb direct,BLOCK_M=4", dict(loop, groups=1, block_m=4, block_n_dwdb=small_block(n))),
        ("dwdb partial G=3,BLOCK_M=2", dict(groups=3, block_m=2, block_n_dwdb=small_block(n))),
        ("dwdb partial G=3,i64", dict(groups=3, block_m=2, index_64=True)),
    )
    for mode, kw in variants:

        def bwd(kw=kw):
            dx, dw, db = W.layer_norm_backward(dy, x, w, mean, rstd, **kw)
            return [("dx", dx, ref[0], 1.0), ("dw", dw, ref[1], 1.0), ("db", db, ref[2], 1.0)]

        run_case(f"layer_norm_bwd({mode}) {tag}", bwd, tol)

    # aten sizes db from the bias argument, so pass one; weight stays None.
    ref_nw = torch.ops.aten.native_layer_norm_backward(dy.double(), x64, [n], mean64, rstd64, None, b64,
                                                       [True, False, True])
    for mode, kw in (("default", {}), ("looped,partial G=2", dict(loop, groups=2, block_m=2))):

        def bwd_nw(kw=kw):
            dx, dw, db = W.layer_norm_backward(dy, x, None, mean, rstd, **kw)
            assert dw is None
            return [("dx", dx, ref_nw[0], 1.0), ("db", db, ref_nw[2], 1.0)]

        run_case(f"layer_norm_bwd(no weight,{mode}) {tag}", bwd_nw, tol)


def run_all(device):
    import triton_wrappers as W

    W.FILL_OUTPUTS_WITH_NAN = True
    torch.manual_seed(20261122)
    dev = torch.device(device)
    dtypes = [torch.float32, torch.float64]
    if device == "cuda":
        dtypes = [torch.float16, torch.bfloat16] + dtypes

    for dt in dtypes:
        dname = str(dt).replace("torch.", "")
        for m in ROWS:
            for n in COLS:
                tag = f"{dname} [{m}x{n}]"
                sum_cases(W, dt, dev, m, n, tag)
                softmax_cases(W, dt, dev, m, n, tag)
                layer_norm_cases(W, dt, dev, m, n, tag)

        # Rows with their own stride (a column slice of a wider tensor): kernels get stride != N.
        for n in (17, 1000):
            base = torch.randn(7, n + 5, dtype=dt, device=dev)
            xs = base[:, 3:3 + n]
            tag = f"{dname} [7x{n}] row stride {xs.stride(0)}"
            run_case(f"sum_rows(strided) {tag}",
                     lambda: [("out", W.sum_dim_last(xs), xs.double().sum(-1), math.sqrt(n))], TOL[dt])
            run_case(f"sum_rows(strided,blocked) {tag}",
                     lambda: [("out", W.sum_dim_last(xs, blocked=True), xs.double().sum(-1), math.sqrt(n))],
                     TOL[dt])
            softmax_cases(W, dt, dev, 7, n, tag, x=xs)
            layer_norm_cases(W, dt, dev, 7, n, tag, x=xs)

        # Middle dim of a 3-D tensor, and dim 0 of a 3-D tensor.
        x3 = torch.randn(3, 17, 33, dtype=dt, device=dev)
        for d in (0, 1):
            run_case(f"sum_mid(dim={d}) {dname} [3x17x33]",
                     lambda: [("out", W.sum_dim(x3, d, splits=1, block_r=4, block_k=8), x3.double().sum(d),
                               math.sqrt(x3.shape[d]))],
                     TOL[dt])
            run_case(f"sum_mid_split(dim={d}) {dname} [3x17x33]",
                     lambda: [("out", W.sum_dim(x3, d, splits=2, block_r=2, block_k=8), x3.double().sum(d),
                               math.sqrt(x3.shape[d]))],
                     TOL[dt])

        # Softmax with -inf entries, including a whole first chunk of -inf on the looped path
        # (exercises the online-softmax guard against exp(-inf - -inf)).
        xi = torch.randn(7, 1000, dtype=dt, device=dev)
        xi[:, :300] = float("-inf")
        xi[3, 500:] = float("-inf")
        softmax_cases(W, dt, dev, 7, 1000, f"{dname} [7x1000] with -inf", x=xi)

        # Softmax with a huge softmax-ed dim (2**20 + 3 columns): looped only.
        if dt in (torch.float32, torch.float64):
            xb = torch.randn(1, 2**20 + 3, dtype=dt, device=dev) * 4
            run_case(f"softmax_fwd(default=looped) {dname} [1x{2**20 + 3}]",
                     lambda: [("out", W.softmax(xb), torch.softmax(xb.double(), -1))], TOL[dt])

        # Layer norm variance stability: mean far from 0 (E[x^2]-E[x]^2 would lose ~3 digits here).
        if dt == torch.float32:
            xo = 1000.0 + torch.randn(7, 4097, dtype=dt, device=dev)
            layer_norm_cases(W, dt, dev, 7, 4097, f"{dname} [7x4097] mean 1000", x=xo, tol=1e-3)


# ---------------------------------------------------------------------------------- part 2: compile


def compile_check():
    import triton_wrappers as W
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    R, S, L = W.sum_k, W.softmax_k, W.layer_norm_k
    import importlib
    K = importlib.import_module("tjit.kernels_py.rms_norm")
    T = importlib.import_module("tjit.kernels_py.norm_team")
    B = importlib.import_module("tjit.kernels_py.norm_backward")
    F = importlib.import_module("tjit.kernels_py.norm_forward")

    # rms_norm's held team kernel and its rescue share their arguments.
    rms_team_ptrs = dict(dx_ptr="in", dw_partial_ptr="acc", dy_ptr="in", v_ptr="in", w_ptr="in", rstd_ptr="acc",
                         ds_ptr="in", sync_ptr="i64")
    rms_team_ints = ["M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_v_row", "stride_ds_row"]
    # (kernel, pointer args -> "in"/"acc" (element type of the tested pointer or the accumulator) or a
    #  fixed element type ("i64"),
    #  int args, float args, fixed constexprs, has SINGLE_PASS, optional pointers (None in the spec-1 variant))
    kernels = [
        (R.sum_rows_kernel, dict(in_ptr="in", out_ptr="in"), ["M", "N", "stride_in_row"], [],
         dict(BLOCK_N=1024, PDL=True), False, []),
        (R.sum_rows_blocked_kernel, dict(in_ptr="in", out_ptr="in"), ["M", "N", "stride_in_row"], [],
         dict(BLOCK_M=16, BLOCK_N=128), False, []),
        (R.sum_mid_kernel, dict(in_ptr="in", out_ptr="in"), ["M", "R", "K", "stride_m", "stride_r"], [],
         dict(BLOCK_R=8, BLOCK_K=256), False, []),
        (R.sum_mid_split_kernel, dict(in_ptr="in", partial_ptr="acc"),
         ["M", "R", "K", "stride_m", "stride_r", "rows_per_split"], [], dict(BLOCK_R=8, BLOCK_K=256), False, []),
        (R.sum_partial_kernel, dict(in_ptr="in", partial_ptr="acc"), ["M", "N", "stride_in_row", "chunk"], [],
         dict(BLOCK_N=4096, PDL=True), False, []),
        (R.sum_partial_strided_kernel, dict(in_ptr="in", partial_ptr="acc"), ["M", "N", "stride_in_row", "splits"],
         [], dict(BLOCK_N=4096, PDL=True), False, []),
        (S.softmax_fwd_kernel, dict(out_ptr="in", in_ptr="in"), ["M", "N", "stride_in_row", "stride_out_row"], [],
         dict(BLOCK_N=4096), True, []),
        (S.softmax_bwd_kernel, dict(grad_in_ptr="in", grad_out_ptr="in", out_ptr="in"),
         ["M", "N", "stride_grad_in_row", "stride_grad_out_row", "stride_out_row"], [], dict(BLOCK_N=4096), True, []),
        (S.softmax_fwd_split_kernel, dict(out_ptr="in", in_ptr="in", sync_ptr="i64"),
         ["M", "N", "S", "stride_in_row", "stride_out_row"], [], dict(BLOCK_N=4096, S_POW2=4, ALIGN=8), False, []),
        (S.softmax_bwd_split_kernel, dict(grad_in_ptr="in", grad_out_ptr="in", out_ptr="in", sync_ptr="i64"),
         ["M", "N", "S", "stride_grad_in_row", "stride_grad_out_row", "stride_out_row"], [],
         dict(BLOCK_N=8192, S_POW2=32, ALIGN=1, REREAD=False), False, []),
        (S.softmax_bwd_split_kernel, dict(grad_in_ptr="in", grad_out_ptr="in", out_ptr="in", sync_ptr="i64"),
         ["M", "N", "S", "stride_grad_in_row", "stride_grad_out_row", "stride_out_row"], [],
         dict(BLOCK_N=4096, S_POW2=4, ALIGN=8, REREAD=True), False, []),
        (L.layer_norm_fwd_kernel,
         dict(y_ptr="in", x_ptr="in", w_ptr="in", b_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_x_row", "stride_y_row"], ["eps"], dict(BLOCK_N=4096, BLOCK_TAIL=0, PRELOAD=True), True,
         ["w_ptr", "b_ptr", "mean_ptr", "rstd_ptr"]),
        (L.layer_norm_fwd_kernel,  # two passes in a compile-time number of steps, the row kept in L2
         dict(y_ptr="in", x_ptr="in", w_ptr="in", b_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_x_row", "stride_y_row"], ["eps"],
         dict(BLOCK_N=4096, SINGLE_PASS=False, BLOCK_TAIL=0, PRELOAD=False, KEEP_ROW=True, ROW_STEPS=3), False,
         ["w_ptr", "b_ptr", "mean_ptr", "rstd_ptr"]),
        (L.layer_norm_fwd_persistent_kernel,
         dict(y_ptr="in", x_ptr="in", w_ptr="in", b_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_x_row", "stride_y_row"], ["eps"], dict(BLOCK_N=4096, BLOCK_TAIL=1024, STAGES=2), False,
         ["w_ptr", "b_ptr", "mean_ptr", "rstd_ptr"]),
        (L.layer_norm_fwd_long_kernel.fn,  # the autotuned kernel's split configs
         dict(y_ptr="in", x_ptr="in", w_ptr="in", b_ptr="in", mean_ptr="acc", rstd_ptr="acc", sync_ptr="i64"),
         ["M_BUCKET", "N", "stride_x_row", "stride_y_row"], ["eps"], dict(BLOCK_N=4096, SPLIT=True), False,
         ["w_ptr", "b_ptr", "mean_ptr", "rstd_ptr"]),
        (B.norm_bwd_fused_kernel,  # layer_norm's form: a mean and db, no ds; a tail block
         dict(dx_ptr="in", dw_partial_ptr="acc", db_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in",
              mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row", "rows_per_program"], [],
         dict(ds_ptr=None, COMPUTE_DX=True, BLOCK_M=1, BLOCK_N=4096, BLOCK_TAIL=1024, PREFETCH=True, PRELOAD_W=True),
         False, ["w_ptr", "db_partial_ptr"]),
        (B.norm_bwd_fused_kernel,  # db alone: x, mean and rstd not read
         dict(db_partial_ptr="acc", dy_ptr="in", x_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row", "rows_per_program"], [],
         dict(dx_ptr=None, dw_partial_ptr=None, w_ptr=None, ds_ptr=None, COMPUTE_DX=False, BLOCK_M=4, BLOCK_N=512,
              BLOCK_TAIL=0, PREFETCH=False, PRELOAD_W=True), False, ["x_ptr"]),
        (B.norm_bwd_dx_kernel,  # layer_norm's form: a mean, no ds
         dict(dx_ptr="in", dy_ptr="in", x_ptr="in", w_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"], [],
         dict(ds_ptr=None, BLOCK_N=4096), True, ["w_ptr"]),
        (L.layer_norm_bwd_team_kernel,
         dict(dx_ptr="in", dw_partial_ptr="acc", db_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in",
              mean_ptr="acc", rstd_ptr="acc", sync_ptr="i64"),
         ["M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row"], [],
         dict(COMPUTE_DX=True, BLOCK_N=4096, S_POW2=4, STAGES=3), False, ["w_ptr", "db_partial_ptr"]),
        (T.norm_bwd_team_lag_kernel,  # layer_norm's form: a mean, no ds
         dict(dx_ptr="in", dw_partial_ptr="acc", db_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in",
              mean_ptr="acc", rstd_ptr="acc", sync_ptr="i64"),
         ["M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"], [],
         dict(ds_ptr=None, BLOCK_N=2048, S_POW2=8, STAGES=2), False, ["w_ptr", "db_partial_ptr"]),
        (T.norm_bwd_team_lag_kernel,  # STAGES=1: no pipelining, wait instead of the peeked words
         dict(dx_ptr="in", dw_partial_ptr="acc", db_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in",
              mean_ptr="acc", rstd_ptr="acc", sync_ptr="i64"),
         ["M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"], [],
         dict(ds_ptr=None, BLOCK_N=2048, S_POW2=8, STAGES=1), False, ["w_ptr", "db_partial_ptr"]),
        (L.layer_norm_bwd_team_lag_finalize_kernel,
         dict(dw_ptr="in", db_ptr="in", dw_partial_ptr="acc", db_partial_ptr="acc", dx_ptr="in", dy_ptr="in",
              x_ptr="in", w_ptr="in", mean_ptr="acc", rstd_ptr="acc", sync_ptr="i64"),
         ["M", "N", "S", "rows_per_team", "G", "stride_dx_row", "stride_dy_row", "stride_x_row"], [],
         dict(BLOCK_G=32, BLOCK_N=64), False, ["w_ptr", "dw_ptr", "dw_partial_ptr"]),
        (B.norm_bwd_column_sums_kernel,  # layer_norm's: dw and db
         dict(dw_partial_ptr="acc", db_partial_ptr="acc", dy_ptr="in", x_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_dy_row", "stride_x_row", "rows_per_group"], [], dict(BLOCK_M=32, BLOCK_N=128), False,
         ["db_partial_ptr"]),
        (B.norm_bwd_column_sums_kernel,  # one group writing db alone (x, mean and rstd not read)
         dict(dw_partial_ptr="in", db_partial_ptr="in", dy_ptr="in", x_ptr="in", mean_ptr="acc", rstd_ptr="acc"),
         ["M", "N", "stride_dy_row", "stride_x_row", "rows_per_group"], [], dict(BLOCK_M=32, BLOCK_N=128), False,
         ["dw_partial_ptr", "x_ptr"]),
        (F.norm_fwd_kernel,
         dict(y_ptr="in", s_ptr="in", rstd_ptr="acc", x_ptr="in", r_ptr="in", w_ptr="in"),
         ["M", "N", "stride_y_row", "stride_s_row", "stride_x_row", "stride_r_row"], ["eps"],
         dict(mean_ptr=None, b_ptr=None, SUBTRACT_MEAN=False,
              HAS_RESIDUAL=True, BLOCK_M=1, BLOCK_N=4096, BLOCK_TAIL=0, KEEP_ROW=False), True, ["w_ptr", "rstd_ptr"]),
        (F.norm_fwd_kernel,  # two passes, the row kept in L2 between them
         dict(y_ptr="in", s_ptr="in", rstd_ptr="acc", x_ptr="in", r_ptr="in", w_ptr="in"),
         ["M", "N", "stride_y_row", "stride_s_row", "stride_x_row", "stride_r_row"], ["eps"],
         dict(mean_ptr=None, b_ptr=None, SUBTRACT_MEAN=False,
              HAS_RESIDUAL=True, BLOCK_M=1, BLOCK_N=2048, BLOCK_TAIL=0, KEEP_ROW=True), True, ["w_ptr", "rstd_ptr"]),
        (F.norm_fwd_kernel,  # as above, in a compile-time number of steps (both loops unrolled)
         dict(y_ptr="in", s_ptr="in", rstd_ptr="acc", x_ptr="in", r_ptr="in", w_ptr="in"),
         ["M", "N", "stride_y_row", "stride_s_row", "stride_x_row", "stride_r_row"], ["eps"],
         dict(mean_ptr=None, b_ptr=None, SUBTRACT_MEAN=False,
              HAS_RESIDUAL=True, BLOCK_M=1, BLOCK_N=4096, BLOCK_TAIL=0, KEEP_ROW=True, ROW_STEPS=3), True,
         ["w_ptr", "rstd_ptr"]),
        (F.norm_fwd_kernel,  # a tail block beside the row's block
         dict(y_ptr="in", s_ptr="in", rstd_ptr="acc", x_ptr="in", r_ptr="in", w_ptr="in"),
         ["M", "N", "stride_y_row", "stride_s_row", "stride_x_row", "stride_r_row"], ["eps"],
         dict(mean_ptr=None, b_ptr=None, SUBTRACT_MEAN=False,
              HAS_RESIDUAL=True, BLOCK_M=1, BLOCK_N=4096, BLOCK_TAIL=1024, KEEP_ROW=False), True,
         ["w_ptr", "rstd_ptr"]),
        (F.norm_fwd_kernel,
         dict(y_ptr="in", s_ptr="in", rstd_ptr="acc", x_ptr="in", r_ptr="in", w_ptr="in"),
         ["M", "N", "stride_y_row", "stride_s_row", "stride_x_row", "stride_r_row"], ["eps"],
         dict(mean_ptr=None, b_ptr=None, SUBTRACT_MEAN=False,
              HAS_RESIDUAL=False, BLOCK_M=4, BLOCK_N=256, BLOCK_TAIL=0, KEEP_ROW=False), True,
         ["w_ptr", "rstd_ptr", "s_ptr", "r_ptr"]),
        (F.norm_fwd_kernel,  # layer_norm's short rows: the mean subtracted, a bias, a tail block
         dict(y_ptr="in", mean_ptr="acc", rstd_ptr="acc", x_ptr="in", w_ptr="in", b_ptr="in"),
         ["M", "N", "stride_y_row", "stride_s_row", "stride_x_row", "stride_r_row"], ["eps"],
         dict(s_ptr=None, r_ptr=None, HAS_RESIDUAL=False, SUBTRACT_MEAN=True, BLOCK_M=4, BLOCK_N=1024, BLOCK_TAIL=256,
              SINGLE_PASS=True, KEEP_ROW=False), False, ["w_ptr", "b_ptr", "mean_ptr", "rstd_ptr"]),
        (B.norm_bwd_fused_kernel,  # rms_norm's form: no mean, a ds
         dict(dx_ptr="in", dw_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in", rstd_ptr="acc", ds_ptr="in"),
         ["M", "N", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row", "rows_per_program"], [],
         dict(db_partial_ptr=None, mean_ptr=None, COMPUTE_DX=True, BLOCK_M=2, BLOCK_N=2048, BLOCK_TAIL=0,
              PREFETCH=False, PRELOAD_W=True), False, ["w_ptr", "ds_ptr", "dw_partial_ptr"]),
        (B.norm_bwd_fused_kernel,  # as above with a tail block, the next tile prefetched, w loaded per tile
         dict(dx_ptr="in", dw_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in", rstd_ptr="acc", ds_ptr="in"),
         ["M", "N", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row", "rows_per_program"], [],
         dict(db_partial_ptr=None, mean_ptr=None, COMPUTE_DX=True, BLOCK_M=1, BLOCK_N=4096, BLOCK_TAIL=1024,
              PREFETCH=True, PRELOAD_W=False), False, ["w_ptr", "ds_ptr", "dw_partial_ptr"]),
        (K.rms_norm_bwd_team_kernel,
         rms_team_ptrs, rms_team_ints, [],
         dict(BLOCK_N=4096, S_POW2=4, STAGES=3), False, ["w_ptr", "ds_ptr", "dw_partial_ptr"]),
        (T.norm_bwd_team_lag_kernel,  # rms_norm's form: no mean, no bias, a ds
         dict(dx_ptr="in", dw_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in", rstd_ptr="acc", ds_ptr="in",
              sync_ptr="i64"),
         ["M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"], [],
         dict(db_partial_ptr=None, mean_ptr=None, BLOCK_N=2048, S_POW2=8, STAGES=2), False,
         ["w_ptr", "ds_ptr", "dw_partial_ptr"]),
        (T.norm_bwd_team_lag_kernel,  # STAGES=1: no pipelining, wait instead of the peeked words
         dict(dx_ptr="in", dw_partial_ptr="acc", dy_ptr="in", x_ptr="in", w_ptr="in", rstd_ptr="acc", ds_ptr="in",
              sync_ptr="i64"),
         ["M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"], [],
         dict(db_partial_ptr=None, mean_ptr=None, BLOCK_N=2048, S_POW2=8, STAGES=1), False,
         ["w_ptr", "ds_ptr", "dw_partial_ptr"]),
        (K.rms_norm_bwd_team_rescue_kernel,
         rms_team_ptrs, rms_team_ints, [],
         dict(BLOCK_N=4096), False, ["w_ptr", "ds_ptr", "dw_partial_ptr"]),
        (B.norm_bwd_dx_kernel,  # rms_norm's form: no mean, a ds
         dict(dx_ptr="in", dy_ptr="in", x_ptr="in", w_ptr="in", rstd_ptr="acc", ds_ptr="in"),
         ["M", "N", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"], [],
         dict(mean_ptr=None, BLOCK_N=4096), True, ["w_ptr", "ds_ptr"]),
        (B.norm_bwd_column_sums_kernel,  # rms_norm's: dw alone, no mean
         dict(dw_partial_ptr="acc", dy_ptr="in", x_ptr="in", rstd_ptr="acc"),
         ["M", "N", "stride_dy_row", "stride_x_row", "rows_per_group"], [],
         dict(db_partial_ptr=None, mean_ptr=None, BLOCK_M=32, BLOCK_N=128), False, []),
        (B.norm_bwd_sums_finalize_kernel,
         dict(dw_ptr="in", db_ptr="in", dw_partial_ptr="acc", db_partial_ptr="acc"), ["G", "N"], [],
         dict(BLOCK_G=32, BLOCK_N=128), False, ["dw_ptr", "dw_partial_ptr"]),
    ]
    # (pointer dtype, SINGLE_PASS, INDEX_64, ints divisible by 16, spec-1 variant)
    variants = [
        ("fp32", True, False, True, False),
        ("fp32", False, True, False, False),
        ("bf16", True, True, False, False),
        ("bf16", False, False, True, False),
        ("fp64", False, False, False, True),  # ints == 1 -> constexpr 1, optional pointers None
    ]
    for fn, ptrs, ints, floats, fixed, has_single, optional in kernels:
        seen = set()
        for pdt, single, idx64, div16, spec1 in variants:
            key = (pdt, single if has_single else None, idx64, div16, spec1)
            if key in seen:
                continue
            seen.add(key)
            acc = "fp64" if pdt == "fp64" else "fp32"
            sig, consts = {}, dict(fixed, INDEX_64=idx64)
            for name, kind in ptrs.items():
                if spec1 and name in optional:
                    sig[name], consts[name] = "constexpr", None
                else:
                    sig[name] = "*" + {"in": pdt, "acc": acc}.get(kind, kind)
            for name in ints:
                if spec1:
                    sig[name], consts[name] = "constexpr", 1
                else:
                    # Under INDEX_64 the sizes may exceed int32: the runtime passes them as i64.
                    sig[name] = "i64" if idx64 and name in ("N", "M") else "i32"
            for name in floats:
                # As a launch passes it: the annotated type (layer_norm's eps: fp64), else fp32.
                sig[name] = next(p.annotation_type for p in fn.params if p.name == name) or "fp32"
            if has_single:
                consts["SINGLE_PASS"] = single
            for param in fn.params:  # constexprs a case leaves out take their defaults, as a launch does
                if param.is_constexpr and param.name not in consts and param.default is not inspect.Parameter.empty:
                    consts[param.name] = param.default
            for flag in ("HAS_WEIGHT", "HAS_BIAS", "COMPUTE_DW", "COMPUTE_DB"):
                if flag in fn.arg_names:
                    ptr = {"HAS_WEIGHT": "w_ptr", "HAS_BIAS": "b_ptr"}.get(flag)
                    if ptr is None:  # COMPUTE_DW/DB: follow whichever output pointer is present (or fixed None)
                        ptr = [p for p in [*ptrs, *fixed] if p.startswith(flag[-2:].lower())][0]
                    consts[flag] = consts.get(ptr, 0) is not None
            sig.update({name: "constexpr" for name in consts if name not in sig})
            attrs = {}
            for i, name in enumerate(fn.arg_names):
                if sig[name].startswith("*") or (div16 and sig[name] in ("i32", "i64") and name != "M"):
                    attrs[(i, )] = [["tt.divisibility", 16]]
            label = (f"compile sm_90 {fn.__name__} *{pdt}" + (f" SINGLE_PASS={single}" if has_single else "") +
                     "".join(f" {k}={fixed[k]}" for k in ("STAGES", "REREAD", "BLOCK_TAIL", "KEEP_ROW", "ROW_STEPS") if k in fixed) +
                     f" INDEX_64={idx64}" + (" ints=1,None ptrs" if spec1 else ""))
            t0 = time.time()
            try:
                src = ASTSource(fn, signature=sig, constexprs=consts, attrs=attrs)
                compiled = triton.compile(src, target=target, options={"num_warps": 4})
                ok = len(compiled.asm.get("cubin", b"")) > 0
                report(ok, label, f"{time.time() - t0:.1f}s" if ok else "no cubin")
            except Exception as exc:
                report(False, label, f"{type(exc).__name__}: {str(exc).splitlines()[-1] if str(exc) else ''}")


def main():
    t0 = time.time()
    if ARGS.compile_only:
        compile_check()
        print(f"compile check: {RESULTS['PASS']} passed, {RESULTS['FAIL']} failed")
        return 1 if RESULTS["FAIL"] else 0

    if ARGS.device == "cpu":
        from triton_wrappers import patch_interpreter_for_numpy
        patch_interpreter_for_numpy()
    elif not torch.cuda.is_available():
        print("FAIL --device cuda but torch sees no GPU")
        return 1
    where = "Triton interpreter" if ARGS.device == "cpu" else "compiled, " + torch.cuda.get_device_name()
    print(f"== part 1: kernels vs torch ({where}); torch {torch.__version__}, triton {triton.__version__}", flush=True)
    run_all(ARGS.device)
    run_pass, run_fail = RESULTS["PASS"], RESULTS["FAIL"]
    t_run = time.time() - t0

    comp_rc = None
    if not ARGS.skip_compile:
        print("== part 2: compile for sm_90 (no GPU needed; subprocess without TRITON_INTERPRET)", flush=True)
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        comp_rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--compile-only"], env=env).returncode

    print(f"part 1 (run vs torch, {ARGS.device}): {run_pass} passed, {run_fail} failed, {t_run:.0f}s")
    if comp_rc is not None:
        print(f"part 2 (compile sm_90): {'all passed' if comp_rc == 0 else 'FAILURES (see above)'}")
    ok = run_fail == 0 and comp_rc in (None, 0)
    print(f"{'ALL PASSED' if ok else 'SOME CHECKS FAILED'} in {time.time() - t0:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
