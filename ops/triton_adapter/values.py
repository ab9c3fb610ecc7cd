"""Values crossing between the C++ runtime and Python: constexpr values and their JSON form,
arguments as they arrive from the runtime (DLPack capsules, host tensor descriptors as dicts,
tuples), and the text form of tuple types in a signature."""

from triton import language as tl


def is_element_dtype(value):
    """A tl.dtype of an element type (tl.bfloat16), not a pointer or block type."""
    return isinstance(value, tl.dtype) and type(value) is tl.dtype


def constexpr_value(name, value, what):
    if value is None or isinstance(value, (bool, int, float, str)) or is_element_dtype(value):
        return value
    raise TypeError(f"{what} sets {name} to {value!r} ({type(value).__name__}); tjit passes None, bool, int, "
                    "float, str and tl.dtype meta-parameters")


def constexpr_json(value):
    """A constexpr value as tjit's JSON holds it: a tl.dtype as {"dtype": name}."""
    return {"dtype": value.name} if is_element_dtype(value) else value


def python_constexpr(value):
    return tl.dtype(value["dtype"]) if isinstance(value, dict) else value  # JSON writes a dtype so


class _DtypeOnly:
    """What a heuristic sees of a tensor argument: its dtype. tjit remembers a heuristic's values per
    scalar argument values and tensor dtypes, so a heuristic that read anything else of a tensor
    could be silently wrong for the next call; it fails instead."""

    def __init__(self, name, dtype):
        self._name, self.dtype = name, dtype

    def __getattr__(self, attribute):
        raise AttributeError(f"a @triton.heuristics function read {self._name}.{attribute}; under tjit a heuristic "
                             f"sees only the dtype of a tensor argument (its values are remembered per scalar "
                             f"argument values and tensor dtypes): pass what it needs as a scalar argument")


def python_value(a, dtype_only_name=None):
    """A value from the runtime as Python Triton's caller would pass it: tensors arrive as DLPack
    capsules (shared memory), host tensor descriptors as dicts, tuples as tuples. With
    dtype_only_name, a tensor (in a tuple or under a descriptor too) is only its dtype (_DtypeOnly)."""
    import torch
    if isinstance(a, tuple):
        return tuple(python_value(e, dtype_only_name) for e in a)
    if isinstance(a, dict):  # a host tensor descriptor
        base = python_value(a["tensordesc"], dtype_only_name)
        if dtype_only_name is not None:  # what a heuristic may read of it: no data pointer
            import types
            return types.SimpleNamespace(base=base, shape=a["shape"], strides=a["strides"],
                                         block_shape=a["block_shape"], padding=a["padding"])
        from triton.tools.tensor_descriptor import TensorDescriptor
        padding = {"padding": a["padding"]} if a["padding"] != "zero" else {}  # Triton 3.4 has no padding
        return TensorDescriptor(base, a["shape"], a["strides"], a["block_shape"], **padding)
    if type(a).__name__ == "PyCapsule":
        tensor = torch.from_dlpack(a)
        return _DtypeOnly(dtype_only_name, tensor.dtype) if dtype_only_name is not None else tensor
    return a


def tuple_type(text):
    """Triton's type of a tuple argument from its text: "[*fp32,[i32,constexpr]]" ->
    ("*fp32", ("i32", "constexpr")); any other type text is returned as it is."""
    if not text.startswith("["):
        return text
    stack = [[]]
    token = ""
    for c in text:
        if c in "[],":
            if token:
                stack[-1].append(token)
                token = ""
            if c == "[":
                stack.append([])
            elif c == "]":
                done = tuple(stack.pop())
                stack[-1].append(done)
        else:
            token += c
    return stack[0][0]


def type_text(t):
    """A signature type as tjit writes it: a tuple's as "[*fp32,i32]" (tuple_type's inverse)."""
    return "[" + ",".join(type_text(e) for e in t) + "]" if isinstance(t, tuple) else t
