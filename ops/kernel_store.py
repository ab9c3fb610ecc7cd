"""tjit's kernel store, read from Python: where it is, what it holds, clearing and pruning it.

The C++ runtime writes the store (tjit/kernel_store.h; docs/design.md, "Kernel store" describes the
files). This module reads the same files without importing triton or loading tjit's libraries;
`python -m tjit cache {info,list,clear,prune}` is its command line.

It trusts what the runtime trusts (ops/csrc/runtime/binaries/store_access.h): folders and files
that the running user or root owns and nobody else can write (with TJIT_CACHE_SHARED=<group>, also
that group's members, group-writable for that group), never a symbolic link. Anything else is a
Refused item, never read.
"""

import dataclasses
import fcntl
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import stat
import struct
import sys
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


@dataclasses.dataclass(frozen=True)
class Policy:
    """Whose store files are read: the running user's and root's, and with TJIT_CACHE_SHARED the
    members' of that group (group, its gid; None for a private store)."""
    user: int
    group: Optional[int] = None
    group_name: str = ""


def policy() -> Policy:
    """The policy of this process's environment, as the runtime reads it."""
    shared = os.environ.get("TJIT_CACHE_SHARED", "")
    if not shared:
        return Policy(os.geteuid())
    try:
        entry = grp.getgrnam(shared)
        return Policy(os.geteuid(), entry.gr_gid, entry.gr_name)
    except KeyError:
        if shared.isdigit():
            return Policy(os.geteuid(), int(shared), shared)
    print(f"tjit: TJIT_CACHE_SHARED={shared} names no group of this machine; the store stays private to you",
          file=sys.stderr)
    return Policy(os.geteuid())


def _user(uid: int):
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return None


def _members(gid: int) -> Optional[List[str]]:
    try:
        return list(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return None


def _is_member(uid: int, gid: int) -> bool:
    user = _user(uid)
    return user is not None and (user.pw_gid == gid or user.pw_name in (_members(gid) or []))


def _owner(uid: int) -> str:
    user = _user(uid)
    return f"uid {uid}" + (f" ({user.pw_name})" if user else "")


def distrust_reason(st: os.stat_result, rules: Policy) -> Optional[str]:
    """Why a store folder or file with status `st` must not be read under `rules`; None when it may
    (the runtime's rule, store_access.cpp: distrust_reason)."""
    shared = rules.group is not None and st.st_gid == rules.group
    if st.st_uid not in (rules.user, 0) and not (shared and _is_member(st.st_uid, rules.group)):
        return (f"owned by {_owner(st.st_uid)}, not by you ({_owner(rules.user)}) or root"
                + (f" or a member of TJIT_CACHE_SHARED's group {rules.group_name}" if rules.group is not None else ""))
    mode = f"{stat.S_IMODE(st.st_mode):04o}"
    if st.st_mode & stat.S_IWOTH:
        return f"writable by every user (mode {mode})"
    if st.st_mode & stat.S_IWGRP and not shared:
        user, members = _user(st.st_uid), _members(st.st_gid)
        private = user is not None and user.pw_gid == st.st_gid and members is not None and \
            all(m == user.pw_name for m in members)
        if not private:
            return (f"writable by group {st.st_gid} (mode {mode}), which " +
                    (f"is not TJIT_CACHE_SHARED's group {rules.group_name}" if rules.group is not None
                     else "TJIT_CACHE_SHARED does not name"))
    return None


def _refusal(path: str, rules: Policy, folder: bool) -> Optional[str]:
    """Why `path` is not read (a link, not a folder or file, or distrust_reason), or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if folder and not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    if not folder and not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return distrust_reason(st, rules)


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


@dataclasses.dataclass
class Refused:
    """A store folder or file that is not read: another user could have planted it (reason says
    how). mine: the running user owns it, so `cache prune` removes it."""
    path: str
    size: int
    reason: str
    mine: bool


def _format_root(folder: str) -> str:
    return os.path.join(folder, f"v{FORMAT_VERSION}")


def _walk(folder: str, rules: Policy):
    """(path, refusal) for every kernel file of the store, and for every folder refused (whose
    files are then not looked at); refusal is None for what may be read."""
    root = _format_root(folder)
    # The store's folder as the user named it (a link there is theirs to choose), then checked.
    for path, why in ((folder, distrust_reason(os.stat(folder), rules) if os.path.isdir(folder) else None),
                      (root, _refusal(root, rules, folder=True))):
        if why:
            yield path, why
            return
    if not os.path.isdir(root):
        return
    for kernel_dir in sorted(os.scandir(root), key=lambda d: d.name):
        if kernel_dir.name.startswith("."):  # the prune lock
            continue
        why = _refusal(kernel_dir.path, rules, folder=True)
        if why:
            yield kernel_dir.path, why
            continue
        for f in sorted(os.scandir(kernel_dir.path), key=lambda d: d.name):
            if not f.name.startswith("."):  # .*.tmp: a write under way
                yield f.path, _refusal(f.path, rules, folder=False)


def _store_files(folder: str):
    """The store's kernel files that may be read."""
    for path, why in _walk(folder, policy()):
        if why is None:
            yield path


def _read_trusted(path: str, rules: Policy) -> bytes:
    """The bytes of `path`, opened without following a link and checked on the open file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else distrust_reason(st, rules)
        if why:
            raise PermissionError(f"{path}: {why}")
        return f.read()


def read(folder: Optional[str] = None) -> Iterator[object]:
    """Every entry (Entry), damaged file (Damaged) and refused folder or file (Refused) in the
    store; signature and decision records are checked and reported only when damaged."""
    folder = folder or directory()
    if folder is None:
        return
    rules = policy()
    for path, why in _walk(folder, rules):
        if why is not None:
            st = os.lstat(path)
            yield Refused(path, st.st_size, why, st.st_uid == rules.user)
            continue
        try:
            data = _read_trusted(path, rules)
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as e:  # swapped for a link or another owner's file since the walk looked
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            yield Refused(path, st.st_size, str(e).split(": ", 1)[-1], st.st_uid == rules.user)
            continue
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
    rules = policy()
    names = sorted(os.listdir(kernel_dir)) if _refusal(kernel_dir, rules, folder=True) is None else []
    for name in [SIGNATURE_NAME] + names:
        path = os.path.join(kernel_dir, name)
        if name.startswith(".") or not os.path.exists(path) or _refusal(path, rules, folder=False):
            continue
        try:
            data = _read_trusted(path, rules)
            header, _ = decode(data, SIGNATURE_MAGIC if name == SIGNATURE_NAME else ENTRY_MAGIC)
            kernel = header if name == SIGNATURE_NAME else header["kernel"]
            return kernel["function"], kernel["file"]
        except (OSError, DamagedFile, KeyError, TypeError):
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
               "max_bytes": max_bytes(), "refused": []}
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
        elif isinstance(item, Refused):
            summary["refused"].append({"path": item.path, "reason": item.reason, "yours": item.mine})
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
    processes use the store. Files the runtime refuses to read (Refused) that are the user's own go
    first, whatever the bound; those of other users stay ("refused_kept": [paths]).
    Returns {"removed": [paths], "bytes_removed", "bytes_left", "max_bytes", "refused_kept"}."""
    folder = folder or directory()
    if limit is None:
        limit = max_bytes() or None  # 0: no bound
    result = {"removed": [], "bytes_removed": 0, "bytes_left": 0, "max_bytes": limit, "refused_kept": []}
    root = _format_root(folder) if folder else None
    if root is None or not os.path.isdir(root):
        return result
    rules = policy()
    for path, why in _walk(folder, rules):  # the refusals alone: no file is read
        if why is None:
            continue
        st = os.lstat(path)
        if st.st_uid == rules.user and path not in (folder, root) and _remove_refused(path):
            result["removed"].append(path)
            result["bytes_removed"] += st.st_size
        else:
            result["refused_kept"].append(path)
    if root in result["refused_kept"] or folder in result["refused_kept"]:
        return result  # a store the runtime does not use: nothing in it is touched
    try:
        lock = open(os.path.join(root, PRUNE_LOCK_NAME), "a")
    except OSError as e:  # a read-only store: nothing here can be removed either
        raise PermissionError(f"cannot prune the kernel store {folder}: {e.strerror}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        total, evictable = 0, []
        now = time.time()
        for kernel_dir in os.scandir(root):
            if not kernel_dir.is_dir(follow_symlinks=False) or kernel_dir.path in result["refused_kept"]:
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


def _remove_refused(path: str) -> bool:
    """Removes a refused file, link or folder of the user's own (a link itself, never its target)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        return True
    except OSError:
        return False


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
