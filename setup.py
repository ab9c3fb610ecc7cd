"""Builds tjit through its one CMake build and installs the Python package `tjit` (ops/).

Needs torch and triton already installed in this Python (they are not installed for
you: a plain `torch` requirement would download a CUDA build over an existing one). Use
    pip install --no-build-isolation .            (or -e . for a checkout you edit)
    pip wheel --no-build-isolation --no-deps .    (a wheel for environments with the same torch)
Environment: TJIT_BUILD_DIR (default ./build), TJIT_BUILD_TESTS (default 1), CMAKE_BUILD_PARALLEL_LEVEL.

The package is also a CMake prefix (`tjit.cmake_prefix_path`): include/tjit, lib/ with the
libraries and lib/cmake/tjit, kernels_py/. Libraries in a wheel find torch's through a relative
path (site-packages/torch/lib); an editable install keeps the build's paths.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGE_DIR = ROOT / "ops"
LIBRARIES = ("liboperators.so", "libtriton_jit.so", "libtjit_python.so")


def _torch_version():
    """The version of the torch to build against; both torch and triton must be installed."""
    try:
        import torch
        import triton  # noqa: F401  (only that it is there: kernels compile with it)
    except ImportError as error:
        sys.exit(f"tjit: building needs torch and triton in this Python ({error}); install them "
                 "first (CPU: pip install torch==2.13.0 triton==3.6.0), then "
                 "pip install --no-build-isolation .")
    return torch.__version__


def _cmake_build(editable):
    build_dir = Path(os.environ.get("TJIT_BUILD_DIR", ROOT / "build"))
    configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DTJIT_PYTHON_EXECUTABLE={sys.executable}",
                 f"-DTJIT_BUILD_TESTS={'ON' if os.environ.get('TJIT_BUILD_TESTS', '1') != '0' else 'OFF'}"]
    cache = build_dir / "CMakeCache.txt"
    if cache.exists():
        # A build folder copied or moved with its checkout names the old source folder: CMake
        # refuses it. It holds nothing this checkout can reuse, so start it afresh.
        home = next((line.split("=", 1)[1].strip() for line in cache.read_text(errors="replace").splitlines()
                     if line.startswith("CMAKE_HOME_DIRECTORY:")), None)
        if home is not None and Path(home).resolve() != ROOT.resolve():
            print(f"tjit: {build_dir} was configured for the sources in {home}, not {ROOT} (a copied "
                  "checkout?); removing it and configuring afresh", file=sys.stderr)
            shutil.rmtree(build_dir)
    if shutil.which("ninja") and not cache.exists():
        configure += ["-G", "Ninja"]
    subprocess.check_call(configure)
    subprocess.check_call(["cmake", "--build", str(build_dir)])
    prefix = build_dir / "package-prefix"
    shutil.rmtree(prefix, ignore_errors=True)
    subprocess.check_call(["cmake", "--install", str(build_dir), "--prefix", str(prefix)],
                          stdout=subprocess.DEVNULL)
    subprocess.check_call(["cmake", "--install", str(build_dir), "--prefix", str(prefix), "--component",
                           "python_module"], stdout=subprocess.DEVNULL)
    # The package carries its libraries (lib/), the C++ demo (bin/), the kernels (kernels_py/, in
    # the sources already), the headers (include/) and the CMake package (lib/cmake/tjit).
    for folder in ("include", "lib/cmake"):
        shutil.rmtree(PACKAGE_DIR / folder, ignore_errors=True)
        shutil.copytree(prefix / folder, PACKAGE_DIR / folder)
    # Installed binaries carry relative run paths; an editable checkout keeps the build's, which
    # name the torch it was built with (its demo runs from ops/bin, where no relative path leads).
    binaries = build_dir if editable else prefix
    (PACKAGE_DIR / "bin").mkdir(exist_ok=True)
    # shutil.copy, not copy2: fresh modification times tell run.sh this build produced them.
    for name in LIBRARIES:
        shutil.copy(binaries / "lib" / name, PACKAGE_DIR / "lib" / name)
    shutil.copy(binaries / "bin" / "tjit_demo", PACKAGE_DIR / "bin" / "tjit_demo")
    # tjit._C, the Python functions' direct calls, sits in the package's root.
    for old in PACKAGE_DIR.glob("_C.*.so"):
        old.unlink()
    for module in (build_dir / "lib" if editable else prefix / "python").glob("_C.*.so"):
        shutil.copy(module, PACKAGE_DIR / module.name)


class BuildPyWithCMake(build_py):

    def run(self):
        _cmake_build(editable=getattr(self, "editable_mode", False))
        super().run()


class BinaryDistribution(Distribution):
    """The package holds native libraries built for one Python and one torch: wheels say so."""

    def has_ext_modules(self):
        return True


def _release(version):
    return re.match(r"\d+(\.\d+)*", version).group(0)  # 2.13.0+cpu -> 2.13.0


def _kernel_packages():
    """tjit.kernels_py and every kernel package below it (a folder with __init__.py)."""
    return ["tjit." + ".".join(init.parent.relative_to(PACKAGE_DIR).parts)
            for init in sorted((PACKAGE_DIR / "kernels_py").rglob("__init__.py"))]


TORCH_VERSION = _torch_version()

setup(
    name="tjit",
    version="0.1.0",
    description="PyTorch operators written in Triton, launched from C++ by an embedded Triton JIT runtime",
    # The kernels are a package of their own (tjit.kernels_py, with subpackages such as
    # kernels_py/layer_norm/), which the C++ runtime also loads by file path.
    packages=["tjit", "tjit.aot", "tjit.triton_adapter", *_kernel_packages()],
    package_dir={"tjit": "ops"},
    package_data={"tjit": ["_C.*.so", "lib/*.so", "bin/tjit_demo", "kernels_py/*.json", "include/tjit/*.h", "include/tjit/*/*.h",
                           "lib/cmake/tjit/*.cmake", "lib/cmake/tjit/*.in"]},
    python_requires=">=3.9",
    # The libraries are built against this torch's C++ ABI, which changes between releases.
    # Triton compiles kernels (a warm kernel store needs none); tjit supports 3.4 to 3.9.
    install_requires=[f"torch=={_release(TORCH_VERSION)}", "triton>=3.4,<3.10"],
    cmdclass={"build_py": BuildPyWithCMake},
    distclass=BinaryDistribution,
    zip_safe=False,
)
