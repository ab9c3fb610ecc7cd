"""A Triton older than tjit supports is refused with one clear message, naming the version found and
the supported range, whether the runtime is reached from Python or from a C++ program. Each case
runs a fresh process whose PYTHONPATH puts a stand-in `triton` package (only a __version__) first."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("TJIT_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "tjit_store_probe")
TEST_KERNELS = os.path.join(REPO, "tests", "cpp", "kernels", "runtime_test_kernels.py")
EXPECTED = "tjit supports Triton 3.4 to 3.9, but the Triton found is 3.3.1"


@pytest.fixture
def old_triton_env(tmp_path):
    package = tmp_path / "old" / "triton"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "3.3.1"\n')
    path = os.pathsep.join(p for p in (str(package.parent), os.environ.get("PYTHONPATH")) if p)
    # An empty store of its own: nothing compiled by the real Triton may stand in for the compile.
    env = dict(os.environ, PYTHONPATH=path, TJIT_TRITON_DIR=str(package), TJIT_CACHE_DIR=str(tmp_path / "store"))
    return env, str(package)


def test_python_caller_sees_the_version(old_triton_env):
    env, package = old_triton_env
    code = ("import torch, tjit\n"
            "try:\n"
            "    torch.ops.tjit.add(torch.ones(4), torch.ones(4))\n"
            "except RuntimeError as e:\n"
            "    print(e)\n")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert EXPECTED in result.stdout, result.stdout
    assert package in result.stdout, result.stdout


def test_cpp_program_sees_the_version(old_triton_env):
    if not os.path.exists(PROBE):
        pytest.fail(f"{PROBE} is missing: build tjit with its tests (./run.sh test, or TJIT_BUILD_DIR=<build>)")
    env, package = old_triton_env
    result = subprocess.run([PROBE, TEST_KERNELS, "scale_kernel", "cuda:90", "64"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 3, result.stdout + result.stderr
    assert EXPECTED in result.stderr, result.stderr
    assert package in result.stderr, result.stderr
