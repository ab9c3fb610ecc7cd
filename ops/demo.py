"""tjit's demo: the whole product in one run.

    python -m tjit.demo [--device cuda|cpu]      (./run.sh demo builds tjit first)

1. every operator, forward and backward, against aten (the largest difference);
2. host time per call from Python: tjit.<op>, torch.ops.tjit.<op> and torch's own function;
3. host time per call from C++ (tjit_demo): tjit::<op> and at::<op>;
4. on a GPU, the memory bandwidth of a large case of each operator against aten;
5. a fresh process's first call, with an empty and then a warm kernel store;
6. where the kernel store is and how to inspect it.

Without a GPU it runs on the CPU through Triton's interpreter, at small sizes (under a minute):
correct, but the timings then measure the interpreter, not tjit's launch path.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import tjit
from tjit import kernel_store


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def host_us_per_call(fns, device, calls, rounds):
    """For each of `fns`, the median over rounds of (host time of `calls` back-to-back calls) /
    calls, in microseconds; the functions take turns round by round, so that a slow phase of the
    host (frequency, other processes) weighs on all of them alike."""
    for fn in fns:
        for _ in range(3):
            fn()  # warm up: compile, module load, allocator caches
    samples = [[] for _ in fns]
    for _ in range(rounds):
        for fn, times in zip(fns, samples):
            _sync(device)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - start) / calls * 1e6)
    _sync(device)
    return [statistics.median(times) for times in samples]


def _cases(device, small):
    """(op, inputs, tjit's function, torch.ops.tjit's, torch's) for each operator; fresh random inputs."""
    n, cols = (1000, 256) if small else (1024, 1024)
    f32 = dict(device=device, dtype=torch.float32)
    x, y = torch.randn(n, **f32), torch.randn(n, **f32)
    rows, w, b = torch.randn(32, cols, **f32), torch.randn(cols, **f32), torch.randn(cols, **f32)
    return [
        ("add", (x, y), lambda a, c: tjit.add(a, c, alpha=0.5), lambda a, c: torch.ops.tjit.add(a, c, alpha=0.5),
         lambda a, c: torch.add(a, c, alpha=0.5)),
        ("sum", (x,), lambda a: tjit.sum(a), lambda a: torch.ops.tjit.sum(a), lambda a: torch.sum(a)),
        ("softmax", (rows,), lambda a: tjit.softmax(a, -1), lambda a: torch.ops.tjit.softmax(a, -1),
         lambda a: torch.softmax(a, -1)),
        ("layer_norm", (rows, w, b), lambda a, ww, bb: tjit.layer_norm(a, [cols], ww, bb),
         lambda a, ww, bb: torch.ops.tjit.layer_norm(a, [cols], ww, bb),
         lambda a, ww, bb: F.layer_norm(a, (cols,), ww, bb)),
    ]


def check_against_aten(cases):
    """Forward and gradients of each operator against aten's: prints the largest differences."""
    print(f"  {'op':<11}{'forward max |diff|':>20}{'gradients max |diff|':>22}")
    ok = True
    for op, inputs, tjit_fn, _, torch_fn in cases:
        ours = [t.detach().clone().requires_grad_(True) for t in inputs]
        theirs = [t.detach().clone().requires_grad_(True) for t in inputs]
        out, ref = tjit_fn(*ours), torch_fn(*theirs)
        grad_out = torch.randn_like(ref)
        out.backward(grad_out)
        ref.backward(grad_out)
        forward = (out - ref).abs().max().item()
        backward = max((a.grad - r.grad).abs().max().item() for a, r in zip(ours, theirs))
        agrees = torch.allclose(out, ref, rtol=1e-4, atol=1e-4) and all(
            torch.allclose(a.grad, r.grad, rtol=1e-4, atol=1e-4) for a, r in zip(ours, theirs))
        ok = ok and agrees
        print(f"  {op:<11}{forward:>20.2e}{backward:>22.2e}{'' if agrees else '   DIFFERS from aten'}")
    return ok


def python_host_times(cases, device, calls, rounds):
    if device == "cpu":
        print("  (CPU: tjit's kernels run through Triton's interpreter, torch's natively; these times and their "
              "ratio say nothing about speed, only that the calls work)")
    print(f"  {'op':<11} {'tjit.<op>':>14} {'torch.ops.tjit':>14} {'torch':>14} {'tjit / torch':>12}")
    for op, inputs, tjit_fn, ops_fn, torch_fn in cases:
        us = host_us_per_call([lambda f=f: f(*inputs) for f in (tjit_fn, ops_fn, torch_fn)], device, calls, rounds)
        times = " ".join(f"{f'{t:.2f} us':>14}" for t in us)
        print(f"  {op:<11} {times} {us[0] / us[2]:>12.2f}")


def _bandwidth_cases():
    """(op, bytes moved, tjit call, aten call) at sizes that fill an H100/H200."""
    dev = dict(device="cuda", dtype=torch.float32)
    x, y = torch.randn(1 << 26, **dev), torch.randn(1 << 26, **dev)
    rows = torch.randn(8192, 8192, **dev)
    w, b = torch.randn(8192, **dev), torch.randn(8192, **dev)
    bytes_2d = 2 * rows.numel() * 4
    return [
        ("add, 2^26 fp32", 3 * x.numel() * 4, lambda: tjit.add(x, y), lambda: torch.add(x, y)),
        ("sum, 2^26 fp32", x.numel() * 4, lambda: tjit.sum(x), lambda: torch.sum(x)),
        ("softmax, 8192x8192 fp32", bytes_2d, lambda: tjit.softmax(rows, -1), lambda: torch.softmax(rows, -1)),
        ("layer_norm, 8192x8192 fp32", bytes_2d, lambda: tjit.layer_norm(rows, [8192], w, b),
         lambda: F.layer_norm(rows, (8192,), w, b)),
    ]


def gpu_bandwidth():
    from triton.testing import do_bench  # the GPU machine has Triton; only this part needs it
    print(f"  {'case':<28}{'tjit GB/s':>11}{'aten GB/s':>11}{'tjit / aten':>13}")
    for name, nbytes, ours, theirs in _bandwidth_cases():
        ms = [do_bench(f, warmup=25, rep=100, return_mode="median") for f in (ours, theirs)]
        gbs = [nbytes / (t * 1e-3) / 1e9 for t in ms]
        print(f"  {name:<28}{gbs[0]:>11.0f}{gbs[1]:>11.0f}{gbs[0] / gbs[1]:>13.2f}")


_FIRST_CALL = r"""
import json, sys, time
import torch
start = time.perf_counter()
import tjit
imported = time.perf_counter()
device = sys.argv[1]
x = torch.randn(32, 256, device=device)
if device == "cuda":
    torch.cuda.synchronize()
begin = time.perf_counter()
tjit.softmax(x, -1)
if device == "cuda":
    torch.cuda.synchronize()
print(json.dumps({"import_ms": (imported - start) * 1e3, "first_call_ms": (time.perf_counter() - begin) * 1e3,
                  "triton_imported": "triton" in sys.modules}))
"""


def fresh_process_first_call(device):
    with tempfile.TemporaryDirectory(prefix="tjit-demo-store-") as store:
        env = dict(os.environ, TJIT_CACHE_DIR=store, TJIT_LOG_COMPILES="0")
        env.pop("TJIT_CACHE", None)
        for label in ("empty store", "warm store"):
            run = subprocess.run([sys.executable, "-c", _FIRST_CALL, device], env=env, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"  {label}: the child failed:\n{run.stderr}")
                return False
            r = json.loads(run.stdout.strip().splitlines()[-1])
            print(f"  {label:<12} import tjit {r['import_ms']:6.1f} ms, first tjit.softmax {r['first_call_ms']:8.1f} ms, "
                  f"triton imported: {'yes' if r['triton_imported'] else 'no'}")
        info = kernel_store.info(store)
        print(f"  the store after both: {info['entries']} compiled entries, {info['signatures']} signature records, "
              f"{info['bytes']} bytes" + ("" if device == "cuda" else
                                          " (the interpreter compiles nothing: CPU runs store signatures only)"))
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    # Each kernel compiles once, at its first call (section 5 times it); its log line would only
    # interleave with the tables here.
    os.environ.setdefault("TJIT_LOG_COMPILES", "0")
    device = args.device
    cuda = device == "cuda"
    calls, rounds = (1000, 25) if cuda else (5, 3)
    where = torch.cuda.get_device_name() if cuda else "CPU, through Triton's interpreter (no GPU in use)"
    print(f"tjit demo on {where}\n")
    cases = _cases(device, small=not cuda)

    sizes = "add and sum 1000 elements, softmax and layer_norm 32x256" if not cuda else \
        "add and sum 1024 elements, softmax and layer_norm 32x1024"
    print(f"1. Operators against aten: fresh random float32 inputs ({sizes}), forward and gradients")
    ok = check_against_aten(cases)
    print(f"\n2. Host time per call from Python (median of {rounds} rounds x {calls} calls)")
    python_host_times(cases, device, calls, rounds)
    sys.stdout.flush()

    print("\n3. Host time per call from C++ (" + os.path.basename(tjit.DEMO_BINARY) + ")", flush=True)
    # The binary finds torch's libraries through this torch (a wheel's relative path to them
    # holds only when tjit and torch share one site-packages).
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [torch_lib, os.environ.get("LD_LIBRARY_PATH")])))
    ok = subprocess.run([tjit.DEMO_BINARY, "--device", device], check=False, env=env).returncode == 0 and ok

    if cuda:
        print("\n4. Memory bandwidth of a large case (CUDA events, median; bytes read + written)")
        gpu_bandwidth()
    else:
        print("\n4. Memory bandwidth: on a GPU only")
    print("\n5. A fresh process's first call (tjit.softmax), with an empty and then a warm kernel store", flush=True)
    ok = fresh_process_first_call(device) and ok

    print("\n6. The kernel store: compiled kernels on disk, shared by every process")
    info = kernel_store.info()
    print(f"  here: {info['directory'] or '(off: TJIT_CACHE=0)'} ({info['entries']} entries, {info['bytes']} bytes; "
          f"bound {info['max_bytes']} bytes, TJIT_CACHE_MAX_BYTES)")
    print("  inspect: python -m tjit cache info | list [--kernel NAME] | clear | prune [--max-bytes N]")
    print("\ndemo " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
