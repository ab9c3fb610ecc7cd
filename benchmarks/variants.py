"""Running launch variants A/B in one process: the plumbing the *_variants.py benchmarks share.

Each script builds, per shape, its own variants (a name and a zero-argument callable each) and its
own report; this module holds what they do alike: pick the device, read `--shapes`, load a kernel
file by path or as a commit had it, check each variant once and time them in interleaved rounds.
One process and interleaved rounds, so that the variants share inputs, clocks and drift.

It imports neither torch nor bandwidth.py when it loads: a script turns Triton's interpreter on
(pick_device) before any kernel file loads.
"""

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pick_device(args):
    """"cuda" where there is one and --smoke is off; otherwise "cpu", with args.smoke set and
    Triton's interpreter on (the kernel files read TRITON_INTERPRET when they load)."""
    os.environ.setdefault("TJIT_LOG_COMPILES", "0")
    import torch
    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    if device == "cpu":
        args.smoke = True
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernel files load
    return device


def device_name(device):
    """The GPU's name for the report's first line, or what runs instead."""
    import torch
    return torch.cuda.get_device_name() if device == "cuda" else "cpu (Triton interpreter)"


def parse_shapes(text, with_dtype=True):
    """--shapes "bfloat16:32768x4096,float32:26214x5120" as [(dtype, rows, cols)], or without dtypes
    ("512x262144,1088x128256", with_dtype False) as [(rows, cols)]."""
    if not with_dtype:
        return [tuple(int(v) for v in item.lower().split("x")) for item in text.split(",")]
    out = []
    for item in text.split(","):
        dtype, mn = item.split(":")
        m, n = mn.lower().split("x")
        out.append((dtype, int(m), int(n)))
    return out


def load_kernels(name, path, package=None):
    """The Python file at `path` as module `name`, registered in sys.modules (Triton's JIT looks a
    kernel's globals up through its module), so a second copy of a kernel file can run beside the
    installed one. With `package` (a loaded package's name) it is that package's submodule, so its
    relative imports (`from .row_exchange import ...`) find the package's modules."""
    if package:
        name = f"{package}.{name}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def kernels_at(commit, file, tmp, name, option, path=None):
    """(module, None) of `file` (a path in this repository) as `commit` has it, read with git show
    into `tmp` at run time (the tree need not keep the old kernel to compare against it), or of
    `path` where given; (None, why not) where git cannot show it, naming the `option` that passes
    the file instead."""
    if path is None:
        try:
            source = subprocess.run(["git", "show", f"{commit}:{file}"], cwd=ROOT, check=True, capture_output=True,
                                    text=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            why = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()
            return None, f"git show {commit} failed ({why[0] if why else ''}); pass {option}"[:300]
        path = os.path.join(tmp, f"{os.path.splitext(os.path.basename(file))[0]}_{commit}.py")
        with open(path, "w") as f:
            f.write(source)
    package = None
    if file.startswith("ops/kernels_py/"):
        import triton_wrappers  # loads this tree's kernel package under its private name
        package = triton_wrappers.KERNEL_PACKAGE
    return load_kernels(name, path, package), None


def _first_error_line(exc):
    import bandwidth  # loaded by the script after pick_device
    return bandwidth._first_error_line(exc)


def check_once(row, verify):
    """Runs verify(row) (which runs the variant and records rel_err / ok in `row`) and readies the
    row for timing (an empty "ms"); where it raises, the row gets the error's first line instead and
    is not timed: a failing variant is reported and the rest go on."""
    try:
        verify(row)
        row["ms"] = []
    except Exception as exc:  # noqa: BLE001 - reported, the rest go on
        row["error"] = _first_error_line(exc)
    return row


def time_rounds(rows, fns, timer, rounds, nbytes, rep_ms, on_cuda, copy_bytes=None):
    """Times every checked variant (a row with "ms") `rounds` times, one call of timer(fn) each, the
    variants interleaved within each round so that drift falls on all alike; a variant that raises
    is dropped with its error. On CUDA the copy is also timed with triton.testing.do_bench and keeps
    its best time (as bandwidth.py: a graph replay or a plain timing, whichever is faster); the
    others keep the median of their rounds. GB/s from `nbytes` (the copy's from `copy_bytes` where
    given); a row that is the `same_as` another takes that one's GB/s."""
    for _ in range(rounds):
        for name, fn in fns.items():
            if "ms" in rows[name]:
                try:
                    rows[name]["ms"].append(timer(fn))
                except Exception as exc:  # noqa: BLE001
                    rows[name]["error"] = _first_error_line(exc)
                    del rows[name]["ms"]
    if on_cuda and "ms" in rows.get("copy", {}):
        import triton.testing
        rows["copy"]["ms"].append(triton.testing.do_bench(fns["copy"], rep=rep_ms, return_mode="median"))
    for name, row in rows.items():
        if row.get("ms"):
            row["median_ms"] = min(row["ms"]) if name == "copy" else statistics.median(row["ms"])
            row["gbps"] = (copy_bytes if name == "copy" and copy_bytes is not None else nbytes) / row["median_ms"] / 1e6
    for name, row in rows.items():
        if "same_as" in row and "gbps" in rows[row["same_as"]]:
            row["gbps"] = rows[row["same_as"]]["gbps"]


def report_failures(results, label):
    """Prints the variants that were wrong or failed (label(result) names their case) and returns
    the script's exit status: 1 where any did."""
    failed = [f"{label(r)} {v['variant']}" for r in results for v in r["variants"]
              if v.get("ok") is False or "error" in v]
    if failed:
        print("FAILED: " + "; ".join(failed))
    return 1 if failed else 0


def print_case(title, nbytes, started, rows, notes, against, name_width, status_width):
    """Prints a case's report: a title line, then a line a variant (GB/s, the ratios, `= the variant
    it repeats`, WRONG where its check failed, its launch) and a line a skipped variant. `against`
    ({row key: (reference GB/s or None, label)}, e.g. {"vs_tjit": (tjit's GB/s, " tjit")}) names the
    ratios, which each timed row also gains under those keys."""
    print(f"\n{title} ({nbytes / 2**20:.0f} MiB moved, {time.perf_counter() - started:.0f} s)", flush=True)
    for name, row in rows.items():
        for key, (gbps, _) in against.items():
            if gbps and row.get("gbps"):
                row[key] = row["gbps"] / gbps
        if row.get("gbps"):
            status = f"{row['gbps']:7.0f} GB/s" + "".join(f" {row.get(key, float('nan')):5.3f}x{label}"
                                                          for key, (_, label) in against.items())
        else:
            status = row.get("error", "no timing")
        if "same_as" in row:
            status += f" (= {row['same_as']})"
        if row.get("ok") is False:
            status += f" WRONG rel_err {row['rel_err']:.2e}"
        print(f"  {name:{name_width}s} {status:{status_width}s} {row.get('launch') or ''}", flush=True)
    for name, why in notes.items():
        print(f"  {name:{name_width}s} skipped: {why}", flush=True)


def write_json(path, doc):
    """Writes a run's results (indented one space a level: readable, and diffs line by line)."""
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
