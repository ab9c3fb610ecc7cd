"""What a config's pre_hook does to a call's host tensor descriptors (descriptor_hook): it runs on
stand-ins that record the block_shape and padding it sets and refuse anything else, so the
runtime can replay the effect per config without calling Python on every launch."""

import json

from . import state
from .autotune import hook_name, wrappers
from .values import python_constexpr


class _NotRecordable(Exception):
    """A config pre_hook did something whose effect tjit cannot record as descriptor fields."""


def _refuse(what):
    def refuse(self, *args, **kwargs):
        raise _NotRecordable(f"it {what} {object.__getattribute__(self, '_tjit_name')}")
    return refuse


class _Opaque:
    """What a recorded pre_hook sees of an argument whose value the recording does not key on (a
    tensor, a runtime scalar, a heuristic's value): any use of it makes the hook not recordable."""

    def __init__(self, name):
        object.__setattr__(self, "_tjit_name", name)

    __getattr__ = _refuse("reads an attribute of")
    __setattr__ = _refuse("sets an attribute of")
    __call__ = _refuse("calls")
    __bool__ = __int__ = __index__ = __float__ = _refuse("reads the value of")
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse("compares")
    __hash__ = __len__ = __iter__ = __getitem__ = __setitem__ = __contains__ = _refuse("uses")
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse("computes with")
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = __and__ = __or__ = __xor__ = _refuse("computes with")
    __str__ = __repr__ = __format__ = _refuse("prints")


def _descriptor_mirror_class():
    from triton.tools.tensor_descriptor import TensorDescriptor

    class DescriptorMirror(TensorDescriptor):
        """A host tensor descriptor argument as a recorded pre_hook sees it: a TensorDescriptor
        (isinstance holds) whose block_shape and padding the hook may set (and read back once set);
        reading the call's own fields (base, shape, strides) makes the hook not recordable."""

        def __init__(self, name):  # noqa: the dataclass's fields are the call's, never read here
            object.__setattr__(self, "_tjit_name", name)
            object.__setattr__(self, "_tjit_set", {})

        def __setattr__(self, attribute, value):
            name = object.__getattribute__(self, "_tjit_name")
            if attribute == "block_shape":
                value = list(value)
                if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    raise TypeError(f"a config pre_hook set {name}.block_shape to {value!r}; it takes a list of ints")
            elif attribute == "padding":
                if value not in ("zero", "nan"):
                    raise TypeError(f"a config pre_hook set {name}.padding to {value!r}; it is 'zero' or 'nan'")
            else:
                raise _NotRecordable(f"it sets {name}.{attribute} (tjit records block_shape and padding)")
            object.__getattribute__(self, "_tjit_set")[attribute] = value

        def __getattribute__(self, attribute):
            if attribute.startswith("__") or attribute.startswith("_tjit"):
                return object.__getattribute__(self, attribute)
            set_fields = object.__getattribute__(self, "_tjit_set")
            if attribute in set_fields:
                return set_fields[attribute]
            raise _NotRecordable(f"it reads {object.__getattribute__(self, '_tjit_name')}.{attribute}")

        __eq__ = _refuse("compares")
        __hash__ = object.__hash__
        __repr__ = _refuse("prints")

    return DescriptorMirror


_DescriptorMirror = None


def descriptor_hook(handle, config_index, arguments_json):
    """What config `config_index`'s pre_hook does to the host tensor descriptors of a call, as JSON
    text: {"descriptors": {name: {"block_shape": [...], "padding": "zero"}}} (the fields it set), or
    {"unsupported": why} when its effect is not only that.

    The hook gets what Python Triton's autotuner gives it ({**named arguments, **config kwargs}),
    mirrored from the runtime's description of the call (arguments_json: {"constexprs": {name:
    value}, "descriptors": [names], "others": [names]}): the caller's constexpr values as they are,
    each host descriptor as a TensorDescriptor that records the block_shape and padding set on it,
    and every other argument (tensors, runtime scalars, heuristics' values) as a stand-in whose use
    makes the hook unrecordable. So the effect depends only on the config, the caller's constexprs
    and which arguments are descriptors: the runtime's key for the recorded decision."""
    from triton.runtime.autotuner import Autotuner
    global _DescriptorMirror
    if _DescriptorMirror is None:
        _DescriptorMirror = _descriptor_mirror_class()
    arguments = json.loads(arguments_json)
    tuner = next(layer for layer in wrappers(state.wrapped[handle]) if isinstance(layer, Autotuner))
    config = tuner.configs[config_index]
    if config.pre_hook is None:
        return json.dumps({"descriptors": {}})
    mirrors = {name: _DescriptorMirror(name) for name in arguments["descriptors"]}
    nargs = {name: _Opaque(name) for name in arguments["others"]}
    nargs.update({name: python_constexpr(value) for name, value in arguments["constexprs"].items()})
    nargs.update(mirrors)
    nargs.update(config.all_kwargs())
    try:
        config.pre_hook(nargs)
    except _NotRecordable as e:
        return json.dumps({"unsupported": f"{hook_name(config.pre_hook)} is not descriptor-only: {e}"})
    set_fields = {name: object.__getattribute__(m, "_tjit_set") for name, m in mirrors.items()}
    return json.dumps({"descriptors": {name: fields for name, fields in set_fields.items() if fields}})
