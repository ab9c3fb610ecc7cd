"""tjit's demo: runs tjit operators from Python and from C++ next to their aten counterparts,
checks that they agree and prints the host time per call.

    python -m tjit.demo [--device cuda|cpu] [--calls N]

Without a GPU it says so and runs on the CPU through Triton's interpreter (correct, but slow:
the timings then measure the interpreter, not tjit's launch path).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

import tjit


def host_us_per_call(fn, device, calls, rounds):
    for _ in range(10):
        fn()  # warm up: compile, module load, allocator caches
    samples = []
    for _ in range(rounds):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    if device == "cuda":
        torch.cuda.synchronize()
    return statistics.median(samples)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=None, help="calls per timing round")
    args = parser.parse_args(argv)
    device = args.device
    cuda = device == "cuda"
    if not cuda:
        print("tjit demo: no GPU in use; running on CPU through Triton's interpreter "
              "(timings measure the interpreter)")
    calls = args.calls or (1000 if cuda else 20)
    rounds = 25 if cuda else 3

    x = torch.randn(1024, device=device)
    y = torch.randn(1024, device=device)
    got = torch.ops.tjit.add(x, y, alpha=0.5)
    ok = torch.allclose(got, torch.add(x, y, alpha=0.5), rtol=1e-6, atol=1e-6)
    print(f"torch.ops.tjit.add(x, y, alpha=0.5) on {device}, 1024 floats: "
          f"{'matches torch.add' if ok else 'DIFFERS from torch.add'}")
    tjit_us = host_us_per_call(lambda: torch.ops.tjit.add(x, y), device, calls, rounds)
    torch_us = host_us_per_call(lambda: torch.add(x, y), device, calls, rounds)
    print(f"Python host time per call (median of {rounds} rounds x {calls} calls):")
    print(f"  torch.ops.tjit.add {tjit_us:9.2f} us\n  torch.add          {torch_us:9.2f} us\n"
          f"  ratio              {tjit_us / torch_us:9.2f}")
    sys.stdout.flush()

    print("\nC++ (" + tjit.DEMO_BINARY + "):", flush=True)
    # The binary finds torch's libraries through this torch (a wheel's relative path to them
    # holds only when tjit and torch share one site-packages).
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(
        filter(None, [torch_lib, os.environ.get("LD_LIBRARY_PATH")])))
    cpp = subprocess.run([tjit.DEMO_BINARY, "--device", device], check=False, env=env)
    ok = ok and cpp.returncode == 0
    print("\ndemo " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
