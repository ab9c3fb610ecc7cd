"""`python <tjit>/aot build ...` (CMake's way: no `tjit` import, so neither torch nor tjit's C++
library is loaded) and `python -m tjit.aot ...`."""

import sys

if __package__:  # python -m tjit.aot
    from .cli import main
else:  # python <folder>: load this folder as a package by path, not from sys.path
    import importlib
    import importlib.util
    import os

    _folder = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _folder:
        del sys.path[0]  # its modules' names (cli, keys, ...) must not shadow others'
    _spec = importlib.util.spec_from_file_location("_tjit_aot", os.path.join(_folder, "__init__.py"),
                                                   submodule_search_locations=[_folder])
    _package = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _package
    _spec.loader.exec_module(_package)
    main = importlib.import_module("_tjit_aot.cli").main

if __name__ == "__main__":
    sys.exit(main())
