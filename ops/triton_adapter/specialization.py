"""What Python Triton itself derives for a launch (triton_specialization), without a GPU: tjit's
tests compare the C++ runtime's classification of arguments with it."""

import contextlib

from triton import knobs
from triton.backends.compiler import GPUTarget

from . import state
from .values import type_text


@contextlib.contextmanager
def _active_driver(stand_in):
    from triton.runtime.driver import driver
    # Triton 3.4 keeps the active driver in the attribute `active`; 3.5 and later in `_active`,
    # behind a property whose first read creates the default driver (which fails without a GPU):
    # save and restore the slot itself.
    slot = "_active" if "_active" in vars(driver) else "active"
    saved = vars(driver)[slot]
    driver.set_active(stand_in)
    try:
        yield
    finally:
        setattr(driver, slot, saved)


def triton_specialization(fn, args, target):
    """What Python Triton itself derives for the launch fn[grid](*args) on target (backend, arch,
    warp_size), as tjit's Specialization holds it: (types, [(index, constexpr value)], [indices
    divisible by 16], [(path, constexpr value)] and [paths divisible by 16] inside tuples). Runs Triton's own JITFunction.run (its binder, then the packing that feeds
    triton.compile) with a stand-in driver that names the target, and stops it through
    knobs.runtime.jit_cache_hook before it compiles, so no GPU is needed. tjit's tests compare the
    C++ runtime's classification with it."""
    gpu_target = GPUTarget(*target)

    class TargetDriver:

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return gpu_target

    captured = {}

    def stop_before_compiling(*, compile, **_):
        captured.update(compile)
        return True  # run() returns without compiling

    saved_hook = knobs.runtime.jit_cache_hook
    with state.mode_lock, _active_driver(TargetDriver()):
        knobs.runtime.jit_cache_hook = stop_before_compiling
        try:
            fn.run(*args, grid=(1, ), warmup=True)
        finally:
            knobs.runtime.jit_cache_hook = saved_hook
    if not captured:
        raise RuntimeError(f"{fn.__name__}: Triton's run() never reached its jit_cache_hook")
    signature, constants, attrs = captured["signature"], captured["constants"], captured["configs"][0]
    types = [type_text(signature[p.name]) for p in fn.params]
    constexprs = sorted((path[0], value) for path, value in constants.items() if len(path) == 1)
    divisible = sorted(path[0] for path, values in attrs.items()
                       if len(path) == 1 and ["tt.divisibility", 16] in values)
    tuple_constexprs = sorted((list(path), value) for path, value in constants.items() if len(path) > 1)
    tuple_divisible = sorted(list(path) for path, values in attrs.items()
                             if len(path) > 1 and ["tt.divisibility", 16] in values)
    return types, constexprs, divisible, tuple_constexprs, tuple_divisible
