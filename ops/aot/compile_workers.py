"""Compiles, each a (specialisation, target) pair, in `spawn` worker processes (or in this one for
-j 1). A worker loads this package by path under _WORKER_PACKAGE, never `tjit` (whose __init__
loads torch), and the task function pickles by that name."""

import contextlib
import importlib
import sys
import types
from typing import Callable

from .kernels import load_kernel
from .siblings import PACKAGE_FOLDER, adapter, load_package

_WORKER_PACKAGE = "_tjit_aot_worker"


def _compile_task(task):
    """One (specialisation, target) compile: ("ok", cubin, metadata, sources) or ("error", message).
    Runs in worker processes, where this module is _WORKER_PACKAGE.compile_workers."""
    file, function, arg_types, constexprs, divisible, target, options, tuple_constexprs, tuple_divisible = task
    try:
        kernel = load_kernel(file, function)
        cubin, metadata = adapter().compile(kernel.handle, list(arg_types), list(constexprs), list(divisible),
                                            tuple(target), dict(options), [(list(p), v) for p, v in tuple_constexprs],
                                            [list(p) for p in tuple_divisible])
        return "ok", bytes(cubin), dict(metadata), list(kernel.sources)
    except Exception as e:
        return "error", f"{type(e).__name__}: {e}"


def _worker_start():
    adapter()  # imports triton while the pool starts, not on the first task


# What each fresh worker interpreter runs first: this package loaded by path as siblings.load_package does.
_WORKER_BOOT = """\
import importlib, importlib.util, os, sys
spec = importlib.util.spec_from_file_location({name!r}, os.path.join({folder!r}, "__init__.py"),
                                              submodule_search_locations=[{folder!r}])
module = importlib.util.module_from_spec(spec)
sys.modules[{name!r}] = module
spec.loader.exec_module(module)
importlib.import_module({name!r} + ".compile_workers")._worker_start()
"""


def _worker_module():
    """This module as the workers know it (_WORKER_PACKAGE.compile_workers), loaded in this process
    too, so that its _compile_task pickles by a name the workers resolve."""
    load_package(_WORKER_PACKAGE)
    return importlib.import_module(f"{_WORKER_PACKAGE}.compile_workers")


@contextlib.contextmanager
def _main_module_hidden():
    """A spawned process first runs its parent's __main__ again, unless that is a package's
    __main__ (`python -m tjit`): the calling script, say, which the workers do not need and which
    would start workers itself without an `if __name__ == "__main__"` guard. Hide it meanwhile."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = saved


def compile_all(tasks, processes, done: Callable[[tuple], None]):
    results = [None] * len(tasks)
    if processes <= 1:
        for i, task in enumerate(tasks):
            results[i] = _compile_task(task)
            done(results[i])
        return results
    import concurrent.futures
    import multiprocessing
    worker = _worker_module()
    boot = _WORKER_BOOT.format(name=_WORKER_PACKAGE, folder=PACKAGE_FOLDER)
    # exec (a builtin, so it pickles by name) runs the boot code in each fresh interpreter.
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=exec, initargs=(boot, {})) as pool:
        with _main_module_hidden():  # the workers start during the submits
            futures = {pool.submit(worker._compile_task, task): i for i, task in enumerate(tasks)}
        try:
            for future in concurrent.futures.as_completed(futures):
                try:
                    results[futures[future]] = future.result()
                except Exception as e:  # BrokenProcessPool: a worker died (or failed to start)
                    results[futures[future]] = ("error", f"the worker process failed: {type(e).__name__}: {e}")
                done(results[futures[future]])
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return results


# --------------------------------------------------------------------------------------------
# Bundles
