"""tjit's Python functions, one per operator, generated from the operators' schemas.

Each function has the schema's parameters (names, defaults, keyword-only markers), annotations
read from its types and the documentation the operator was defined with, and the body every
operator shares: the direct call through tjit._C, else torch.ops.tjit.<name>. The source is
generated (as dataclasses does) so a call costs what a hand-written function would.
"""

import typing
from typing import Optional, Sequence, Tuple, Union

import torch
from torch.compiler import is_compiling

# Schema types, as the schema's text writes them, as Python annotations.
_ANNOTATIONS = {
    "Tensor": torch.Tensor,
    "Tensor?": Optional[torch.Tensor],
    "int": int,
    "SymInt": int,
    "float": float,
    "bool": bool,
    "Scalar": Union[int, float],
    "ScalarType": torch.dtype,
    "ScalarType?": Optional[torch.dtype],
    "int[]": Sequence[int],
    "SymInt[]": Sequence[int],
    "int[1]?": Optional[Union[int, Sequence[int]]],
}


def _annotation(type_text: str) -> object:
    """The annotation of a schema type: those listed above, `T?` as Optional[T] and `T[N]` as
    Sequence[T] for any other T listed; anything else typing.Any."""
    if type_text in _ANNOTATIONS:
        return _ANNOTATIONS[type_text]
    if type_text.endswith("?"):
        inner = _annotation(type_text[:-1])
        return typing.Any if inner is typing.Any else Optional[inner]
    if type_text.endswith("]") and "[" in type_text:
        inner = _annotation(type_text[:type_text.index("[")])
        return typing.Any if inner is typing.Any else Sequence[inner]
    return typing.Any


def _argument_types(schema) -> dict:
    """{argument name: its type as written in the schema} (ScalarType reads as int in schema.arguments)."""
    text = str(schema)
    parameters = text[text.index("(") + 1:text.index(") ->")]
    types = {}
    for parameter in parameters.split(", "):
        if parameter == "*":
            continue
        declaration = parameter.split("=", 1)[0]
        type_text, _, name = declaration.rpartition(" ")
        types[name] = type_text
    return types


def _return_annotation(schema) -> object:
    results = [torch.Tensor if str(r.type) == "Tensor" else typing.Any for r in schema.returns]
    if len(results) == 1:
        return results[0]
    # Multi-tensor results hold None where an output was not asked for.
    return Tuple[tuple(Optional[r] for r in results)]


def _make_function(name: str, direct, packet, doc: str):
    """The Python function of operator `name`: `direct` is its tjit._C binding, `packet` its
    torch.ops.tjit.<name>."""
    schema = packet.default._schema
    namespace = {"_direct": direct, "_op": packet, "_is_compiling": is_compiling}
    params, positional, call = [], [], []
    keyword_only_started = False
    annotations = {}
    types = _argument_types(schema)
    for i, arg in enumerate(schema.arguments):
        if arg.kwarg_only and not keyword_only_started:
            params.append("*")
            keyword_only_started = True
        param = arg.name
        if arg.has_default_value():
            namespace[f"_default{i}"] = arg.default_value
            param += f"=_default{i}"
        params.append(param)
        positional.append(arg.name)
        call.append(f"{arg.name}={arg.name}" if arg.kwarg_only else arg.name)
        annotations[arg.name] = _annotation(types.get(arg.name, ""))
    source = (f"def {name}({', '.join(params)}):\n"
              f"    if not _is_compiling():\n"
              f"        out = _direct({', '.join(positional)})\n"
              f"        if out is not NotImplemented:\n"
              f"            return out\n"
              f"    return _op({', '.join(call)})\n")
    exec(compile(source, f"<tjit.{name}>", "exec"), namespace)  # noqa: S102  (source built from the schema)
    function = namespace[name]
    annotations["return"] = _return_annotation(schema)
    function.__annotations__ = annotations
    function.__doc__ = doc or f"`torch.ops.tjit.{name}`: {schema}"
    function.__module__ = "tjit"
    function.__qualname__ = name
    return function


def define_all(direct_module, ops, target: dict) -> Tuple[str, ...]:
    """Defines a function in `target` (tjit's namespace) for every operator that
    `direct_module` (tjit._C) binds; returns their names."""
    names = tuple(direct_module.operator_names)
    for name in names:
        target[name] = _make_function(name, getattr(direct_module, name), getattr(ops, name),
                                      direct_module.operator_doc(name))
    return names
