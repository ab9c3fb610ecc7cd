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
            "import tjit.kernels_py.row_exchange as r\n"
            "assert s.publish is r.publish and f.publish is r.publish and b.wait is r.wait\n"
            "print(s.softmax_fwd_split_kernel.__name__, f.layer_norm_fwd_long_kernel.fn.__name__, "
            "b.layer_norm_bwd_team_lag_kernel.__name__)")
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["softmax_fwd_split_kernel", "layer_norm_fwd_long_kernel",
                                   "layer_norm_bwd_team_lag_kernel"]
