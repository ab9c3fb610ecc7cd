"""Every kind of launch plan each operator's plan function can choose (tjit.plans: the C++ plans the
operators execute), forced through device facts or overrides, launched as the plan says by the
benchmarks' Python wrappers under Triton's interpreter, against torch on fresh random inputs.

The kinds whose programs wait for each other (softmax's split and long-row kernels, layer_norm's long
row forward) run their rows through the kernels' help path, as test_row_sharing_interpreter.py does;
layer_norm's backward teams (no help path) run teams of one program: the plan's kernel and constexprs
with BLOCK_N covering the row and STAGES 1 (the pipelined loop's spin wait is inline PTX).

Run in a subprocess, since the interpreter must be chosen before triton is imported:
    TRITON_INTERPRET=1 python3 tests/python/test_plan_kinds_interpreter.py
prints one JSON line of {case: [plan kind, max relative error]}."""

import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))

# The kinds each plan can choose (by its default rule, or a measured choice's candidate forced); the
# test fails if a plan kind is added without a case here. (layer_norm's forward chooses among candidates, each run where it fits by
# test_layer_norm_plan_choice.py, the persistent one included.)
KINDS = {
    "softmax": {"short_rows", "row", "persistent", "split", "long"},
    "softmax_backward": {"short_rows", "row", "split"},
    "layer_norm_forward": {"short_rows", "row", "long"},
    "layer_norm_backward": {"none", "fused", "team", "team_lag", "dx_dwdb"},
    "sum_rows": {"rows", "blocked", "two_stage_strided", "two_stage_chunked"},
    "sum_middle": {"middle", "middle_split"},
    "add": {"flat", "strided", "materialised"},
}


def _error(got, want):
    got, want = got.double(), want.double()
    assert not got.isnan().any(), "an output the kernel left unwritten (NaN poison)"
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def _jit(kernel):
    import triton
    while isinstance(kernel, triton.runtime.autotuner.Autotuner):
        kernel = kernel.fn
    return kernel


def main():
    import torch
    import triton
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import triton_wrappers as W
    from tjit import _C, plans

    import tjit
    W.patch_interpreter_for_numpy()
    W.FILL_OUTPUTS_WITH_NAN = True
    torch.manual_seed(0)
    cpu = plans.CPU
    # A small CUDA device: every CUDA-only kind, grids the interpreter runs quickly.
    cuda = plans.device_facts(is_cuda=True, multiprocessors=4, memory_gbps=200, dependent_launch=True)
    cuda_slow = dict(cuda, memory_gbps=100)  # a CUDA card no table serves: the default rule
    results = {}

    def record(name, op, kind, error):
        results[name] = [op, kind, error]
        print(name, kind, error, file=sys.stderr, flush=True)

    # ---------------------------------------------------------------------------------- softmax
    for dt, m, n, facts in [(torch.float32, 5, 100, cpu), (torch.float32, 5, 1000, cpu),
                            (torch.float32, 3, 33000, cpu), (torch.float16, 2, 17000, cpu),
                            (torch.float16, 3, 20500, cpu), (torch.float16, 2, 33000, cpu),
                            (torch.float64, 2, 33000, cuda)]:
        x = torch.randn(m, n, dtype=dt) * 3
        ref = torch.softmax(x.double(), -1)
        plan = plans.plan("softmax", rows=m, cols=n, dtype=dt, device=facts, tuner_available=0)
        got = W.softmax(x, device=facts, tuner=False)
        record(f"softmax {plan['kind']} {plan['launches'][0]['constexprs']} {dt} {m}x{n}", "softmax", plan["kind"],
               _error(got, ref))
        g = torch.randn(m, n, dtype=dt)
        out = ref.to(dt)
        want = out.double() * (g.double() - (g.double() * out.double()).sum(-1, keepdim=True))
        plan = plans.plan("softmax_backward", rows=m, cols=n, dtype=dt, device=facts)
        got = W.softmax_backward(g, out, device=facts)
        record(f"softmax_backward {plan['kind']} {plan['launches'][0]['constexprs']} {dt} {m}x{n}",
               "softmax_backward", plan["kind"], _error(got, want))
    # Candidates the default rule does not take: persistent programs forward, split rows forward and
    # backward (CUDA facts), the 2-byte backward re-reading, and 8192-column chunks.
    x = torch.randn(3, 20500, dtype=torch.float16) * 3
    plan = plans.plan("softmax", rows=3, cols=20500, dtype=x.dtype, device=cpu, candidate=_C.plan_candidates(
        "softmax").index("persistent_w32"))
    record("softmax persistent float16 3x20500", "softmax", plan["kind"],
           _error(W.softmax(x, device=cpu, candidate="persistent_w32"), torch.softmax(x.double(), -1)))
    for dt, n, fwd, bwd in [(torch.float32, 33000, "split4096_w4", "split4096_w4"),
                            (torch.bfloat16, 33000, None, "split4096_w4_reread"),
                            (torch.bfloat16, 131073, None, "split8192_w8_reg80")]:
        x = torch.randn(1, n, dtype=dt) * 3
        ref = torch.softmax(x.double(), -1)
        if fwd is not None:
            plan = plans.plan("softmax", rows=1, cols=n, dtype=dt, device=cuda, tuner_available=0,
                              candidate=_C.plan_candidates("softmax").index(fwd))
            got = W.softmax(x, device=cuda, tuner=False, candidate=fwd)
            record(f"softmax {plan['kind']} {dt} 1x{n}", "softmax", plan["kind"], _error(got, ref))
        g = torch.randn(1, n, dtype=dt)
        out = ref.to(dt)
        want = out.double() * (g.double() - (g.double() * out.double()).sum(-1, keepdim=True))
        plan = plans.plan("softmax_backward", rows=1, cols=n, dtype=dt, device=cuda,
                          candidate=_C.plan_candidates("softmax_backward").index(bwd))
        got = W.softmax_backward(g, out, device=cuda, candidate=bwd)
        record(f"softmax_backward {plan['kind']} {plan['launches'][0]['constexprs']} {dt} 1x{n}", "softmax_backward",
               plan["kind"], _error(got, want))
    # the autotuned long-row kernel: the plan's constexprs with one config of the tuner's (split rows)
    x = torch.randn(2, 9001, dtype=torch.bfloat16) * 3
    y = torch.full_like(x, float("nan"))
    plan = plans.plan("softmax", rows=2, cols=9001, dtype=x.dtype, device=cuda, **W._alignment_inputs(y, x))
    if plan["kind"] == "long":
        raise AssertionError("9001 columns should not be long rows")
    x = torch.randn(2, 40000, dtype=torch.float32) * 3
    y = torch.full_like(x, float("nan"))
    plan = plans.plan("softmax", rows=2, cols=40000, dtype=x.dtype, device=cuda, **W._alignment_inputs(y, x))
    launch = plan["launches"][0]
    chunks = triton.cdiv(40000, 4096)
    sync = torch.zeros(plan["workspace"]["row_exchange_words"], dtype=torch.int64)
    _jit(getattr(W.softmax_k, launch["kernel"]))[(2 * chunks, )](y, x, sync, launch["args"]["M_BUCKET"], 40000,
                                                                 x.stride(0), y.stride(0), **launch["constexprs"],
                                                                 BLOCK_N=4096, SPLIT=True)
    record("softmax long (split config 4096) float32 2x40000", "softmax", plan["kind"],
           _error(y, torch.softmax(x.double(), -1)))

    # ------------------------------------------------------------------------------- layer_norm
    def ln_ref(x, w, b):
        return torch.ops.aten.native_layer_norm(x.double(), [x.shape[1]], w.double(), b.double(), 1e-5)

    for dt, m, n, facts in [(torch.float32, 5, 100, cpu), (torch.float32, 5, 2000, cpu),
                            (torch.float16, 3, 4608, cuda_slow), (torch.float16, 5, 4608, cpu),
                            (torch.bfloat16, 4, 8200, cpu), (torch.float64, 2, 20000, cpu)]:
        x, w, b = torch.randn(m, n, dtype=dt), torch.randn(n, dtype=dt), torch.randn(n, dtype=dt)
        ref = ln_ref(x, w, b)
        plan = plans.plan("layer_norm_forward", rows=m, cols=n, dtype=dt, device=facts, resident_programs_per_sm=1)
        y, mean, rstd = W.layer_norm(x, w, b, device=facts)
        err = max(_error(y, ref[0]), _error(mean, ref[1]), _error(rstd, ref[2]))
        record(f"layer_norm_forward {plan['kind']} {plan['launches'][0]['constexprs']} {dt} {m}x{n}",
               "layer_norm_forward", plan["kind"], err)
    x, w, b = torch.randn(2, 40000), torch.randn(40000), torch.randn(40000)
    plan = plans.plan("layer_norm_forward", rows=2, cols=40000, dtype=x.dtype, device=cuda)
    launch = plan["launches"][0]
    y, mean, rstd = torch.full_like(x, float("nan")), torch.full((2, ), float("nan")), torch.full((2, ), float("nan"))
    sync = torch.zeros(plan["workspace"]["row_exchange_words"], dtype=torch.int64)
    _jit(getattr(W.layer_norm_k, launch["kernel"]))[(2 * triton.cdiv(40000, 4096), )](
        y, x, w, b, mean, rstd, sync, launch["args"]["M_BUCKET"], 40000, x.stride(0), y.stride(0), 1e-5,
        **launch["constexprs"], BLOCK_N=4096, SPLIT=True)
    ref = ln_ref(x, w, b)
    record("layer_norm_forward long (split config 4096) float32 2x40000", "layer_norm_forward", plan["kind"],
           max(_error(y, ref[0]), _error(mean, ref[1].flatten()), _error(rstd, ref[2].flatten())))

    def ln_bwd_ref(dy, x, w, b):
        _, mean, rstd = torch.ops.aten.native_layer_norm(x.double(), [x.shape[1]], w.double(), b.double(), 1e-5)
        return torch.ops.aten.native_layer_norm_backward(dy.double(), x.double(), [x.shape[1]], mean, rstd,
                                                         w.double(), b.double(), [True, True, True])

    many_sms = dict(cpu, multiprocessors=64)  # enough programs wanted that the dw/db rows split into groups
    for dt, m, n, facts in [(torch.float32, 5, 100, cpu), (torch.float32, 3, 5000, cpu), (torch.float16, 6, 300, cpu),
                            (torch.float32, 5, 9000, cpu), (torch.float32, 100, 9000, many_sms),
                            (torch.float64, 3, 20000, cpu)]:
        x, w, b = torch.randn(m, n, dtype=dt), torch.randn(n, dtype=dt), torch.randn(n, dtype=dt)
        dy = torch.randn(m, n, dtype=dt)
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
        plan = plans.plan("layer_norm_backward", rows=m, cols=n, dtype=dt, device=facts)
        dx, dw, db = W.layer_norm_backward(dy, x, w, mean, rstd, device=facts)
        want = ln_bwd_ref(dy, x, w, b)
        record(f"layer_norm_backward {plan['kind']} {[l['kernel'] for l in plan['launches']]} {dt} {m}x{n}",
               "layer_norm_backward", plan["kind"],
               max(_error(dx, want[0]), _error(dw, want[1]), _error(db, want[2])))
    plan = plans.plan("layer_norm_backward", rows=4, cols=100, want_dx=0, want_dw=0, want_db=0, dtype=torch.float32)
    record("layer_norm_backward nothing wanted", "layer_norm_backward", plan["kind"], 0.0 if not plan["launches"]
           else 1.0)
    # The teams (CUDA): teams of one program, BLOCK_N covering the row, 3 rows a team.
    for dt in (torch.float32, torch.bfloat16):
        m, n = 7, 9000
        x, w, b = torch.randn(m, n, dtype=dt), torch.randn(n, dtype=dt), torch.randn(n, dtype=dt)
        dy = torch.randn(m, n, dtype=dt)
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
        plan = plans.plan("layer_norm_backward", rows=m, cols=n, dtype=dt, device=cuda, resident_programs_per_sm=2)
        launch = plan["launches"][0]
        constexprs = dict(launch["constexprs"], BLOCK_N=triton.next_power_of_2(n), S_POW2=1, STAGES=1)
        per_team, teams = 3, triton.cdiv(m, 3)
        dx = torch.full_like(x, float("nan"))
        dw_part, db_part = torch.full((teams, n), float("nan")), torch.full((teams, n), float("nan"))
        # the rows' words, and the lag kernel's mode word per team
        sync = torch.zeros(2 + m + teams, dtype=torch.int64)
        args = (dx, dw_part, db_part, dy, x, w, mean.flatten(), rstd.flatten(), sync, m, n, 1, per_team, n, n, n)
        if plan["kind"] == "team_lag":  # the norm family's kernel: no ds (add_rms_norm's), its stride 0
            args = (*args[:8], None, *args[8:], 0)
        getattr(W.layer_norm_k, launch["kernel"])[(teams, )](*args, **constexprs, num_warps=launch["num_warps"])
        dw, db = dw_part.sum(0), db_part.sum(0)
        if plan["kind"] == "team_lag":
            # its finalize, always: the teams' partial rows (and the rows of any that gave up)
            finalize = plan["launches"][1]
            dw, db = torch.full((n, ), float("nan"), dtype=dt), torch.full((n, ), float("nan"), dtype=dt)
            getattr(W.layer_norm_k, finalize["kernel"])[(triton.cdiv(n, finalize["constexprs"]["BLOCK_N"]), )](
                dw, db, dw_part, db_part, dx, dy, x, w, mean.flatten(), rstd.flatten(), sync, m, n, 1, per_team, teams,
                n, n, n, **finalize["constexprs"], num_warps=finalize["num_warps"])
        want = ln_bwd_ref(dy, x, w, b)
        record(f"layer_norm_backward {plan['kind']} (teams of one program) {dt} {m}x{n}", "layer_norm_backward",
               plan["kind"], max(_error(dx, want[0]), _error(dw, want[1]), _error(db, want[2])))

    # ------------------------------------------------------------------------------------- sum
    # The default rule's kinds, and the strided two-stage form forced (a measured choice's candidate).
    for dt, m, n, form in [(torch.float32, 3, 1000, None), (torch.float32, 3, 100, None),
                           (torch.float32, 1, 20000, None), (torch.float64, 1, 20000, None),
                           (torch.float16, 2, 40000, None), (torch.float32, 2, 20000, "strided4096_w8_reg32")]:
        x = torch.randn(m, n, dtype=dt)
        forced = {} if form is None else {"candidate": _C.plan_candidates("sum_rows").index(form)}
        plan = plans.plan("sum_rows", rows=m, cols=n, dtype=dt, **forced)
        got = W.sum_dim_last(x, candidate=form)
        record(f"sum_rows {plan['kind']} {dt} {m}x{n}", "sum_rows", plan["kind"], _error(got, x.double().sum(-1)))
    for shape, dim in [((3, 17, 33), 1), ((1, 5000, 3), 1)]:
        x = torch.randn(*shape)
        import math
        plan = plans.plan("sum_middle", m=math.prod(shape[:dim]), r=shape[dim], k=math.prod(shape[dim + 1:]),
                          dtype=x.dtype)
        record(f"sum_middle {plan['kind']} {shape} dim {dim}", "sum_middle", plan["kind"],
               _error(W.sum_dim(x, dim), x.double().sum(dim)))

    # ------------------------------------------------------------------------------------- add
    # tjit.add itself: the C++ operator executes its plan (CPU: the interpreter).
    a = torch.randn(4, 5)
    for name, x, y in [("flat", a, torch.randn(4, 5)), ("strided", a, torch.randn(5)),
                       ("materialised", torch.randn(2, 1, 3, 1, 5, 1, 2), torch.randn(1, 4, 1, 6, 1, 3, 1))]:
        out = tjit.add(x, y, alpha=2)
        shape = torch.broadcast_shapes(x.shape, y.shape)
        numel = math.prod(shape)
        same = x.shape == shape and y.shape == shape
        plan = plans.plan("add", numel=numel, same_shape_contiguous=same, collapsed=name != "materialised",
                          has_alpha=1, dtype=x.dtype)
        record(f"add {plan['kind']}", "add", plan["kind"], _error(out, x.double() + 2 * y.double()))
    print(json.dumps(results))


def test_every_plan_kind_under_the_interpreter():
    from conftest import run_script_under_interpreter  # here, not at the top: the script itself needs no tjit

    results = run_script_under_interpreter(__file__, 1800, "a program waited forever")
    seen = {}
    for case, (op, kind, error) in results.items():
        seen.setdefault(op, set()).add(kind)
        limit = 2e-2 if ("bfloat16" in case or "float16" in case) else 1e-5
        assert error <= limit, (case, error)
    assert seen == KINDS, (seen, KINDS)


if __name__ == "__main__":
    main()
