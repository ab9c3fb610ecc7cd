"""A/B of rms_norm's and add_rms_norm's plans and kernel variants at LLM hidden sizes, in one process.

For issue 45's rms_norm targets (>= 1.00x the best peer, forward >= 0.90x and backward >= 0.80x the
device copy): each variant below runs on the same inputs (rows x hidden, weight in the input's
dtype, eps 1e-6), checked once against torch (fp32 math), then timed in `--rounds` interleaved
rounds with bandwidth.Timer (median replay time of a CUDA graph of the call); a variant's time is
the median of its rounds. GB/s counts bytes as bandwidth.py does: forward 2 * tensors * M * N * e
+ N * e (tensors: x, or x and r), backward (3 + residual) * M * N * e + 2 * N * e + 4 * M.

    tjit          torch.ops.tjit.rms_norm / add_rms_norm (fwd) or rms_norm_backward (bwd) as built
    main          commit BASE's kernel file (git show, read at run time) with BASE's plan, restated
                  here: the forward's is this tree's without maxnreg (base_forward), the backward's
                  base_backward
    new           this tree's plan (tjit.plans with this device's facts) and kernel file, launched
                  from Python: what tjit runs (past 8192 columns on CUDA, the team backward; its
                  teams sized for the programs an SM holds, --team-per-sm, else TEAM_PER_SM)
    fused         where new is the team backward: the fused pass the plan takes without teams (the
                  plan for the same facts but is_cuda), and the flips below derived from it
    prefetch_flip, preload_w_flip, both_flip   new with the fused backward's PREFETCH / PRELOAD_W /
                  both negated
    no_tail       new with a head + tail backward tile padded to one power-of-two block again
    maxnreg_flip  (forward) new's 32-warp launch with its register cap (32: two programs an SM) off, or on
    gate_shut     (forward) new as planned for memory that wants no more bytes in flight an SM (an H100's
                  plan; kit::memory_wants_more_in_flight), where it differs
    loop_<B>w<W>  (forward) new's one-row program reading the row twice in B-column blocks at W warps
                  (SINGLE_PASS off: the sum of squares, then y from the row again from its end, mostly from L2)
    inductor_row, inductor_loop   (forward) new's kernel at the launch shapes of Inductor's two configs for
                  an inner reduction: the whole row a block at block / 128 warps, max(4096 / block, 1) rows a
                  program; the row read twice in 2048-column steps at 16 warps (2 rows a program up to
                  2048), kept in L2 between the reads (KEEP_ROW), as Inductor's loads ask
    two_pass_row  (forward) a one-pass plan's block read twice instead (SINGLE_PASS off), with KEEP_ROW
    row_steps_flip  (forward) new's two-pass plan, or else inductor_loop, with its step count a compile-time
                  constant (ROW_STEPS = cdiv(N, BLOCK_N): both loops unrolled) where it is counted at run
                  time, or counted at run time where it is a constant
    loop_<B>w<W>s (forward) inductor_loop's kernel (KEEP_ROW) at B-column steps, W warps, ROW_STEPS
    const_n       (forward) inductor_loop with the row length a compile-time constant (a copy of the kernel
                  file with N a tl.constexpr, as Inductor compiles it: loops unrolled whole, masks folded)
    new_const_n   (forward) new's plan with that kernel file
    keep_row_flip (forward) new's two-pass plan with KEEP_ROW negated
    tail          (forward) new's one-row block split into a head and a tail block (5120: 4096 +
                  1024, 12288: 8192 + 4096) rather than padded to the next power of two
    programs_x2, programs_half      new's fused backward with twice / half the programs
    split_sm      new's fused backward with twice the programs, each half the rows a tile and
                  half the warps (tiles of 2+ rows only)
    warps_half, warps_double        new at half / twice its num_warps
    team_stages   new's team backward with its row loop 2 stages deep, or 3 where it is 2 (CUDA)
    team_held     where new is the team backward's lag form (rms_norm's 2-byte rows): the held form,
                  as add_rms_norm's plan has it (CUDA)
    team_lag      where new is the held form (add_rms_norm's 2-byte rows): the lag form (CUDA)
    evict_lag     where new is the lag form: its kernel with a row's first reads evict_last (kept in L2
                  for the second, dx's) and dx's stores evict_first (EVICT_LAG_EDITS; CUDA)
    aten, compile F.rms_norm (after x + r for add_rms_norm) eager / torch.compile'd; the backward
                  through autograd (graph recorded once, re-run)
    liger, flaggems   their RMSNorm (benchmarks/peers.py), where installed (CUDA)
    copy          y.copy_(x): the better of a graph replay and a plain timing, as bandwidth.py

A variant whose launches repeat an earlier one's (same kernel file) is not timed again. On CUDA each
Python launch shows its binary's registers, spills and programs an SM holds; `--sm90` prints the
same for every variant's launches without a GPU (compiled for sm_90 with Triton's ptxas, read with
its cuobjdump; occupancy of an H100/H200 SM: 64K registers, 228 KiB shared memory, 64 warps).

    python3 benchmarks/rms_norm_variants.py --out rms.json --budget-s 200        # GPU, bwd, 5 sizes
    python3 benchmarks/rms_norm_variants.py --passes fwd,bwd --hidden all --out rms.json
    python3 benchmarks/rms_norm_variants.py --sm90 --hidden all --passes fwd,bwd  # CPU, no GPU
    python3 benchmarks/rms_norm_variants.py --smoke                               # CPU, interpreter
"""

import argparse
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from variants import (check_once, device_name, kernels_at, parse_shapes, pick_device, print_case,
                      report_failures, time_rounds, write_json)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASE = "ffa1136"
KERNEL_FILE = "ops/kernels_py/rms_norm.py"
ALL_HIDDEN = (2048, 4096, 5120, 7168, 8192, 12288, 16384)
DEFAULT_HIDDEN = (2048, 5120, 8192, 12288, 16384)
SMOKE_SHAPES = [("bfloat16", 5, 2000), ("float32", 5, 4100), ("bfloat16", 2, 12000)]
LOOP_CONFIGS = ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16))  # the forward's two-pass variants: (BLOCK_N, num_warps)
STATIC_CONFIGS = ((1024, 8), (2048, 8), (2048, 16), (4096, 16))  # (BLOCK_N, num_warps) of the static-steps variants
SMOKE_SMS = 4  # the interpreter's device facts
# Programs of the team backward's binaries an SM holds on an H100/H200 (sm_90, --sm90 reads them back):
# the held form 222 registers a thread, the lag form capped at 128.
TEAM_PER_SM = {"rms_norm_bwd_team_kernel": 2, "rms_norm_bwd_team_lag_kernel": 4}
EPS = 1e-6


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--smoke", action="store_true", help="CPU, Triton's interpreter, tiny shapes")
    p.add_argument("--sm90", action="store_true", help="no timing: compile every variant's launches for sm_90 and "
                   "print registers, spills, shared memory and programs an SM holds (CPU)")
    p.add_argument("--hidden", default=",".join(map(str, DEFAULT_HIDDEN)), help="hidden sizes, or 'all'")
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--ops", default="rms_norm,add_rms_norm")
    p.add_argument("--passes", default="bwd", help="fwd, bwd or fwd,bwd")
    p.add_argument("--shapes", help="dtype:rows x cols list instead of --hidden/--dtypes, e.g. bfloat16:26240x5120")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep-ms", type=float, default=15.0)
    p.add_argument("--base", default=BASE, help="the commit whose kernel file 'main' runs")
    p.add_argument("--base-kernel", help=f"the base's {KERNEL_FILE}, where git cannot show it")
    p.add_argument("--sms", type=int, default=132, help="--sm90: the device's multiprocessors")
    p.add_argument("--team-per-sm", type=int, default=0, help="programs of the team backward an SM holds, for its "
                   "plan (0: TEAM_PER_SM's for its kernel; the C++ operator asks the driver; each CUDA launch "
                   "prints what its binary holds)")
    p.add_argument("--skip", default="", help="variants not to run, e.g. compile,warps_double")
    p.add_argument("--budget-s", type=float, default=0, help="start no case after this many seconds (0: no limit); "
                   "the cases not run are listed")
    args = p.parse_args(argv)
    args.skip = {name.strip() for name in args.skip.split(",") if name.strip()}
    if "tjit" in args.skip:
        p.error("--skip tjit: the ratios are to tjit")
    args.hidden = ALL_HIDDEN if args.hidden == "all" else tuple(int(h) for h in args.hidden.split(","))
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.ops = [o for o in args.ops.split(",") if o]
    args.passes = [s for s in args.passes.split(",") if s]
    return args


def shapes_of(args, llm_rows):
    if args.shapes:
        return parse_shapes(args.shapes)
    if args.smoke:
        return SMOKE_SHAPES
    return [(d, llm_rows(n), n) for d in args.dtypes for n in args.hidden]  # a 256 MiB bf16 tensor


def base_kernels(tmp, commit, path=None):
    """(module, None) of `commit`'s rms_norm kernel file (from git unless `path`), or (None, why not)."""
    return kernels_at(commit, KERNEL_FILE, tmp, f"_rms_{commit}", "--base-kernel", path)


def edited_kernels(tmp, name, edit):
    """The module of this tree's kernel file with edit(source) applied, written to tmp as rms_norm_<name>.py."""
    with open(os.path.join(ROOT, KERNEL_FILE)) as f:
        source = f.read()
    path = os.path.join(tmp, f"rms_norm_{name}.py")
    with open(path, "w") as f:
        f.write(edit(source))
    return kernels_at(None, KERNEL_FILE, tmp, f"_rms_{name}", "", path)[0]


def const_n_kernels(tmp):
    """This tree's kernel file with the forward's row length N a tl.constexpr (Inductor's form)."""
    head = "def rms_norm_fwd_kernel(y_ptr, s_ptr, rstd_ptr, x_ptr, r_ptr, w_ptr, M, N,"

    def edit(source):
        assert head in source, "rms_norm_fwd_kernel's signature changed: update const_n_kernels"
        return source.replace(head, head.replace(" N,", " N: tl.constexpr,"))

    return edited_kernels(tmp, "const_n", edit)


# The lag backward's first reads of a row ask L2 to keep it for the second (dx, one iteration later),
# and its dx stores to leave L2 first: (text in the kernel file, its replacement).
EVICT_LAG_EDITS = (
    ("            dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0).to(tl.float32)\n"
     "            vhat = tl.load(v_ptr + row * stride_v_row + cols, mask=mask, other=0.0).to(tl.float32) * \\\n",
     "            dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0,\n"
     "                         eviction_policy=\"evict_last\").to(tl.float32)\n"
     "            vhat = tl.load(v_ptr + row * stride_v_row + cols, mask=mask, other=0.0,\n"
     "                           eviction_policy=\"evict_last\").to(tl.float32) * \\\n"),
    ("                tl.store(dx_ptr + prev * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=prev_mask)\n",
     "                tl.store(dx_ptr + prev * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=prev_mask,\n"
     "                         eviction_policy=\"evict_first\")\n"),
)


def evict_lag_kernels(tmp):
    """This tree's kernel file with EVICT_LAG_EDITS made in rms_norm_bwd_team_lag_kernel."""

    def edit(source):
        start = source.index("def rms_norm_bwd_team_lag_kernel(")
        head, body = source[:start], source[start:]
        for old, new in EVICT_LAG_EDITS:
            assert body.count(old) == 1, "rms_norm_bwd_team_lag_kernel changed: update EVICT_LAG_EDITS"
            body = body.replace(old, new)
        return head + body

    return edited_kernels(tmp, "evict_lag", edit)


# ------------------------------------------------------------------------------------------ plans


def _p2(n):
    return 1 << (max(n, 1) - 1).bit_length()


def _cdiv(a, b):
    return -(-a // b)


def _finalize(groups, n):
    block_n = min(max(_p2(_cdiv(n, 256)), 16), 128)
    block_g = min(_p2(groups), max(32, 2048 // block_n))
    return dict(kernel="rms_norm_bwd_dw_finalize_kernel", grid=[_cdiv(n, block_n), 1, 1], num_warps=4, maxnreg=0,
                launch_pdl=False, constexprs=dict(BLOCK_G=block_g, BLOCK_N=block_n, INDEX_64=False),
                args=dict(G=groups))


def base_backward(m, n, element_size, sms):
    """The base commit's rms_norm backward plan for a fused shape (ops/csrc/ops/rms_norm/plan.cpp at
    BASE), in tjit.plans' form."""
    if element_size == 8 or n > 16384:
        raise ValueError(f"{m}x{n}: base_backward restates the fused plan only")
    block_n = _p2(n)
    tile = max(2048 if block_n <= 512 else 4096 if block_n <= 2048 else 8192, block_n)
    per_sm = 2 if 128 < block_n <= (2048 if element_size == 2 else 512) else 1
    block_m = tile // block_n
    programs = min(per_sm * sms, _cdiv(m, block_m))
    rows_per_program = _cdiv(_cdiv(m, programs), block_m) * block_m
    programs = _cdiv(m, rows_per_program)
    launches = [dict(kernel="rms_norm_bwd_fused_kernel", grid=[programs, 1, 1], num_warps=min(max(tile // 512, 4), 32),
                     maxnreg=0, launch_pdl=False,
                     constexprs=dict(HAS_WEIGHT=True, COMPUTE_DX=True, COMPUTE_DW=True, BLOCK_M=block_m,
                                     BLOCK_N=block_n, INDEX_64=False), args=dict(rows_per_program=rows_per_program))]
    if programs > 1:
        launches.append(_finalize(programs, n))
    return dict(kind="fused", launches=launches)


def _copy(plan):
    return dict(plan, launches=[dict(l, constexprs=dict(l["constexprs"]), args=dict(l.get("args") or {}))
                                for l in plan["launches"]])


def _with_constexprs(plan, **constexprs):
    """A copy of `plan` with its first launch's constexprs updated."""
    plan = _copy(plan)
    plan["launches"][0]["constexprs"].update(constexprs)
    return plan


def with_programs(plan, m, n, programs):
    """The fused backward plan with `programs` programs (rows re-split, the finalize re-sized)."""
    plan = _copy(plan)
    fused = plan["launches"][0]
    block_m = fused["constexprs"]["BLOCK_M"]
    programs = max(1, min(programs, _cdiv(m, block_m)))
    rows_per_program = _cdiv(_cdiv(m, programs), block_m) * block_m
    programs = _cdiv(m, rows_per_program)
    fused["grid"] = [programs, 1, 1]  # as tjit.plans writes grids
    fused["args"]["rows_per_program"] = rows_per_program
    plan["launches"] = [fused] + ([_finalize(programs, n)] if programs > 1 else [])
    return plan


def warps_variants(new):
    """{warps_half, warps_double: `new` with half / twice its first launch's warps}, where 1..32."""
    out = {}
    for name, factor in (("warps_half", 0.5), ("warps_double", 2)):
        warps = int(new["launches"][0]["num_warps"] * factor)
        if 1 <= warps <= 32:
            plan = _copy(new)
            plan["launches"][0]["num_warps"] = warps
            out[name] = plan
    return out


def backward_variants(new, m, n, element_size, sms):
    """{name: plan} of the candidates derived from this tree's backward plan `new`."""
    out = {}
    if new["kind"] != "fused":
        return out
    c = new["launches"][0]["constexprs"]
    for name, keys in (("prefetch_flip", ("PREFETCH", )), ("preload_w_flip", ("PRELOAD_W", )),
                       ("both_flip", ("PREFETCH", "PRELOAD_W"))):
        if all(key in c for key in keys):
            out[name] = _with_constexprs(new, **{key: not c[key] for key in keys})
    if c.get("BLOCK_TAIL"):
        out["no_tail"] = _with_constexprs(new, BLOCK_N=2 * c["BLOCK_N"], BLOCK_TAIL=0)
    programs = new["launches"][0]["grid"][0]
    out["programs_x2"] = with_programs(new, m, n, 2 * programs)
    if programs >= 2 * sms:
        out["programs_half"] = with_programs(new, m, n, programs // 2)
    out.update(warps_variants(new))
    if c["BLOCK_M"] >= 2 and new["launches"][0]["num_warps"] >= 8:
        # Two programs of half the tile and warps where one was: one's loads in flight while the
        # other sums (the registers a thread needs stay as they were).
        plan = _copy(new)
        plan["launches"][0]["constexprs"]["BLOCK_M"] //= 2
        plan["launches"][0]["num_warps"] //= 2
        out["split_sm"] = with_programs(plan, m, n, 2 * programs)
    return out


def forward_variants(new, n):
    out = {}
    c = new["launches"][0]["constexprs"]
    head = c["BLOCK_N"] // 2
    tail = _p2(n - head)
    if c["SINGLE_PASS"] and c["BLOCK_M"] == 1 and head >= 4096 and n > head and tail <= head // 2:
        out["tail"] = _with_constexprs(new, BLOCK_N=head, BLOCK_TAIL=tail)
    if c["SINGLE_PASS"] and c["BLOCK_M"] == 1:
        # The row read twice, the second time from L2 (a row is <= 64 KiB): small blocks, few
        # registers, many rows in flight an SM, where the one-pass block holds the whole row.
        for block, warps in LOOP_CONFIGS:
            if block < n:
                plan = _copy(new)
                plan["launches"][0]["constexprs"].update(BLOCK_N=block, SINGLE_PASS=False, BLOCK_TAIL=0)
                plan["launches"][0].update(num_warps=warps, maxnreg=0)
                out[f"loop_{block}w{warps}"] = plan
    if c["BLOCK_M"] == 1 and not c.get("BLOCK_TAIL"):
        # Inductor's two configs for an inner reduction (torch._inductor.runtime.triton_heuristics,
        # default mode): the whole row a block, max(4096 // block, 1) rows a program, block / 128 warps
        # (<= 16, 32 past 8192 columns); and the row read twice in 2048-column steps at 16 warps,
        # two rows a program up to 2048 columns.
        block = _p2(n)
        plan = _copy(new)
        plan["launches"][0]["constexprs"].update(BLOCK_M=max(4096 // block, 1), BLOCK_N=block, SINGLE_PASS=True)
        plan["launches"][0].update(num_warps=min(max(block // 128, 2), 16 if block <= 8192 else 32), maxnreg=0,
                                   grid=[_cdiv(new["launches"][0]["grid"][0], max(4096 // block, 1)), 1, 1])
        out["inductor_row"] = plan
        plan = _copy(new)
        rows = 2 if block <= 2048 else 1
        plan["launches"][0]["constexprs"].update(BLOCK_M=rows, BLOCK_N=min(block, 2048), SINGLE_PASS=False,
                                                 KEEP_ROW=True, ROW_STEPS=0)
        plan["launches"][0].update(num_warps=16, maxnreg=0, grid=[_cdiv(new["launches"][0]["grid"][0], rows), 1, 1])
        out["inductor_loop"] = plan
        # Inductor's form at its one-block config: the block read twice, kept in L2 between the reads.
        out["two_pass_row"] = _with_constexprs(new, SINGLE_PASS=False, KEEP_ROW=True)
        for block, warps in STATIC_CONFIGS:
            if 2 * block <= n:
                plan = _with_constexprs(out["inductor_loop"], BLOCK_N=block, ROW_STEPS=_cdiv(n, block))
                plan["launches"][0]["num_warps"] = warps
                out[f"loop_{block}w{warps}s"] = plan
    out.update(warps_variants(new))
    if new["launches"][0]["num_warps"] == 32:
        # 32 warps a program: two fit an SM only at <= 32 registers a thread (fp32 rows of 8193..16384
        # columns compile to 34-37 unless capped: one program an SM, none loading while it sums).
        plan = _copy(new)
        plan["launches"][0]["maxnreg"] = 0 if new["launches"][0]["maxnreg"] else 32
        out["maxnreg_flip"] = plan
    return out


def base_forward(new):
    """The base commit's forward plan: this tree's without the register cap (maxnreg) and the
    constexprs (BLOCK_TAIL, KEEP_ROW, ROW_STEPS) it added."""
    plan = _copy(new)
    plan["launches"][0]["maxnreg"] = 0
    for name in ("BLOCK_TAIL", "KEEP_ROW", "ROW_STEPS"):
        plan["launches"][0]["constexprs"].pop(name, None)
    return plan


def describe(plan):
    parts = []
    for l in plan["launches"]:
        c = {k: v for k, v in l["constexprs"].items()
             if k not in ("HAS_WEIGHT", "HAS_RESIDUAL", "INDEX_64", "COMPUTE_DX", "COMPUTE_DW")}
        text = (f"{l['kernel'].replace('rms_norm_', '').replace('_kernel', '')} grid {l['grid'][0]} w{l['num_warps']} " +
                " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in c.items()))
        if "rows_per_program" in (l.get("args") or {}):
            text += f" rows/program {l['args']['rows_per_program']}"
        if "n_regs" in l:
            text += f" ({l['n_regs']} regs, {l['n_spills']} spills, {l['resident_programs_per_sm']}/SM)"
        parts.append(text)
    return "; ".join(parts)


# ------------------------------------------------------------------------------------- launching


def forward_args(t, plan, residual):
    x, r, w, y, s = t["x"], t["r"], t["w"], t["y"], t["s"]
    m, n = x.shape
    return (y, s if residual else None, None, x, r if residual else None, w, m, n, y.stride(0),
            s.stride(0) if residual else 0, x.stride(0), r.stride(0) if residual else 0, EPS)


def launch_plan(torch, tw, module, plan, args_of, on_cuda):
    """A zero-argument callable running `plan`'s launches with `module`'s kernels; on CUDA each
    launch dict gains its binary's n_regs, n_spills and resident_programs_per_sm."""
    calls = []
    before = getattr(args_of, "before", None)
    for launch in plan["launches"]:
        kernel = getattr(module, launch["kernel"])
        args = args_of(launch)
        options = tw._options(launch)
        if on_cuda and before is not None:
            before()  # warmup runs nothing, but the occupancy query below may launch nothing either
        if on_cuda:
            compiled = kernel.warmup(*args, grid=(1, ), **launch["constexprs"], **options)
            compiled._init_handles()
            tw._RESIDENT_PER_SM.clear()  # keyed by the kernel's name, which the variants share
            launch.update(n_regs=compiled.n_regs, n_spills=compiled.n_spills,
                          resident_programs_per_sm=tw._resident_per_sm(kernel, args, options, **launch["constexprs"]))
        calls.append((kernel, tuple(launch["grid"]), args, launch["constexprs"], options))

    def run():
        if before is not None:
            before()
        for kernel, grid, args, constexprs, options in calls:
            kernel[grid](*args, **constexprs, **options)

    return run


def backward_args_of(torch, t, plan, residual):
    """args_of(launch) for a backward plan, with its dw partial buffer allocated once."""
    x, v, w, dy, ds, dx, dw, rstd = t["x"], t["v"], t["w"], t["dy"], t["ds"], t["dx"], t["dw"], t["rstd"]
    m, n = x.shape
    groups = plan["launches"][-1]["args"].get("G", 1)  # the finalize's, where there is one
    team = plan["kind"] == "team"
    partial = torch.empty((groups, n), dtype=torch.float32, device=x.device) if groups > 1 else dw
    sync = torch.zeros(plan["workspace"]["row_exchange_words"], dtype=torch.int64, device=x.device) if team else None
    ds_stride = ds.stride(0) if residual else 0

    def args_of(launch):
        if launch["kernel"] == "rms_norm_bwd_fused_kernel":
            return (dx, partial, dy, v, w, rstd, ds if residual else None, m, n, dx.stride(0), dy.stride(0),
                    v.stride(0), ds.stride(0) if residual else 0, launch["args"]["rows_per_program"])
        if launch["kernel"] in ("rms_norm_bwd_team_kernel", "rms_norm_bwd_team_lag_kernel",
                                "rms_norm_bwd_team_rescue_kernel"):
            return (dx, partial, dy, v, w, rstd, ds if residual else None, sync, m, n, launch["args"]["S"],
                    launch["args"]["rows_per_team"], dx.stride(0), dy.stride(0), v.stride(0), ds_stride)
        if launch["kernel"] == "rms_norm_bwd_dw_finalize_kernel":
            return (dw, partial, launch["args"]["G"], n)
        raise ValueError(f"no arguments for {launch['kernel']}")

    def before():
        if sync is not None:
            sync.zero_()  # the team kernel's tickets, row words and mode words start from 0 every launch

    args_of.before = before
    return args_of


# --------------------------------------------------------------------------------------- sm_90


def sm90_resources(fn, signature, constexprs, num_warps, maxnreg=0):
    """Registers, spilled bytes, shared memory and programs an H100/H200 SM holds for an sm_90
    binary of `fn`, compiled here (no GPU) and read with Triton's cuobjdump."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    attrs = {}
    for i, name in enumerate(fn.arg_names):
        kind = signature.get(name, "")
        if kind.startswith("*") or (kind == "i32" and (name == "N" or name.startswith("stride"))):
            attrs[(i, )] = [["tt.divisibility", 16]]
    constexprs = dict(constexprs)
    for param in fn.params:  # constexprs the launch leaves out take their defaults, as a call does
        if param.is_constexpr and param.name not in constexprs and param.default is not inspect.Parameter.empty:
            constexprs[param.name] = param.default
    full = dict(signature, **{k: "constexpr" for k in constexprs if k not in signature})
    options = {"num_warps": num_warps}
    if maxnreg:
        options["maxnreg"] = maxnreg
    compiled = triton.compile(ASTSource(fn, signature=full, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options=options)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        text = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    regs, stack, shared, local = map(int, found.groups())
    smem = max(shared, compiled.metadata.shared)
    per_warp = _cdiv(regs * 32, 256) * 256  # registers are allocated per warp in units of 256
    per_sm = min(65536 // (per_warp * num_warps), 64 // num_warps, 32,
                 (228 * 1024) // (smem + 1024) if smem else 32)
    return dict(n_regs=regs, n_spills=stack + local, smem=smem, resident_programs_per_sm=per_sm)


def sm90_annotate(module, plan, dtype, residual, pas):
    """Fills each launch of `plan` with sm90_resources (pointers typed as the plan's call passes them)."""
    d = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}[dtype]
    for launch in plan["launches"]:
        fn = getattr(module, launch["kernel"])
        c = dict(launch["constexprs"])
        if launch["kernel"] == "rms_norm_fwd_kernel":
            sig = dict(y_ptr=f"*{d}", s_ptr=f"*{d}", rstd_ptr="constexpr", x_ptr=f"*{d}", r_ptr=f"*{d}", w_ptr=f"*{d}",
                       M="i32", N="i32", stride_y_row="i32", stride_s_row="i32", stride_x_row="i32",
                       stride_r_row="i32", eps="fp64")
            c["rstd_ptr"] = None
            if not residual:
                sig.update(s_ptr="constexpr", r_ptr="constexpr")
                c.update(s_ptr=None, r_ptr=None)
        elif launch["kernel"] == "rms_norm_bwd_fused_kernel":
            sig = dict(dx_ptr=f"*{d}", dw_partial_ptr="*fp32", dy_ptr=f"*{d}", v_ptr=f"*{d}", w_ptr=f"*{d}",
                       rstd_ptr="*fp32", ds_ptr=f"*{d}", M="i32", N="i32", stride_dx_row="i32", stride_dy_row="i32",
                       stride_v_row="i32", stride_ds_row="i32", rows_per_program="i32")
            if not residual:
                sig["ds_ptr"] = "constexpr"
                c["ds_ptr"] = None
        elif launch["kernel"] in ("rms_norm_bwd_team_kernel", "rms_norm_bwd_team_lag_kernel",
                                  "rms_norm_bwd_team_rescue_kernel"):
            sig = dict(dx_ptr=f"*{d}", dw_partial_ptr="*fp32", dy_ptr=f"*{d}", v_ptr=f"*{d}", w_ptr=f"*{d}",
                       rstd_ptr="*fp32", ds_ptr=f"*{d}", sync_ptr="*i64", M="i32", N="i32", S="i32",
                       rows_per_team="i32", stride_dx_row="i32", stride_dy_row="i32", stride_v_row="i32",
                       stride_ds_row="i32")
            if not residual:
                sig["ds_ptr"] = "constexpr"
                c["ds_ptr"] = None
        elif launch["kernel"] == "rms_norm_bwd_dw_finalize_kernel":
            sig = dict(dw_ptr=f"*{d}", dw_partial_ptr="*fp32", G="i32", N="i32")
        else:
            continue
        sig = {k: v for k, v in sig.items() if k in fn.arg_names}
        launch.update(sm90_resources(fn, sig, c, launch["num_warps"], launch.get("maxnreg") or 0))


# ------------------------------------------------------------------------------------------ main


def byte_count(pas, residual, m, n, e):
    if pas == "fwd":
        return 2 * (2 if residual else 1) * m * n * e + n * e
    return (3 + (1 if residual else 0)) * m * n * e + 2 * n * e + 4 * m


def plans_for(args, plans, kernels, facts, dtype_name, m, n, op, pas):
    """{name: (module key, plan)} of the Python-launched variants, and {name: why not}."""
    import torch
    dtype = getattr(torch, dtype_name)
    e = torch.empty((), dtype=dtype).element_size()
    residual = op == "add_rms_norm"
    out, notes = {}, {}
    if pas == "fwd":
        new = plans.plan("rms_norm_forward", rows=m, cols=n, dtype=dtype, device=facts, has_residual=int(residual))
        if kernels["main"] is not None:
            out["main"] = ("main", base_forward(new))
        out["new"] = ("new", new)
        # The plan on memory that wants no more bytes in flight (kit::memory_wants_more_in_flight shut).
        shut = plans.plan("rms_norm_forward", rows=m, cols=n, dtype=dtype, device=dict(facts, memory_gbps=0),
                          has_residual=int(residual))
        if facts["is_cuda"] and shut != new:
            out["gate_shut"] = ("new", shut)
        if not new["launches"][0]["constexprs"]["SINGLE_PASS"]:
            out["keep_row_flip"] = ("new", _with_constexprs(
                new, KEEP_ROW=not new["launches"][0]["constexprs"]["KEEP_ROW"]))
        out.update({k: ("new", p) for k, p in forward_variants(shut, n).items()})
        if not new["launches"][0]["constexprs"]["SINGLE_PASS"]:
            two_pass = new
        else:
            two_pass = out["inductor_loop"][1] if "inductor_loop" in out else None
        if two_pass is not None:
            c = two_pass["launches"][0]["constexprs"]
            out["row_steps_flip"] = ("new", _with_constexprs(
                two_pass, ROW_STEPS=0 if c.get("ROW_STEPS") else _cdiv(n, c["BLOCK_N"])))
        if kernels.get("const_n") is not None:
            if "inductor_loop" in out:
                out["const_n"] = ("const_n", out["inductor_loop"][1])
            out["new_const_n"] = ("const_n", new)
    else:
        query = dict(rows=m, cols=n, dtype=dtype, has_grad_sum=int(residual))
        new = backward_plan(plans, facts, query, args.team_per_sm)
        try:
            if kernels["main"] is not None:
                out["main"] = ("main", base_backward(m, n, e, facts["multiprocessors"]))
        except ValueError as exc:
            notes["main"] = str(exc)
        out["new"] = ("new", new)
        fused = new
        if new["kind"] == "team":
            fused = plans.plan("rms_norm_backward", device=dict(facts, is_cuda=False), **query)
            if fused["kind"] == "fused":
                out["fused"] = ("new", fused)
            else:  # past 16384 columns: dx, then dw by column blocks
                notes["fused"] = f"the plan without teams is {fused['kind']}, which this script does not launch"
            out["team_stages"] = ("new", _with_constexprs(
                new, STAGES=2 if new["launches"][0]["constexprs"]["STAGES"] > 2 else 3))
            # The team's other form: the one the plan gives the other operator (rms_norm's 2-byte rows
            # lag, add_rms_norm's are held); the launches differ in that form only.
            other = backward_plan(plans, facts, dict(query, has_grad_sum=1 - query["has_grad_sum"]), args.team_per_sm)
            if other["kind"] == "team" and other != new:
                out["team_lag" if "lag" in other["launches"][0]["kernel"] else "team_held"] = ("new", other)
            if kernels.get("evict_lag") is not None and "lag" in new["launches"][0]["kernel"]:
                out["evict_lag"] = ("evict_lag", new)
        elif n > 8192 and e != 8 and not facts["is_cuda"]:
            notes["team"] = "CUDA only: the team backward's programs wait for each other"
        out.update({k: ("new", p) for k, p in backward_variants(fused, m, n, e, facts["multiprocessors"]).items()})
    for name in args.skip:
        out.pop(name, None)
    return out, notes


def backward_plan(plans, facts, query, per_sm=0):
    """The backward plan as the operator makes it: a team plan asked again with the programs an SM
    holds of the kernel it names (per_sm, else TEAM_PER_SM's)."""
    plan = plans.plan("rms_norm_backward", device=facts, **query)
    if plan.pop("needs_occupancy", False):
        per_sm = per_sm or TEAM_PER_SM[plan["launches"][0]["kernel"]]
        plan = plans.plan("rms_norm_backward", device=facts, resident_programs_per_sm=per_sm, **query)
        plan.pop("needs_occupancy", None)
    return plan


def run_sm90(args):
    os.environ.pop("TRITON_INTERPRET", None)
    from tjit import plans
    sys.path.insert(0, HERE)
    import triton_wrappers as tw
    kernels = {"new": tw.rms_norm_k}  # the kernels package's module: rms_norm.py imports row_exchange
    tmp = tempfile.mkdtemp(prefix="rms-variants-")
    try:
        kernels["main"], note = base_kernels(tmp, args.base, args.base_kernel)
        if note:
            print(f"main: {note}")
        kernels["evict_lag"] = evict_lag_kernels(tmp)
        facts = plans.device_facts(is_cuda=True, multiprocessors=args.sms, memory_gbps=4800)
        print(f"sm_90 binaries, plans for {facts}")
        results = []
        for dtype_name, m, n in shapes_of(args, _llm_rows()):
            for op in args.ops:
                for pas in args.passes:
                    variants, notes = plans_for(args, plans, kernels, facts, dtype_name, m, n, op, pas)
                    print(f"\n{op} {pas} {dtype_name} {m} x {n}", flush=True)
                    seen = {}
                    rows = []
                    for name, (key, plan) in variants.items():
                        same = seen.get((key, json.dumps(plan, sort_keys=True)))
                        if same:
                            print(f"  {name:15s} (= {same})")
                            continue
                        seen[(key, json.dumps(plan, sort_keys=True))] = name
                        try:
                            sm90_annotate(kernels[key], plan, dtype_name, op == "add_rms_norm", pas)
                            print(f"  {name:15s} {describe(plan)}", flush=True)
                        except Exception as exc:  # noqa: BLE001 - reported, the rest go on
                            print(f"  {name:15s} compile failed: {str(exc).splitlines()[-1][:200] if str(exc) else exc}")
                        rows.append(dict(variant=name, plan=plan))
                    results.append(dict(op=op, pass_=pas, dtype=dtype_name, rows=m, cols=n, variants=rows,
                                        skipped=notes))
        if args.out:
            write_json(args.out, {"facts": facts, "sm90": True, "results": results})
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _llm_rows():
    sys.path.insert(0, HERE)
    import bandwidth
    return bandwidth.llm_rows


def main(argv=None):
    args = parse_args(argv)
    if args.sm90:
        return run_sm90(args)
    device = pick_device(args)
    import torch
    import torch.nn.functional as F

    import tjit  # noqa: F401 - loads torch.ops.tjit
    from tjit import plans
    if device == "cpu":
        from tjit.triton_adapter.interpreter import fix_interpreter_scalar_index
        fix_interpreter_scalar_index()  # as the C++ runtime's interpreted runs do
    sys.path.insert(0, HERE)
    import bandwidth
    import peers as peer_lib
    import triton_wrappers as tw

    started = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="rms-variants-")
    try:
        kernels = {"new": tw.rms_norm_k}  # the kernels package's module: rms_norm.py imports row_exchange
        kernels["main"], base_note = base_kernels(tmp, args.base, args.base_kernel)
        kernels["const_n"] = const_n_kernels(tmp)
        kernels["evict_lag"] = evict_lag_kernels(tmp)
        timer = bandwidth.Timer(device, args.smoke, rep_ms=args.rep_ms)
        facts = plans.device_facts(torch.device(device) if device == "cuda" else None)
        peers = {name: peer_lib.load_peer(name, device) for name in ("liger", "flaggems") if name not in args.skip}
        gpu = device_name(device)
        print(f"{gpu}; device facts {facts}; torch {torch.__version__}; " +
              "; ".join(f"{k}: {p.version if p.available else p.note}" for k, p in peers.items()), flush=True)
        on_cuda = device == "cuda"
        compiled_fwd = {}
        results = []
        not_run = []  # past --budget-s
        for dtype_name, m, n in shapes_of(args, bandwidth.llm_rows):
            dtype = getattr(torch, dtype_name)
            e = torch.empty((), dtype=dtype).element_size()
            for op in args.ops:
                residual = op == "add_rms_norm"
                for pas in args.passes:
                    case_started = time.perf_counter()
                    if args.budget_s and case_started - started > args.budget_s:
                        not_run.append(f"{op} {pas} {dtype_name} {m}x{n}")
                        continue
                    g = torch.Generator(device=device).manual_seed(0)
                    t = {k: torch.randn(m, n, dtype=dtype, device=device, generator=g) for k in ("x", "r", "dy", "ds")}
                    t["w"] = torch.randn(n, dtype=dtype, device=device, generator=g)
                    if not residual:
                        t["r"] = t["ds"] = None
                    t["y"] = torch.empty_like(t["x"])
                    t["s"] = torch.empty_like(t["x"]) if residual else None
                    nbytes = byte_count(pas, residual, m, n, e)

                    def torch_fwd(x, r, w, n=n):
                        if r is not None:
                            v = x + r
                            return F.rms_norm(v, (n, ), w, EPS), v
                        return F.rms_norm(x, (n, ), w, EPS)

                    if on_cuda and "compile" not in args.skip and (dtype_name, n, op) not in compiled_fwd:
                        compiled_fwd[(dtype_name, n, op)] = bandwidth.compile_static(torch_fwd)
                    compiled = compiled_fwd.get((dtype_name, n, op))
                    variants = {}  # name: (plan or None, callable, output check)
                    notes = {}
                    plan_variants, plan_notes = plans_for(args, plans, kernels, facts, dtype_name, m, n, op, pas)
                    notes.update(plan_notes)
                    if kernels["main"] is None:
                        notes["main"] = base_note
                    if pas == "fwd":
                        v32 = (t["x"].float() + t["r"].float()).to(dtype).float() if residual else t["x"].float()
                        ref = F.rms_norm(v32, (n, ), t["w"].float(), EPS)
                        refs = (ref, v32) if residual else (ref, )
                        if residual:
                            variants["tjit"] = (None, lambda: torch.ops.tjit.add_rms_norm(t["x"], t["r"], [n], t["w"], EPS))
                        else:
                            variants["tjit"] = (None, lambda: (torch.ops.tjit.rms_norm(t["x"], [n], t["w"], EPS), ))
                        for name, (key, plan) in plan_variants.items():
                            fn = launch_plan(torch, tw, kernels[key], plan, lambda l: forward_args(t, plan, residual),
                                             on_cuda)
                            variants[name] = (plan, (lambda fn=fn: (fn(), (t["y"], t["s"]) if residual else (t["y"], ))[1]))
                        variants["aten"] = (None, lambda: torch_fwd(t["x"], t["r"], t["w"]))
                        if compiled is not None:
                            variants["compile"] = (None, lambda: compiled(t["x"], t["r"], t["w"]))
                        for name, peer in peers.items():
                            why = peer.why_not(op, "fwd", [m, n])
                            if why is None:
                                inputs = (t["x"], t["r"], t["w"], EPS) if residual else (t["x"], t["w"], EPS)
                                variants[name] = (None, peer.bind(op, "fwd", *inputs))
                            else:
                                notes[name] = why
                        variants["copy"] = (None, lambda: t["y"].copy_(t["x"]))
                    else:
                        with torch.no_grad():
                            if residual:
                                _, t["v"], t["rstd"] = torch.ops.tjit.add_rms_norm_forward(t["x"], t["r"], [n], t["w"], EPS)
                            else:
                                t["v"] = t["x"]
                                _, t["rstd"] = torch.ops.tjit.rms_norm_forward(t["x"], [n], t["w"], EPS)
                        leaves = [t["v"].detach().double().requires_grad_(), t["w"].detach().double().requires_grad_()]
                        grads = torch.autograd.grad(F.rms_norm(leaves[0], (n, ), leaves[1], EPS), leaves,
                                                    t["dy"].double())
                        refs = ((grads[0] + t["ds"].double()).float() if residual else grads[0].float(),
                                grads[1].float())
                        del leaves, grads
                        t["dx"] = torch.empty_like(t["x"])
                        t["dw"] = torch.empty_like(t["w"])
                        variants["tjit"] = (None, lambda: torch.ops.tjit.rms_norm_backward(
                            t["dy"], t["v"], [n], t["rstd"], t["w"], [True, True], t["ds"]))
                        for name, (key, plan) in plan_variants.items():
                            fn = launch_plan(torch, tw, kernels[key], plan, backward_args_of(torch, t, plan, residual),
                                             on_cuda)
                            variants[name] = (plan, (lambda fn=fn: (fn(), (t["dx"], t["dw"]))[1]))

                        def autograd_bwd(forward):
                            base = [t["x"].detach().requires_grad_(), t["w"].detach().requires_grad_()]
                            if residual:
                                rr = t["r"].detach().requires_grad_()
                                y, v = forward(base[0], rr, base[1])
                                outs, gs = [y, v], [t["dy"], t["ds"]]
                            else:
                                outs, gs = [forward(base[0], None, base[1])], [t["dy"]]
                            return lambda: torch.autograd.grad(outs, base, gs, retain_graph=True)

                        variants["aten"] = (None, autograd_bwd(torch_fwd))
                        if compiled is not None:
                            variants["compile"] = (None, autograd_bwd(compiled))
                        for name, peer in peers.items():
                            why = peer.why_not(op, "bwd", [m, n])
                            if why is None:
                                inputs = ((t["x"], t["r"], t["w"], t["dy"], t["ds"], EPS) if residual else
                                          (t["x"], t["w"], t["dy"], EPS))
                                variants[name] = (None, peer.bind(op, "bwd", *inputs))
                            else:
                                notes[name] = why
                        variants["copy"] = (None, lambda: t["y"].copy_(t["x"]))
                    for name in args.skip:
                        variants.pop(name, None)

                    rows = {}
                    seen = {}
                    for name, (plan, fn) in variants.items():
                        row = {"variant": name, "launch": describe(plan) if plan else None, "plan": plan}
                        key = (plan_variants[name][0], json.dumps(plan, sort_keys=True)) if plan else None
                        if key is not None and key in seen:
                            row["same_as"] = seen[key]
                            rows[name] = row
                            continue
                        if key is not None:
                            seen[key] = name

                        def verify(row, name=name, fn=fn):
                            for out in ("y", "s", "dx", "dw"):
                                if t.get(out) is not None:
                                    t[out].fill_(float("nan"))
                            got = fn()
                            if name != "copy":
                                got = [g for g in (got if isinstance(got, (tuple, list)) else (got, )) if g is not None]
                                if pas == "bwd" and name in ("aten", "compile", "liger", "flaggems"):
                                    got = [got[0], got[-1]]  # d input (= d residual), dw
                                row["rel_err"] = max(bandwidth.rel_err(a, b) for a, b in zip(got, refs))
                                row["ok"] = row["rel_err"] <= bandwidth.TOLERANCE[dtype]

                        rows[name] = check_once(row, verify)
                    time_rounds(rows, {name: fn for name, (_, fn) in variants.items()}, timer, args.rounds, nbytes,
                                args.rep_ms, on_cuda, copy_bytes=2 * m * n * e)
                    peer_best = max((rows[p]["gbps"] for p in ("aten", "compile", "liger", "flaggems")
                                     if rows.get(p, {}).get("gbps") and rows[p].get("ok")), default=None)
                    print_case(f"{op} {pas} {dtype_name} {m} x {n}", nbytes, case_started, rows, notes,
                               {"vs_tjit": (rows["tjit"].get("gbps"), " tjit"),
                                "vs_copy": (rows.get("copy", {}).get("gbps"), " copy"),
                                "vs_best_peer": (peer_best, " peer")}, 15, 60)
                    results.append({"op": op, "pass": pas, "dtype": dtype_name, "rows": m, "cols": n, "bytes": nbytes,
                                    "variants": list(rows.values()), "skipped": notes})
                    del t, variants, refs
                    if on_cuda:
                        torch.cuda.empty_cache()
        elapsed = time.perf_counter() - started
        print(f"\n{len(results)} cases in {elapsed:.0f} s; timing: {timer.describe()}, median of {args.rounds} rounds")
        if not_run:
            print(f"not run (past --budget-s {args.budget_s:.0f}): " + "; ".join(not_run))
        if args.out:
            write_json(args.out, {"device": gpu, "facts": facts, "base": args.base, "rounds": args.rounds,
                                  "timing": timer.describe(), "seconds": elapsed, "results": results,
                                  "not_run": not_run})
            print(f"wrote {args.out}")
        return report_failures(results, lambda r: f"{r['op']} {r['pass']} {r['dtype']} {r['rows']}x{r['cols']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
