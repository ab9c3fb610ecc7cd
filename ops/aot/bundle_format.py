"""The bundle file: encode_bundle() writes it, decode_bundle()/read_bundle() read it back with every
check the C++ loader makes.

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

A kernel's index record may carry "decisions": [{"kind": "heuristics", "autotune" or "caller", "key", "value"}],
keyed as the runtime looks them up: "config <i>\narguments <name>=<value>, ..." with the values
({parameter: value}), or "target <t>\nkey <tuning key>" with the config's text. Index version 2 adds
the kind "descriptor_hook" ("config <i>\nconstexprs <name>=<value>, ...\ndescriptors <names>" with
{descriptor: {"block_shape", "padding"}}, what a config pre_hook set); a bundle carries version 2
only when it has such a decision, so a runtime that cannot apply them refuses it instead of running
without them. The kind "caller" (key: the text of what decided it, value: a JSON object; what
TritonJitFunction::store_decision keeps, such as an operator's plan choice) may be in either version:
a runtime that never asks for one runs the same without it.
"""

import dataclasses
import hashlib
import json
import os
import struct
from typing import List, Optional, Sequence, Tuple

from .keys import OPTION_DEFAULTS, OPTIONAL_OPTIONS, TJIT_VERSION, bundle_key, canonical, describe, target_string
from .manifest import DECISION_KINDS
from .siblings import DamagedFile, kernel_store

BUNDLE_MAGIC = b"TJITBNDL"
BUNDLE_VERSION = 1
INDEX_VERSIONS = (1, 2)  # 2: decisions of kind descriptor_hook
# "caller" (a caller's own decision, an operator's plan choice) in either version: a runtime that does not
# look such decisions up runs correctly without them.
_INDEX_KINDS = {1: ("heuristics", "autotune", "caller"), 2: DECISION_KINDS}
BUNDLE_FORMAT = "tjit kernel bundle"
BUNDLE_ENTRY_KEY = "tjit bundle entry"  # an entry's store key; the bundle loader does not compare it
_BUNDLE_FRAME = struct.Struct("<8sIIQ40s")  # magic, format, index bytes, payload bytes, SHA-1 of the index JSON (hex)
_U32 = struct.Struct("<I")  # the index's JSON size and entry count
_RECORD = struct.Struct("<IIQQ")  # an index record before its key: kernel, key bytes, offset, size
_LAUNCH_FIELDS = {"symbol": str, "shared_memory": int, "num_warps": int, "num_ctas": int,
                  "global_scratch_size": int, "global_scratch_align": int, "profile_scratch_size": int,
                  "profile_scratch_align": int, "launch_cooperative_grid": bool, "launch_pdl": bool}


def _descriptor_launch_ok(d) -> bool:
    """One launch.tensor_descriptors item as the runtime reads it: TMA metadata, or decomposition flags."""
    if not isinstance(d, dict) or not isinstance(d.get("tma"), bool):
        return False
    if not d["tma"]:
        return type(d.get("flags")) is int and d["flags"] >= 0
    return all(type(d.get(name)) is int for name in ("swizzle", "elem_size", "elem_type")) and \
        isinstance(d.get("block_size"), list) and all(type(b) is int and b > 0 for b in d["block_size"]) and \
        isinstance(d.get("fp4_padded"), bool)


class BuildError(RuntimeError):
    """A bundle that could not be built (failed compiles, conflicting kernels, bad targets)."""


# --------------------------------------------------------------------------------------------
# Writing

def entry_key(kernel: dict, header: dict) -> str:
    """bundle_key of an entry: its kernel's index record ({"function", "file_name", ...}) and its header."""
    specialization = header["specialization"]
    return bundle_key(kernel["function"], kernel["file_name"], specialization["types"], specialization["constexprs"],
                      specialization["divisible_by_16"], header["options"], header["target"],
                      specialization.get("tuple_constexprs", ()), specialization.get("tuple_divisible_by_16", ()))


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
    hooks = any(d.get("kind") == "descriptor_hook" for k in kernels for d in k.get("decisions", []))
    index = {"format": BUNDLE_FORMAT, "version": 2 if hooks else 1,
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


# --------------------------------------------------------------------------------------------
# Reading

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
        return describe(names, s["types"], s["constexprs"], s["divisible_by_16"], s.get("tuple_constexprs", ()),
                        s.get("tuple_divisible_by_16", ()))

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
    _damaged(index.get("format") == BUNDLE_FORMAT, f"index format is {canonical(index.get('format'))}, "
             f"not {BUNDLE_FORMAT!r}")
    _damaged(index.get("version") in INDEX_VERSIONS and _is_int(index.get("version")),
             f"index version is {canonical(index.get('version'))}, this tjit reads "
             f"{' and '.join(map(str, INDEX_VERSIONS))}")
    kinds = _INDEX_KINDS[index["version"]]
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
            isinstance(d, dict) and d.get("kind") in kinds and isinstance(d.get("key"), str) and "value" in d
            for d in decisions), f"index: kernel {i} ({k['function']}): its decisions are not kind, key and value")


def _check_entry(where: str, header: dict, binary: bytes, record: dict, kernel: dict):
    """That a decoded store entry is complete (what decode_entry requires) and agrees with its index
    record: the record's kernel is the header's, and the record's key is the header's."""
    for name in ("key", "kernel", "specialization", "options", "target", "launch", "binary_format"):
        _damaged(name in header, f"{where}: its header misses {name!r}")
    _damaged(canonical(header["kernel"]) == canonical(kernel["signature"]),
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
    _damaged(header["binary_format"] == "cubin", f"{where}: binary format {canonical(header['binary_format'])} "
             "is not cubin")
    _damaged(launch["symbol"] and binary and launch["num_warps"] > 0 and launch["num_ctas"] > 0 and
             launch["shared_memory"] >= 0, f"{where}: inconsistent launch metadata")
    descriptors = launch.get("tensor_descriptors", [])
    descriptor_params = sum(1 for t in header["specialization"]["types"] if t.startswith("tensordesc<"))
    _damaged(isinstance(descriptors, list) and len(descriptors) == descriptor_params and
             all(_descriptor_launch_ok(d) for d in descriptors),
             f"{where}: launch.tensor_descriptors does not describe its {descriptor_params} tensor descriptors")


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
