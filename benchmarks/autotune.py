"""Autotuned kernels through tjit against Python Triton's autotuner, on the same kernels
(benchmarks/kernels/autotune_bench_kernels.py: an elementwise add with eight configs, and the same
kernel plain):

  - tuning cost per new key (ms): the first call with a new n, after a first key compiled the
    configs' binaries (so both sides time configs and nothing else);
  - host time per call after tuning (us): median over rounds of back-to-back calls / calls, the
    stream synchronized before each round only. Python: add_tuned_kernel[grid](...) and
    add_plain_kernel[grid](..., BLOCK=1024); C++: tjit_bench_autotune (run(), and operator()).

    python benchmarks/autotune.py [--out results.json] [--cpp-bin PATH]

Needs a CUDA GPU; without one it says so and exits 0.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from overhead import find_cpp_binary, parse_last_json  # noqa: E402

KERNELS = os.path.join(HERE, "kernels", "autotune_bench_kernels.py")
KEYS = [1 << 20, 1 << 12, 1 << 16, 1 << 24]  # as tjit_bench_autotune: the first one compiles


def python_triton(calls=2000, rounds=15):
    import torch
    spec = importlib.util.spec_from_file_location("autotune_bench_kernels", KERNELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tuned, plain = module.add_tuned_kernel, module.add_plain_kernel
    tuning_ms, chosen = {}, {}
    for n in KEYS:
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        tuned[lambda meta: (triton_cdiv(n, meta["BLOCK"]), )](x, y, out, n)
        torch.cuda.synchronize()
        tuning_ms[str(n)] = (time.perf_counter() - start) * 1e3
        chosen[str(n)] = str(tuned.best_config)
        assert torch.allclose(out, x + y)
    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    cases = {
        "autotuned_launch": lambda: tuned[lambda meta: (triton_cdiv(n, meta["BLOCK"]), )](x, y, out, n),
        "plain_launch": lambda: plain[(triton_cdiv(n, 1024), )](x, y, out, n, BLOCK=1024),
    }
    samples = {name: [] for name in cases}
    for fn in cases.values():
        for _ in range(200):
            fn()
    for _ in range(rounds):
        for name, fn in cases.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    host_us = {name: sorted(v)[len(v) // 2] for name, v in samples.items()}
    return {"tuning_ms": tuning_ms, "chosen": chosen, "host_us": host_us, "calls": calls, "rounds": rounds}


def triton_cdiv(a, b):
    return (a + b - 1) // b


def cpp(binary, calls=2000, rounds=15):
    path = find_cpp_binary(binary, name="tjit_bench_autotune")
    if path is None:
        return {"skipped": True, "reason": "tjit_bench_autotune not found (ninja -C build tjit_bench_autotune)"}
    env = dict(os.environ, TJIT_LOG_COMPILES="0")
    proc = subprocess.run([path, "--kernel-file", KERNELS, "--calls", str(calls), "--rounds", str(rounds)],
                          capture_output=True, text=True, env=env, timeout=600)
    data = parse_last_json(proc.stdout)
    if data is None:
        return {"skipped": True, "reason": f"exit {proc.returncode}: {(proc.stdout + proc.stderr)[-500:]}"}
    return data


def run_autotune(device, smoke, binary=None, log=print):
    """Both sides, as benchmarks/run_benchmarks.py keeps them; skipped (with the reason) without CUDA."""
    if device != "cuda":
        return {"skipped": True, "reason": "autotuning is timed on CUDA only"}
    calls, rounds = (50, 3) if smoke else (2000, 15)
    result = {"tjit": cpp(binary, calls, rounds)}
    if result["tjit"].get("skipped"):
        log(f"  note: {result['tjit']['reason']}")
        return {"skipped": True, "reason": result["tjit"]["reason"]}
    result["python_triton"] = python_triton(calls, rounds)
    result["tuning_ratio"] = max(result["tjit"]["tuning_ms"][str(n)] / result["python_triton"]["tuning_ms"][str(n)]
                                 for n in KEYS[1:])
    result["host_ratio"] = result["tjit"]["host_us"]["autotuned_run"] / result["tjit"]["host_us"]["plain_operator"]
    for line in report(result).splitlines():
        log("  " + line)
    return result


def report(result):
    py, c = result["python_triton"], result["tjit"]
    lines = ["| new key n | Python Triton tuning (ms) | tjit tuning (ms) | tjit / Python |", "|---|---|---|---|"]
    for n in [str(k) for k in KEYS[1:]]:
        p, t = py["tuning_ms"][n], c["tuning_ms"][n]
        lines.append(f"| {n} | {p:.0f} | {t:.0f} | {t / p:.2f} |")
    lines += ["", "| host time per call (us), n = 4096 | value |", "|---|---|"]
    for name, value in list(py["host_us"].items()):
        lines.append(f"| Python Triton {name} | {value:.2f} |")
    for name, value in c["host_us"].items():
        lines.append(f"| tjit {name} | {value:.2f} |")
    ratio = c["host_us"]["autotuned_run"] / c["host_us"]["plain_operator"]
    lines.append(f"| tjit autotuned_run / plain_operator | {ratio:.3f} (target <= 1.10) |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the JSON here")
    parser.add_argument("--cpp-bin", help="path of tjit_bench_autotune")
    args = parser.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("autotune benchmark: no CUDA device; nothing measured")
        return 0
    result = run_autotune("cuda", False, args.cpp_bin, log=lambda line: None)
    if result.get("skipped"):
        print(json.dumps(result, indent=1))
        return 1
    result["device"] = torch.cuda.get_device_name()
    print(report(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
