"""The keys the C++ runtime looks binaries up by, in Python: compile targets, Triton's type names,
launch options and their defaults, a specialisation's description, and bundle_key() byte for byte
as the runtime's bundle_key builds it from a launch."""

import json
import re
import struct
from typing import Sequence, Tuple

TJIT_VERSION = "0.1.0"  # setup.py's and CMakeLists.txt's version; this package must not import tjit
OPTION_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "enable_fp_fusion": True,
                   "launch_cooperative_grid": False, "launch_pdl": False}
# Options that keys, headers and manifests carry only when set (so the keys of kernels without them
# stay those of earlier releases): maxnreg, a config's register limit per thread (0: none).
OPTIONAL_OPTIONS = {"maxnreg": 0}
# tl.dtype's names (a dtype constexpr is {"dtype": name} in JSON), as tjit::Dtype (launch/dtype.cpp) knows them.
DTYPE_NAMES = ("int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "fp16", "bf16",
               "fp32", "fp64", "fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16", "fp8e4b15")
_DTYPE_ATTRIBUTES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}  # tl.<attribute>


def dtype_attribute(name: str) -> str:
    """tl's attribute for a dtype name: "bf16" -> "bfloat16", "fp8e5" -> "float8e5", "int32" -> "int32"."""
    return _DTYPE_ATTRIBUTES.get(name, "float" + name[2:] if name.startswith("fp8") else name)


def parse_target(text: str) -> Tuple[str, int, int]:
    """A compile target: cuda:90 or cuda:90:32 (backend, arch, warp size; 32 by default) -> ("cuda", 90, 32)."""
    parts = str(text).split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        backend, arch, warp_size = parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 32
    except ValueError:
        raise ValueError(f"cannot parse compile target {text!r}: expected BACKEND:ARCH[:WARP_SIZE], "
                         "e.g. cuda:90") from None
    if backend != "cuda":
        raise ValueError(f"compile target {text!r}: only the cuda backend is supported")
    if arch <= 0 or warp_size <= 0:
        raise ValueError(f"compile target {text!r}: arch and warp size must be positive")
    return backend, arch, warp_size


def target_string(target) -> str:
    if isinstance(target, dict):
        target = (target["backend"], target["arch"], target["warp_size"])
    return f"{target[0]}:{target[1]}:{target[2]}"


_INTEGERS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_FLOATS = ("fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16")
_SCALARS = ("u1", ) + _INTEGERS + _FLOATS  # Triton's canonical names (triton._utils.type_canonicalisation_dict)


_TENSOR_DESCRIPTOR = re.compile(r"tensordesc<(\w+)\[(\d+(?:, \d+){0,4})\]>")


def parse_type(text: str) -> Tuple[str, bool]:
    """A manifest type string -> (Triton type, divisible by 16); ValueError saying what is wrong."""
    if text.startswith("tensordesc"):  # a host tensor descriptor: tensordesc<fp16[64, 32]>
        match = _TENSOR_DESCRIPTOR.fullmatch(text)
        if not match or match.group(1) not in _SCALARS or \
                any(int(d) & (int(d) - 1) or int(d) == 0 for d in match.group(2).split(", ")):
            raise ValueError(f"{text!r} is not a tensor descriptor type: expected tensordesc<ELEMENT[BLOCK, ...]> with "
                             "a scalar element type and 1 to 5 power-of-two block dims, as Triton writes it "
                             "(\"tensordesc<fp16[64, 32]>\")")
        return text, False
    base, divisible = (text[:-3], True) if text.endswith(":16") else (text, False)
    pointer = base.startswith("*")
    element = base[2:] if base.startswith("*k") else base[1:] if pointer else base
    if element not in _SCALARS:
        if base == "constexpr":
            raise ValueError("\"constexpr\" is not a runtime type: give the constexpr's value instead")
        raise ValueError(f"{text!r} is not a Triton type: expected a scalar ({', '.join(_SCALARS)}) or a pointer "
                         "to one (\"*fp32\"; \"*kfp32\" for a tl.const parameter), with \":16\" appended when "
                         "divisible by 16")
    if divisible and not (pointer or element in _INTEGERS):
        raise ValueError(f"{text!r}: only pointers and integers are marked divisible by 16")
    return base, divisible


def _value_text(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict) and "dtype" in value:
        return f"tl.{dtype_attribute(value['dtype'])}"
    return repr(value)


def canonical(value) -> str:
    """JSON text that tells 1, 1.0 and true apart (Python's == does not)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _describe_tuple(text, path, values, divisible):
    """A tuple parameter as Specialization::describe writes it: "(*fp32:16, 1, (i32, None))"."""
    parts, depth, token = [], 0, ""
    for c in text[1:-1] + ",":  # split the elements at this level
        if c == "," and depth == 0:
            parts.append(token)
            token = ""
            continue
        depth += (c == "[") - (c == "]")
        token += c
    parts = [p for p in parts if p] if text != "[]" else []
    out = []
    for i, part in enumerate(parts):
        at = path + (i, )
        if part.startswith("["):
            out.append(_describe_tuple(part, at, values, divisible))
        elif part == "constexpr":
            out.append(_value_text(values.get(at)))
        else:
            out.append(part + (":16" if at in divisible else ""))
    return "(" + ", ".join(out) + ")"


def describe(param_names: Sequence[str], types, constexprs, divisible, tuple_constexprs=(), tuple_divisible=()) -> str:
    """A specialisation as the runtime describes it: "x_ptr: *fp32:16, n: i32, BLOCK=1024"."""
    values = dict((int(i), v) for i, v in constexprs)
    tuple_values = {tuple(p): v for p, v in tuple_constexprs}
    tuple_divisible = {tuple(p) for p in tuple_divisible}
    parts = []
    for i, t in enumerate(types):
        name = param_names[i] if i < len(param_names) else str(i)
        if t.startswith("["):
            parts.append(f"{name}: {_describe_tuple(t, (i, ), tuple_values, tuple_divisible)}")
        elif t != "constexpr":
            parts.append(f"{name}: {t}" + (":16" if i in divisible else ""))
        else:
            parts.append(f"{name}={_value_text(values.get(i))}")
    return ", ".join(parts)


def options_text(options: dict) -> str:
    """Launch options as the store's key writes them."""
    return " ".join([f"{name}={int(options[name])}" for name in OPTION_DEFAULTS] +
                    [f"{name}={int(options[name])}" for name in OPTIONAL_OPTIONS if options.get(name)])


def _key_integer(value, what) -> int:
    if type(value) is not int:
        raise ValueError(f"{what} is {value!r}, not an integer")
    return value


def _key_flag(value, what) -> int:
    if not isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, not true or false")
    return int(value)


def _key_value(value) -> str:
    """A constexpr's value in a bundle key (bool before int: True is an int in Python)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "bool:1" if value else "bool:0"
    if isinstance(value, int):
        return f"int:{value}"
    if isinstance(value, float):
        return f"float:{struct.unpack('<Q', struct.pack('<d', value))[0]}"  # the IEEE-754 bits, in decimal
    if isinstance(value, str):
        return f"str:{len(value.encode('utf-8'))}:{value}"  # by length: a string may hold ',' or a newline
    if isinstance(value, dict) and set(value) == {"dtype"} and value["dtype"] in DTYPE_NAMES:
        return f"dtype:{value['dtype']}"
    raise ValueError(f"constexpr value {value!r} is not null, a boolean, an integer, a float, a string or "
                     "{\"dtype\": <a Triton dtype's name>}")


def _key_tuple_path(path):
    if not isinstance(path, (list, tuple)) or len(path) < 2:
        raise ValueError(f"{path!r} is not a path inside a tuple parameter")
    return tuple(_key_integer(i, "a tuple path's index") for i in path)


def _key_path(path) -> str:
    return ".".join(str(i) for i in path)


def bundle_key(function: str, file_name: str, types, constexprs, divisible_by_16, options: dict, target,
               tuple_constexprs=(), tuple_divisible=()) -> str:
    """An entry's lookup key, as the C++ runtime's bundle_key builds it from a launch: one line each
    for function, file name, types, constexprs (by parameter index), parameters divisible by 16,
    options and target. constexprs: (index, value) pairs; options and target: as an entry header
    has them ({"num_warps": 4, ...}, {"backend": "cuda", "arch": 90, "warp_size": 32}; a target
    may also be a (backend, arch, warp size) tuple). Raises ValueError for values a key cannot hold.

        add_kernel\\nadd.py\\n*fp32,*fp32,*fp32,i32,constexpr,\\n4=int:1024,\\n0,1,2,\\n4,3,1,1,0,0,\\ncuda:90:32"""
    for what, text in (("function", function), ("file name", file_name)):
        if not isinstance(text, str):
            raise ValueError(f"{what} is {text!r}, not a string")
    for t in types:
        if not isinstance(t, str):
            raise ValueError(f"type {t!r} is not a string")
    pairs = []
    for pair in constexprs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"constexpr {pair!r} is not an (index, value) pair")
        pairs.append((_key_integer(pair[0], "a constexpr's index"), pair[1]))
    divisible = sorted(_key_integer(i, "a divisible parameter's index") for i in divisible_by_16)
    tuple_pairs = [(_key_tuple_path(p), v) for p, v in tuple_constexprs]
    tuple_divisible = sorted(_key_tuple_path(p) for p in tuple_divisible)
    if isinstance(target, dict):
        target = (target.get("backend"), target.get("arch"), target.get("warp_size"))
    backend, arch, warp_size = target
    if not isinstance(backend, str):
        raise ValueError(f"target backend is {backend!r}, not a string")
    launch = [_key_integer(options.get(name), f"option {name}") for name in ("num_warps", "num_stages", "num_ctas")] + \
        [_key_flag(options.get(name), f"option {name}")
         for name in ("enable_fp_fusion", "launch_cooperative_grid", "launch_pdl")] + \
        [f"{name}={_key_integer(options[name], f'option {name}')}" for name in OPTIONAL_OPTIONS if options.get(name)]
    return (f"{function}\n{file_name}\n" +
            "".join(t + "," for t in types) + "\n" +
            "".join(f"{i}={_key_value(v)}," for i, v in sorted(pairs, key=lambda p: p[0])) +
            "".join(f"{_key_path(p)}={_key_value(v)}," for p, v in sorted(tuple_pairs, key=lambda p: p[0])) + "\n" +
            "".join(f"{i}," for i in divisible) + "".join(f"{_key_path(p)}," for p in tuple_divisible) + "\n" +
            "".join(f"{x}," for x in launch) + "\n" +
            f"{backend}:{_key_integer(arch, 'target arch')}:{_key_integer(warp_size, 'target warp size')}")


# --------------------------------------------------------------------------------------------
