"""`python -m tjit tune`: the plan table of this GPU, measured (plans as measured choices,
tjit/kit/plan_choice.h; docs/design.md "Plans").

For each plan that has candidates (rms_norm's and layer_norm's forwards and backwards, softmax and its
backward, sum's rows and add), each dtype, each of the plan's switches (add_rms_norm's residual, the
gradients a backward computes)
and each point of a grid of row classes and column counts, every candidate that fits is timed
(GPU time per call: replays of a CUDA graph of calls that rotate over enough input sets to leave the
L2 cache cold, as the benchmarks time), and the fastest goes into the table:

    python -m tjit tune -o ops/plan_tables/nvidia_h200.json               # the whole grid
    python -m tjit tune --dtypes bfloat16 --cols 4096,5120 -o part.json    # a part of it
    python -m tjit tune --merge part1.json part2.json -o table.json

A table serves cards of its compute capability and SM count whose peak bandwidth is within 10% of
its own. Commit it under ops/plan_tables/ (embedded in liboperators at build) or name it (or its
folder) in TJIT_PLAN_TABLES. Between measured points the nearest measured neighbour decides.

Every candidate's time goes beside the table, in <table>.measurements.json: the evidence for each
choice and what --merge carries on. The runtime reads the choices only (it skips those files), so a
first call does not parse the timings, which outweigh the choices by far.
"""

import argparse
import json
import math
import statistics
import sys
import time

FORMAT = "tjit plan table 1"
MEASUREMENTS_FORMAT = "tjit plan measurements 1"
MEASUREMENTS_SUFFIX = ".measurements.json"
DTYPES = ("bfloat16", "float16", "float32")
# Row classes (powers of two, as ChoiceKey buckets rows): decode steps to training batches.
ROWS = (1, 8, 64, 512, 4096, 32768)
# Hidden sizes every 512 columns to 16384, odd ones, and rows past the one-pass limit.
COLS = tuple(range(512, 16385, 512)) + (1000, 3000, 4097, 5000, 11008, 20480, 32768, 49152)
L2_COLD_BYTES = 100e6  # input sets rotated within a graph until the calls read at least this much
# A candidate replaces the default rule's only when it is faster by more than this: the spread of
# repeated timings, so the table does not record noise.
NOISE = 0.01


def _torch():
    import torch
    return torch


class TunedPlan:
    """How the tuner measures one plan: its switches (flags), make(rows, cols, dtype, flags) ->
    (inputs per set, bytes per call, call(inputs)), query(flags) -> the plan's inputs a switch sets,
    sizes(rows, cols) -> the describer's size inputs, and point(rows, cols) -> the table point the
    plan's choice key reads (rows class, columns)."""

    def __init__(self, switches, make, query=lambda flags: {}, sizes=None, point=None):
        self.switches = switches
        self.make = make
        self.query = query
        self.sizes = sizes or (lambda rows, cols: {"rows": rows, "cols": cols})
        self.point = point or (lambda rows, cols: (rows, cols))


def _next_power_of_2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def _plans():
    """{plan: TunedPlan}: the plans with candidates and how a call of each is made."""
    torch = _torch()

    def element_size(dtype):
        return torch.empty((), dtype=dtype).element_size()

    def rms_forward(rows, cols, dtype, flags):
        def inputs():
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            w = torch.randn(cols, device="cuda", dtype=dtype)
            return (x, w, torch.randn_like(x) if flags & 1 else None)

        def call(t):
            x, w, r = t
            if r is None:
                return torch.ops.tjit.rms_norm(x, [cols], w, 1e-6)
            return torch.ops.tjit.add_rms_norm(x, r, [cols], w, 1e-6)

        return inputs, rows * cols * element_size(dtype) * (4 if flags & 1 else 2), call

    def layer_norm_forward(rows, cols, dtype, flags):
        def inputs():
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            return (x, torch.randn(cols, device="cuda", dtype=dtype), torch.randn(cols, device="cuda", dtype=dtype))

        def call(t):
            x, w, b = t
            return torch.ops.tjit.layer_norm(x, [cols], w, b, 1e-5)

        return inputs, rows * cols * element_size(dtype) * 2, call

    def softmax(backward):
        def make(rows, cols, dtype, flags):
            def inputs():
                x = torch.randn(rows, cols, device="cuda", dtype=dtype)
                return (x, torch.softmax(x.float(), -1).to(dtype)) if backward else (x, )

            def call(t):
                if backward:
                    return torch.ops.tjit.softmax_backward(t[0], t[1], -1, dtype)
                return torch.ops.tjit.softmax(t[0], -1)

            return inputs, rows * cols * element_size(dtype) * (3 if backward else 2), call

        return make

    def rms_backward(rows, cols, dtype, flags):
        # flags: dx 1, dw 2, add_rms_norm's grad_sum 4 (rms_norm/plan.cpp's choice key).
        def inputs():
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            w = torch.randn(cols, device="cuda", dtype=dtype)
            _, rstd = torch.ops.tjit.rms_norm_forward(x, [cols], w, 1e-6)
            return (torch.randn_like(x), x, rstd, w, torch.randn_like(x) if flags & 4 else None)

        def call(t):
            dy, x, rstd, w, ds = t
            return torch.ops.tjit.rms_norm_backward(dy, x, [cols], rstd, w, [bool(flags & 1), bool(flags & 2)], ds)

        return inputs, rows * cols * element_size(dtype) * (4 if flags & 4 else 3), call

    def layer_norm_backward(rows, cols, dtype, flags):
        # flags: dx 1, dw 2, db 4 (layer_norm/plan.cpp's choice key).
        def inputs():
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            w = torch.randn(cols, device="cuda", dtype=dtype)
            b = torch.randn(cols, device="cuda", dtype=dtype)
            _, mean, rstd = torch.ops.tjit.layer_norm_forward(x, [cols], w, b, 1e-5)
            return (torch.randn_like(x), x, mean, rstd, w, b)

        def call(t):
            dy, x, mean, rstd, w, b = t
            return torch.ops.tjit.layer_norm_backward(dy, x, [cols], mean, rstd, w, b,
                                                      [bool(flags & 1), bool(flags & 2), bool(flags & 4)])

        return inputs, rows * cols * element_size(dtype) * 3, call

    def sum_rows(rows, cols, dtype, flags):
        def inputs():
            return (torch.randn(rows, cols, device="cuda", dtype=dtype), )

        def call(t):
            return torch.ops.tjit.sum(t[0], [1])

        return inputs, rows * cols * element_size(dtype), call

    def add(rows, cols, dtype, flags):
        def inputs():
            return (torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(rows, cols, device="cuda", dtype=dtype))

        def call(t):
            return torch.ops.tjit.add(t[0], t[1])

        return inputs, rows * cols * element_size(dtype) * 3, call

    return {"rms_norm_forward": TunedPlan((0, 1), rms_forward, lambda flags: {"has_residual": flags & 1}),
            "layer_norm_forward": TunedPlan((0, ), layer_norm_forward),
            "rms_norm_backward": TunedPlan((3, 7), rms_backward, lambda flags: {
                "want_dx": flags & 1, "want_dw": (flags >> 1) & 1, "has_grad_sum": (flags >> 2) & 1}),
            "layer_norm_backward": TunedPlan((7, ), layer_norm_backward, lambda flags: {
                "want_dx": flags & 1, "want_dw": (flags >> 1) & 1, "want_db": (flags >> 2) & 1}),
            "softmax": TunedPlan((0, ), softmax(False)),
            "softmax_backward": TunedPlan((0, ), softmax(True)),
            # A sum's choice serves columns up to the next power of two; an add's, outputs of up to the
            # next power of two elements, 65536 at least (one row of that many columns; flat: flags 0;
            # add/plan.cpp's choice_key).
            "sum_rows": TunedPlan((0, ), sum_rows, point=lambda rows, cols: (rows, _next_power_of_2(cols))),
            "add": TunedPlan((0, ), add, sizes=lambda rows, cols: {"numel": rows * cols},
                             point=lambda rows, cols: (1, _next_power_of_2(max(rows * cols, 65536))))}


def time_per_call(make_inputs, nbytes, call, rounds=5):
    """Median GPU ms per call: replays of a CUDA graph of calls rotating over input sets."""
    torch = _torch()
    sets = [make_inputs() for _ in range(max(1, min(64, math.ceil(L2_COLD_BYTES / max(nbytes, 1)))))]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in sets:
            call(s)  # compiles, and warms the allocator
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call(sets[0])
    end.record()
    end.synchronize()
    estimate = max(start.elapsed_time(end), 1e-3)
    calls = max(len(sets), min(1000, int(2.0 / estimate)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            call(sets[i % len(sets)])
    graph.replay()
    times = []
    for _ in range(rounds):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    del graph
    return statistics.median(times)


def time_forced(plan, candidate, make_inputs, nbytes, call):
    """time_per_call of `call` with plan `plan` forced to take `candidate`."""
    from tjit import _C
    _C.force_plan_candidate(plan, candidate)
    try:
        return time_per_call(make_inputs, nbytes, call)
    finally:
        _C.force_plan_candidate(plan, None)


def card():
    torch = _torch()
    from tjit import _C
    facts = _C.device_facts(f"cuda:{torch.cuda.current_device()}")
    return {"name": torch.cuda.get_device_name(), "capability": facts["capability"],
            "multiprocessors": facts["multiprocessors"], "memory_gbps": facts["memory_gbps"]}


def tune(plans=None, dtypes=DTYPES, rows=ROWS, cols=COLS, flags=None, budget_s=None, log=print):
    """The table (a dict) for this GPU over the grid; `measurements` holds every candidate's time."""
    torch = _torch()
    import tjit.plans as tplans
    table = {"format": FORMAT, "card": card(), "generated_by": "python -m tjit tune", "plans": {},
             "measurements": {}}
    started = time.monotonic()
    device = torch.device("cuda", torch.cuda.current_device())
    facts = tplans.device_facts(device)  # with capability -1 no table serves them: the default rule
    for plan, tuned in _plans().items():
        if plans and plan not in plans:
            continue
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            for flag in tuned.switches:
                if flags is not None and flag not in flags:
                    continue
                entries = table["plans"].setdefault(plan, {}).setdefault(dtype_name, {}).setdefault(str(flag), [])
                measured = table["measurements"].setdefault(plan, {}).setdefault(dtype_name, {}).setdefault(
                    str(flag), [])
                points = set()
                for r in rows:
                    for c in cols:
                        if budget_s is not None and time.monotonic() - started > budget_s:
                            log(f"  budget of {budget_s} s spent: stopped before {plan} {dtype_name} {flag} {r}x{c}")
                            return table
                        point = tuned.point(r, c)
                        if point in points:
                            continue  # a size whose choice is measured already (the same class)
                        points.add(point)
                        query = dict(tuned.sizes(r, c), **tuned.query(flag))
                        described = tplans.plan(plan, dtype=dtype, device=device, **query)
                        if "fitting" not in described:
                            continue  # no candidates here (layer_norm's long rows: an autotuned kernel)
                        inputs, nbytes, call = tuned.make(r, c, dtype, flag)
                        times = {}
                        for name in described["fitting"]:
                            try:
                                times[name] = time_forced(plan, name, inputs, nbytes, call)
                            except Exception as e:  # a candidate that fails to compile or launch is skipped
                                log(f"  {plan} {dtype_name} {flag} {r}x{c}: {name} failed: {str(e).splitlines()[0]}")
                        torch.cuda.empty_cache()
                        if not times:
                            continue
                        best = min(times, key=times.get)
                        default = tplans.plan(plan, dtype=dtype, device=dict(facts, capability=-1),
                                              **query)["candidate"]
                        if default in times and times[default] <= times[best] * (1 + NOISE):
                            best = default
                        entries.append([*point, best])
                        measured.append([*point, {k: round(v * 1e3, 3) for k, v in times.items()}])  # us
                        now = described["candidate"]
                        log(f"  {plan} {dtype_name} flags {flag} {r:>6} x {c:<6} best {best:<14} "
                            f"{times[best] * 1e3:8.2f} us; the current choice ({described['source']}) {now} "
                            f"{times.get(now, float('nan')) / times[best]:.3f}x")
    return table


def merge(tables):
    """One table from parts measured on the same card (later parts win at the same point)."""
    out = None
    for t in tables:
        if out is None:
            out = {"format": t["format"], "card": t["card"], "generated_by": "",
                   "plans": {}, "measurements": {}}
        # The merged table names every command that measured a part of it.
        commands = [c for c in out["generated_by"].split(" ; ") if c]
        if t.get("generated_by") and t["generated_by"] not in commands:
            out["generated_by"] = " ; ".join(commands + [t["generated_by"]])
        if (t["card"]["capability"], t["card"]["multiprocessors"]) != \
                (out["card"]["capability"], out["card"]["multiprocessors"]):
            raise ValueError(f"tune --merge: tables of different cards ({t['card']} and {out['card']})")
        for key in ("plans", "measurements"):
            for plan, by_dtype in t.get(key, {}).items():
                for dtype, by_flags in by_dtype.items():
                    for flag, rows in by_flags.items():
                        target = out[key].setdefault(plan, {}).setdefault(dtype, {}).setdefault(flag, [])
                        points = {(e[0], e[1]): e for e in target}
                        points.update({(e[0], e[1]): e for e in rows})
                        target[:] = [points[p] for p in sorted(points)]
    return out


def measurements_path(path):
    """Where the timings of the table at `path` go: <table>.measurements.json beside it."""
    path = str(path)
    return (path[:-len(".json")] if path.endswith(".json") else path) + MEASUREMENTS_SUFFIX


def _write_sections(f, sections):
    # One entry a line: diffs of a regenerated table stay readable.
    for n, (key, by_plan) in enumerate(sections):
        f.write(f'  "{key}": {{')
        plans = list(by_plan.items())
        for i, (plan, by_dtype) in enumerate(plans):
            f.write(f'\n    {json.dumps(plan)}: {{')
            for j, (dtype, by_flags) in enumerate(by_dtype.items()):
                f.write(f'\n      {json.dumps(dtype)}: {{')
                for k, (flag, rows) in enumerate(by_flags.items()):
                    f.write(f'\n        {json.dumps(flag)}: [')
                    f.write(",".join(f"\n          {json.dumps(e)}" for e in rows))
                    f.write("]" + ("," if k + 1 < len(by_flags) else ""))
                f.write("}" + ("," if j + 1 < len(by_dtype) else ""))
            f.write("}" + ("," if i + 1 < len(plans) else ""))
        f.write("}" + ("," if n + 1 < len(sections) else "") + "\n")


def write(table, path):
    """The table's choices to `path`, its timings (if any) to measurements_path(path)."""
    with open(path, "w") as f:
        f.write("{\n")
        f.write(f'  "format": {json.dumps(table["format"])},\n  "card": {json.dumps(table["card"])},\n')
        f.write(f'  "generated_by": {json.dumps(table.get("generated_by", ""))},\n')
        _write_sections(f, [("plans", table.get("plans", {}))])
        f.write("}\n")
    if table.get("measurements"):
        with open(measurements_path(path), "w") as f:
            f.write("{\n")
            f.write(f'  "format": {json.dumps(MEASUREMENTS_FORMAT)},\n  "card": {json.dumps(table["card"])},\n')
            f.write('  "unit": "us",\n')
            _write_sections(f, [("measurements", table["measurements"])])
            f.write("}\n")


def read(path):
    """The table at `path` with its timings from measurements_path(path) when that file exists."""
    with open(path) as f:
        table = json.load(f)
    table.setdefault("measurements", {})
    try:
        with open(measurements_path(path)) as f:
            measured = json.load(f)
    except FileNotFoundError:
        return table
    if measured.get("format") != MEASUREMENTS_FORMAT or measured.get("card") != table.get("card"):
        raise ValueError(f"tune: {measurements_path(path)} is not the measurements of {path} "
                         f"(format {measured.get('format')!r}, card {measured.get('card')})")
    table["measurements"] = measured.get("measurements", {})
    return table


def _ints(text):
    return tuple(int(v) for v in text.split(",") if v)


def generated_by(prog, args):
    """The command that measures this table again: what was measured, without where it was written
    or the time budget."""
    words = [prog]
    if args.plans:
        words += ["--plans", args.plans]
    words += ["--dtypes", args.dtypes, "--rows", ",".join(map(str, args.rows)), "--cols", ",".join(map(str, args.cols))]
    if args.flags:
        words += ["--flags", ",".join(map(str, args.flags))]
    return " ".join(words)


def build_parser(prog):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", required=True, help="the table to write")
    parser.add_argument("--plans", help="comma-separated plans (default: every plan with candidates)")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--rows", type=_ints, default=ROWS, help="row classes (powers of two)")
    parser.add_argument("--cols", type=_ints, default=COLS)
    parser.add_argument("--flags", type=_ints, help="only these switches of each plan (e.g. 0)")
    parser.add_argument("--budget-s", type=float, help="stop after this many seconds (the part so far is written)")
    parser.add_argument("--merge", nargs="+", metavar="TABLE", help="merge these tables instead of measuring")
    return parser


def main(argv=None, prog="python -m tjit tune"):
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.merge:
        tables = [read(p) for p in args.merge]
        write(merge(tables), args.out)
        return 0
    torch = _torch()
    if not torch.cuda.is_available():
        print(f"{prog}: no CUDA device: a plan table is measured on the card it is for", file=sys.stderr)
        return 1
    import tjit  # noqa: F401  (loads the operators)
    bad = [r for r in args.rows if r & (r - 1)]
    if bad:
        parser.error(f"--rows must be powers of two (the row classes), got {bad}")
    table = tune(plans=args.plans.split(",") if args.plans else None, dtypes=args.dtypes.split(","), rows=args.rows,
                 cols=args.cols, flags=args.flags, budget_s=args.budget_s)
    table["generated_by"] = generated_by(prog, args)
    write(table, args.out)
    print(f"wrote {args.out} and {measurements_path(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
