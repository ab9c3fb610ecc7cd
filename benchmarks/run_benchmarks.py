#!/usr/bin/env python3
"""tjit's benchmark suite: host overhead (Python and C++; a user's own kernels through tjit.jit against
Python Triton, a ctypes cuLaunchKernel and C++: own_kernels.py), memory bandwidth (a power-of-two sweep, and
the shapes language models run: `--only llm`; grids of sizes chosen by rule: `--only dense` and
`--only decode`, run only when named), cold start, and the first calls of operators whose plans are
tuned or read from a card's table (first_call.py), how close first-call tuning on a card without a table
comes to the table's choices (tuned_choice.py), tjit against
aten, Python Triton, torch.library.triton_op, FlagGems and Liger-Kernel (where installed; peers.py) and a
device copy, with the targets checked at the end.

    python3 benchmarks/run_benchmarks.py --out benchmarks/results      # on the CUDA machine
    python3 benchmarks/run_benchmarks.py --smoke                       # anywhere: tiny sizes, CPU ok

Writes results.json, results.md and PNG plots into <out>/<gpu-name-slug>/ and prints a summary
table (targets with PASS/MISS) last. --smoke uses tiny sizes and few iterations (on CPU through
Triton's interpreter) to check that everything runs; its results go to a temporary folder unless
--out names another one, and never into benchmarks/results. See benchmarks/README.md.
"""

import argparse
import datetime
import os
import platform
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(HERE, "results")
OPS = ("add", "sum", "softmax", "layer_norm", "rms_norm", "add_rms_norm")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="results folder; a <gpu-name-slug> folder is made inside "
                   "(default: benchmarks/results, or a new temporary folder with --smoke)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes and few iterations, to check that everything runs (implied on CPU)")
    p.add_argument("--only", choices=("overhead", "bandwidth", "llm", "cold_start", "first_call", "tuned_choice",
                                      "autotune", "dense", "decode"),
                   help="run one part only (llm: softmax at vocabulary sizes, layer_norm, rms_norm and "
                   "add_rms_norm at hidden sizes; dense and decode: the grids of grids.py, run only when named)")
    p.add_argument("--shard", default="0/1", help="dense and decode: run the I-th of N interleaved shares of the "
                   "sizes (I/N, default 0/1: all), so a part fits a 10-minute command; --merge the shards")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available, else cpu")
    p.add_argument("--ops", help=f"comma-separated subset of {','.join(OPS)} (default: all)")
    p.add_argument("--dtypes", help="bandwidth dtypes, comma-separated (default: float32,bfloat16)")
    p.add_argument("--cpp-bin", help="path of tjit_bench_overhead (default: build/bin, then ops/bin)")
    p.add_argument("--no-build", action="store_true",
                   help="do not try to build tjit_bench_overhead when it is missing")
    p.add_argument("--merge", action="store_true",
                   help="update an existing results.json in the output folder with the parts run now "
                   "(e.g. after --only / --ops runs split over several commands)")
    p.add_argument("--cold-start-runs", type=int, help="fresh processes per cold-start scenario (default 5; smoke 1)")
    p.add_argument("--warmup-ms", type=float, default=20, help="do_bench warm-up time per measurement (ms)")
    p.add_argument("--rep-ms", type=float, default=60, help="do_bench measuring time per measurement (ms)")
    p.add_argument("--rounds", type=int, help="timings of each implementation per case, in rotated order, the "
                   "median kept (default: 3 for decode, whose microsecond calls move by a few percent between "
                   "timings; 1 elsewhere)")
    return p.parse_args(argv)


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder + os.sep)


def merge_previous(results, path, ops_filter):
    """results with the parts not run now taken from the results.json at path (if any)."""
    import json
    if not os.path.exists(path):
        print(f"note: --merge: no {path} yet, nothing to merge")
        return results
    with open(path) as f:
        old = json.load(f)
    if old.get("meta", {}).get("device_name") != results["meta"]["device_name"]:
        print(f"note: --merge: {path} is from {old.get('meta', {}).get('device_name')}; not merged")
        return results
    ran = set(ops_filter or OPS)
    for part in ("python", "cpp", "own_kernels"):
        if part not in results["overhead"] and part in (old.get("overhead") or {}):
            results["overhead"][part] = old["overhead"][part]
        elif part == "python" and ops_filter and part in (old.get("overhead") or {}):
            kept = {op: e for op, e in old["overhead"][part].get("ops", {}).items() if op not in ran}
            results["overhead"][part]["ops"] = {**kept, **results["overhead"][part]["ops"]}
    for part in ("cold_start", "first_call", "tuned_choice"):
        if results.get(part) is None and old.get(part):
            results[part] = old[part]
    if results.get("autotune") is None and old.get("autotune"):
        results["autotune"] = old["autotune"]
    for part in ("bandwidth", "llm"):
        if not old.get(part):
            continue
        if results.get(part) is None:
            results[part] = old[part]
        else:
            kept = [r for r in old[part]["records"] if r["op"] not in ran]
            results[part]["records"] = kept + results[part]["records"]
            # dict.fromkeys: notes not tied to an op (absent peers) come with every run, once is enough
            results[part]["notes"] = list(dict.fromkeys(
                [n for n in old[part].get("notes", []) if not any(op in n for op in ran)] + results[part]["notes"]))
    for part in ("dense", "decode"):
        if not old.get(part):
            continue
        if results.get(part) is None:
            results[part] = old[part]
        else:  # another shard, or the same sizes again: keep what was not measured now
            case = lambda r: (r["op"], r["pass"], r["dtype"], tuple(r["shape"]))  # noqa: E731
            now = {case(r) for r in results[part]["records"]}
            results[part]["records"] = [r for r in old[part]["records"] if case(r) not in now] + results[part]["records"]
            results[part]["notes"] = list(dict.fromkeys(old[part].get("notes", []) + results[part]["notes"]))
    results["meta"]["merged_with_run_of"] = old.get("meta", {}).get("date_utc")
    return results


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    # Before torch/tjit/triton load: quiet tjit's per-compile log line.
    os.environ.setdefault("TJIT_LOG_COMPILES", "0")
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("run_benchmarks: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    smoke = args.smoke
    if device == "cpu" and not smoke:
        print("run_benchmarks: no GPU in use: running the CPU smoke mode (Triton interpreter, tiny sizes)")
        smoke = True
    if device == "cpu":
        # The Python Triton baselines run through Triton's interpreter on CPU tensors; triton.jit
        # reads this when the kernel files are loaded (tjit's own CPU path interprets regardless).
        os.environ["TRITON_INTERPRET"] = "1"

    out_root = args.out or (tempfile.mkdtemp(prefix="tjit-bench-smoke-") if smoke else DEFAULT_OUT)
    if smoke and _inside(out_root, DEFAULT_OUT):
        print(f"run_benchmarks: smoke results must not go into {DEFAULT_OUT}; pass --out /tmp/... or omit --out",
              file=sys.stderr)
        return 2
    ops_filter = [o.strip() for o in args.ops.split(",")] if args.ops else None
    if ops_filter and not set(ops_filter) <= set(OPS):
        print(f"run_benchmarks: --ops takes {','.join(OPS)}", file=sys.stderr)
        return 2
    dtypes = [d.strip() for d in args.dtypes.split(",")] if args.dtypes else None

    import triton

    import tjit
    sys.path.insert(0, HERE)
    import python_baselines
    if device == "cpu":
        python_baselines.patch_interpreter_for_numpy()
    import bandwidth
    import autotune
    import grids
    import cold_start
    import first_call
    import overhead
    import own_kernels
    import report

    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        device_name = torch.cuda.get_device_name()
        extra = {"sm_count": props.multi_processor_count, "memory_gb": round(props.total_memory / 1e9, 1),
                 "compute_capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda}
    else:
        device_name = f"CPU ({platform.machine()}, Triton interpreter)"
        extra = {}
    dir_slug = slug(device_name if device == "cuda" else "cpu") + ("-smoke" if smoke else "")
    out_dir = os.path.join(out_root, dir_slug)
    tjit_ops = {name: hasattr(torch.ops.tjit, name) for name in ("add", "sum", "softmax", "softmax_backward",
                                                                  "layer_norm")}
    meta = {"device_name": device_name, "device": device, "smoke": smoke,
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
            "tjit_library": tjit.LIBRARY_PATH, "tjit_ops_present": tjit_ops, **extra,
            "argv": sys.argv[1:] if argv is None else list(argv)}
    print(f"tjit benchmarks on {device_name} ({'smoke' if smoke else 'full'} run); results -> {out_dir}")
    missing = [k for k, v in tjit_ops.items() if not v]
    if missing:
        print(f"note: torch.ops.tjit has no {', '.join(missing)} yet; tjit is skipped there")

    results = {"meta": meta, "overhead": {}, "bandwidth": None, "llm": None, "cold_start": None, "first_call": None,
               "tuned_choice": None,
               "autotune": None, "dense": None, "decode": None}
    if args.only in (None, "overhead"):
        print("\n== host overhead, Python ==", flush=True)
        results["overhead"]["python"] = overhead.run_python_overhead(device, smoke, ops_filter)
        print("\n== host overhead, C++ ==", flush=True)
        results["overhead"]["cpp"] = overhead.run_cpp_overhead(device, smoke, args.cpp_bin,
                                                               allow_build=not (smoke or args.no_build))
        print("\n== host overhead per launch, own kernels: tjit.jit against Triton, the ctypes floor and C++ ==",
              flush=True)
        results["overhead"]["own_kernels"] = own_kernels.run_own_kernels(device, smoke, results["overhead"]["cpp"])
    if args.only in (None, "bandwidth"):
        print("\n== bandwidth ==", flush=True)
        results["bandwidth"] = bandwidth.run_bandwidth(device, smoke, ops_filter, dtypes, args.warmup_ms, args.rep_ms)
    if args.only in (None, "llm"):
        print("\n== bandwidth at LLM shapes (vocabulary softmax, hidden-size layer_norm and rms_norm) ==", flush=True)
        results["llm"] = bandwidth.run_bandwidth(device, smoke, ops_filter, dtypes, args.warmup_ms, args.rep_ms,
                                                 llm=True)
    if args.only in ("dense", "decode"):
        index, count = grids.parse_shard(args.shard)
        make = grids.dense_grid if args.only == "dense" else grids.decode_grid
        grid = make(smoke, index, count)
        print(f"\n== {args.only} grid, shard {index}/{count}: {grids.grid_size(grid)} sizes ==", flush=True)
        results[args.only] = bandwidth.run_bandwidth(device, smoke, ops_filter, dtypes, args.warmup_ms, args.rep_ms,
                                                     grid=grid,
                                                     passes=("fwd", ) if args.only == "decode" else ("fwd", "bwd"),
                                                     rounds=args.rounds or (3 if args.only == "decode" else 1))
        results[args.only]["config"]["shard"] = [index, count]
    if args.only in (None, "cold_start"):
        print("\n== cold start (fresh processes) ==", flush=True)
        results["cold_start"] = cold_start.run_cold_start(device, smoke, runs=args.cold_start_runs)
    if args.only in (None, "first_call"):
        print("\n== first calls of operators with plan choices (fresh processes: tuned, table, store) ==", flush=True)
        results["first_call"] = first_call.run_first_call(device, smoke)
    if args.only in (None, "tuned_choice"):
        print("\n== a card without a table: first-call tuned choices against the table's, LLM shapes ==", flush=True)
        import tuned_choice
        results["tuned_choice"] = tuned_choice.run_tuned_choice(device, smoke, ops_filter, dtypes)
    if args.only in (None, "autotune"):
        print("\n== autotuning (tjit against Python Triton's autotuner) ==", flush=True)
        results["autotune"] = autotune.run_autotune(device, smoke, None)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    if args.merge:
        results = merge_previous(results, os.path.join(out_dir, report.RESULTS_JSON), ops_filter)

    paths = report.write_all(results, out_dir)
    print("\nwrote " + ", ".join(os.path.relpath(p) if _inside(p, os.getcwd()) else p for p in paths))
    print(f"({meta['seconds']} s)\n")
    print("\n".join(report.summary_lines(results)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
