"""Every kernel in ops/kernels_py compiles for an sm_90 target, with no GPU present.

The CPU suite runs the kernels through Triton's interpreter, which never type-checks a kernel the
way the compiler does: a constexpr branch that only compiled code takes (a pipelined loop, a
plan's STAGES=1 path, INDEX_64, None pointers, ints specialised to 1) can be broken and still pass
there. kernels_interpreter_check.py --compile-only compiles each kernel in each such variant
through triton.compile(ASTSource(...)); this runs it, interpreter off, and names what failed."""

import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels_interpreter_check.py")


def test_every_kernel_variant_compiles_for_sm90():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, SCRIPT, "--compile-only"], env=env, capture_output=True, text=True,
                          timeout=900)
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert done.returncode == 0 and not failed, "\n".join(failed) or done.stdout[-2000:] + done.stderr[-2000:]
    assert "compile check:" in done.stdout and " 0 failed" in done.stdout, done.stdout[-2000:]


def test_kernels_are_an_importable_package():
    # tjit.kernels_py is a package: its modules import their helpers (row_exchange) with relative
    # imports, in the installed package as in the C++ runtime's loads by path.
    code = ("import tjit.kernels_py.softmax as s, tjit.kernels_py.layer_norm.forward as f, "
            "tjit.kernels_py.layer_norm.backward as b, tjit.kernels_py.sum, tjit.kernels_py.add\n"
            "import tjit.kernels_py.row_exchange as r, tjit.kernels_py.norm_team as t\n"
            "assert s.publish is r.publish and f.publish is r.publish and b.wait is r.wait and t.wait is r.wait\n"
            "assert b._team_row is t._team_row\n"
            "print(s.softmax_fwd_split_kernel.__name__, f.layer_norm_fwd_long_kernel.fn.__name__, "
            "t.norm_bwd_team_lag_kernel.fn.__name__)")
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["softmax_fwd_split_kernel", "layer_norm_fwd_long_kernel",
                                   "norm_bwd_team_lag_kernel"]


# The norm family's lag team backward's pipelined row loop (layer_norm's and rms_norm's forms): no local memory inside
# them at 128 registers (help code in that loop once made ptxas spill there, reloaded every row:
# 0.76-0.79x on an H200), their copies ahead (LDGSTS) still in them. Run in a subprocess with the
# interpreter off, like the check above.
SPILL_CHECK = r"""
import os, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import tjit.kernels_py.norm_team as t
# (kernel, pointers and their element types ("in": the rows'), int32 arguments, constexprs): the bf16 10944 x 12288
# and 8192 x 16384 plans' kernels (tests/python/test_plans.py)
KERNELS = [
    (t.norm_bwd_team_lag_kernel,  # layer_norm's form
     dict(dx_ptr="in", dw_partial_ptr="fp32", db_partial_ptr="fp32", dy_ptr="in", x_ptr="in", w_ptr="in",
          mean_ptr="fp32", rstd_ptr="fp32", sync_ptr="i64"),
     ("M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"),
     dict(ds_ptr=None, HAS_WEIGHT=True, COMPUTE_DW=True, COMPUTE_DB=True, BLOCK_N=2048, S_POW2=8, STAGES=2,
          INDEX_64=False)),
    (t.norm_bwd_team_lag_kernel,  # rms_norm's form
     dict(dx_ptr="in", dw_partial_ptr="fp32", dy_ptr="in", x_ptr="in", w_ptr="in", rstd_ptr="fp32",
          sync_ptr="i64"),
     ("M", "N", "S", "rows_per_team", "stride_dx_row", "stride_dy_row", "stride_x_row", "stride_ds_row"),
     dict(db_partial_ptr=None, mean_ptr=None, ds_ptr=None, HAS_WEIGHT=True, COMPUTE_DW=True, COMPUTE_DB=False,
          BLOCK_N=2048, S_POW2=8, STAGES=2, INDEX_64=False)),
]
for fn, pointers, ints, consts in KERNELS:
    for dt in ("bf16", "fp16"):
        sig, attrs = {}, {}
        for i, name in enumerate(fn.arg_names):
            if name in pointers:
                sig[name], attrs[(i, )] = "*" + pointers[name].replace("in", dt), [["tt.divisibility", 16]]
            elif name in ints:
                sig[name] = "i32"
                if name not in ("S", "rows_per_team"):
                    attrs[(i, )] = [["tt.divisibility", 16]]
            else:
                sig[name] = "constexpr"
        compiled = triton.compile(ASTSource(fn, signature=sig, constexprs=consts, attrs=attrs),
                                  target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, maxnreg=128))
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(compiled.asm["cubin"])
        tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
        sass = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
        os.unlink(f.name)
        code = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
        # loops: a branch back to an earlier address; the pipelined one holds the copies ahead
        pipelined = []
        for address, text in code:
            back = re.search(r"\bBRA(?:\.U)?\s+(?:!?U?P\w+,\s*)?0x([0-9a-f]+)", text)
            if back and int(back.group(1), 16) < address:
                body = [t for a, t in code if int(back.group(1), 16) <= a <= address]
                if any("LDGSTS" in t for t in body):
                    pipelined.append(body)
        case = (fn.__name__, "rms_norm" if consts.get("mean_ptr", 0) is None else "layer_norm", dt)
        assert len(pipelined) == 1, (case, len(pipelined))
        local = [t for t in pipelined[0] if re.search(r"\b(STL|LDL)\b", t)]
        assert not local, (case, local)
        assert sum("LDGSTS" in t for t in pipelined[0]) >= 8, case
        print(*case, "pipelined loop:", len(pipelined[0]), "instructions, no local memory")
"""


def test_lag_team_backward_pipelined_loop_has_no_local_memory():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", SPILL_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
