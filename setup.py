"""Builds tjit through its one CMake build and installs the Python package `tjit` (ops/).

Needs torch and triton already installed in this Python (they are not installed for
you: a plain `torch` requirement would download a CUDA build over an existing one). Use
    pip install --no-build-isolation .
Environment: TJIT_BUILD_DIR (default ./build), TJIT_BUILD_TESTS (default 1), CMAKE_BUILD_PARALLEL_LEVEL.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGE_DIR = ROOT / "ops"
LIBRARIES = ("liboperators.so", "libtriton_jit.so", "libtjit_python.so")


def _cmake_build():
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError as error:
        sys.exit(f"tjit: building needs torch and triton in this Python ({error}); install them "
                 "first (CPU: pip install torch==2.13.0 triton==3.6.0), then "
                 "pip install --no-build-isolation .")
    build_dir = Path(os.environ.get("TJIT_BUILD_DIR", ROOT / "build"))
    configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DTJIT_PYTHON_EXECUTABLE={sys.executable}",
                 f"-DTJIT_BUILD_TESTS={'ON' if os.environ.get('TJIT_BUILD_TESTS', '1') != '0' else 'OFF'}"]
    if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
        configure += ["-G", "Ninja"]
    subprocess.check_call(configure)
    subprocess.check_call(["cmake", "--build", str(build_dir)])
    # The package carries its libraries (lib/), the C++ demo (bin/) and the kernels (kernels_py/).
    (PACKAGE_DIR / "lib").mkdir(exist_ok=True)
    (PACKAGE_DIR / "bin").mkdir(exist_ok=True)
    # shutil.copy, not copy2: fresh modification times tell run.sh this build produced them.
    for name in LIBRARIES:
        shutil.copy(build_dir / "lib" / name, PACKAGE_DIR / "lib" / name)
    shutil.copy(build_dir / "bin" / "tjit_demo", PACKAGE_DIR / "bin" / "tjit_demo")


class BuildPyWithCMake(build_py):

    def run(self):
        _cmake_build()
        super().run()


setup(
    name="tjit",
    version="0.1.0",
    description="PyTorch operators written in Triton, launched from C++ by an embedded Triton JIT runtime",
    packages=["tjit"],
    package_dir={"tjit": "ops"},
    package_data={"tjit": ["lib/*.so", "bin/tjit_demo", "kernels_py/*.py"]},
    python_requires=">=3.9",
    cmdclass={"build_py": BuildPyWithCMake},
    zip_safe=False,
)
