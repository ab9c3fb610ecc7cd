"""tjit's kernel store, read from Python: where it is, what it holds, clearing and pruning it.

The C++ runtime writes the store (tjit/kernel_store.h; docs/design.md, "Kernel store" describes the
files). This module reads the same files without importing triton or loading tjit's libraries;
`python -m tjit cache {info,list,clear,prune}` is its command line.
"""

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import struct
import time
from typing import Iterator, List, Optional

FORMAT_VERSION = 1
ENTRY_MAGIC = b"TJITKRNL"
SIGNATURE_MAGIC = b"TJITSIGN"
ENTRY_SUFFIX = ".tjk"
SIGNATURE_NAME = "signature.tjs"
# Decisions the runtime makes once per kernel and key: autotune choices, heuristic values
# (JSON header {"key": text, "value": ...}, no binary).
DECISION_MAGIC = b"TJITDCSN"
DECISION_SUFFIX = ".tjd"
_FRAME = struct.Struct("<8sIIQ40s")  # magic, format, header bytes, binary bytes, SHA-1 (hex)
# The size bound (kernel_store.h: kDefaultKernelStoreMaxBytes, TJIT_CACHE_MAX_BYTES).
DEFAULT_MAX_BYTES = 4 << 30
PRUNE_LOCK_NAME = ".prune.lock"  # flock'ed by whoever prunes, the runtime too
DEAD_WRITE_SECONDS = 3600  # a temporary file this old was left by a writer that died


class DamagedFile(ValueError):
    """A store file that is not intact (the runtime ignores and replaces such files)."""


def directory() -> Optional[str]:
    """The store's folder as the runtime chooses it; None when the store is off (TJIT_CACHE=0)."""
    if os.environ.get("TJIT_CACHE", "").lower() in ("0", "off", "false", "no"):
        return None
    chosen = os.environ.get("TJIT_CACHE_DIR")
    if not chosen:
        if os.environ.get("XDG_CACHE_HOME"):
            chosen = os.path.join(os.environ["XDG_CACHE_HOME"], "tjit")
        elif os.environ.get("HOME"):
            chosen = os.path.join(os.environ["HOME"], ".cache", "tjit")
        else:
            return None
    return os.path.normpath(os.path.abspath(chosen))


def parse_size(text: str) -> int:
    """Bytes from "1073741824", "512M", "4G", "4GiB" (K, M, G, T: powers of 1024), as the runtime
    reads TJIT_CACHE_MAX_BYTES; raises ValueError for anything else."""
    m = re.fullmatch(r"(\d{1,19})([KMGT](?:I?B)?)?", text.strip().upper())
    if not m:
        raise ValueError(f"{text!r} is not a size (bytes, or with a K, M, G or T suffix such as 4G)")
    return int(m.group(1)) << (10 * ("KMGT".index(m.group(2)[0]) + 1) if m.group(2) else 0)


def max_bytes() -> int:
    """The store's size bound as the runtime chooses it (0: none): TJIT_CACHE_MAX_BYTES, else
    DEFAULT_MAX_BYTES (an unreadable setting, which the runtime warns about, is the default too)."""
    text = os.environ.get("TJIT_CACHE_MAX_BYTES", "")
    try:
        return parse_size(text) if text else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


def encode(header: dict, binary: bytes, magic: bytes) -> bytes:
    """A framed store file holding `header` (as compact JSON) and `binary`: the layout the C++
    encode_entry and encode_signature write, which decode (and the C++ decoders) read back."""
    if len(magic) != 8:
        raise ValueError(f"a store file's magic is 8 bytes, got {magic!r}")
    header_bytes = json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    if len(header_bytes) >= 2**32:
        raise ValueError(f"header of {len(header_bytes)} bytes does not fit the frame's u32 size")
    contents = header_bytes + bytes(binary)
    checksum = hashlib.sha1(contents).hexdigest().encode()
    return _FRAME.pack(magic, FORMAT_VERSION, len(header_bytes), len(binary), checksum) + contents


def decode(data: bytes, magic: bytes):
    """(header dict, binary bytes) of a framed store file; raises DamagedFile saying why."""
    if len(data) < _FRAME.size:
        raise DamagedFile(f"shorter ({len(data)} bytes) than its frame")
    found_magic, version, header_size, binary_size, checksum = _FRAME.unpack_from(data)
    if found_magic != magic:
        raise DamagedFile("not a tjit store file of this kind (wrong magic)")
    if version != FORMAT_VERSION:
        raise DamagedFile(f"store format {version}, this tjit reads {FORMAT_VERSION}")
    if _FRAME.size + header_size + binary_size != len(data):
        raise DamagedFile(f"size {len(data)} bytes, its frame says {_FRAME.size + header_size + binary_size}")
    contents = data[_FRAME.size:]
    if hashlib.sha1(contents).hexdigest().encode() != checksum:
        raise DamagedFile("checksum mismatch")
    try:
        header = json.loads(contents[:header_size])
    except ValueError as e:
        raise DamagedFile(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise DamagedFile("header is not a JSON object")
    return header, contents[header_size:]


@dataclasses.dataclass
class Entry:
    """One compiled specialisation in the store."""
    path: str
    size: int
    header: dict
    binary_size: int

    @property
    def function(self) -> str:
        return self.header["kernel"]["function"]

    @property
    def file(self) -> str:
        return self.header["kernel"]["file"]

    def _key_line(self, name):
        prefix = name + " "
        return next((line[len(prefix):] for line in self.header["key"].splitlines() if line.startswith(prefix)), "")

    @property
    def signature(self) -> str:
        """The specialisation, e.g. "x_ptr: *fp32:16, n: i32, BLOCK=1024"."""
        return self._key_line("signature")

    @property
    def options(self) -> str:
        return self._key_line("options")

    @property
    def target(self) -> str:
        t = self.header["target"]
        return f"{t['backend']}:{t['arch']}:{t['warp_size']}"

    @property
    def triton(self) -> str:
        return self.header["kernel"]["triton"]

    def as_dict(self) -> dict:
        return {"path": self.path, "bytes": self.size, "function": self.function, "file": self.file,
                "signature": self.signature, "options": self.options, "target": self.target, "triton": self.triton,
                "sources": self.header["kernel"]["sources"], "launch": self.header["launch"],
                "binary_bytes": self.binary_size}


@dataclasses.dataclass
class Damaged:
    """A store file that failed to decode."""
    path: str
    size: int
    reason: str


def _format_root(folder: str) -> str:
    return os.path.join(folder, f"v{FORMAT_VERSION}")


def _store_files(folder: str):
    root = _format_root(folder)
    if not os.path.isdir(root):
        return
    for kernel_dir in sorted(os.scandir(root), key=lambda d: d.name):
        if not kernel_dir.is_dir():
            continue
        for f in sorted(os.scandir(kernel_dir.path), key=lambda d: d.name):
            if f.is_file() and not f.name.startswith("."):  # .*.tmp: a write under way
                yield f.path


def read(folder: Optional[str] = None) -> Iterator[object]:
    """Every entry (Entry) and damaged file (Damaged) in the store; signature and decision records
    are checked and reported only when damaged."""
    folder = folder or directory()
    if folder is None:
        return
    for path in _store_files(folder):
        with open(path, "rb") as f:
            data = f.read()
        is_signature = os.path.basename(path) == SIGNATURE_NAME
        if path.endswith(DECISION_SUFFIX):
            try:
                header, binary = decode(data, DECISION_MAGIC)
                if binary or not isinstance(header.get("key"), str) or "value" not in header:
                    raise DamagedFile("not a decision record (key, value, no binary)")
            except DamagedFile as e:
                yield Damaged(path, len(data), str(e))
            continue
        try:
            header, binary = decode(data, SIGNATURE_MAGIC if is_signature else ENTRY_MAGIC)
            if not is_signature:
                entry = Entry(path, len(data), header, len(binary))
                entry.as_dict()  # every field the listing shows is present
        except (DamagedFile, KeyError, TypeError) as e:
            yield Damaged(path, len(data), str(e) if isinstance(e, DamagedFile) else f"missing field {e}")
            continue
        if not is_signature:
            yield entry


def _kernel_identity(kernel_dir: str):
    """(function, kernel file or None) of a kernel folder: from its signature record or an entry
    when one is intact, else the function from the folder's name (<function>-<hash of file>)."""
    for name in [SIGNATURE_NAME] + sorted(os.listdir(kernel_dir)):
        path = os.path.join(kernel_dir, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        try:
            header, _ = decode(data, SIGNATURE_MAGIC if name == SIGNATURE_NAME else ENTRY_MAGIC)
            kernel = header if name == SIGNATURE_NAME else header["kernel"]
            return kernel["function"], kernel["file"]
        except (DamagedFile, KeyError, TypeError):
            continue
    return os.path.basename(kernel_dir).rsplit("-", 1)[0], None


def matches(item, kernel: Optional[str]) -> bool:
    """Whether a store item (Entry or Damaged) belongs to `kernel`: a function name or a kernel file.
    An entry says so itself; a damaged file belongs to its folder's kernel."""
    if kernel is None:
        return True
    if isinstance(item, Entry):
        return kernel in (item.function, item.file)
    return kernel in _kernel_identity(os.path.dirname(item.path))


def info(folder: Optional[str] = None) -> dict:
    folder = folder or directory()
    summary = {"directory": folder, "enabled": folder is not None, "exists": bool(folder and os.path.isdir(folder)),
               "kernels": 0, "entries": 0, "signatures": 0, "decisions": 0, "damaged": 0, "bytes": 0,
               "max_bytes": max_bytes()}
    if folder is None:
        return summary
    functions = set()
    for path in _store_files(folder):
        summary["bytes"] += os.path.getsize(path)
        if os.path.basename(path) == SIGNATURE_NAME:
            summary["signatures"] += 1
        elif path.endswith(DECISION_SUFFIX):
            summary["decisions"] += 1
    for item in read(folder):
        if isinstance(item, Entry):
            summary["entries"] += 1
            functions.add((item.file, item.function))
        else:
            summary["damaged"] += 1
    summary["kernels"] = len(functions)
    return summary


def clear(folder: Optional[str] = None, kernel: Optional[str] = None) -> List[str]:
    """Removes the store's files, or those of `kernel` (a function name or a kernel file path);
    returns the removed paths. Clearing everything removes tjit's format folders (v1, ...) of any
    version and nothing else, so a store folder shared with other files is safe to clear."""
    folder = folder or directory()
    if folder is None or not os.path.isdir(folder):
        return []
    removed = []
    if kernel is None:
        for version_dir in os.scandir(folder):
            if version_dir.is_dir() and re.fullmatch(r"v\d+", version_dir.name):
                for dirpath, _, filenames in os.walk(version_dir.path):
                    removed.extend(os.path.join(dirpath, name) for name in filenames)
                shutil.rmtree(version_dir.path)
        return removed
    root = _format_root(folder)
    for kernel_dir in sorted(os.scandir(root), key=lambda d: d.name) if os.path.isdir(root) else []:
        if kernel_dir.is_dir() and kernel in _kernel_identity(kernel_dir.path):
            for name in sorted(os.listdir(kernel_dir.path)):
                os.remove(os.path.join(kernel_dir.path, name))
                removed.append(os.path.join(kernel_dir.path, name))
            os.rmdir(kernel_dir.path)
    return removed


def prune(folder: Optional[str] = None, limit: Optional[int] = None) -> dict:
    """Removes the least recently used kernel entries and decision records (oldest modification
    time first: the runtime refreshes it on every hit) until the store holds at most `limit` bytes
    (default: the bound, max_bytes(), and nothing when there is none; 0 removes every entry and
    record), and temporary files of writes that died (an hour old). Takes the store's prune lock, as the runtime does, so it is safe while
    processes use the store. Returns {"removed": [paths], "bytes_removed", "bytes_left", "max_bytes"}."""
    folder = folder or directory()
    if limit is None:
        limit = max_bytes() or None  # 0: no bound
    result = {"removed": [], "bytes_removed": 0, "bytes_left": 0, "max_bytes": limit}
    root = _format_root(folder) if folder else None
    if root is None or not os.path.isdir(root):
        return result
    try:
        lock = open(os.path.join(root, PRUNE_LOCK_NAME), "a")
    except OSError as e:  # a read-only store: nothing here can be removed either
        raise PermissionError(f"cannot prune the kernel store {folder}: {e.strerror}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        total, evictable = 0, []
        now = time.time()
        for kernel_dir in os.scandir(root):
            if not kernel_dir.is_dir(follow_symlinks=False):
                continue
            for f in os.scandir(kernel_dir.path):
                try:
                    st = f.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed meanwhile
                if not f.is_file(follow_symlinks=False):
                    continue
                if f.name.startswith("."):  # a write under way, or left by one that died
                    if f.name.endswith(".tmp") and now - st.st_mtime > DEAD_WRITE_SECONDS and _unlink(f.path):
                        result["removed"].append(f.path)
                        result["bytes_removed"] += st.st_size
                    else:
                        total += st.st_size
                    continue
                total += st.st_size
                if f.name.endswith((ENTRY_SUFFIX, DECISION_SUFFIX)):
                    evictable.append((st.st_mtime_ns, f.path, st.st_size))
        if limit is not None:
            for _, path, size in sorted(evictable):
                if total <= limit:
                    break
                if _unlink(path):
                    result["removed"].append(path)
                    result["bytes_removed"] += size
                total -= size  # removed now, or by another process before the lock
        result["bytes_left"] = total
    return result


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
