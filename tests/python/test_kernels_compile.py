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
