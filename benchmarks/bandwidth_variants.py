"""A/B of launch variants behind issue 44's last bandwidth gaps, in one process, on the same inputs.

Two cases (`--case`), each at its issue shape and, with --all, the neighbouring LLM shapes of its
dtype (rows for a 256 MiB bf16 tensor, as `run_benchmarks.py --only llm`):

softmax_fwd_bf16 (default 1088 x 128256, 512 x 262144; --all: every vocabulary of bandwidth.py)
    GB/s = 2*M*N*2 / time.
    tjit            torch.ops.tjit.softmax as built (the autotuned long-row kernel)
    plan            this build's plan launched from Python (triton_wrappers.softmax: Python's autotune
                    of the same configs)
    untuned         the plan a capture without a tuned config takes (tuner_available=0)
    loop_<B>w<W>, split_<B>w<W>   each config of softmax_fwd_long_kernel on its own: which one the
                    tuner should pick, and how close each comes to the copy
    split_<B>w<W>_r32  that split config capped at 32 registers a thread (sm_90, no spills): the
                    committed split_4096w4 binary takes 56 and 9 programs an SM, capped 16 (ncu at
                    1088 x 128256: DRAM 72% busy, register-limited occupancy, stalls on loads and
                    the block's reductions)
    split_2048w4    softmax_fwd_split_kernel with 2048-column chunks: more, smaller programs
    peek_<B>w<W>    benchmarks/kernels/bandwidth_candidates.py: the split kernel polling the row's
                    words with relaxed loads instead of per-lane atomics (all S programs of a row
                    poll the same S words, one L2 slice: S*S atomics a poll round); _r48: capped at
                    48 registers (5 programs an SM at 8 warps, as the committed 8192w8 binary)
    peek_off_8192w8 the candidate kernel with PEEK=False: the control for its other changes
    team_<B>w<W>_s<S>  the same file's team kernel: as many teams of cdiv(N, B) programs as the GPU
                    holds, each walking rows with its row loop pipelined S stages (the next rows'
                    loads in flight while a row waits for its team; CUDA only, N % 8 == 0)
layer_norm_bwd_fp32 (default 65536 x 2048; --all: every hidden size of bandwidth.py)
    GB/s = (3*M*N + 3*N) * 4 + 8*M / time; dx, dw and db.
    tjit            torch.ops.tjit.layer_norm_backward as built
    plan            this build's plan for this device's facts, launched from Python
    gate_shut       the plan asked with memory_gbps 0 (an H100's; main's plan before the gated change)
    The fused kernel (hidden <= 8192) with the gate-shut plan's launch changed, then its finalize:
    rows_x2         twice the rows a tile (BLOCK_M) and twice the warps (same registers a thread,
                    twice the bytes in flight a program)
    two_per_sm      the same tile capped to the registers of two programs an SM, twice the programs
    half_rows       half the rows a tile, same warps, as many programs as an SM holds
    half_rows_warps half the rows and half the warps, as many programs as an SM holds

Both cases also time FlagGems and Liger-Kernel where installed (peers.py) and the device copy (the
better of a CUDA-graph replay and a plain timing, as bandwidth.py). Every variant is checked once
against torch in fp32 (outputs poisoned with NaN first), then timed in `--rounds` interleaved rounds
with bandwidth.Timer (CUDA-graph replay, median); a variant's time is the median of its rounds. Each
Python launch on CUDA shows its binary's registers, spills and the programs an SM holds.

    python3 benchmarks/bandwidth_variants.py --case softmax_fwd_bf16 --out sm.json
    python3 benchmarks/bandwidth_variants.py --case layer_norm_bwd_fp32 --all
    python3 benchmarks/bandwidth_variants.py --case softmax_fwd_bf16 --smoke      # CPU, interpreter
"""

import argparse
import os
import sys
import time

from variants import (check_once, device_name, parse_shapes, pick_device, print_case, report_failures, time_rounds,
                      write_json)

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("layer_norm_bwd_fp32", "softmax_fwd_bf16")  # --case both: the short one first
DEFAULT_COLS = {"softmax_fwd_bf16": (128256, 262144), "layer_norm_bwd_fp32": (2048, )}
SMOKE_SHAPES = {"softmax_fwd_bf16": [(1, 20500), (1, 50257)], "layer_norm_bwd_fp32": [(37, 2048), (9, 5120)]}
# The interpreter runs a split row's programs one after another, so each row waits out HELP_AFTER
# polls once per launch: --smoke runs one variant of each kind (--only widens it).
SMOKE_VARIANTS = {"tjit", "plan", "untuned", "loop_8192w32", "split_8192w8", "split_2048w4", "peek_8192w8_r48",
                  "peek_off_8192w8", "gate_shut", "rows_x2", "two_per_sm", "half_rows", "half_rows_warps", "copy"}
DTYPES = {"softmax_fwd_bf16": "bfloat16", "layer_norm_bwd_fp32": "float32"}
EPS = 1e-5


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=CASES + ("both", ), default="both")
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--smoke", action="store_true", help="CPU, Triton's interpreter, tiny shapes")
    p.add_argument("--all", action="store_true", help="every LLM shape of the case's dtype")
    p.add_argument("--shapes", help="rows x cols list for the case(s), e.g. 512x262144,1088x128256")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep-ms", type=float, default=15.0)
    p.add_argument("--only", default="", help="variants to run besides tjit and copy, e.g. split_8192w8,peek_8192w8")
    p.add_argument("--skip", default="", help="variants not to run, e.g. flaggems,loop_16384w16")
    args = p.parse_args(argv)
    args.only = {v.strip() for v in args.only.split(",") if v.strip()}
    args.skip = {v.strip() for v in args.skip.split(",") if v.strip()}
    if "tjit" in args.skip:
        p.error("--skip tjit: the ratios are to tjit")
    return args


def shapes_of(args, case, llm_rows, vocab, hidden):
    if args.shapes:
        return parse_shapes(args.shapes, with_dtype=False)
    if args.smoke:
        return SMOKE_SHAPES[case]
    cols = (vocab if case.startswith("softmax") else hidden) if args.all else DEFAULT_COLS[case]
    return [(llm_rows(n), n) for n in cols]


class Launch:
    """One Python launch of a kernel: kernel[grid](*args, **constexprs, **options)."""

    def __init__(self, kernel, grid, args, constexprs, options):
        self.kernel, self.grid, self.args = kernel, tuple(grid), args
        self.constexprs, self.options = dict(constexprs), dict(options)

    def __call__(self):
        self.kernel[self.grid](*self.args, **self.constexprs, **self.options)

    def describe(self, tw):
        fn = getattr(self.kernel, "fn", self.kernel)
        c = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in self.constexprs.items()
                     if k not in ("HAS_WEIGHT", "COMPUTE_DX", "COMPUTE_DW", "COMPUTE_DB", "INDEX_64"))
        text = f"{fn.__name__} grid {self.grid[0]} w{self.options['num_warps']} {c}"
        if self.options.get("maxnreg"):
            text += f" maxnreg {self.options['maxnreg']}"
        device = self.args[0].device
        if device.type == "cuda":
            # The limiter's evidence: registers, spills and the programs an SM holds.
            compiled = self.kernel.warmup(*self.args, grid=(1, ), **self.constexprs, **self.options)
            compiled._init_handles()
            per_sm = tw._resident_per_sm(self.kernel, self.args, self.options, **self.constexprs)
            text += f" ({compiled.n_regs} regs, {compiled.n_spills} spills, {per_sm}/SM)"
        return text


def steps(*launches):
    """A zero-argument callable running the launches (Launch or plain callables) in order."""
    def run():
        for launch in launches:
            launch()
    return run


# ------------------------------------------------------------------------------------------ softmax

def softmax_variants(ctx, x, out, smoke):
    """{name: (callable, description or None, output tensor or None: the callable's result is it)}."""
    import torch
    tw, cand = ctx["tw"], ctx["candidates"]
    m, n = x.shape
    sk = tw.softmax_k
    index_64 = tw._needs_index_64(x)
    align = tw._split_alignment(n, out, x)
    variants = {"tjit": (lambda: torch.ops.tjit.softmax(x, -1), None, None)}
    plan = tw._plan("softmax", x.dtype, x.device, rows=m, cols=n, index64=index_64, **tw._alignment_inputs(out, x))
    variants["plan"] = (lambda: tw.softmax(x), f"plan {plan['kind']}", None)
    untuned = tw._plan("softmax", x.dtype, x.device, rows=m, cols=n, index64=index_64, tuner_available=0,
                       **tw._alignment_inputs(out, x))
    variants["untuned"] = (lambda: tw.softmax(x, tuner=False),
                           f"plan {untuned['kind']}: {untuned['launches'][0]['kernel']}", None)
    if n <= 20480:
        return variants  # the long-row kernel's contract: CHUNKS_POW2 >= 8
    # As the long-row plan sizes them (also where the interpreter's plan is not "long").
    chunks = -(-n // 4096)
    chunks_pow2 = 1 << (chunks - 1).bit_length()
    m_bucket = min(1 << (m - 1).bit_length(), 4096)
    long_sync = torch.zeros(2 + m * chunks, dtype=torch.int64, device=x.device)
    for config in sk._long_row_configs():
        block, split = config.kwargs["BLOCK_N"], config.kwargs["SPLIT"]
        grid = (m * -(-n // block) if split else m, )
        launch = Launch(sk.softmax_fwd_long_kernel.fn, grid,
                        (out, x, long_sync, m_bucket, n, x.stride(0), out.stride(0)),
                        dict(CHUNKS_POW2=chunks_pow2, ALIGN=align, INDEX_64=index_64, BLOCK_N=block, SPLIT=split),
                        dict(num_warps=config.num_warps))
        name = f"{'split' if split else 'loop'}_{block}w{config.num_warps}"
        variants[name] = (steps(long_sync.zero_, launch) if split else launch, launch, out)
        if split and config.num_warps <= 8:
            capped = Launch(launch.kernel, launch.grid, launch.args, launch.constexprs,
                            dict(num_warps=config.num_warps, maxnreg=32))
            variants[f"{name}_r32"] = (steps(long_sync.zero_, capped), capped, out)

    def split(kernel, block, warps, maxnreg=0, **extra):
        s = -(-n // block)
        if s > 128:
            return None
        sync = torch.zeros(2 + m * s, dtype=torch.int64, device=x.device)
        options = dict(num_warps=warps, **({"maxnreg": maxnreg} if maxnreg else {}))
        launch = Launch(kernel, (m * s, ), (out, x, sync, m, n, s, x.stride(0), out.stride(0)),
                        dict(BLOCK_N=block, S_POW2=1 << (s - 1).bit_length(), ALIGN=align, INDEX_64=index_64,
                             **extra), options)
        return steps(sync.zero_, launch), launch, out

    # The interpreter runs no PTX: there the candidate takes its atomic polls (PEEK=False).
    peek = not smoke
    candidates = {"split_2048w4": (sk.softmax_fwd_split_kernel, 2048, 4, 0, {}),
                  "peek_8192w8": (cand.softmax_fwd_split_peek_kernel, 8192, 8, 0, {"PEEK": peek}),
                  "peek_8192w8_r48": (cand.softmax_fwd_split_peek_kernel, 8192, 8, 48, {"PEEK": peek}),
                  "peek_4096w4": (cand.softmax_fwd_split_peek_kernel, 4096, 4, 0, {"PEEK": peek}),
                  "peek_16384w16": (cand.softmax_fwd_split_peek_kernel, 16384, 16, 0, {"PEEK": peek}),
                  "peek_off_8192w8": (cand.softmax_fwd_split_peek_kernel, 8192, 8, 0, {"PEEK": False})}
    for name, (kernel, block, warps, maxnreg, extra) in candidates.items():
        made = split(kernel, block, warps, maxnreg, **extra)
        if made is not None:
            variants[name] = made
    aligned = n % 8 == 0 and x.stride(0) % 8 == 0 and out.stride(0) % 8 == 0
    if x.is_cuda and aligned:  # the team kernel: CUDA only, 16-byte aligned rows
        for block, warps, stages in ((8192, 8, 3), (8192, 8, 2), (4096, 4, 3), (16384, 16, 2)):
            made = team(ctx, x, out, block, warps, stages, index_64)
            if made is not None:
                variants[f"team_{block}w{warps}_s{stages}"] = made
    return variants


def team(ctx, x, out, block, warps, stages, index_64):
    """softmax_fwd_team_kernel with as many teams as the GPU holds at once (the binary's occupancy)."""
    import torch
    tw, kernel = ctx["tw"], ctx["candidates"].softmax_fwd_team_kernel
    m, n = x.shape
    s = -(-n // block)
    if s > 128:
        return None
    sync = torch.zeros(2 + m * s, dtype=torch.int64, device=x.device)
    constexprs = dict(BLOCK_N=block, S_POW2=1 << (s - 1).bit_length(), STAGES=stages, INDEX_64=index_64)
    options = dict(num_warps=warps)
    rows_per_team = 3  # a stand-in (not 1, which Triton would specialise) until the grid is known
    for _ in range(2):  # again with the binary the launch runs (rows_per_team's divisibility may change it)
        args = (out, x, sync, m, n, s, rows_per_team, x.stride(0), out.stride(0))
        tw._RESIDENT_PER_SM.clear()  # keyed without the ints' values
        capacity = tw._resident_per_sm(kernel, args, options, **constexprs) * ctx["facts"]["multiprocessors"]
        if capacity < s:
            return None
        rows_per_team = -(-m // min(capacity // s, m))
    teams = -(-m // rows_per_team)
    launch = Launch(kernel, (teams * s, ), (out, x, sync, m, n, s, rows_per_team, x.stride(0), out.stride(0)),
                    constexprs, options)
    return steps(sync.zero_, launch), launch, out


def run_softmax_shape(ctx, m, n, smoke):
    import torch
    device = ctx["device"]
    x = torch.randn(m, n, dtype=torch.bfloat16, device=device)
    out = torch.empty_like(x)
    ref = torch.softmax(x.float(), -1)
    variants = softmax_variants(ctx, x, out, smoke)
    peer_inputs = (x, )
    return dict(nbytes=2 * m * n * 2, variants=variants, ref=ref, outputs=lambda got: got, peer=("softmax", "fwd"),
                peer_inputs=peer_inputs, copy_dtype=torch.bfloat16)


# --------------------------------------------------------------------------------------- layer_norm

def finalize_launch(tw, dw, db, dw_part, db_part, groups, n):
    """layer_norm_bwd_dwdb_finalize_kernel as plan_finalize (layer_norm/plan.cpp) sizes it."""
    block_n = min(max(1 << (-(-n // 256) - 1).bit_length(), 16), 128)
    block_g = min(1 << (groups - 1).bit_length(), max(32, 2048 // block_n))
    return Launch(tw.layer_norm_k.layer_norm_bwd_dwdb_finalize_kernel, (-(-n // block_n), ),
                  (dw, db, dw_part, db_part, groups, n),
                  dict(COMPUTE_DW=True, COMPUTE_DB=True, BLOCK_G=block_g, BLOCK_N=block_n, INDEX_64=False),
                  dict(num_warps=4))


def fused_launches(ctx, base, t, block_m, warps, per_sm=None, maxnreg=0):
    """The fused backward with `base`'s launch (a plan's) changed to block_m rows a tile, `warps` warps
    and min(per_sm * SMs, tiles) programs (per_sm None: as many as an SM holds of that binary), then
    its finalize; None where the tile has no whole rows."""
    import torch
    tw = ctx["tw"]
    x, dy, w, mean, rstd, dx, dw, db = (t[k] for k in ("x", "dy", "w", "mean", "rstd", "dx", "dw", "db"))
    m, n = x.shape
    if block_m < 1 or warps < 1 or warps > 32:
        return None
    constexprs = dict(base["constexprs"], BLOCK_M=block_m)
    options = dict(num_warps=warps, **({"maxnreg": maxnreg} if maxnreg else {}))
    kernel = tw.layer_norm_k.layer_norm_bwd_fused_kernel
    sms = ctx["facts"]["multiprocessors"]
    rows_per_program = 3  # a stand-in (not 1, which Triton would specialise) until the grid is known
    for _ in range(2 if per_sm is None else 1):  # again with the binary the launch runs
        probe = (dx, mean, mean, dy, x, w, mean, rstd, m, n, dx.stride(0), dy.stride(0), x.stride(0),
                 rows_per_program)
        tw._RESIDENT_PER_SM.clear()  # keyed without the ints' values
        holds = per_sm or tw._resident_per_sm(kernel, probe, options, **constexprs)
        programs = min(holds * sms, -(-m // block_m))
        rows_per_program = -(-(-(-m // programs)) // block_m) * block_m
    programs = -(-m // rows_per_program)
    dw_part = torch.empty(programs, n, dtype=torch.float32, device=x.device)
    db_part = torch.empty_like(dw_part)
    fused = Launch(kernel, (programs, ), (dx, dw_part, db_part, dy, x, w, mean, rstd, m, n, dx.stride(0),
                                         dy.stride(0), x.stride(0), rows_per_program), constexprs, options)
    return steps(fused, finalize_launch(tw, dw, db, dw_part, db_part, programs, n)), fused


def run_layer_norm_shape(ctx, m, n, smoke):
    import torch
    import torch.nn.functional as F
    device, tw, plans = ctx["device"], ctx["tw"], ctx["plans"]
    x = torch.randn(m, n, dtype=torch.float32, device=device)
    w = torch.randn(n, dtype=torch.float32, device=device)
    b = torch.randn(n, dtype=torch.float32, device=device)
    dy = torch.randn(m, n, dtype=torch.float32, device=device)
    _, mean, rstd = tw.layer_norm(x, w, b, EPS)  # the stats the backward reads (fp32)
    xf, wf, bf = (t.detach().clone().requires_grad_() for t in (x, w, b))
    ref = torch.autograd.grad(F.layer_norm(xf, (n, ), wf, bf, EPS), (xf, wf, bf), dy)
    del xf, wf, bf
    t = dict(x=x, dy=dy, w=w, mean=mean, rstd=rstd, dx=torch.empty_like(x), dw=torch.empty_like(w),
             db=torch.empty_like(b))
    outputs = (t["dx"], t["dw"], t["db"])
    variants = {"tjit": (lambda: torch.ops.tjit.layer_norm_backward(dy, x, [n], mean, rstd, w, b, [True] * 3), None,
                         None)}
    index_64 = tw._needs_index_64(x, dy, t["dx"])
    inputs = dict(rows=m, cols=n, want_dx=True, want_dw=True, want_db=True, has_weight=True, index64=index_64)

    def planned(facts):
        plan = plans.plan("layer_norm_backward", dtype=x.dtype, device=facts, **inputs)
        fn = lambda: tw._layer_norm_backward_planned(t["dx"], t["dw"], t["db"], dy, x, w, mean, rstd, m, n,  # noqa
                                                     index_64, facts)
        main = plan["launches"][0]
        text = (f"plan {plan['kind']}: {main['kernel']} grid {main['grid'][0]} w{main['num_warps']} " +
                " ".join(f"{k}={v}" for k, v in main["constexprs"].items() if k.startswith("BLOCK")))
        return plan, (fn, text, outputs)

    plan, variants["plan"] = planned(ctx["facts"])
    shut, variants["gate_shut"] = planned(dict(ctx["facts"], memory_gbps=0))
    if shut["kind"] == "fused" and not index_64:
        base = shut["launches"][0]
        bm, warps = base["constexprs"]["BLOCK_M"], base["num_warps"]
        threads = 32 * warps
        cap = min(255, 65536 // (2 * threads) // 8 * 8)
        for name, args in (("rows_x2", (bm * 2, warps * 2, 1)), ("two_per_sm", (bm, warps, 2, cap)),
                           ("half_rows", (bm // 2, warps, None)), ("half_rows_warps", (bm // 2, warps // 2, None))):
            made = fused_launches(ctx, base, t, *args)
            if made is not None:
                variants[name] = (made[0], made[1], outputs)
    return dict(nbytes=(3 * m * n + 3 * n) * 4 + 8 * m, variants=variants, ref=ref, outputs=lambda got: got,
                peer=("layer_norm", "bwd"), peer_inputs=(x, w, b, dy, EPS), copy_dtype=torch.float32)


# ------------------------------------------------------------------------------------------ driver

def poison(outputs):
    if outputs is None:
        return
    for o in outputs if isinstance(outputs, tuple) else (outputs, ):
        o.fill_(float("nan"))


def error_of(bandwidth, got, ref):
    if isinstance(ref, tuple):
        return max(bandwidth.rel_err(g, r) for g, r in zip(got, ref))
    return bandwidth.rel_err(got, ref)


def run_shape(ctx, case, m, n, args):
    import torch
    bandwidth, timer, tw = ctx["bandwidth"], ctx["timer"], ctx["tw"]
    started = time.perf_counter()
    made = (run_softmax_shape if case.startswith("softmax") else run_layer_norm_shape)(ctx, m, n, args.smoke)
    variants, nbytes = made["variants"], made["nbytes"]
    notes = {}
    op, pas = made["peer"]
    for peer in ctx["peers"]:
        why = peer.why_not(op, pas, [m, n])
        if why is None:
            variants[peer.name] = (peer.bind(op, pas, *made["peer_inputs"]), None, None)
        else:
            notes[peer.name] = why
    numel = max(1, nbytes // (2 * torch.empty((), dtype=made["copy_dtype"]).element_size()))
    src = torch.randn(numel, device=ctx["device"]).to(made["copy_dtype"])
    dst = torch.empty_like(src)
    variants["copy"] = (lambda: dst.copy_(src), None, None)
    keep = {"tjit", "copy"} | args.only if args.only else SMOKE_VARIANTS if args.smoke else None
    for name in list(variants):
        if name in args.skip or (keep is not None and name not in keep):
            del variants[name]

    dtype = getattr(torch, DTYPES[case])
    rows = {}
    for name, (fn, launch, outputs) in variants.items():
        def verify(row, name=name, fn=fn, launch=launch, outputs=outputs):
            row["launch"] = launch.describe(tw) if isinstance(launch, Launch) else launch
            if name != "copy":
                poison(outputs)
                got = fn()
                got = outputs if outputs is not None else got
                row["rel_err"] = error_of(bandwidth, got, made["ref"])
                row["ok"] = row["rel_err"] <= bandwidth.TOLERANCE[dtype]
            else:
                fn()

        rows[name] = check_once({"variant": name}, verify)
    time_rounds(rows, {name: fn for name, (fn, _, _) in variants.items()}, timer, args.rounds, nbytes, args.rep_ms,
                ctx["device"] == "cuda")
    print_case(f"{case} {m} x {n}", nbytes, started, rows, notes,
               {"vs_tjit": (rows["tjit"].get("gbps"), " tjit"), "vs_copy": (rows.get("copy", {}).get("gbps"), " copy")},
               16, 42)
    del variants, made
    if ctx["device"] == "cuda":
        torch.cuda.empty_cache()
    return {"case": case, "rows": m, "cols": n, "bytes": nbytes, "variants": list(rows.values()), "skipped": notes}


def main(argv=None):
    args = parse_args(argv)
    device = pick_device(args)
    import torch
    import tjit  # noqa: F401 - loads torch.ops.tjit
    from tjit import plans
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "kernels"))
    import bandwidth
    import bandwidth_candidates
    import peers as peer_lib
    import triton_wrappers as tw

    started = time.perf_counter()
    facts = plans.device_facts(torch.device(device) if device == "cuda" else None)
    peers = [peer_lib.load_peer(name, device) for name in ("flaggems", "liger")]
    ctx = dict(device=device, tw=tw, plans=plans, bandwidth=bandwidth, candidates=bandwidth_candidates, facts=facts,
               peers=peers, timer=bandwidth.Timer(device, args.smoke, rep_ms=args.rep_ms))
    gpu = device_name(device)
    print(f"{gpu}; device facts {facts}; torch {torch.__version__}; " +
          "; ".join(f"{p.name}: {p.version if p.available else p.note}" for p in peers), flush=True)
    results = []
    for case in (CASES if args.case == "both" else (args.case, )):
        for m, n in shapes_of(args, case, bandwidth.llm_rows, bandwidth.VOCAB_SIZES, bandwidth.HIDDEN_SIZES):
            results.append(run_shape(ctx, case, m, n, args))
            elapsed = time.perf_counter() - started
            if args.out:  # after every shape, so a run cut short keeps what it measured
                write_json(args.out, {"device": gpu, "facts": facts, "rounds": args.rounds,
                                      "timing": ctx["timer"].describe(), "seconds": elapsed, "results": results})
    print(f"\n{len(results)} shapes in {elapsed:.0f} s; timing: {ctx['timer'].describe()}, median of {args.rounds} "
          f"rounds")
    if args.out:
        print(f"wrote {args.out}")
    return report_failures(results, lambda r: f"{r['case']} {r['rows']}x{r['cols']}")


if __name__ == "__main__":
    sys.exit(main())
