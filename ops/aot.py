"""tjit's ahead-of-time bundle builder: a manifest of kernel specialisations in, one bundle file of
compiled kernels for several GPU targets out, which the C++ runtime embeds in a program and loads
without Python or Triton.

    python -m tjit aot build --manifest M.json [--manifest M2.json ...] --target cuda:80 --target cuda:90
                             -o OUT.tjb [-j N] [--depfile OUT.tjb.d]
    python -m tjit aot list OUT.tjb [--json]
    python -m tjit aot merge A.json B.json ... -o C.json

The same module runs as a plain script, `python <tjit>/aot.py build ...`, without importing the
`tjit` package (whose __init__ loads tjit's C++ library and torch): CMake builds bundles that way.
It then loads kernel_store.py and triton_adapter.py from its own folder by path. Compiles go
through triton_adapter (load_kernel, compile), in `spawn` worker processes (-j, default
os.cpu_count()); nothing is written unless every compile succeeds.

Manifest (JSON; written by hand, by `aot merge`, or by the C++ runtime under TJIT_RECORD=<file>):

    {"tjit_manifest": 1,
     "entries": [{"file": "add.py", "function": "add_kernel",
                  "args": {"x_ptr": "*fp32:16", "n_elements": "i32", "BLOCK": 1024, ...},
                  "options": {"num_warps": 4, "num_stages": 3}}]}

- file: absolute, or relative to the manifest's folder.
- args: every parameter of the kernel by name, no others. A string is a runtime type as Triton
  writes it ("*fp32", "*kbf16" for a tl.const pointer, "i32", "i64", "u64", "u1", "fp32", ...),
  ":16" appended when the argument is divisible by 16 (tt.divisibility). Any other JSON value
  (integer, float, true/false, null) is a constexpr's value; a runtime parameter takes only null
  (None) or 1 (Triton's ==1 specialisation) that way.
- options: num_warps (4), num_stages (3), num_ctas (1), enable_fp_fusion (true),
  launch_cooperative_grid (false), launch_pdl (false); missing ones take the default.
Entries equal after resolving (file, function, args, options) count once.

A manifest also carries what a kernel's Python decorators decided, so a deployed program needs no
Python for them (TJIT_RECORD writes these as they happen; `aot build --decisions-from STORE` adds
those a kernel store holds):

    {"file": ..., "function": ..., "heuristics": {"config": -1, "arguments": {"x_ptr": "Float", "n": "1000"},
                                                  "values": {"EVEN": true}}}
    {"file": ..., "function": ..., "autotune": {"target": "cuda:90:32", "key": "n=1000, dtypes: Float Float",
                                                "config": "BLOCK: 256, num_warps: 4, num_ctas: 1, num_stages: 3"}}

- heuristics: the values @triton.heuristics returned for a call whose arguments (every argument
  run() takes, by name) the runtime describes so: a tensor by its dtype (Float, Half, BFloat16, ...),
  a number or bool as Python prints it, None; "config": the index of the autotune config the
  heuristics saw (-1: they ran before or without an autotuner).
- autotune: the config @triton.autotune chose on a target for a tuning key (the key arguments'
  values and the tensors' dtypes, as the runtime's log line prints them), as the config's text.

Bundle (.tjb), format 1:

    0   magic b"TJITBNDL"
    8   bundle format, u32 little-endian (1)
    12  index size in bytes, u32 LE
    16  payload size in bytes, u64 LE
    24  SHA-1 of the index's JSON bytes, 40 lowercase hex digits
    64  index:
          u32 LE  JSON size
          JSON    (UTF-8)
          u32 LE  entry count N
          N records: u32 LE kernel | u32 LE key size K | u64 LE offset | u64 LE size | K bytes key (UTF-8)
    64+index size: payload: kernel-store entry files (TJITKRNL frames, kernel_store.encode), one after another

The index is exactly its JSON size, count and records. Its JSON: {"format": "tjit kernel bundle",
"version": 1, "created_by": {"tjit", "triton"}, "targets": ["cuda:80:32", ...], "kernels":
[{"function", "file_name", "signature"}]}; a kernel's signature is the store's signature JSON (file,
function, params, sources with fingerprints, triton). A record names its entry's kernel (an index
into "kernels"), where the entry lies (offset relative to the payload, size) and its lookup key,
bundle_key() of the entry's kernel and of its header's specialisation, options and target: the
C++ runtime builds the same key from a launch and finds the entry by it without reading any entry
(nor JSON per entry). Everything else about an entry is in its header. Entries are sorted by
kernel (function, file name), then specialisation and options, then target, so the same inputs
give the same bytes; they lie one after another. The runtime tells bundle kernels apart by
function and file name, so two files of one name defining one function cannot share a bundle.

A kernel's index record may carry "decisions": [{"kind": "heuristics" or "autotune", "key", "value"}],
keyed as the runtime looks them up: "config <i>\narguments <name>=<value>, ..." with the values
({parameter: value}), or "target <t>\nkey <tuning key>" with the config's text.

Python API: read_manifest, read_decisions, merge_manifests, build_bundle, read_bundle (raises
kernel_store.DamagedFile, saying why, for a damaged bundle), bundle_key, store_decisions.
"""

import argparse
import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import json
import math
import os
import struct
import sys
import time
import types
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

TJIT_VERSION = "0.1.0"  # setup.py's and CMakeLists.txt's version; this module must not import tjit
MANIFEST_VERSION = 1
BUNDLE_MAGIC = b"TJITBNDL"
BUNDLE_VERSION = 1
BUNDLE_FORMAT = "tjit kernel bundle"
BUNDLE_ENTRY_KEY = "tjit bundle entry"  # an entry's store key; the bundle loader does not compare it
_BUNDLE_FRAME = struct.Struct("<8sIIQ40s")  # magic, format, index bytes, payload bytes, SHA-1 of the index JSON (hex)
_U32 = struct.Struct("<I")  # the index's JSON size and entry count
_RECORD = struct.Struct("<IIQQ")  # an index record before its key: kernel, key bytes, offset, size
OPTION_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "enable_fp_fusion": True,
                   "launch_cooperative_grid": False, "launch_pdl": False}
# Options that keys, headers and manifests carry only when set (so the keys of kernels without them
# stay those of earlier releases): maxnreg, a config's register limit per thread (0: none).
OPTIONAL_OPTIONS = {"maxnreg": 0}
_LAUNCH_FIELDS = {"symbol": str, "shared_memory": int, "num_warps": int, "num_ctas": int,
                  "global_scratch_size": int, "global_scratch_align": int, "profile_scratch_size": int,
                  "profile_scratch_align": int, "launch_cooperative_grid": bool, "launch_pdl": bool}
_HERE = os.path.dirname(os.path.abspath(__file__))
_WORKER_MODULE = "_tjit_aot_worker"  # this file's name in worker processes (and for pickling their task function)


def _sibling(name):
    """tjit's module `name`: through the package when this module is tjit.aot, else (a script, or
    a worker process) loaded from this file's folder by path, so `tjit/__init__` never runs."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    module_name = f"_tjit_aot_{name}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, os.path.join(_HERE, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return module


kernel_store = _sibling("kernel_store")
DamagedFile = kernel_store.DamagedFile
_triton_adapter = None


def _adapter():
    """triton_adapter, imported on first need (it imports triton; `list` and damaged-bundle checks don't)."""
    global _triton_adapter
    if _triton_adapter is None:
        _triton_adapter = _sibling("triton_adapter")
    return _triton_adapter


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file, the entry and what is wrong."""


class BuildError(RuntimeError):
    """A bundle that could not be built (failed compiles, conflicting kernels, bad targets)."""


# --------------------------------------------------------------------------------------------
# Targets and types

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


def _parse_type(text: str) -> Tuple[str, bool]:
    """A manifest type string -> (Triton type, divisible by 16); ValueError saying what is wrong."""
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
    return repr(value)


def _canonical(value) -> str:
    """JSON text that tells 1, 1.0 and true apart (Python's == does not)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def describe(param_names: Sequence[str], types, constexprs, divisible) -> str:
    """A specialisation as the runtime describes it: "x_ptr: *fp32:16, n: i32, BLOCK=1024"."""
    values = dict((int(i), v) for i, v in constexprs)
    parts = []
    for i, t in enumerate(types):
        name = param_names[i] if i < len(param_names) else str(i)
        if t != "constexpr":
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
    raise ValueError(f"constexpr value {value!r} is not null, a boolean, an integer or a float")


def bundle_key(function: str, file_name: str, types, constexprs, divisible_by_16, options: dict, target) -> str:
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
            "".join(f"{i}={_key_value(v)}," for i, v in sorted(pairs, key=lambda p: p[0])) + "\n" +
            "".join(f"{i}," for i in divisible) + "\n" +
            "".join(f"{x}," for x in launch) + "\n" +
            f"{backend}:{_key_integer(arch, 'target arch')}:{_key_integer(warp_size, 'target warp size')}")


# --------------------------------------------------------------------------------------------
# Kernels (loaded through triton_adapter once per process)

@dataclasses.dataclass
class _Kernel:
    file: str
    function: str
    handle: int
    params: list  # (name, is_constexpr, is_const, do_not_specialize, do_not_specialize_on_alignment, annotation)
    sources: list  # (path, fingerprint), the kernel file first
    triton: str
    tuning: str = ""  # what @triton.autotune / @triton.heuristics add (JSON; empty for a plain kernel)

    def signature(self) -> dict:
        """The store's signature JSON (signature_to_json in kernel_entry.cpp)."""
        return {"file": self.file, "function": self.function,
                "params": [{"name": name, "constexpr": is_constexpr, "const": is_const, "do_not_specialize": dns,
                            "do_not_specialize_on_alignment": dnsoa, "annotation": annotation}
                           for name, is_constexpr, is_const, dns, dnsoa, annotation in self.params],
                "sources": [{"path": path, "fingerprint": fingerprint} for path, fingerprint in self.sources],
                "triton": self.triton, "tuning": self.tuning}


_loaded = {}  # (file, function) -> _Kernel


def _load_kernel(file: str, function: str) -> _Kernel:
    kernel = _loaded.get((file, function))
    if kernel is None:
        handle, params, sources, triton_version, tuning = _adapter().load_kernel(file, function)
        kernel = _Kernel(file, function, handle, [tuple(p) for p in params], [tuple(s) for s in sources],
                         triton_version, tuning)
        _loaded[(file, function)] = kernel
    return kernel


# --------------------------------------------------------------------------------------------
# Manifests

@dataclasses.dataclass(eq=False)
class Spec:
    """One manifest entry, resolved against its kernel: what one compile per target needs."""
    file: str  # absolute, symbolic links resolved
    function: str
    args: Tuple[Tuple[str, object], ...]  # every parameter in the kernel's order: its manifest value
    options: Tuple[Tuple[str, object], ...]  # all of OPTION_DEFAULTS, in that order, then OPTIONAL_OPTIONS that are set
    types: Tuple[str, ...]
    constexprs: Tuple[Tuple[int, object], ...]
    divisible: Tuple[int, ...]
    origin: str  # "<manifest>: entry <i>", for messages

    @property
    def key(self) -> str:
        """Identity for deduplication (JSON, so that 1, 1.0 and true differ)."""
        return _canonical([self.file, self.function, [list(a) for a in self.args], [list(o) for o in self.options]])

    def describe(self) -> str:
        return f"{self.function}({describe([n for n, _ in self.args], self.types, self.constexprs, self.divisible)})"


@dataclasses.dataclass(eq=False)
class Decision:
    """A manifest's heuristics or autotune entry: what a kernel's decorator decided for some inputs."""
    file: str  # absolute, symbolic links resolved
    function: str
    kind: str  # "heuristics" or "autotune"
    fields: dict  # the entry's object under `kind`
    origin: str

    @property
    def lookup_key(self) -> str:
        """The key the runtime looks the decision up by (triton_jit_function.cpp)."""
        f = self.fields
        if self.kind == "heuristics":
            arguments = ", ".join(f"{name}={value}" for name, value in f["arguments"].items())
            return f"config {f['config']}\narguments {arguments}"
        return f"target {f['target']}\nkey {f['key']}"

    @property
    def value(self):
        return self.fields["values"] if self.kind == "heuristics" else self.fields["config"]

    @property
    def key(self) -> str:
        return _canonical([self.file, self.function, self.kind, self.lookup_key])


DECISION_KINDS = ("heuristics", "autotune")


def _parse_decision(kernel: _Kernel, kind: str, fields, fail) -> dict:
    """The checked fields of a heuristics or autotune entry of `kernel`."""
    tuning = json.loads(kernel.tuning) if kernel.tuning else {}
    if not isinstance(fields, dict):
        fail(f"{kind} must be a JSON object, got {_canonical(fields)}")
    expected = ("config", "arguments", "values") if kind == "heuristics" else ("target", "key", "config")
    if sorted(fields) != sorted(expected):
        fail(f"{kind} has {', '.join(expected)}, got {', '.join(sorted(fields)) or 'nothing'}")
    if kind == "heuristics":
        set_by = list(tuning.get("heuristics", []))
        if not set_by:
            fail(f"{kernel.function} has no @triton.heuristics")
        if type(fields["config"]) is not int or fields["config"] < -1:
            fail(f"heuristics config must be -1 or a config's index, got {_canonical(fields['config'])}")
        arguments = fields["arguments"]
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            fail("heuristics arguments must be an object of the call's arguments as the runtime describes them "
                 f"(\"x\": \"Float\", \"n\": \"1000\"), got {_canonical(arguments)}")
        values = fields["values"]
        if not isinstance(values, dict) or sorted(values) != sorted(set_by):
            fail(f"heuristics values must give every parameter the heuristics set ({', '.join(set_by)}), got "
                 f"{_canonical(values)}")
        for name, value in values.items():
            if not (value is None or isinstance(value, (bool, int, float))) or \
                    (isinstance(value, float) and not math.isfinite(value)):
                fail(f"heuristics value of {name} must be a number, true/false or null, got {_canonical(value)}")
        return {"config": fields["config"], "arguments": dict(arguments), "values": dict(values)}
    if not tuning.get("autotuned"):
        fail(f"{kernel.function} has no @triton.autotune")
    try:
        target = target_string(parse_target(fields["target"])) if isinstance(fields["target"], str) \
            and fields["target"] != "interpreter" else fields["target"]
    except ValueError as e:
        fail(f"autotune target: {e}")
    for name in ("target", "key", "config"):
        if not isinstance(fields[name], str) or not fields[name]:
            fail(f"autotune {name} must be a non-empty string, got {_canonical(fields[name])}")
    return {"target": target, "key": fields["key"], "config": fields["config"]}


def _no_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name):
    raise ValueError(f"{name} is not JSON (constexpr values must be finite numbers)")


def _parse_options(options, fail):
    if not isinstance(options, dict):
        fail(f"options must be a JSON object, got {_canonical(options)}")
    known = {**OPTION_DEFAULTS, **OPTIONAL_OPTIONS}
    unknown = [name for name in options if name not in known]
    if unknown:
        fail(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
             f"(options: {', '.join(known)})")
    resolved = dict(OPTION_DEFAULTS)
    for name, value in options.items():
        if isinstance(known[name], bool):
            if not isinstance(value, bool):
                fail(f"option {name} must be true or false, got {_canonical(value)}")
        elif type(value) is not int:
            fail(f"option {name} must be an integer, got {_canonical(value)}")
        resolved[name] = value
    warps = resolved["num_warps"]
    if not (1 <= warps <= 64 and warps & (warps - 1) == 0):
        fail(f"option num_warps must be a power of two in [1, 64], got {warps}")
    if not 0 <= resolved["num_stages"] < 256:
        fail(f"option num_stages must be in [0, 255], got {resolved['num_stages']}")
    if not 1 <= resolved["num_ctas"] <= 16:
        fail(f"option num_ctas must be in [1, 16], got {resolved['num_ctas']}")
    if not 0 <= resolved.get("maxnreg", 0) <= 255:
        fail(f"option maxnreg must be in [0, 255] (0: no limit), got {resolved['maxnreg']}")
    if resolved.get("maxnreg") == 0:
        del resolved["maxnreg"]
    return tuple(resolved.items())


def _parse_args(kernel: _Kernel, args, fail):
    if not isinstance(args, dict):
        fail(f"args must be a JSON object (parameter name -> type or value), got {_canonical(args)}")
    names = [p[0] for p in kernel.params]
    missing = [n for n in names if n not in args]
    unknown = [n for n in args if n not in names]
    if missing or unknown:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + \
                   ([f"unknown {', '.join(unknown)}"] if unknown else [])
        fail(f"args must name every parameter of {kernel.function} once: {'; '.join(problems)} "
             f"(its parameters: {', '.join(names)})")
    types, constexprs, divisible = [], [], []
    for index, (name, is_constexpr, is_const, dns, dnsoa, annotation) in enumerate(kernel.params):
        value = args[name]
        if isinstance(value, str):
            if is_constexpr:
                fail(f"{name} is a tl.constexpr parameter: give its value (a number, true/false or null), "
                     f"not a type ({value!r})")
            try:
                triton_type, is_divisible = _parse_type(value)
            except ValueError as e:
                fail(f"{name}: {e}")
            if annotation and triton_type != annotation:
                fail(f"{name} is annotated {annotation}: its type is {annotation!r}, not {triton_type!r}")
            if triton_type.startswith("*") and triton_type.startswith("*k") != is_const:
                element = triton_type[2:] if triton_type.startswith("*k") else triton_type[1:]
                fail(f"{name} is {'' if is_const else 'not '}a tl.const parameter: its pointer type is "
                     f"{('*k' if is_const else '*') + element!r}, not {triton_type!r}")
            if is_divisible and (dns or dnsoa):
                fail(f"{name} is do_not_specialize{'_on_alignment' if dnsoa and not dns else ''}: Triton never "
                     "marks it divisible by 16 (drop the \":16\")")
            types.append(triton_type)
            if is_divisible:
                divisible.append(index)
            continue
        if isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, float):
            if not math.isfinite(value):
                fail(f"{name}: constexpr {value} is not a finite number")
        elif isinstance(value, int):
            if not -2**63 <= value < 2**63:
                fail(f"{name}: constexpr {value} does not fit in 64 bits")
        else:
            fail(f"{name}: {_canonical(value)} is neither a type string nor a constexpr value "
                 "(integer, float, true/false, null)")
        if not is_constexpr and not (value is None or (type(value) is int and value == 1 and not dns)):
            fail(f"{name} is a runtime parameter: give its type (e.g. \"i32\", \"*fp32:16\"); as a value it takes "
                 f"only null or 1 (Triton's ==1 specialisation{', which do_not_specialize turns off' if dns else ''}),"
                 f" got {_canonical(value)}")
        types.append("constexpr")
        constexprs.append((index, value))
    return tuple((name, args[name]) for name in names), tuple(types), tuple(constexprs), tuple(divisible)


def _parse_entry(manifest: str, index: int, entry):
    where = f"{manifest}: entry {index}"
    if isinstance(entry, dict) and isinstance(entry.get("function"), str) and entry["function"]:
        where += f" ({entry['function']})"

    def fail(message):
        raise ManifestError(f"{where}: {message}")

    if not isinstance(entry, dict):
        fail("an entry is a JSON object with file, function, args and (optionally) options")
    kinds = [k for k in DECISION_KINDS if k in entry]
    if kinds:
        unknown = [k for k in entry if k not in ("file", "function") and k != kinds[0]]
        if unknown or len(kinds) > 1:
            fail(f"a {kinds[0]} entry has file, function and {kinds[0]} only, got {', '.join(entry)}")
        for key in ("file", "function"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                fail(f"{key} must be a non-empty string, got {_canonical(entry.get(key))}")
        file = os.path.realpath(os.path.join(os.path.dirname(manifest), entry["file"]))
        if not os.path.isfile(file):
            fail(f"kernel file {file} does not exist")
        try:
            kernel = _load_kernel(file, entry["function"])
        except Exception as e:
            fail(f"cannot load {entry['function']} from {file}: {type(e).__name__}: {e}")
        return Decision(file, entry["function"], kinds[0], _parse_decision(kernel, kinds[0], entry[kinds[0]], fail),
                        where)
    unknown = [k for k in entry if k not in ("file", "function", "args", "options")]
    if unknown:
        fail(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
             "(an entry has file, function, args, options)")
    missing = [k for k in ("file", "function", "args") if k not in entry]
    if missing:
        fail(f"missing {', '.join(missing)}")
    for key in ("file", "function"):
        if not isinstance(entry[key], str) or not entry[key]:
            fail(f"{key} must be a non-empty string, got {_canonical(entry[key])}")
    file = os.path.realpath(os.path.join(os.path.dirname(manifest), entry["file"]))
    if not os.path.isfile(file):
        fail(f"kernel file {file} does not exist")
    options = _parse_options(entry.get("options", {}), fail)
    try:
        kernel = _load_kernel(file, entry["function"])
    except Exception as e:  # the kernel file runs here: anything it raises is the entry's problem
        fail(f"cannot load {entry['function']} from {file}: {type(e).__name__}: {e}")
    args, types, constexprs, divisible = _parse_args(kernel, entry["args"], fail)
    return Spec(file, entry["function"], args, options, types, constexprs, divisible, where)


def read_manifest(path) -> List[Spec]:
    """The manifest's specialisations, resolved and checked against their kernels (which this loads
    through triton_adapter), duplicates dropped; raises ManifestError naming the file, entry and
    problem. Its heuristics and autotune entries: read_decisions."""
    return [e for e in _read_entries(path) if isinstance(e, Spec)]


def read_decisions(paths) -> List[Decision]:
    """The heuristics and autotune entries of manifests, checked, each distinct one once; two that
    decide one thing differently are a ManifestError."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return _merge_decisions(e for path in paths for e in _read_entries(path) if isinstance(e, Decision))


def _merge_decisions(decisions: Iterable[Decision]) -> List[Decision]:
    chosen, result = {}, []
    for d in decisions:
        other = chosen.get(d.key)
        if other is None:
            chosen[d.key] = d
            result.append(d)
        elif _canonical(other.value) != _canonical(d.value):
            raise ManifestError(f"{d.origin}: {d.function}'s {d.kind} for {d.lookup_key!r} is {_canonical(d.value)}, "
                                f"but {other.origin} says {_canonical(other.value)}")
    return result


def _read_entries(path):
    """Every entry of the manifest at `path`, parsed (Spec or Decision), duplicates dropped."""
    path = os.path.abspath(os.fspath(path))
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror}") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except ValueError as e:  # UnicodeDecodeError too
        raise ManifestError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: a manifest is a JSON object with \"tjit_manifest\": 1 and \"entries\"")
    unknown = [k for k in data if k not in ("tjit_manifest", "entries")]
    if unknown:
        raise ManifestError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                            "(a manifest has tjit_manifest and entries)")
    version = data.get("tjit_manifest")
    if type(version) is not int or version != MANIFEST_VERSION:
        raise ManifestError(f"{path}: \"tjit_manifest\" must be {MANIFEST_VERSION} (the manifest format), "
                            f"got {_canonical(version) if 'tjit_manifest' in data else 'nothing'}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise ManifestError(f"{path}: \"entries\" must be a list, got "
                            f"{_canonical(entries) if 'entries' in data else 'nothing'}")
    parsed = [_parse_entry(path, i, entry) for i, entry in enumerate(entries)]
    return _deduplicate([e for e in parsed if isinstance(e, Spec)]) + [e for e in parsed if isinstance(e, Decision)]


def _deduplicate(specs: Iterable[Spec]) -> List[Spec]:
    seen, result = set(), []
    for spec in specs:
        if spec.key not in seen:
            seen.add(spec.key)
            result.append(spec)
    return result


def read_manifests(paths) -> List[Spec]:
    """Several manifests merged: their entries in order, each distinct one once."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return _deduplicate(spec for path in paths for spec in read_manifest(path))


def manifest_json(specs: Sequence[Spec], folder: str, decisions: Sequence[Decision] = ()) -> str:
    """Manifest text for `specs` and `decisions`, kernel files relative to `folder`; one entry a line."""
    lines = []
    for spec in specs:
        entry = {"file": os.path.relpath(spec.file, folder), "function": spec.function, "args": dict(spec.args),
                 "options": dict(spec.options)}
        lines.append("    " + json.dumps(entry, ensure_ascii=False, allow_nan=False))
    for d in decisions:
        entry = {"file": os.path.relpath(d.file, folder), "function": d.function, d.kind: d.fields}
        lines.append("    " + json.dumps(entry, ensure_ascii=False, allow_nan=False))
    body = ",\n".join(lines)
    return "{\n  \"tjit_manifest\": %d,\n  \"entries\": [\n%s\n  ]\n}\n" % (MANIFEST_VERSION, body) if lines else \
        "{\n  \"tjit_manifest\": %d,\n  \"entries\": []\n}\n" % MANIFEST_VERSION


def merge_manifests(inputs, output) -> dict:
    """Writes the entries of `inputs` (manifest paths), each distinct one once in first-seen order,
    to the manifest `output`, kernel files relative to its folder. Returns counts."""
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    per_file = [read_manifest(path) for path in inputs]
    specs = _deduplicate(spec for specs in per_file for spec in specs)
    decisions = read_decisions(inputs)
    output = os.path.abspath(os.fspath(output))
    _write_atomically(output, manifest_json(specs, os.path.dirname(output), decisions).encode("utf-8"))
    return {"manifests": len(inputs), "entries": len(specs), "decisions": len(decisions), "output": output}


# --------------------------------------------------------------------------------------------
# Compiling (in worker processes, or in this one for -j 1)

def _compile_task(task):
    """One (specialisation, target) compile: ("ok", cubin, metadata, sources) or ("error", message).
    Runs in worker processes, where this file is the module _WORKER_MODULE."""
    file, function, arg_types, constexprs, divisible, target, options = task
    try:
        kernel = _load_kernel(file, function)
        cubin, metadata = _adapter().compile(kernel.handle, list(arg_types), list(constexprs), list(divisible),
                                             tuple(target), dict(options))
        return "ok", bytes(cubin), dict(metadata), list(kernel.sources)
    except Exception as e:
        return "error", f"{type(e).__name__}: {e}"


def _worker_start():
    _adapter()  # imports triton while the pool starts, not on the first task


_WORKER_BOOT = """\
import importlib.util, sys
spec = importlib.util.spec_from_file_location({name!r}, {path!r})
module = importlib.util.module_from_spec(spec)
sys.modules[{name!r}] = module
spec.loader.exec_module(module)
module._worker_start()
"""


def _worker_module():
    """This file loaded as _WORKER_MODULE in this process too, so its _compile_task pickles by a
    name that the workers (which load the file the same way: _WORKER_BOOT) resolve."""
    module = sys.modules.get(_WORKER_MODULE)
    if module is None:
        spec = importlib.util.spec_from_file_location(_WORKER_MODULE, os.path.abspath(__file__))
        module = importlib.util.module_from_spec(spec)
        sys.modules[_WORKER_MODULE] = module
        spec.loader.exec_module(module)
    return module


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


def _compile_all(tasks, processes, done: Callable[[tuple], None]):
    results = [None] * len(tasks)
    if processes <= 1:
        for i, task in enumerate(tasks):
            results[i] = _compile_task(task)
            done(results[i])
        return results
    import concurrent.futures
    import multiprocessing
    worker = _worker_module()
    boot = _WORKER_BOOT.format(name=_WORKER_MODULE, path=os.path.abspath(__file__))
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

@dataclasses.dataclass
class BuildStats:
    output: str
    size: int  # bytes of the bundle
    entries: int  # compiled entries: specialisations x targets
    specializations: int
    kernels: int
    targets: List[str]
    seconds: float
    processes: int  # worker processes (1: compiled in this process)
    sources: List[str]  # every source file of every kernel (what the depfile lists after the manifests)
    decisions: int = 0  # heuristics values and autotune choices shipped


class _Progress:
    """A line on `log` at most every `interval` seconds or 10% of the compiles, and at the end."""

    def __init__(self, total, log, start, interval=2.0):
        self.total, self.log, self.start, self.interval = total, log, start, interval
        self.done = self.failed = 0
        self.last_time = start
        self.last_tenth = 0

    def __call__(self, result):
        self.done += 1
        self.failed += result[0] != "ok"
        if self.log is None:
            return
        now = time.monotonic()
        tenth = self.done * 10 // self.total
        if self.done == self.total or tenth > self.last_tenth or now - self.last_time >= self.interval:
            failed = f", {self.failed} failed" if self.failed else ""
            self.log(f"compiled {self.done}/{self.total} ({now - self.start:.1f} s{failed})")
            self.last_time, self.last_tenth = now, tenth


def _write_atomically(path: str, data: bytes):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _make_escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def entry_key(kernel: dict, header: dict) -> str:
    """bundle_key of an entry: its kernel's index record ({"function", "file_name", ...}) and its header."""
    specialization = header["specialization"]
    return bundle_key(kernel["function"], kernel["file_name"], specialization["types"], specialization["constexprs"],
                      specialization["divisible_by_16"], header["options"], header["target"])


def encode_bundle(kernels: Sequence[dict], entries: Sequence[Tuple[int, dict, bytes]], targets: Sequence[str],
                  triton_version: str) -> bytes:
    """Bundle bytes. kernels: [{"function", "file_name", "signature"}] in index order; entries:
    [(index of the entry's kernel, entry header, binary)] in the order to store them."""
    payload = bytearray()
    records = [_U32.pack(len(entries))]
    seen = {}
    for i, (kernel, header, binary) in enumerate(entries):
        if not (type(kernel) is int and 0 <= kernel < len(kernels)):
            raise BuildError(f"entry {i}: kernel {kernel!r} is not an index into the {len(kernels)} kernels")
        key = entry_key(kernels[kernel], header)
        if key in seen:
            raise BuildError(f"entries {seen[key]} and {i} have the same key {key!r}")
        seen[key] = i
        data = kernel_store.encode(header, binary, kernel_store.ENTRY_MAGIC)
        key_bytes = key.encode("utf-8")
        records.append(_RECORD.pack(kernel, len(key_bytes), len(payload), len(data)) + key_bytes)
        payload += data
    index = {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION,
             "created_by": {"tjit": TJIT_VERSION, "triton": triton_version},
             "targets": list(targets), "kernels": list(kernels)}
    index_json = json.dumps(index, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    index_size = _U32.size + len(index_json) + sum(len(r) for r in records)
    if index_size >= 2**32:
        raise BuildError(f"the bundle's index ({index_size} bytes: {len(index_json)} of JSON, {len(entries)} records) "
                         "does not fit its u32 size")
    index_bytes = _U32.pack(len(index_json)) + index_json + b"".join(records)
    # The checksum covers the JSON only: the runtime checks it at the first lookup, where hashing
    # every record too would cost ~2 ms for tjit's operators; a record is checked when it is used
    # (its entry's own checksum, and its key against the entry's header).
    frame = _BUNDLE_FRAME.pack(BUNDLE_MAGIC, BUNDLE_VERSION, len(index_bytes), len(payload),
                               hashlib.sha1(index_json).hexdigest().encode())
    return frame + index_bytes + bytes(payload)


def _caller_params(kernel: _Kernel) -> List[str]:
    """The parameters run() takes from its caller: those no config and no heuristic sets."""
    tuning = json.loads(kernel.tuning) if kernel.tuning else {}
    if not tuning or "unsupported" in tuning:
        return [p[0] for p in kernel.params]
    set_elsewhere = set(tuning.get("heuristics", [])) | {k for c in tuning.get("configs", []) for k in c["kwargs"]}
    return [p[0] for p in kernel.params if p[0] not in set_elsewhere]


def store_decisions(folder: str, kernels: Sequence[_Kernel]) -> List[Decision]:
    """The heuristic values and autotune choices a kernel store at `folder` holds for `kernels`,
    made from their current sources by their Triton (others are stale and left out), as manifest
    decisions. Damaged records are left out too."""
    by_identity = {(k.file, k.function): k for k in kernels}
    found = []
    for path in kernel_store._store_files(folder):
        if not path.endswith(kernel_store.DECISION_SUFFIX):
            continue
        try:
            with open(path, "rb") as f:
                header, _ = kernel_store.decode(f.read(), kernel_store.DECISION_MAGIC)
            lines = header["key"].split("\n")
            fields = dict(line.split(" ", 1) for line in lines[1:] if " " in line)
            value = json.loads(header["value"]) if isinstance(header["value"], str) else header["value"]
        except (OSError, kernel_store.DamagedFile, KeyError, ValueError, TypeError):
            continue
        kernel = by_identity.get((os.path.realpath(fields.get("file", "")), fields.get("function")))
        if kernel is None:
            continue
        sources = [tuple(item.rsplit("@", 1)) for item in fields.get("sources", "").split()]
        if sources != [tuple(s) for s in kernel.sources] or fields.get("triton") != kernel.triton:
            continue  # made from other sources, or by another Triton
        where = f"{path} (kernel store)"
        try:
            if lines[0] == "tjit heuristic values v1":
                names = _caller_params(kernel)
                texts = fields["arguments"].split()
                if len(texts) != len(names):
                    continue
                params = [p[0] for p in kernel.params]
                decision = {"config": int(fields["config"]), "arguments": dict(zip(names, texts)),
                            "values": {params[index]: v for index, v in value}}
                kind = "heuristics"
            elif lines[0] == "tjit autotune choice v1":
                decision = {"target": fields["target"], "key": fields["key"], "config": value["config_text"]}
                kind = "autotune"
            else:
                continue
        except (KeyError, ValueError, TypeError, IndexError):
            continue

        def fail(message, where=where):
            raise ManifestError(f"{where}: {message}")
        found.append(Decision(kernel.file, kernel.function, kind, _parse_decision(kernel, kind, decision, fail), where))
    return found


def build_bundle(manifests, targets, output, jobs: Optional[int] = None, depfile: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None, decisions_from: Sequence[str] = ()) -> BuildStats:
    """Compiles every entry of `manifests` (paths) for every target ("cuda:90", "cuda:90:32" or
    (backend, arch, warp_size)) in `jobs` processes (default os.cpu_count(); 1 compiles in this
    process) and writes the bundle to `output` atomically, and a Makefile depfile when asked.
    The manifests' heuristics and autotune entries go into the bundle, with those the kernel stores
    in `decisions_from` hold for its kernels. Raises ManifestError or BuildError (every failed
    compile listed) and then writes nothing. `log` receives progress lines."""
    start = time.monotonic()
    if isinstance(targets, (str, tuple)):
        targets = [targets]
    try:
        parsed = {parse_target(t) if isinstance(t, str) else parse_target(target_string(t)) for t in targets}
    except ValueError as e:
        raise BuildError(str(e)) from None
    if not parsed:
        raise BuildError("no compile target: give at least one, e.g. cuda:90")
    target_list = sorted(parsed, key=lambda t: (t[0], t[1], t[2]))
    manifests = [manifests] if isinstance(manifests, (str, os.PathLike)) else list(manifests)
    manifests = [os.path.abspath(os.fspath(m)) for m in manifests]
    specs = read_manifests(manifests)
    decisions = read_decisions(manifests)

    # Kernels in index order; the runtime names a bundle kernel by function and file name.
    kernel_keys = sorted({(s.function, os.path.basename(s.file), s.file) for s in [*specs, *decisions]})
    by_name = {}
    for function, file_name, file in kernel_keys:
        other = by_name.setdefault((function, file_name), file)
        if other != file:
            raise BuildError(f"two kernel files named {file_name} both define {function} ({other} and {file}): "
                             "a bundle tells its kernels apart by function and file name only")
    kernel_index = {(file, function): i for i, (function, _, file) in enumerate(kernel_keys)}
    kernels = [_load_kernel(file, function) for function, _, file in kernel_keys]
    for folder in ([decisions_from] if isinstance(decisions_from, str) else decisions_from):
        decisions = _merge_decisions([*decisions, *store_decisions(os.path.abspath(folder), kernels)])

    tasks, task_specs = [], []
    for spec in specs:
        for target in target_list:
            tasks.append((spec.file, spec.function, spec.types, spec.constexprs, spec.divisible, target,
                          spec.options))
            task_specs.append((spec, target))
    processes = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    if log and tasks:
        log(f"compiling {_count(len(specs), 'specialisation')} x {_count(len(target_list), 'target')} = "
            f"{_count(len(tasks), 'entry', 'entries')} in {_count(processes, 'process', 'processes')}")
    results = _compile_all(tasks, processes, _Progress(len(tasks), log, start))

    failures, entries = [], []
    for (spec, target), result in zip(task_specs, results):
        kernel = kernels[kernel_index[(spec.file, spec.function)]]
        if result[0] == "ok" and [tuple(s) for s in result[3]] != kernel.sources:
            result = ("error", f"a source file of {spec.function} changed during the build ({spec.file} or one "
                      "it imports): build again")
        if result[0] != "ok":
            failures.append(f"{spec.describe()} for {target_string(target)} ({spec.origin}):\n    " +
                            result[1].replace("\n", "\n    "))
            continue
        _, cubin, md, _ = result
        specialization = {"types": list(spec.types), "constexprs": [[i, v] for i, v in spec.constexprs],
                          "divisible_by_16": list(spec.divisible)}
        options = dict(spec.options)
        target_json = {"backend": target[0], "arch": target[1], "warp_size": target[2]}
        header = {"key": BUNDLE_ENTRY_KEY, "kernel": kernel.signature(), "specialization": specialization,
                  "options": options, "target": target_json,
                  "launch": {"symbol": md["name"], "shared_memory": int(md["shared"]),
                             "num_warps": int(md["num_warps"]), "num_ctas": int(md["num_ctas"]),
                             "global_scratch_size": int(md["global_scratch_size"]),
                             "global_scratch_align": int(md["global_scratch_align"]),
                             "profile_scratch_size": int(md["profile_scratch_size"]),
                             "profile_scratch_align": int(md["profile_scratch_align"]),
                             "launch_cooperative_grid": bool(md["launch_cooperative_grid"]),
                             "launch_pdl": bool(md["launch_pdl"])},
                  "binary_format": "cubin"}
        order = (spec.function, os.path.basename(spec.file), spec.file,
                 _canonical({**specialization, "options": options}), target)
        entries.append((order, kernel_index[(spec.file, spec.function)], header, cubin))
    if failures:
        raise BuildError(f"{len(failures)} of {len(tasks)} compiles failed; nothing written:\n  " +
                         "\n  ".join(failures))

    entries.sort(key=lambda e: e[0])
    kernel_records = [{"function": k.function, "file_name": os.path.basename(k.file), "signature": k.signature()}
                      for k in kernels]
    for d in sorted(decisions, key=lambda d: (d.kind, d.lookup_key)):
        kernel_records[kernel_index[(d.file, d.function)]].setdefault("decisions", []).append(
            {"kind": d.kind, "key": d.lookup_key, "value": d.value})
    triton_version = kernels[0].triton if kernels else _adapter().triton.__version__
    data = encode_bundle(kernel_records, [(k, h, b) for _, k, h, b in entries],
                         [target_string(t) for t in target_list], triton_version)
    output = os.path.abspath(os.fspath(output))
    sources = list(dict.fromkeys(path for k in kernels for path, _ in k.sources))
    _write_atomically(output, data)
    if depfile:
        deps = " \\\n  ".join(_make_escape(p) for p in manifests + sources)
        _write_atomically(os.path.abspath(depfile), f"{_make_escape(output)}: \\\n  {deps}\n".encode("utf-8"))
    return BuildStats(output, len(data), len(entries), len(specs), len(kernels),
                      [target_string(t) for t in target_list], time.monotonic() - start, processes, sources,
                      len(decisions))


@dataclasses.dataclass
class BundleEntry:
    """One entry of a bundle: its index record ({"kernel", "key", "offset", "size"}), its kernel's
    index record ({"function", "file_name", "signature"}), its decoded store entry."""
    record: dict
    kernel: dict
    header: dict
    binary: bytes

    @property
    def function(self) -> str:
        return self.kernel["function"]

    @property
    def file_name(self) -> str:
        return self.kernel["file_name"]

    @property
    def key(self) -> str:
        return self.record["key"]

    @property
    def specialization(self) -> dict:
        """{"types", "constexprs", "divisible_by_16"}, from the entry's header."""
        return self.header["specialization"]

    @property
    def target(self) -> str:
        return target_string(self.header["target"])

    @property
    def options(self) -> dict:
        return self.header["options"]

    @property
    def launch(self) -> dict:
        return self.header["launch"]

    @property
    def offset(self) -> int:
        return self.record["offset"]

    @property
    def size(self) -> int:
        return self.record["size"]

    @property
    def signature(self) -> str:
        """The specialisation: "x_ptr: *fp32:16, n: i32, BLOCK=1024"."""
        names = [p["name"] for p in self.kernel["signature"]["params"]]
        s = self.specialization
        return describe(names, s["types"], s["constexprs"], s["divisible_by_16"])

    def as_dict(self) -> dict:
        s = self.specialization
        return {"function": self.function, "file_name": self.file_name, "signature": self.signature,
                "types": s["types"], "constexprs": s["constexprs"], "divisible_by_16": s["divisible_by_16"],
                "options": self.options, "target": self.target, "offset": self.offset, "size": self.size,
                "binary_bytes": len(self.binary), "launch": self.launch}


@dataclasses.dataclass
class Bundle:
    path: Optional[str]
    size: int
    index: dict  # the index's JSON
    entries: List[BundleEntry]

    @property
    def created_by(self) -> dict:
        return self.index["created_by"]

    @property
    def targets(self) -> List[str]:
        return self.index["targets"]

    @property
    def kernels(self) -> List[dict]:
        return self.index["kernels"]


def _damaged(condition, message):
    if not condition:
        raise DamagedFile(message)


def _is_int(value) -> bool:
    return type(value) is int


def _split_index(index: bytes) -> Tuple[bytes, List[dict]]:
    """The index region's JSON bytes and records ({"kernel", "key", "offset", "size"}); it must
    consist of exactly its JSON size, JSON, entry count and records."""
    def need(position, size, what):
        _damaged(position + size <= len(index), f"index: {what} runs past the index's {len(index)} bytes")

    need(0, _U32.size, "its JSON size")
    json_size, = _U32.unpack_from(index, 0)
    position = _U32.size
    need(position, json_size, f"its {json_size}-byte JSON")
    json_bytes = index[position:position + json_size]
    position += json_size
    need(position, _U32.size, "its entry count")
    count, = _U32.unpack_from(index, position)
    position += _U32.size
    records = []
    for i in range(count):
        need(position, _RECORD.size, f"record {i} of {count}")
        kernel, key_size, offset, size = _RECORD.unpack_from(index, position)
        position += _RECORD.size
        need(position, key_size, f"record {i}'s {key_size}-byte key")
        try:
            key = index[position:position + key_size].decode("utf-8")
        except UnicodeDecodeError as e:
            raise DamagedFile(f"index: record {i}'s key is not UTF-8 ({e.reason} at byte {e.start})") from None
        position += key_size
        records.append({"kernel": kernel, "key": key, "offset": offset, "size": size})
    _damaged(position == len(index), f"index: {len(index) - position} bytes after its {count} records")
    return json_bytes, records


def _check_index(index):
    """The index's JSON."""
    _damaged(isinstance(index, dict), "index is not a JSON object")
    _damaged(index.get("format") == BUNDLE_FORMAT, f"index format is {_canonical(index.get('format'))}, "
             f"not {BUNDLE_FORMAT!r}")
    _damaged(index.get("version") == BUNDLE_VERSION and _is_int(index.get("version")),
             f"index version is {_canonical(index.get('version'))}, this tjit reads {BUNDLE_VERSION}")
    created = index.get("created_by")
    _damaged(isinstance(created, dict) and isinstance(created.get("tjit"), str) and
             isinstance(created.get("triton"), str), "index: created_by misses tjit or triton")
    _damaged(isinstance(index.get("targets"), list) and all(isinstance(t, str) for t in index["targets"]),
             "index: targets is not a list of strings")
    kernels = index.get("kernels")
    _damaged(isinstance(kernels, list), "index: kernels is not a list")
    for i, k in enumerate(kernels):
        _damaged(isinstance(k, dict) and isinstance(k.get("function"), str) and isinstance(k.get("file_name"), str)
                 and isinstance(k.get("signature"), dict), f"index: kernel {i} misses function, file_name or signature")
        signature = k["signature"]
        _damaged(signature.get("function") == k["function"] and isinstance(signature.get("file"), str) and
                 os.path.basename(signature["file"]) == k["file_name"] and isinstance(signature.get("params"), list)
                 and all(isinstance(p, dict) and isinstance(p.get("name"), str) for p in signature["params"]),
                 f"index: kernel {i} ({k['function']}): its signature names another kernel or has no params")
        decisions = k.get("decisions", [])
        _damaged(isinstance(decisions, list) and all(
            isinstance(d, dict) and d.get("kind") in DECISION_KINDS and isinstance(d.get("key"), str) and "value" in d
            for d in decisions), f"index: kernel {i} ({k['function']}): its decisions are not kind, key and value")


def _check_entry(where: str, header: dict, binary: bytes, record: dict, kernel: dict):
    """That a decoded store entry is complete (what decode_entry requires) and agrees with its index
    record: the record's kernel is the header's, and the record's key is the header's."""
    for name in ("key", "kernel", "specialization", "options", "target", "launch", "binary_format"):
        _damaged(name in header, f"{where}: its header misses {name!r}")
    _damaged(_canonical(header["kernel"]) == _canonical(kernel["signature"]),
             f"{where} disagrees with its index record: its header's kernel is not the record's kernel "
             f"{record['kernel']}, {kernel['function']} ({kernel['file_name']})")
    specialization = header["specialization"]
    _damaged(isinstance(specialization, dict) and all(isinstance(specialization.get(name), list) for name in
                                                      ("types", "constexprs", "divisible_by_16")),
             f"{where}: its header's specialization misses types, constexprs or divisible_by_16")
    types, params = specialization["types"], kernel["signature"]["params"]
    _damaged(len(types) == len(params), f"{where}: {len(types)} types for a kernel of {len(params)} parameters")
    for name, value in (("options", header["options"]), ("target", header["target"])):
        _damaged(isinstance(value, dict), f"{where}: its header's {name} is not a JSON object")
    for name, default in OPTION_DEFAULTS.items():
        value = header["options"].get(name)
        _damaged(isinstance(value, type(default)) and (type(default) is bool or not isinstance(value, bool)),
                 f"{where}: option {name} is missing or mistyped")
    for name in OPTIONAL_OPTIONS:
        value = header["options"].get(name, 1)
        _damaged(type(value) is int and value > 0, f"{where}: option {name} is mistyped or 0 (written only when set)")
    try:
        key = entry_key(kernel, header)
    except (ValueError, TypeError) as e:
        raise DamagedFile(f"{where}: its header makes no key: {e}") from None
    _damaged(key == record["key"], f"{where} disagrees with its index record: key {record['key']!r} in the record, "
             f"{key!r} from its header")
    launch = header["launch"]
    _damaged(isinstance(launch, dict), f"{where}: launch is not a JSON object")
    for name, kind in _LAUNCH_FIELDS.items():
        value = launch.get(name)
        _damaged(isinstance(value, kind) and (kind is bool or not isinstance(value, bool)),
                 f"{where}: launch.{name} is missing or mistyped")
    _damaged(header["binary_format"] == "cubin", f"{where}: binary format {_canonical(header['binary_format'])} "
             "is not cubin")
    _damaged(launch["symbol"] and binary and launch["num_warps"] > 0 and launch["num_ctas"] > 0 and
             launch["shared_memory"] >= 0, f"{where}: inconsistent launch metadata")


def decode_bundle(data: bytes, path: Optional[str] = None) -> Bundle:
    """A bundle's index and entries, every check made; raises DamagedFile saying why."""
    data = bytes(data)
    if len(data) < _BUNDLE_FRAME.size:
        raise DamagedFile(f"shorter ({len(data)} bytes) than a bundle's {_BUNDLE_FRAME.size}-byte frame")
    magic, version, index_size, payload_size, checksum = _BUNDLE_FRAME.unpack_from(data)
    _damaged(magic == BUNDLE_MAGIC, f"not a tjit kernel bundle (wrong magic {magic!r})")
    _damaged(version == BUNDLE_VERSION, f"bundle format {version}, this tjit reads {BUNDLE_VERSION}")
    expected = _BUNDLE_FRAME.size + index_size + payload_size
    _damaged(expected == len(data), f"size {len(data)} bytes, its frame says {expected}")
    index_bytes = data[_BUNDLE_FRAME.size:_BUNDLE_FRAME.size + index_size]
    json_bytes, records = _split_index(index_bytes)
    _damaged(hashlib.sha1(json_bytes).hexdigest().encode() == checksum, "index checksum mismatch")
    try:
        index = json.loads(json_bytes.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError too
        raise DamagedFile(f"index is not valid JSON: {e}") from None
    _check_index(index)
    kernels, keys = index["kernels"], {}
    for i, record in enumerate(records):
        _damaged(record["kernel"] < len(kernels), f"index: record {i}: kernel {record['kernel']} does not exist "
                 f"(the index has {len(kernels)})")
        other = keys.setdefault(record["key"], i)
        _damaged(other == i, f"index: records {other} and {i} have the same key")
    payload = memoryview(data)[_BUNDLE_FRAME.size + index_size:]
    entries, offset = [], 0
    for i, record in enumerate(records):
        kernel = kernels[record["kernel"]]
        # The target (the key's last line) for messages; whether the key is right shows once the entry is read.
        where = f"entry {i} ({kernel['function']} for {record['key'].rsplit(chr(10), 1)[-1]})"
        _damaged(record["offset"] + record["size"] <= payload_size, f"{where}: its {record['size']} bytes at offset "
                 f"{record['offset']} run past the payload's {payload_size}")
        _damaged(record["offset"] == offset, f"{where}: at offset {record['offset']} of the payload, the entries "
                 f"before it end at {offset}")
        try:
            header, binary = kernel_store.decode(bytes(payload[offset:offset + record["size"]]),
                                                 kernel_store.ENTRY_MAGIC)
        except DamagedFile as e:
            raise DamagedFile(f"{where}: {e}") from None
        _check_entry(where, header, binary, record, kernel)
        entries.append(BundleEntry(record, kernel, header, binary))
        offset += record["size"]
    _damaged(offset == payload_size, f"the entries end at {offset} bytes, the payload has {payload_size}")
    return Bundle(path, len(data), index, entries)


def read_bundle(path) -> Bundle:
    """The bundle file at `path`, checked: raises kernel_store.DamagedFile saying why it is damaged."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        return decode_bundle(f.read(), path)


# --------------------------------------------------------------------------------------------
# Command line

def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _count(n, word, plural=None):
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _say(message):
    print(f"tjit aot: {message}", file=sys.stderr, flush=True)


def _build(args):
    stats = build_bundle(args.manifest, args.target, args.output, jobs=args.jobs, depfile=args.depfile, log=_say,
                         decisions_from=args.decisions_from or ())
    _say(f"{_count(stats.entries, 'entry', 'entries')} "
         f"({_count(stats.specializations, 'specialisation')} of {_count(stats.kernels, 'kernel')} x "
         f"{_count(len(stats.targets), 'target')}: {', '.join(stats.targets)}"
         f"{'; ' + _count(stats.decisions, 'decision') if stats.decisions else ''}) in {stats.seconds:.1f} s with "
         f"{_count(stats.processes, 'process', 'processes')}: {stats.output} ({_size(stats.size)})")
    return 0


def _list(args):
    bundle = read_bundle(args.bundle)
    if args.json:
        print(json.dumps({"path": os.path.abspath(args.bundle), "bytes": bundle.size, "created_by": bundle.created_by,
                          "targets": bundle.targets,
                          "kernels": [{"function": k["function"], "file_name": k["file_name"],
                                       "file": k["signature"]["file"],
                                       **({"decisions": k["decisions"]} if k.get("decisions") else {})}
                                      for k in bundle.kernels],
                          "entries": [e.as_dict() for e in bundle.entries]}, indent=2))
        return 0
    print(f"{args.bundle}: tjit {bundle.created_by['tjit']}, triton {bundle.created_by['triton']}; targets "
          f"{', '.join(bundle.targets) or 'none'}; {_count(len(bundle.kernels), 'kernel')}, "
          f"{_count(len(bundle.entries), 'entry', 'entries')}, {_size(bundle.size)}")
    for e in bundle.entries:
        print(f"{e.function}({e.signature}) {options_text(e.options)} {e.target} {_size(e.size)}")
    for k in bundle.kernels:
        for d in k.get("decisions", []):
            print(f"{k['function']} {d['kind']}: {d['key'].replace(chr(10), '; ')} -> {_canonical(d['value'])}")
    return 0


def _merge(args):
    result = merge_manifests(args.manifests, args.output)
    _say(f"{_count(result['entries'], 'entry', 'entries')} from {_count(result['manifests'], 'manifest')}: "
         f"{result['output']}")
    return 0


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description="tjit's ahead-of-time bundle builder.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile a manifest's entries for each target into a bundle")
    build.add_argument("--manifest", action="append", required=True, help="a manifest (repeat to merge several)")
    build.add_argument("--target", action="append", required=True, help="cuda:ARCH[:WARP_SIZE] (repeatable)")
    build.add_argument("-o", "--output", required=True, help="the bundle file to write")
    build.add_argument("-j", "--jobs", type=int, help="compile processes (default: os.cpu_count())")
    build.add_argument("--depfile", help="also write a Makefile depfile (for CMake's DEPFILE)")
    build.add_argument("--decisions-from", action="append", metavar="STORE",
                       help="also ship the heuristic values and autotune choices this kernel store folder holds "
                            "for the bundle's kernels (repeatable)")
    listing = commands.add_parser("list", help="a bundle's entries")
    listing.add_argument("bundle")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    merge = commands.add_parser("merge", help="merge manifests, each distinct entry once")
    merge.add_argument("manifests", nargs="+")
    merge.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    if args.command == "build" and args.jobs is not None and args.jobs < 1:
        parser.error("-j must be at least 1")
    try:
        return {"build": _build, "list": _list, "merge": _merge}[args.command](args)
    except DamagedFile as e:
        _say(f"{args.bundle} is damaged: {e}")
    except (ManifestError, BuildError) as e:
        _say(str(e))
    except OSError as e:
        _say(f"{e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
