"""Manifests: the kernel specialisations (and decisions) a bundle is built from.

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
  (None) or 1 (Triton's ==1 specialisation) that way. A tl.constexpr parameter's string is its
  value ("ACTIVATION": "leaky_relu"), a tl.dtype value is {"dtype": "bf16"} (tl.dtype's name).
- options: num_warps (4), num_stages (3), num_ctas (1), enable_fp_fusion (true),
  launch_cooperative_grid (false), launch_pdl (false); missing ones take the default. An entry with
  launch_pdl true is built for cuda:90 and newer targets only.
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

    {"file": ..., "function": ..., "descriptor_hook": {"config": 0, "constexprs": {"SPLIT": "False"},
                                                       "descriptors": ["a_desc", "c_desc"],
                                                       "values": {"a_desc": {"block_shape": [64, 32]}}}}

- descriptor_hook: what config `config`'s pre_hook set on the host tensor descriptors (block_shape,
  padding) of a call whose constexpr arguments the runtime describes so and whose arguments named
  in "descriptors" are host descriptors.
"""

import dataclasses
import json
import math
import os
from typing import Iterable, List, Sequence, Tuple

from .files import write_atomically
from .kernels import Kernel, load_kernel
from .keys import DTYPE_NAMES, OPTION_DEFAULTS, OPTIONAL_OPTIONS, canonical, describe, parse_target, parse_type, target_string

MANIFEST_VERSION = 1


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file, the entry and what is wrong."""


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
    # Inside tuple parameters (their type "[*fp32,i32]"): constexpr and divisible elements by path.
    tuple_constexprs: Tuple[Tuple[Tuple[int, ...], object], ...] = ()
    tuple_divisible: Tuple[Tuple[int, ...], ...] = ()

    @property
    def key(self) -> str:
        """Identity for deduplication (JSON, so that 1, 1.0 and true differ)."""
        return canonical([self.file, self.function, [list(a) for a in self.args], [list(o) for o in self.options]])

    def describe(self) -> str:
        return f"{self.function}({describe([n for n, _ in self.args], self.types, self.constexprs, self.divisible, self.tuple_constexprs, self.tuple_divisible)})"


@dataclasses.dataclass(eq=False)
class Decision:
    """A manifest's heuristics, autotune or descriptor_hook entry (what a kernel's decorators decided for
    some inputs), or its caller entry (what the code launching it decided by measurement, keyed by
    everything that decided it: an operator's plan choice, TritonJitFunction::store_decision)."""
    file: str  # absolute, symbolic links resolved
    function: str
    kind: str  # "heuristics", "autotune", "descriptor_hook" or "caller"
    fields: dict  # the entry's object under `kind`
    origin: str

    @property
    def lookup_key(self) -> str:
        """The key the runtime looks the decision up by (triton_jit_function.cpp)."""
        f = self.fields
        if self.kind == "heuristics":
            arguments = ", ".join(f"{name}={value}" for name, value in f["arguments"].items())
            return f"config {f['config']}\narguments {arguments}"
        if self.kind == "descriptor_hook":
            constexprs = ", ".join(f"{name}={value}" for name, value in f["constexprs"].items())
            return f"config {f['config']}\nconstexprs {constexprs}\ndescriptors {' '.join(f['descriptors'])}"
        if self.kind == "caller":
            return f["what"]
        return f"target {f['target']}\nkey {f['key']}"

    @property
    def value(self):
        if self.kind == "caller":
            return self.fields["value"]
        return self.fields["values"] if self.kind in ("heuristics", "descriptor_hook") else self.fields["config"]

    @property
    def key(self) -> str:
        return canonical([self.file, self.function, self.kind, self.lookup_key])


DECISION_KINDS = ("heuristics", "autotune", "descriptor_hook", "caller")


def _parse_descriptor_hook(kernel: Kernel, tuning: dict, fields, fail) -> dict:
    configs = tuning.get("configs", [])
    config = fields["config"]
    if type(config) is not int or not 0 <= config < len(configs) or not configs[config].get("pre_hook"):
        fail(f"descriptor_hook config must be the index of a config of {kernel.function} that has a pre_hook, got "
             f"{canonical(config)}")
    params = {p[0]: p for p in kernel.params}
    constexprs, descriptors, values = fields["constexprs"], fields["descriptors"], fields["values"]
    if not isinstance(constexprs, dict) or not all(isinstance(v, str) and k in params for k, v in constexprs.items()):
        fail("descriptor_hook constexprs must be an object of the call's constexpr arguments as the runtime describes "
             f"them (\"SPLIT\": \"False\"), got {canonical(constexprs)}")
    if not isinstance(descriptors, list) or not all(isinstance(d, str) and d in params for d in descriptors):
        fail(f"descriptor_hook descriptors must be a list of parameter names, got {canonical(descriptors)}")
    if not isinstance(values, dict):
        fail(f"descriptor_hook values must be an object, got {canonical(values)}")
    for name, set_fields in values.items():
        if name not in descriptors or not isinstance(set_fields, dict) or not set_fields or \
                not set(set_fields) <= {"block_shape", "padding"}:
            fail(f"descriptor_hook values must give descriptors named in descriptors their block_shape and/or "
                 f"padding, got {name}: {canonical(set_fields)}")
        block = set_fields.get("block_shape", [1])
        if not isinstance(block, list) or not block or not all(type(b) is int and b > 0 and b & (b - 1) == 0
                                                                 for b in block):
            fail(f"descriptor_hook block_shape of {name} must be a list of powers of two, got {canonical(block)}")
        if set_fields.get("padding", "zero") not in ("zero", "nan"):
            fail(f"descriptor_hook padding of {name} must be \"zero\" or \"nan\", got "
                 f"{canonical(set_fields['padding'])}")
    return {"config": config, "constexprs": dict(constexprs), "descriptors": list(descriptors), "values": dict(values)}


def parse_decision(kernel: Kernel, kind: str, fields, fail) -> dict:
    """The checked fields of a heuristics, autotune, descriptor_hook or caller entry of `kernel`."""
    tuning = json.loads(kernel.tuning) if kernel.tuning else {}
    if not isinstance(fields, dict):
        fail(f"{kind} must be a JSON object, got {canonical(fields)}")
    if kind == "caller":
        if sorted(fields) != ["value", "what"]:
            fail(f"caller has what and value, got {', '.join(sorted(fields)) or 'nothing'}")
        if not isinstance(fields["what"], str) or not fields["what"]:
            fail(f"caller what must be the non-empty text of what decided it, got {canonical(fields['what'])}")
        if not isinstance(fields["value"], dict):
            fail(f"caller value must be a JSON object, got {canonical(fields['value'])}")
        return {"what": fields["what"], "value": dict(fields["value"])}
    if kind == "descriptor_hook":
        expected = ("config", "constexprs", "descriptors", "values")
        if sorted(fields) != sorted(expected):
            fail(f"{kind} has {', '.join(expected)}, got {', '.join(sorted(fields)) or 'nothing'}")
        return _parse_descriptor_hook(kernel, tuning, fields, fail)
    expected = ("config", "arguments", "values") if kind == "heuristics" else ("target", "key", "config")
    if sorted(fields) != sorted(expected):
        fail(f"{kind} has {', '.join(expected)}, got {', '.join(sorted(fields)) or 'nothing'}")
    if kind == "heuristics":
        set_by = list(tuning.get("heuristics", []))
        if not set_by:
            fail(f"{kernel.function} has no @triton.heuristics")
        if type(fields["config"]) is not int or fields["config"] < -1:
            fail(f"heuristics config must be -1 or a config's index, got {canonical(fields['config'])}")
        arguments = fields["arguments"]
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            fail("heuristics arguments must be an object of the call's arguments as the runtime describes them "
                 f"(\"x\": \"Float\", \"n\": \"1000\"), got {canonical(arguments)}")
        values = fields["values"]
        if not isinstance(values, dict) or sorted(values) != sorted(set_by):
            fail(f"heuristics values must give every parameter the heuristics set ({', '.join(set_by)}), got "
                 f"{canonical(values)}")
        for name, value in values.items():
            if not (value is None or isinstance(value, (bool, int, float))) or \
                    (isinstance(value, float) and not math.isfinite(value)):
                fail(f"heuristics value of {name} must be a number, true/false or null, got {canonical(value)}")
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
            fail(f"autotune {name} must be a non-empty string, got {canonical(fields[name])}")
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
        fail(f"options must be a JSON object, got {canonical(options)}")
    known = {**OPTION_DEFAULTS, **OPTIONAL_OPTIONS}
    unknown = [name for name in options if name not in known]
    if unknown:
        fail(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
             f"(options: {', '.join(known)})")
    resolved = dict(OPTION_DEFAULTS)
    for name, value in options.items():
        if isinstance(known[name], bool):
            if not isinstance(value, bool):
                fail(f"option {name} must be true or false, got {canonical(value)}")
        elif type(value) is not int:
            fail(f"option {name} must be an integer, got {canonical(value)}")
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


def _parse_args(kernel: Kernel, args, fail):
    if not isinstance(args, dict):
        fail(f"args must be a JSON object (parameter name -> type or value), got {canonical(args)}")
    names = [p[0] for p in kernel.params]
    missing = [n for n in names if n not in args]
    unknown = [n for n in args if n not in names]
    if missing or unknown:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + \
                   ([f"unknown {', '.join(unknown)}"] if unknown else [])
        fail(f"args must name every parameter of {kernel.function} once: {'; '.join(problems)} "
             f"(its parameters: {', '.join(names)})")
    types, constexprs, divisible, tuple_constexprs, tuple_divisible = [], [], [], [], []
    for index, (name, is_constexpr, is_const, dns, dnsoa, annotation, _) in enumerate(kernel.params):
        value = args[name]
        if isinstance(value, list):
            if is_constexpr or annotation:
                fail(f"{name}: a tuple (a JSON array) is for a runtime parameter without annotation")

            def element(item, path):
                if isinstance(item, list):
                    return "[" + ",".join(element(e, path + (i, )) for i, e in enumerate(item)) + "]"
                if isinstance(item, str):
                    try:
                        triton_type, is_divisible = parse_type(item)
                    except ValueError as e:
                        fail(f"{name}{list(path[1:])}: {e}")
                    if triton_type.startswith("*") and triton_type.startswith("*k") != is_const:
                        fail(f"{name}{list(path[1:])}: {name} is {'' if is_const else 'not '}a tl.const parameter")
                    if is_divisible and (dns or dnsoa):
                        fail(f"{name}{list(path[1:])}: {name} is do_not_specialize: never divisible by 16")
                    if is_divisible:
                        tuple_divisible.append(path)
                    return triton_type
                if not (item is None or (type(item) is int and item == 1 and not dns)):
                    fail(f"{name}{list(path[1:])}: a tuple's element is a type, or null or 1 (Triton's constexpr "
                         f"elements), got {canonical(item)}")
                tuple_constexprs.append((path, item))
                return "constexpr"
            types.append(element(value, (index, )))
            continue
        if isinstance(value, str) and not is_constexpr:
            try:
                triton_type, is_divisible = parse_type(value)
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
        if isinstance(value, (bool, str)) or value is None:
            pass
        elif isinstance(value, dict) and set(value) == {"dtype"}:
            if value["dtype"] not in DTYPE_NAMES:
                fail(f"{name}: {canonical(value['dtype'])} is not a Triton dtype (Triton's: {', '.join(DTYPE_NAMES)})")
        elif isinstance(value, float):
            if not math.isfinite(value):
                fail(f"{name}: constexpr {value} is not a finite number")
        elif isinstance(value, int):
            if not -2**63 <= value < 2**63:
                fail(f"{name}: constexpr {value} does not fit in 64 bits")
        else:
            fail(f"{name}: {canonical(value)} is neither a type string nor a constexpr value "
                 "(integer, float, true/false, null, a string, {\"dtype\": \"bf16\"})")
        if not is_constexpr and not (value is None or (type(value) is int and value == 1 and not dns)):
            fail(f"{name} is a runtime parameter: give its type (e.g. \"i32\", \"*fp32:16\"); as a value it takes "
                 f"only null or 1 (Triton's ==1 specialisation{', which do_not_specialize turns off' if dns else ''}),"
                 f" got {canonical(value)}")
        types.append("constexpr")
        constexprs.append((index, value))
    return (tuple((name, args[name]) for name in names), tuple(types), tuple(constexprs), tuple(divisible),
            tuple(tuple_constexprs), tuple(tuple_divisible))


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
                fail(f"{key} must be a non-empty string, got {canonical(entry.get(key))}")
        file = os.path.realpath(os.path.join(os.path.dirname(manifest), entry["file"]))
        if not os.path.isfile(file):
            fail(f"kernel file {file} does not exist")
        try:
            kernel = load_kernel(file, entry["function"])
        except Exception as e:
            fail(f"cannot load {entry['function']} from {file}: {type(e).__name__}: {e}")
        return Decision(file, entry["function"], kinds[0], parse_decision(kernel, kinds[0], entry[kinds[0]], fail),
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
            fail(f"{key} must be a non-empty string, got {canonical(entry[key])}")
    file = os.path.realpath(os.path.join(os.path.dirname(manifest), entry["file"]))
    if not os.path.isfile(file):
        fail(f"kernel file {file} does not exist")
    options = _parse_options(entry.get("options", {}), fail)
    try:
        kernel = load_kernel(file, entry["function"])
    except Exception as e:  # the kernel file runs here: anything it raises is the entry's problem
        fail(f"cannot load {entry['function']} from {file}: {type(e).__name__}: {e}")
    args, types, constexprs, divisible, tuple_constexprs, tuple_divisible = _parse_args(kernel, entry["args"], fail)
    return Spec(file, entry["function"], args, options, types, constexprs, divisible, where, tuple_constexprs,
                tuple_divisible)


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
    return merge_decisions(e for path in paths for e in _read_entries(path) if isinstance(e, Decision))


def merge_decisions(decisions: Iterable[Decision]) -> List[Decision]:
    chosen, result = {}, []
    for d in decisions:
        other = chosen.get(d.key)
        if other is None:
            chosen[d.key] = d
            result.append(d)
        elif canonical(other.value) != canonical(d.value):
            raise ManifestError(f"{d.origin}: {d.function}'s {d.kind} for {d.lookup_key!r} is {canonical(d.value)}, "
                                f"but {other.origin} says {canonical(other.value)}")
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
                            f"got {canonical(version) if 'tjit_manifest' in data else 'nothing'}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise ManifestError(f"{path}: \"entries\" must be a list, got "
                            f"{canonical(entries) if 'entries' in data else 'nothing'}")
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
    write_atomically(output, manifest_json(specs, os.path.dirname(output), decisions).encode("utf-8"))
    return {"manifests": len(inputs), "entries": len(specs), "decisions": len(decisions), "output": output}
