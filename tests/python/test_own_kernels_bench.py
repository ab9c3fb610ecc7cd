"""benchmarks/own_kernels.py without a GPU: issue 64's targets and the tables from synthetic results;
the ctypes floor's kernel parameters against the C launcher Triton generates for the same
specialisation (and the sm_90 binaries need nothing a plain cuLaunchKernel lacks); and its ctypes
call of cuLaunchKernel, through a stand-in libcuda built here. The timed run itself needs CUDA
(run_benchmarks.py --only overhead); test_benchmarks_smoke.py checks the CPU skip."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
BENCH = os.path.join(ROOT, "benchmarks")


def import_bench(name):
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return __import__(name)


def _part(us, cpp=3.6, checks=None, errors=None):
    """A measured part: us = {case: {impl: us}}."""
    cases = {}
    for name, times in us.items():
        times = dict(times, cpp=cpp)
        ratios = {k: times[k.split("/")[0]] / times[k.split("/")[1]] for k in
                  ("tjit_jit/triton", "tjit_jit/ctypes_floor", "tjit_jit/cpp", "tjit_jit_bound/triton")
                  if k.split("/")[0] in times and k.split("/")[1] in times}
        cases[name] = {"kernel": name, "params": 4 if name == "4_args" else 14, "us_per_launch": times,
                       "ratios": ratios,
                       "checks": dict({i: True for i in times if i != "cpp"}, **(checks or {}).get(name, {})),
                       "errors": (errors or {}).get(name, {}), "subscript_us": 0.3}
    return {"config": {"statistic": "median over rounds of host us per launch", "rounds": 25, "calls_per_round": 1000,
                       "n": 1000, "kernel_file": "benchmarks/kernels/launch_overhead_kernels.py", "triton": "3.6.0"},
            "cases": cases,
            "cpp": {name: {"us_per_launch": cpp, "source": f"tjit_bench_overhead's own_{name}"} for name in us},
            "notes": [], "errors": []}


def test_targets_and_tables_synthetic(tmp_path):
    report = import_bench("report")

    def targets(part):
        return {t["id"]: t for t in report.evaluate_targets({"overhead": {"own_kernels": part}})}

    part = _part({"4_args": {"triton": 20.0, "tjit_jit": 4.0, "tjit_jit_bound": 3.7, "ctypes_floor": 6.0},
                  "14_args": {"triton": 28.0, "tjit_jit": 7.0, "tjit_jit_bound": 6.6, "ctypes_floor": 6.5}})
    t = targets(part)
    assert t["py_jit_vs_triton"]["status"] == "PASS" and t["py_jit_vs_triton"]["ratio"] == pytest.approx(0.25)
    assert t["py_jit_vs_triton"]["worst_at"].startswith("14_args")
    # 14 arguments: 7.0 over the 6.5 floor
    assert t["py_jit_vs_floor"]["status"] == "MISS" and t["py_jit_vs_floor"]["ratio"] == pytest.approx(7.0 / 6.5)
    assert t["py_jit_vs_cpp"]["status"] == "MISS" and t["py_jit_vs_cpp"]["ratio"] == pytest.approx(7.0 / 3.6)

    # tjit.jit wrong anywhere: MISS however fast; the floor not measured: N/A with the error.
    part = _part({"4_args": {"triton": 20.0, "tjit_jit": 4.0, "tjit_jit_bound": 3.7},
                  "14_args": {"triton": 28.0, "tjit_jit": 5.0, "tjit_jit_bound": 4.6}},
                 checks={"4_args": {"tjit_jit": False}},
                 errors={"4_args": {"ctypes_floor": "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1)"}})
    t = targets(part)
    assert t["py_jit_vs_triton"]["status"] == "MISS"
    assert t["py_jit_vs_floor"]["ratio"] is None and "CUDA_ERROR_INVALID_VALUE" in t["py_jit_vs_floor"]["note"]
    # Skipped (CPU) or not run: N/A, saying why.
    t = targets({"skipped": True, "reason": "needs a CUDA GPU"})
    assert all(t[k]["status"] == "N/A" and "needs a CUDA GPU" in t[k]["note"] for k in
               ("py_jit_vs_triton", "py_jit_vs_floor", "py_jit_vs_cpp"))
    assert targets(None)["py_jit_vs_cpp"]["status"] == "N/A"

    # The Markdown table, the errors and the terminal lines.
    part = _part({"4_args": {"triton": 20.0, "tjit_jit": 4.0, "tjit_jit_bound": 3.7, "ctypes_floor": 6.0}},
                 errors={"4_args": {"ctypes_floor": "boom"}})
    results = {"meta": {"device_name": "test"}, "overhead": {"own_kernels": part}}
    md = open(report.write_markdown(results, str(tmp_path / "results.md"))).read()
    section = md.split("## Host overhead per launch, own kernels (tjit.jit)")[1].split("## Bandwidth")[0]
    assert ("| kernel | params | triton us | tjit_jit us | tjit_jit_bound us | ctypes_floor us | cpp us | "
            "tjit_jit/triton | tjit_jit/ctypes_floor | tjit_jit/cpp | tjit_jit_bound/triton |") in section
    assert "| 4_args | 4 | 20.00 | 4.00 | 3.70 | 6.00 | 3.60 | 0.20 | 0.67 | 1.11 | 0.18 |" in section
    assert "**ERROR** 4_args/ctypes_floor: boom" in section
    lines = "\n".join(report.summary_lines(results))
    assert "Own kernels, host us per launch" in lines and "4_args" in lines


CHECK_SCRIPT = textwrap.dedent("""
    import json, os, re, sys, types
    sys.path.insert(0, sys.argv[1])
    import torch, triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import make_launcher
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    import own_kernels as ok

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    out = {}
    for case in ok.make_cases(torch, ok.load_kernels(), "cpu"):
        k = case.kernel
        # The specialisation Triton's launch makes (JITFunction.run: binder, _pack_args).
        kwargs = dict(case.constexprs, debug=False)
        bound, specialization, options = create_function_from_signature(k.signature, k.params, backend)(
            *case.args, **kwargs)
        options, signature, constexprs, attrs = k._pack_args(backend, kwargs, bound, specialization, options)
        src = ASTSource(k, signature, constexprs, attrs)
        params = ok.kernel_params(types.SimpleNamespace(src=src), case.named, ok.trailing_launcher_params())
        # What Triton's generated launcher declares and passes.
        c = make_launcher(src.constants, dict(src.signature), None)
        decls = dict(reversed(d.strip().rsplit(" ", 1)) for d in
                     re.search(r"static void _launch\\((.*?)\\) \\{", c, re.S).group(1).split(","))
        passed = re.search(r"void \\*params\\[\\] = \\{(.*?)\\};", c).group(1)
        passed = [p.strip().lstrip("&") for p in passed.split(",")]
        compiled = triton.compile(src, target=target, options=options.__dict__)
        out[case.name] = {"ours": [[n, ty, type(v).__name__, ok.ctypes.sizeof(v)] for n, ty, v in params],
                          "passed": passed, "c_types": [decls[p] for p in passed],
                          "problems": ok.launch_problems(compiled.metadata)}
    print(json.dumps(out))
""")

C_SIZE = {"CUdeviceptr": 8, "int32_t": 4, "int64_t": 8, "uint32_t": 4, "uint64_t": 8, "int8_t": 1, "double": 8}


def test_floor_params_match_tritons_launcher():
    """kernel_params gives, for both kernels, the parameters Triton's generated launcher passes: the
    same count and order, each of the C type's size, fp32 as a 4-byte float (Triton packs its bits
    into uint32_t), and the trailing scratch pointers; the sm_90 binaries need no scratch, clusters
    or launch attributes, so a plain cuLaunchKernel launches them as Triton does."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # JITFunctions, not interpreted
    env["TJIT_LOG_COMPILES"] = "0"
    proc = subprocess.run([sys.executable, "-c", CHECK_SCRIPT, BENCH], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(out) == {"4_args", "14_args"}
    for name, case in out.items():
        ours, c_types = case["ours"], case["c_types"]
        assert len(ours) == len(case["passed"]), (name, ours, case["passed"])
        assert case["passed"][-2:] == ["global_scratch", "profile_scratch"], case["passed"]
        assert [n for n, *_ in ours[-2:]] == ["global_scratch", "profile_scratch"]
        for (pname, ty, ctype, size), c_type in zip(ours, c_types):
            assert size == C_SIZE[c_type], (name, pname, ty, ctype, c_type)
            if ty == "fp32":
                assert ctype == "c_float" and c_type == "uint32_t", (name, pname)
        assert case["problems"] == [], (name, case["problems"])
    assert [ty for _, ty, *_ in out["14_args"]["ours"][:12]] == ["*fp32"] * 4 + ["i32"] * 4 + ["fp32"] * 4


FAKE_LIBCUDA = r"""
#include <stdint.h>
#include <stdio.h>
int fail_next = 0;
int cuCtxGetCurrent(void** ctx) { *ctx = (void*)0x1234; return 0; }
int cuGetErrorName(int code, const char** s) { *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** p, void** extra) {
  printf("%p %u %u %u %u %u %u %u %p %d %llx %llx %d %g %llu %llu\n", f, gx, gy, gz, bx, by, bz, shared, stream,
         extra == 0, (unsigned long long)*(uint64_t*)p[0], (unsigned long long)*(uint64_t*)p[3], *(int32_t*)p[6],
         *(float*)p[9], (unsigned long long)*(uint64_t*)p[12], (unsigned long long)*(uint64_t*)p[13]);
  fflush(stdout);
  return fail_next ? 700 : 0;
}
"""

CALL_SCRIPT = textwrap.dedent("""
    import ctypes, sys, types
    sys.path.insert(0, sys.argv[1])
    import torch
    import own_kernels as ok
    ok._libcuda = ctypes.CDLL(sys.argv[2])
    case = ok.make_cases(torch, ok.load_kernels(), "cpu")[1]
    signature = {n: ("constexpr" if n in case.constexprs else "*fp32" if hasattr(v, "data_ptr") else
                     "fp32" if isinstance(v, float) else "i32") for n, v in case.named.items()}
    meta = types.SimpleNamespace(num_warps=4, num_ctas=1, shared=2048, global_scratch_size=0, profile_scratch_size=0,
                                 launch_cooperative_grid=False, launch_pdl=False)
    compiled = types.SimpleNamespace(src=types.SimpleNamespace(signature=signature), metadata=meta,
                                     function=0xbeef, _init_handles=lambda: None)
    launch, info = ok.ctypes_floor(compiled, case.named, 0x7777)
    print("expect", hex(case.args[0].data_ptr()), hex(case.args[3].data_ptr()), flush=True)
    launch()
    ctypes.c_int.in_dll(ok._libcuda, "fail_next").value = 1
    try:
        launch()
    except ok.LaunchError as exc:
        print("raised", exc, flush=True)
    meta.global_scratch_size = 64
    try:
        ok.ctypes_floor(compiled, case.named, 0)
    except ok.LaunchError as exc:
        print("refused", exc, flush=True)
""")


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler for the stand-in libcuda")
def test_floor_calls_culaunchkernel_as_prepared(tmp_path):
    """The floor's ctypes call hands cuLaunchKernel the function, grid, block (32 x num_warps), shared
    memory, stream, the params array (values as prepared) and a null `extra`; a failing CUresult raises
    with its name, and a cubin that needs scratch is refused."""
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    lib = tmp_path / "libfakecuda.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "fake.c")], check=True)
    proc = subprocess.run([sys.executable, "-c", CALL_SCRIPT, BENCH, str(lib)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    _, x, out = lines[0].split()
    assert lines[1].split() == ["0xbeef", "1", "1", "1", "128", "1", "1", "2048", "0x7777", "1", x[2:], out[2:], "3",
                                "-1.25", "0", "0"], lines
    assert lines[2] == lines[1], lines  # the second launch passes the same, and fails:
    assert lines[3] == "raised cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS (700)", lines
    assert lines[4].startswith("refused ") and "global_scratch_size = 64" in lines[4], lines
