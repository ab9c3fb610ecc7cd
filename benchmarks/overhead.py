"""Host (CPU) time per call: tjit against aten and Python Triton, from Python and from C++.

Python: for each operator, on a small fp32 input (1024 elements for add and sum, 32 x 1024 for
softmax and layer_norm), the median over rounds of (time of N back-to-back calls) / N, with a
synchronize before each round and none inside it. Implementations are measured round-robin (round
r of every implementation, then round r + 1, ...) after a warm-up, so drift hits all alike.

    tjit             tjit.<op>, tjit's Python function (its direct path to C++, tjit._C)
    tjit_torch_ops   torch.ops.tjit.<op>, the registered op (schema parsing and boxing on each call)
    aten             the torch function (torch.add, torch.sum, torch.softmax, F.layer_norm)
    python_triton    Python Triton wrapper of the same kernel: torch.empty + kernel[grid](...)
                     (python_baselines.add, triton_wrappers.sum_all / softmax / layer_norm)
    triton_op        the same wrapper as torch.library.triton_op + wrap_triton (torch.ops.tjit_bench.*)
    triton_launch    add only: kernel[grid](...) into a pre-allocated output (no allocation)
    tjit_overload    add only: torch.ops.tjit.add.default (the overload, no overload resolution)
    aten_via_torch_ops  add only: torch.ops.aten.add.Tensor, aten's kernel through the torch.ops
                     call path tjit's operators take (what that path costs, apart from the kernel)
    flaggems         FlagGems: flag_gems.ops.add / sum / softmax(x, -1) / layer_norm (peers.py)
    liger            Liger-Kernel, softmax and layer_norm: LigerSoftmaxFunction.apply,
                     LigerLayerNormFunction.apply (peers.py); absent peers (CPU, not installed) are
                     skipped with a note

C++: runs the tjit_bench_overhead executable (benchmarks/cpp/bench_overhead.cpp) and keeps its JSON.
"""

import json
import os
import shutil
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
import tjit

import peers as peer_lib
import python_baselines as pb
import triton_wrappers as tw

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
CPP_BINARY_NAME = "tjit_bench_overhead"


def have_op(name):
    return hasattr(torch.ops.tjit, name)


def measure_round_robin(fns, sync, calls, rounds, warmup):
    """{name: median us per call} for callables `fns` ({name: fn}), measured round-robin."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync()
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    sync()
    return {name: statistics.median(v) for name, v in samples.items()}


def _cases(device, peers=None, ops_filter=None):
    """[(op, shape, {impl: fn})] with each fn bound to its inputs, plus the tjit calls, references and
    notes on the peers (FlagGems, Liger-Kernel) that are absent or lack an operator."""
    f32 = dict(device=device, dtype=torch.float32)
    x1 = torch.randn(1024, **f32)
    y1 = torch.randn(1024, **f32)
    out1 = torch.empty(1024, **f32)
    x2 = torch.randn(32, 1024, **f32)
    w = torch.randn(1024, **f32)
    b = torch.randn(1024, **f32)
    ops = None
    ops_error = None
    try:
        ops = pb.register_triton_ops()
    except Exception as exc:  # older torch without triton_op, or a registration problem
        ops_error = f"triton_op unavailable: {type(exc).__name__}: {exc}"

    cases = []
    add = {"aten": lambda: torch.add(x1, y1), "python_triton": lambda: pb.add(x1, y1),
           "triton_launch": lambda: pb.add_launch_only(x1, y1, out1),
           # How the call is made, apart from the operator: tjit's overload called directly, and
           # aten's add through the same torch.ops path tjit's operators take.
           "tjit_overload": lambda: torch.ops.tjit.add.default(x1, y1),
           "aten_via_torch_ops": lambda: torch.ops.aten.add.Tensor(x1, y1)}
    if ops is not None:
        add["triton_op"] = lambda: ops.add(x1, y1)
    cases.append(("add", [1024], add))

    s = {"aten": lambda: torch.sum(x1), "python_triton": lambda: tw.sum_all(x1)}
    if ops is not None:
        s["triton_op"] = lambda: ops.sum(x1)
    cases.append(("sum", [1024], s))

    sm = {"aten": lambda: torch.softmax(x2, -1), "python_triton": lambda: tw.softmax(x2)}
    if ops is not None:
        sm["triton_op"] = lambda: ops.softmax(x2)
    cases.append(("softmax", [32, 1024], sm))

    ln = {"aten": lambda: F.layer_norm(x2, (1024, ), w, b, 1e-5),
          "python_triton": lambda: tw.layer_norm(x2, w, b, 1e-5, stats=False)}
    if ops is not None:
        ln["triton_op"] = lambda: ops.layer_norm(x2, w, b, 1e-5)
    cases.append(("layer_norm", [32, 1024], ln))

    # The peers, on the same inputs (peers.Peer.bind takes the arguments the bandwidth cases pass).
    peer_notes = []
    peers = peer_lib.load(device) if peers is None else peers
    inputs = {"add": (x1, y1), "sum": (x1, ), "softmax": (x2, ), "layer_norm": (x2, w, b, 1e-5)}
    for name, peer in peers.items():
        if not peer.available:
            peer_notes.append(f"{name}: {peer.note}; skipped")
            continue
        for op, shape, fns in cases:
            if ops_filter and op not in ops_filter:
                continue
            why = peer.why_not(op, "fwd", shape)
            if why is None:
                fns[name] = peer.bind(op, "fwd", *inputs[op])
            else:
                peer_notes.append(f"{name} {op}: {why}: skipped")

    # tjit's two entry points: the Python function (what `import tjit` users call) and the op.
    tjit_fns = {
        "add": {"tjit": lambda: tjit.add(x1, y1), "tjit_torch_ops": lambda: torch.ops.tjit.add(x1, y1)},
        "sum": {"tjit": lambda: tjit.sum(x1), "tjit_torch_ops": lambda: torch.ops.tjit.sum(x1)},
        "softmax": {"tjit": lambda: tjit.softmax(x2, -1), "tjit_torch_ops": lambda: torch.ops.tjit.softmax(x2, -1)},
        "layer_norm": {"tjit": lambda: tjit.layer_norm(x2, [1024], w, b, 1e-5),
                       "tjit_torch_ops": lambda: torch.ops.tjit.layer_norm(x2, [1024], w, b, 1e-5)},
    }
    # Reference values, to check each implementation once before timing it.
    refs = {
        "add": lambda: torch.add(x1, y1),
        "sum": lambda: torch.sum(x1),
        "softmax": lambda: torch.softmax(x2, -1),
        "layer_norm": lambda: F.layer_norm(x2, (1024, ), w, b, 1e-5),
    }
    return cases, tjit_fns, refs, ops_error, peer_notes


def _first_tensor(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def run_python_overhead(device, smoke, ops_filter, log=print, peers=None):
    cuda = device == "cuda"
    calls = 5 if smoke else 1000
    rounds = 3 if smoke else 25
    warmup = 2 if smoke else 50

    def sync():
        if cuda:
            torch.cuda.synchronize()

    peers = peer_lib.load(device) if peers is None else peers
    cases, tjit_fns, refs, ops_error, peer_notes = _cases(device, peers, ops_filter)
    result = {"config": {"device": device, "dtype": "float32", "calls_per_round": calls, "rounds": rounds,
                         "warmup_calls": warmup, "statistic": "median over rounds of host us per call"},
              "ops": {}, "notes": [], "peers": peer_lib.describe(peers)}
    for note in ([ops_error] if ops_error else []) + peer_notes:
        result["notes"].append(note)
        log(f"  note: {note}")
    for op, shape, fns in cases:
        if ops_filter and op not in ops_filter:
            continue
        entry = {"shape": shape, "us_per_call": {}, "ratios": {}, "checks": {}, "errors": {}}
        fns = dict(fns)
        if have_op(op):
            fns = {**tjit_fns[op], **fns}
        else:
            note = f"torch.ops.tjit.{op} does not exist yet: skipped tjit for {op}"
            entry["errors"]["tjit"] = note
            log(f"  note: {note}")
        # Check every implementation once (also the first call: compiles); drop what fails.
        ref = _first_tensor(refs[op]())
        for name in list(fns):
            try:
                got = _first_tensor(fns[name]())
                if name == "triton_launch":
                    entry["checks"][name] = bool(torch.allclose(got, ref, rtol=1e-5, atol=1e-5))
                else:
                    entry["checks"][name] = bool(got.shape == ref.shape
                                                 and torch.allclose(got.float(), ref.float(), rtol=1e-4, atol=1e-4))
            except Exception as exc:
                entry["errors"][name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
                log(f"  note: {op}/{name} failed, not timed: {entry['errors'][name]}")
                del fns[name]
        entry["us_per_call"] = measure_round_robin(fns, sync, calls, rounds, warmup)
        us = entry["us_per_call"]
        if "tjit" in us:
            for other in ("aten", "python_triton", "triton_op", "flaggems", "liger"):
                if other in us:
                    entry["ratios"][f"tjit/{other}"] = us["tjit"] / us[other]
        if "tjit_torch_ops" in us and "aten" in us:
            entry["ratios"]["tjit_torch_ops/aten"] = us["tjit_torch_ops"] / us["aten"]
        result["ops"][op] = entry
        log("  python " + op.ljust(11) + "  ".join(f"{k} {v:8.2f} us" for k, v in us.items()) +
            ("" if not entry["ratios"] else "   | " + "  ".join(f"{k} {v:.2f}" for k, v in entry["ratios"].items())))
        bad = [k for k, v in entry["checks"].items() if not v]
        if bad:
            log(f"  WARNING: {op}: results differ from aten for {', '.join(bad)}")
    return result


# ------------------------------------------------------------------------------------------- C++


def find_cpp_binary(explicit=None, name=CPP_BINARY_NAME):
    """Path of one of tjit's C++ benchmark programs: `explicit`, else $TJIT_BUILD_DIR/bin, build/bin, ops/bin."""
    candidates = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get("TJIT_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["TJIT_BUILD_DIR"], "bin", name))
    candidates += [os.path.join(REPO, "build", "bin", name),
                   os.path.join(REPO, "ops", "bin", name)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def build_cpp_binary(log=print):
    """cmake --build <build dir> --target tjit_bench_overhead, when a configured build dir exists."""
    build_dir = os.environ.get("TJIT_BUILD_DIR", os.path.join(REPO, "build"))
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) or shutil.which("cmake") is None:
        return None, f"no configured CMake build in {build_dir}"
    log(f"  building {CPP_BINARY_NAME} (cmake --build {build_dir} --target {CPP_BINARY_NAME})")
    proc = subprocess.run(["cmake", "--build", build_dir, "--target", CPP_BINARY_NAME], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        return None, "build failed: " + " | ".join(tail)
    return find_cpp_binary(), None


def parse_last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def run_json_process(cmd, env, timeout):
    """One fresh process `cmd`; the JSON its last such line printed, or {"error": why not}."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    data = parse_last_json(proc.stdout)
    if proc.returncode != 0 or data is None:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return data


def run_cpp_overhead(device, smoke, binary=None, allow_build=True, log=print, timeout=300):
    path = find_cpp_binary(binary)
    if path is None and allow_build:
        path, why = build_cpp_binary(log)
        if path is None:
            note = f"{CPP_BINARY_NAME} not found and not built ({why})"
            log(f"  note: {note}")
            return {"skipped": True, "reason": note}
    if path is None:
        note = (f"{CPP_BINARY_NAME} not found (build it: cmake -S . -B build && ninja -C build {CPP_BINARY_NAME}, "
                "or pass --cpp-bin)")
        log(f"  note: {note}")
        return {"skipped": True, "reason": note}
    cmd = [path, "--kernel-file", os.path.join(REPO, "ops", "kernels_py", "add.py"),
           "--own-kernel-file", os.path.join(REPO, "benchmarks", "kernels", "launch_overhead_kernels.py")]
    if smoke:
        cmd += ["--calls", "20", "--rounds", "3", "--compile-check"]
    if device != "cuda":
        cmd += ["--device", "cpu"]
    env = dict(os.environ, TJIT_LOG_COMPILES="0")
    env.pop("TRITON_INTERPRET", None)  # the binary compiles real cubins
    log("  running " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": True, "reason": f"{CPP_BINARY_NAME} timed out after {timeout} s", "binary": path}
    data = parse_last_json(proc.stdout)
    if data is None:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        return {"skipped": True, "binary": path,
                "reason": f"{CPP_BINARY_NAME} exited {proc.returncode} without JSON: " + " | ".join(tail)}
    data["binary"] = path
    data["exit_code"] = proc.returncode
    if data.get("skipped"):
        log(f"  note: C++ benchmark skipped: {data.get('reason')}")
    else:
        us = data.get("us_per_call", {})
        log("  c++    add       " + "  ".join(f"{k} {v:8.2f} us" for k, v in us.items()))
    return data
