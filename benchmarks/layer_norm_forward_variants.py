"""A/B of the layer_norm forward's plans and kernel variants at LLM hidden sizes, in one process.

For issue 44's forward regressions between commit a6daa4a and main: each variant below runs on the
same inputs (rows x hidden, weight and bias in the input's dtype, no mean/rstd unless --stats),
checked once against torch's fp32 layer_norm, then timed in `--rounds` interleaved rounds with
bandwidth.Timer (median replay time of a CUDA graph of the call); a variant's time is the median of
its rounds. GB/s = (2*M*N + 2*N) * element size / time, as bandwidth.py counts it.

    tjit          torch.ops.tjit.layer_norm as built (--stats: layer_norm_forward)
    main          main's plan (tjit.plans with this device's facts) launched from Python with the
                  committed kernels (triton_wrappers' launch of it)
    preload_flip  main's plan with layer_norm_fwd_kernel's PRELOAD constexpr negated; one-program-a-row
                  plans only
    warps_half, warps_double   main's plan at half / twice its num_warps
    gate_shut, gate_open   main's plan asked with the persistent forward's bandwidth gate shut
                  (memory_gbps 0: an H100's plan) or open (10**6: an H200's); one is main's plan
    a6daa4a       the kernel file of commit a6daa4a (git show, read at run time) launched with that
                  commit's plan, which is main's plan with the gate always open (its other rules for
                  these shapes are main's)
    steps_<B>w<W> (--steps) the row read twice in B-column steps at W warps, kept in L2 between the
                  passes, the step count a compile-time constant (layer_norm_fwd_kernel's KEEP_ROW and
                  ROW_STEPS); loop_<B>w<W>: the same steps with a run-time count and no KEEP_ROW
    flaggems      flag_gems.ops.layer_norm (also stores mean/rstd), where installed (CUDA)
    copy          y.copy_(x): the better of a graph replay and a plain timing, as bandwidth.py

A variant whose launch repeats an earlier one of the same kernel source is not timed again. On CUDA
each Python launch also shows its binary's registers, spills and programs an SM holds (occupancy).

    python3 benchmarks/layer_norm_forward_variants.py --out lnf.json          # GPU, ~8 shapes
    python3 benchmarks/layer_norm_forward_variants.py --all --out lnf.json    # 12 shapes
    python3 benchmarks/layer_norm_forward_variants.py --smoke                 # CPU, interpreter
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from variants import (check_once, device_name, kernels_at, parse_shapes, pick_device, print_case, report_failures,
                      time_rounds, write_json)

HERE = os.path.dirname(os.path.abspath(__file__))
OLD_COMMIT = "a6daa4a"
# The regressed shapes plus the two persistent bf16 ones; --all: both dtypes at every size.
DEFAULT_SHAPES = [("bfloat16", 2048), ("bfloat16", 4096), ("bfloat16", 5120), ("bfloat16", 8192),
                  ("bfloat16", 12288), ("float32", 2048), ("float32", 4096), ("float32", 5120)]
ALL_HIDDEN = (2048, 4096, 5120, 8192, 12288, 16384)
SMOKE_SHAPES = [("bfloat16", 3, 2048), ("bfloat16", 3, 4608), ("float32", 2, 5120)]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--smoke", action="store_true", help="CPU, Triton's interpreter, tiny shapes")
    p.add_argument("--all", action="store_true", help="bf16 and fp32 at 2048..16384 columns")
    p.add_argument("--shapes", help="dtype:rows x cols list, e.g. bfloat16:32768x4096,float32:26214x5120")
    p.add_argument("--stats", action="store_true", help="also store mean/rstd (tjit: layer_norm_forward)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep-ms", type=float, default=15.0)
    p.add_argument("--old-kernel", help=f"{OLD_COMMIT}'s ops/kernels_py/layer_norm.py, where git cannot show it")
    p.add_argument("--steps", default="", help="looped forms to time, e.g. 4096w16,2048w8 (steps_/loop_ variants)")
    p.add_argument("--skip", default="", help="variants not to run, e.g. flaggems,warps_half")
    args = p.parse_args(argv)
    args.skip = {name.strip() for name in args.skip.split(",") if name.strip()}
    if "tjit" in args.skip:
        p.error("--skip tjit: the ratios are to tjit")
    return args


def old_kernels(tmp, path=None):
    """(module, None) of a6daa4a's ops/kernels_py/layer_norm.py (from git unless `path`), or (None, why not)."""
    return kernels_at(OLD_COMMIT, "ops/kernels_py/layer_norm.py", tmp, f"_lnf_{OLD_COMMIT}", "--old-kernel", path)


def preload(launch, source):
    """Whether the launch loads weight and bias with the row (the kernels' PRELOAD)."""
    c = launch["constexprs"]
    if source == OLD_COMMIT or launch["kernel"] != "layer_norm_fwd_kernel" or not c.get("SINGLE_PASS"):
        return False
    return bool(c["PRELOAD"])


def planned(plans, tw, module, facts, x, w, b, y, mean, rstd, eps, num_warps=None, flip_preload=False):
    """(launch, zero-argument callable) of tjit's layer_norm_forward plan for `facts`, its kernel taken
    from `module`, num_warps overridden when given (the persistent grid then from that binary's
    occupancy)."""
    m, n = x.shape
    inputs = dict(rows=m, cols=n, index64=0, has_weight=1, has_bias=1, tuner_available=0)
    plan = plans.plan("layer_norm_forward", dtype=x.dtype, device=facts, **inputs)
    launch = dict(plan["launches"][0])
    if plan["kind"] == "long":
        raise ValueError(f"{m}x{n}: the long-row plan is not covered")
    if num_warps is not None:
        launch["num_warps"] = num_warps
    launch["constexprs"] = dict(launch["constexprs"])
    if flip_preload:
        launch["constexprs"]["PRELOAD"] = not launch["constexprs"]["PRELOAD"]
    if module.__name__.startswith(f"_lnf_{OLD_COMMIT}"):
        launch["constexprs"].pop("PRELOAD", None)  # its kernel decides for itself
    kernel = getattr(module, launch["kernel"])
    args = (y, x, w, b, mean, rstd, m, n, x.stride(0), y.stride(0), eps)
    if plan["needs_occupancy"]:
        tw._RESIDENT_PER_SM.clear()  # keyed by the kernel's name, which the variants share
        per_sm = tw._resident_per_sm(kernel, args, tw._options(launch), **launch["constexprs"])
        again = plans.plan("layer_norm_forward", dtype=x.dtype, device=facts, resident_programs_per_sm=per_sm, **inputs)
        launch["grid"] = again["launches"][0]["grid"]
        launch["resident_programs_per_sm"] = per_sm
    grid, options = tuple(launch["grid"]), tw._options(launch)
    _note_binary(tw, launch, kernel, args, options, x.is_cuda)
    return launch, lambda: kernel[grid](*args, **launch["constexprs"], **options)


def _note_binary(tw, launch, kernel, args, options, is_cuda):
    """On CUDA, the limiter's evidence in `launch`: the binary's registers, spills and programs an SM holds."""
    if is_cuda:
        compiled = kernel.warmup(*args, grid=(1, ), **launch["constexprs"], **options)
        compiled._init_handles()
        tw._RESIDENT_PER_SM.clear()
        launch.update(n_regs=compiled.n_regs, n_spills=compiled.n_spills,
                      resident_programs_per_sm=tw._resident_per_sm(kernel, args, options, **launch["constexprs"]))


def stepped(tw, module, x, w, b, y, mean, rstd, eps, block_n, num_warps, keep_row):
    """(launch, zero-argument callable) of the row read twice in block_n-column steps, one program a row:
    with keep_row, kept in L2 between the passes and the step count a compile-time constant."""
    m, n = x.shape
    constexprs = dict(HAS_WEIGHT=True, HAS_BIAS=True, BLOCK_N=block_n, SINGLE_PASS=False, INDEX_64=False, BLOCK_TAIL=0,
                      PRELOAD=False, KEEP_ROW=keep_row, ROW_STEPS=-(-n // block_n) if keep_row else 0)
    launch = dict(kernel="layer_norm_fwd_kernel", grid=[m, 1, 1], num_warps=num_warps, maxnreg=0, launch_pdl=False,
                  constexprs=constexprs, args={})
    kernel = module.layer_norm_fwd_kernel
    args = (y, x, w, b, mean, rstd, m, n, x.stride(0), y.stride(0), eps)
    options = tw._options(launch)
    _note_binary(tw, launch, kernel, args, options, x.is_cuda)
    return launch, lambda: kernel[(m, )](*args, **constexprs, **options)


def describe(launch, source):
    c = {k: v for k, v in launch["constexprs"].items() if k not in ("HAS_WEIGHT", "HAS_BIAS", "INDEX_64", "PRELOAD")}
    extra = f" maxnreg {launch['maxnreg']}" if launch.get("maxnreg") else ""
    if "n_regs" in launch:
        extra += f" ({launch['n_regs']} regs, {launch['n_spills']} spills, {launch['resident_programs_per_sm']}/SM)"
    blocks = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in c.items())
    return (f"{launch['kernel'].replace('layer_norm_fwd_', '')} grid {launch['grid'][0]} w{launch['num_warps']} "
            f"{blocks} PRELOAD={int(preload(launch, source))}{extra}")


def shapes_of(args, llm_rows):
    if args.shapes:
        return parse_shapes(args.shapes)
    if args.smoke:
        return SMOKE_SHAPES
    pairs = [(d, n) for d in ("bfloat16", "float32") for n in ALL_HIDDEN] if args.all else DEFAULT_SHAPES
    return [(d, llm_rows(n), n) for d, n in pairs]  # rows for a 256 MiB bf16 tensor, as --only llm


def main(argv=None):
    args = parse_args(argv)
    device = pick_device(args)
    import torch
    import torch.nn.functional as F

    import tjit  # noqa: F401 - loads torch.ops.tjit
    from tjit import plans
    sys.path.insert(0, HERE)
    import bandwidth
    import peers as peer_lib
    import triton_wrappers as tw

    started = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="lnf-variants-")
    try:
        modules = {"main": tw.layer_norm_k}
        modules[OLD_COMMIT], old_note = (None, "--skip") if OLD_COMMIT in args.skip else old_kernels(tmp, args.old_kernel)
        timer = bandwidth.Timer(device, args.smoke, rep_ms=args.rep_ms)
        facts = plans.device_facts(torch.device(device) if device == "cuda" else None)
        open_gate = dict(facts, memory_gbps=10**6)
        shut_gate = dict(facts, memory_gbps=0)
        flaggems = peer_lib.load_peer("flaggems", device)
        gpu = device_name(device)
        print(f"{gpu}; device facts {facts}; torch {torch.__version__}; FlagGems: "
              f"{flaggems.version if flaggems.available else flaggems.note}", flush=True)
        eps = 1e-5
        results = []
        for dtype_name, m, n in shapes_of(args, bandwidth.llm_rows):
            shape_started = time.perf_counter()
            dtype = getattr(torch, dtype_name)
            e = torch.empty((), dtype=dtype).element_size()
            x = torch.randn(m, n, dtype=dtype, device=device)
            w = torch.randn(n, dtype=dtype, device=device)
            b = torch.randn(n, dtype=dtype, device=device)
            y = torch.empty_like(x)
            mean = torch.empty(m, dtype=torch.float32, device=device) if args.stats else None
            rstd = torch.empty(m, dtype=torch.float32, device=device) if args.stats else None
            ref = F.layer_norm(x.float(), (n, ), w.float(), b.float(), eps)
            nbytes = (2 * m * n + 2 * n) * e
            variants = {}  # name: (launch or None, callable, writes y)
            notes = {}
            if args.stats:
                variants["tjit"] = (None, lambda: torch.ops.tjit.layer_norm_forward(x, [n], w, b, eps)[0], False)
            else:
                variants["tjit"] = (None, lambda: torch.ops.tjit.layer_norm(x, [n], w, b, eps), False)
            base, fn = planned(plans, tw, modules["main"], facts, x, w, b, y, mean, rstd, eps)
            variants["main"] = (base, fn, True)
            if (base["kernel"] == "layer_norm_fwd_kernel" and base["constexprs"].get("SINGLE_PASS") and
                    "preload_flip" not in args.skip):
                variants["preload_flip"] = (*planned(plans, tw, modules["main"], facts, x, w, b, y, mean, rstd, eps,
                                                     flip_preload=True), True)
            for name, warps in (("warps_half", base["num_warps"] // 2), ("warps_double", base["num_warps"] * 2)):
                if 1 <= warps <= 32 and name not in args.skip:
                    variants[name] = (*planned(plans, tw, modules["main"], facts, x, w, b, y, mean, rstd, eps, warps),
                                      True)
            for name, gate in (("gate_shut", shut_gate), ("gate_open", open_gate)):
                if name in args.skip:
                    continue
                variants[name] = (*planned(plans, tw, modules["main"], gate, x, w, b, y, mean, rstd, eps), True)
            for form in filter(None, args.steps.split(",")):
                block_n, warps = (int(v) for v in form.split("w"))
                for prefix, keep_row in (("steps", True), ("loop", False)):
                    variants[f"{prefix}_{form}"] = (*stepped(tw, modules["main"], x, w, b, y, mean, rstd, eps, block_n,
                                                             warps, keep_row), True)
            if OLD_COMMIT in args.skip:
                pass
            elif modules[OLD_COMMIT] is not None:
                variants[OLD_COMMIT] = (*planned(plans, tw, modules[OLD_COMMIT], open_gate, x, w, b, y, mean, rstd,
                                                 eps), True)
            else:
                notes[OLD_COMMIT] = old_note
            why = flaggems.why_not("layer_norm", "fwd", [m, n])
            if why is None:
                variants["flaggems"] = (None, flaggems.bind("layer_norm", "fwd", x, w, b, eps), False)
            else:
                notes["flaggems"] = why
            variants["copy"] = (None, lambda: y.copy_(x), True)
            for name in args.skip:
                variants.pop(name, None)

            rows = {}
            seen = {}
            for name, (launch, fn, writes_y) in variants.items():
                row = {"variant": name, "launch": describe(launch, name) if launch else None,
                       "preload": preload(launch, name) if launch else None, "plan_launch": launch}
                key = (name if name in (OLD_COMMIT, "preload_flip") else "main", json.dumps(launch, sort_keys=True))
                if launch is not None and key in seen:
                    row["same_as"] = seen[key]
                    rows[name] = row
                    continue
                if launch is not None:
                    seen[key] = name

                def verify(row, name=name, fn=fn, writes_y=writes_y):
                    if writes_y:
                        y.fill_(float("nan"))
                    got = fn()
                    if name != "copy":
                        row["rel_err"] = bandwidth.rel_err(y if writes_y else got, ref)
                        row["ok"] = row["rel_err"] <= bandwidth.TOLERANCE[dtype]

                rows[name] = check_once(row, verify)
            time_rounds(rows, {name: fn for name, (_, fn, _) in variants.items()}, timer, args.rounds, nbytes,
                        args.rep_ms, device == "cuda")
            print_case(f"{dtype_name} {m} x {n}", nbytes, shape_started, rows, notes,
                       {"vs_tjit": (rows["tjit"].get("gbps"), "")}, 13, 34)
            results.append({"dtype": dtype_name, "rows": m, "cols": n, "bytes": nbytes, "variants": list(rows.values()),
                            "skipped": notes})
            del x, y, ref, variants
            if device == "cuda":
                torch.cuda.empty_cache()
        elapsed = time.perf_counter() - started
        print(f"\n{len(results)} shapes in {elapsed:.0f} s; timing: {timer.describe()}, median of {args.rounds} rounds")
        if args.out:
            write_json(args.out, {"device": gpu, "facts": facts, "stats": args.stats, "rounds": args.rounds,
                                  "timing": timer.describe(), "seconds": elapsed, "results": results})
            print(f"wrote {args.out}")
        return report_failures(results, lambda r: f"{r['dtype']} {r['rows']}x{r['cols']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
