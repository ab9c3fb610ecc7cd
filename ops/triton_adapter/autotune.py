"""@triton.autotune and @triton.heuristics: the layers they wrap around a kernel, the JSON
description of them the runtime tunes from, and the Python the runtime calls back per call
(prune_configs, heuristic_values), evaluated as Python Triton's Autotuner and Heuristics do."""

import functools
import inspect
import json

import triton
from triton.runtime.jit import JITFunction

from . import state
from .values import constexpr_json, constexpr_value, python_value


def without_front_end(obj):
    """The kernel a tjit.jit object (tjit.python_kernels.JitKernel) launches, else `obj`: a kernel
    file may decorate its kernels with tjit.jit on top of @triton.jit."""
    while getattr(type(obj), "__tjit_jit__", False):
        obj = obj.kernel
    return obj


def unwrap(obj):
    # triton.autotune / triton.heuristics wrap the JITFunction in `.fn`.
    obj = without_front_end(obj)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = without_front_end(obj.fn)
    return obj


def wrappers(obj):
    """The @triton.autotune / @triton.heuristics layers around a kernel, outermost first."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    layers = []
    obj = without_front_end(obj)
    while not isinstance(obj, JITFunction):
        if not isinstance(obj, (Autotuner, Heuristics)):
            raise TypeError(f"{type(obj).__name__} wraps the kernel; tjit runs @triton.jit kernels under "
                            "@triton.autotune and @triton.heuristics only")
        layers.append(obj)
        obj = obj.fn
    return layers


def hook_name(hook):
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


def tuning_description(obj, fn):
    """JSON text of what @triton.autotune and @triton.heuristics add to `fn` (empty when neither):
    the configs, the tuning key, reset_to_zero / restore_value, whether configs are pruned, the
    timing budget, and the parameters heuristics set (and whether they see the config)."""
    from triton.runtime.autotuner import Autotuner
    layers = wrappers(obj)
    if not layers:
        return ""
    name = fn.__name__
    description = {"configs": [], "key": [], "reset_to_zero": [], "restore_value": [], "prune": False,
                   "warmup_ms": 25.0, "rep_ms": 100.0, "heuristics": [], "heuristics_see_config": False,
                   "autotuned": False}
    for layer in layers:
        if isinstance(layer, Autotuner):
            if description["autotuned"]:
                raise TypeError(f"{name} has two @triton.autotune decorators; tjit supports one")
            # Its own pre_hook / post_hook (around each timed run): named, for the runtime's error
            # when tuning needs them and no C++ ones were supplied (set_autotune_hooks).
            if layer.user_defined_pre_hook:
                description["tuner_pre_hook"] = hook_name(layer.pre_hook)
            if layer.user_defined_post_hook:
                description["tuner_post_hook"] = hook_name(layer.post_hook)
            if layer._do_bench is not None and layer.num_warmups is None and layer.num_reps is None \
                    and not layer.use_cuda_graph:
                raise TypeError(f"@triton.autotune of {name} has its own do_bench; tjit times configs itself")
            description["autotuned"] = True
            for config in layer.configs:
                if getattr(config, "ir_override", None):
                    raise TypeError(f"a config of {name} ({config}) has an ir_override, which tjit does not support")
                what = f"a config of {name}"
                description["configs"].append({
                    "kwargs": {k: constexpr_json(constexpr_value(k, v, what)) for k, v in config.kwargs.items()},
                    "num_warps": int(config.num_warps), "num_stages": int(config.num_stages),
                    "num_ctas": int(config.num_ctas), "maxnreg": int(config.maxnreg) if config.maxnreg else 0,
                    # Its pre_hook's name: the runtime records what the hook does to descriptors
                    # (descriptor_hook) and names it in errors.
                    **({"pre_hook": hook_name(config.pre_hook)} if config.pre_hook is not None else {}),
                })
            description["key"] = list(layer.keys)
            description["reset_to_zero"] = list(layer.reset_to_zero)
            description["restore_value"] = list(layer.restore_value)
            description["prune"] = bool(layer.early_config_prune or layer.perf_model)
            if layer.num_warmups is not None:
                description["warmup_ms"] = float(layer.num_warmups)
            if layer.num_reps is not None:
                description["rep_ms"] = float(layer.num_reps)
        else:
            description["heuristics"] += list(layer.values)
            if description["autotuned"]:
                description["heuristics_see_config"] = True
    return json.dumps(description)  # configs keep their meta-parameters in source order, as Triton prints them


def _named_args(handle, args, tensors_as_dtype):
    names = _caller_parameter_names(handle)
    return {name: python_value(value, name if tensors_as_dtype else None) for name, value in zip(names, args)}


@functools.lru_cache(maxsize=None)
def _caller_parameter_names(handle):
    """The parameters a caller passes: those no config and no heuristic sets."""
    from triton.runtime.autotuner import Autotuner
    _, _, fn = state.kernels[handle]
    set_by_layers = set()
    for layer in wrappers(state.wrapped[handle]):
        if isinstance(layer, Autotuner):
            for config in layer.configs:
                set_by_layers.update(config.kwargs)
        else:
            set_by_layers.update(layer.values)
    return [p.name for p in fn.params if p.name not in set_by_layers]


def heuristic_values(handle, args, config_index):
    """The values @triton.heuristics set for a call with `args` (the caller's arguments, in order)
    and the chosen config (-1: none), as [(parameter index, value)], evaluated layer by layer as
    Python Triton's run() does."""
    from triton.runtime.autotuner import Autotuner
    _, _, fn = state.kernels[handle]
    nargs = _named_args(handle, args, tensors_as_dtype=True)
    kwargs = {}
    set_by_heuristics = []
    for layer in wrappers(state.wrapped[handle]):
        if isinstance(layer, Autotuner):
            if config_index >= 0:
                kwargs.update(layer.configs[config_index].all_kwargs())
        else:
            for name, heuristic in layer.values.items():
                kwargs[name] = heuristic({**nargs, **kwargs})
                set_by_heuristics.append(name)
    index = {p.name: i for i, p in enumerate(fn.params)}
    return [(index[name], constexpr_value(name, kwargs[name], f"the heuristic for {name} of {fn.__name__}"))
            for name in set_by_heuristics]


def _keywords_accepted(function, named):
    """The entries of `named` that `function` takes as keyword arguments: all of them when it has
    **kwargs, else those it names."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return dict(named)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(named)
    names = {p.name for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                       inspect.Parameter.KEYWORD_ONLY)}
    return {k: v for k, v in named.items() if k in names}


def prune_configs(handle, args):
    """Indices of the configs @triton.autotune's prune_configs_by keeps for a call with `args` (the
    caller's arguments, in order), in the order it ranks them, as Autotuner.prune_configs does.

    A C++ caller passes every argument by position, where a Python caller may pass some by keyword
    (`kernel[grid](a, b, N_CTX=n, FLATTEN=True)`), and prune functions read those from **kwargs.
    So early_config_prune gets every argument both ways: `named_args` and, as far as its signature
    takes them, keyword arguments; perf_model gets them with each config's values."""
    from triton.runtime.autotuner import Autotuner
    AutotunerError = getattr(triton.runtime.autotuner, "AutotunerError", RuntimeError)  # Triton 3.4: none
    tuner = next(layer for layer in wrappers(state.wrapped[handle]) if isinstance(layer, Autotuner))
    nargs = _named_args(handle, args, tensors_as_dtype=False)
    name = state.kernels[handle][2].__name__
    kept = tuner.configs
    if tuner.early_config_prune:
        kept = tuner.early_config_prune(tuner.configs, nargs, **_keywords_accepted(tuner.early_config_prune, nargs))
        if not kept:
            raise AutotunerError(f"No valid autotuner configs after pruning {name}: `early_config_prune` should "
                                 "return at least one config.")
    if tuner.perf_model:
        top_k = tuner.configs_top_k
        if isinstance(top_k, float) and top_k <= 1.0:
            top_k = int(len(tuner.configs) * top_k)
        elif not isinstance(top_k, int):
            raise TypeError(f"prune_configs_by of {name}: top_k must be a float <= 1.0 or an int")
        if len(kept) > top_k:
            estimate = {config: tuner.perf_model(**_keywords_accepted(tuner.perf_model,
                                                                      {**nargs, **config.all_kwargs()}))
                        for config in kept}
            kept = sorted(estimate, key=estimate.get)[:top_k]
    positions = {id(config): i for i, config in enumerate(tuner.configs)}
    result = []
    for config in kept:
        if id(config) not in positions:
            raise TypeError(f"prune_configs_by of {name} returned a config that is not one of its configs; tjit "
                            "can only run the listed ones")
        result.append(positions[id(config)])
    return result
