"""Where the builder finds tjit's other Python modules, without importing the `tjit` package (whose
__init__ loads tjit's C++ library and torch): kernel_store.py (the entry format) and the package
triton_adapter/ (the only code that knows Triton's Python API) lie in this package's parent
folder, as in tjit's source tree (ops/), a wheel (tjit/) and an installed prefix (share/tjit/aot/).

As `tjit.aot` the package imports them through `tjit`; loaded by path (`python <tjit>/aot build`,
CMake's way, and the compile workers) it loads them by path too."""

import importlib
import importlib.util
import os
import sys

PACKAGE_FOLDER = os.path.dirname(os.path.abspath(__file__))
_PARENT_FOLDER = os.path.dirname(PACKAGE_FOLDER)
_PACKAGE = __name__.rpartition(".")[0]  # "tjit.aot", or the name the package was loaded under by path


def _load_by_path(name: str, path: str, package_folder: str = None):
    """The module (a package, given its folder) at `path` as sys.modules[name], loaded once."""
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            name, path, submodule_search_locations=[package_folder] if package_folder else None)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


def sibling(name: str):
    """tjit's module `name` (kernel_store) or package `name` (triton_adapter)."""
    if _PACKAGE == "tjit.aot":
        return importlib.import_module(f"tjit.{name}")
    folder = os.path.join(_PARENT_FOLDER, name)
    if os.path.isdir(folder):
        return _load_by_path(f"_tjit_aot_{name}", os.path.join(folder, "__init__.py"), folder)
    return _load_by_path(f"_tjit_aot_{name}", f"{folder}.py")


def load_package(name: str):
    """This package loaded again by path as `name` (the compile workers' name for it)."""
    return _load_by_path(name, os.path.join(PACKAGE_FOLDER, "__init__.py"), PACKAGE_FOLDER)


kernel_store = sibling("kernel_store")
DamagedFile = kernel_store.DamagedFile
_triton_adapter = None


def adapter():
    """triton_adapter, imported on first need (it imports triton; `list` and damaged-bundle checks don't)."""
    global _triton_adapter
    if _triton_adapter is None:
        _triton_adapter = sibling("triton_adapter")
    return _triton_adapter
