"""A kernel store only its owner can feed: what another user owns or can write, and links, are never
read, by the C++ runtime (tjit_store_probe, a fresh process) or by `python -m tjit cache`; what the
store creates is private, or shared with one group on purpose (TJIT_CACHE_SHARED). Each case
checks that the results stay right: a refused entry is compiled again, never loaded.

Another owner is made with os.chown, so these tests need root (CI runs as root)."""

import grp
import os
import pwd
import stat
import subprocess
import sys

import pytest
from test_kernel_store import probe, run_probe, store  # noqa: F401  (fixtures)

from tjit import kernel_store

OTHER_UID = 12345  # no user of the machine
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making files of another owner (os.chown) needs root; "
                                "CI runs as root")


@pytest.fixture(autouse=True)
def usual_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def walk(store):
    """Every folder and file below the store's folder, itself included."""
    out = [store]
    for folder, dirs, files in os.walk(store):
        out += [os.path.join(folder, n) for n in dirs + files]
    return out


def entries(store):
    return sorted(p for p in walk(store) if p.endswith(".tjk"))


def warm(probe, store):
    """A store holding block 256's entry, and the binary it holds."""
    cold = run_probe(probe, store, [256])
    assert not cold.from_store(256) and cold.counters["writes"] >= 2
    return cold.binary(256)


def refusals(run):
    return [line for line in run.stderr.splitlines() if "kernel store: not using" in line]


def test_what_the_store_creates_is_private(probe, store):
    warm(probe, store)
    for path in walk(store):
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if os.path.basename(path) == ".prune.lock":
            continue
        assert mode == (0o700 if os.path.isdir(path) else 0o600), (path, oct(mode))
    assert kernel_store.info(store)["refused"] == []


OTHER_GID = 12345  # no group of the machine


@pytest.mark.parametrize("mode", [0o777, pytest.param(0o775, marks=needs_root)])
def test_a_root_others_can_write_is_not_used(probe, store, mode):
    binary = warm(probe, store)
    os.chmod(store, mode)
    if mode == 0o775:  # writable by a group that is not the owner's own
        os.chown(store, -1, OTHER_GID)
    run = run_probe(probe, store, [256, 512])
    assert not run.from_store(256) and run.binary(256) == binary  # compiled again, the same binary
    assert run.counters["hits"] == 0 and run.counters["writes"] == 0 and run.counters["refused"] > 0
    [line] = refusals(run)  # said once, though every lookup and write was refused
    assert store in line and ("every user" if mode == 0o777 else "writable by group") in line
    assert "TJIT_CACHE_DIR" in line and "TJIT_CACHE_SHARED" in line
    assert len(entries(store)) == 1
    info = kernel_store.info(store)
    assert [r["path"] for r in info["refused"]] == [store] and info["entries"] == 0
    assert kernel_store.prune(store, 0)["removed"] == []  # a store the runtime does not use is left alone


@needs_root
def test_an_entry_folder_owned_by_another_user_is_refused(probe, store):
    binary = warm(probe, store)
    [entry] = entries(store)
    folder = os.path.dirname(entry)
    for path in [folder] + [os.path.join(folder, n) for n in os.listdir(folder)]:
        os.chown(path, OTHER_UID, -1)
    run = run_probe(probe, store, [256])
    assert not run.from_store(256) and run.binary(256) == binary
    assert run.counters["refused"] > 0 and run.counters["writes"] == 0  # nothing written into its folder
    [line] = refusals(run)
    assert folder in line and f"owned by uid {OTHER_UID}" in line
    info = kernel_store.info(store)
    assert [(r["path"], r["yours"]) for r in info["refused"]] == [(folder, False)]
    result = kernel_store.prune(store, 0)
    assert result["refused_kept"] == [folder] and os.path.exists(entry)  # not the user's to remove
    listing = subprocess.run([sys.executable, "-m", "tjit", "cache", "info", "--dir", store], capture_output=True,
                             text=True, check=True).stdout
    assert f"refused: {folder}: owned by uid {OTHER_UID}" in listing and "not yours" in listing


def test_a_binary_made_writable_by_others_is_refused_and_pruned(probe, store):
    binary = warm(probe, store)
    [entry] = entries(store)
    os.chmod(entry, 0o666)
    run = run_probe(probe, store, [256])
    assert not run.from_store(256) and run.binary(256) == binary
    [line] = refusals(run)
    assert entry in line and "writable by every user (mode 0666)" in line
    # Its folder is the user's: the compile's write replaced it with a private file.
    assert stat.S_IMODE(os.stat(entry).st_mode) == 0o600 and kernel_store.info(store)["refused"] == []
    again = run_probe(probe, store, [256])
    assert again.from_store(256) and again.binary(256) == binary and not refusals(again)
    # The user's own refused file: `cache info` says so, `cache prune` removes it.
    os.chmod(entry, 0o666)
    assert [(r["path"], r["yours"]) for r in kernel_store.info(store)["refused"]] == [(entry, True)]
    assert entry in kernel_store.prune(store, 10**12)["removed"] and not os.path.exists(entry)


@pytest.mark.parametrize("what", ["entry", "folder"])
def test_a_link_in_the_store_is_never_followed(probe, store, tmp_path, what):
    binary = warm(probe, store)
    [entry] = entries(store)
    target = entry if what == "entry" else os.path.dirname(entry)
    outside = str(tmp_path / "outside")
    os.rename(target, outside)
    os.symlink(outside, target)
    run = run_probe(probe, store, [256])
    assert not run.from_store(256) and run.binary(256) == binary
    [line] = refusals(run)
    assert target in line and ("a symbolic link" in line or "not a folder" in line)
    if what == "entry":  # the compile's write replaced the link (not its target) with a private file
        assert not os.path.islink(entry) and stat.S_IMODE(os.stat(entry).st_mode) == 0o600
        os.remove(entry)
        os.symlink(outside, entry)
    [refused] = kernel_store.info(store)["refused"]
    assert refused["path"] == target and refused["reason"] == "a symbolic link"
    assert [item.path for item in kernel_store.read(store) if isinstance(item, kernel_store.Entry)] == []
    assert target in kernel_store.prune(store, 10**12)["removed"] and os.path.exists(outside)  # the link only


def shared_group():
    """A group with a member user other than root, as Debian's base system has (daemon)."""
    for name in ("daemon", "bin", "sys"):
        try:
            group = grp.getgrnam(name)
        except KeyError:
            continue
        members = [u for u in pwd.getpwall() if u.pw_gid == group.gr_gid and u.pw_uid != 0]
        if members:
            return group, members[0]
    pytest.skip("no group with a member user on this machine")


@needs_root
def test_a_shared_store_takes_its_groups_members_only(probe, store):
    group, member = shared_group()
    shared = {"TJIT_CACHE_SHARED": group.gr_name}
    cold = run_probe(probe, store, [256], env=shared)
    for path in walk(store):
        st = os.lstat(path)
        if os.path.basename(path) == ".prune.lock":
            continue
        assert st.st_gid == group.gr_gid, path
        expected = 0o2770 if os.path.isdir(path) else 0o660  # group-writable, never world-writable
        assert stat.S_IMODE(st.st_mode) == expected, (path, oct(st.st_mode))
    # A member wrote the entry: the shared store reads it, a private one refuses it.
    [entry] = entries(store)
    os.chown(entry, member.pw_uid, group.gr_gid)
    run = run_probe(probe, store, [256], env=shared)
    assert run.from_store(256) and run.binary(256) == cold.binary(256) and not refusals(run)
    assert kernel_store.info(store)["refused"]  # this test's process has no TJIT_CACHE_SHARED
    private = run_probe(probe, store, [256])
    assert not private.from_store(256) and refusals(private)
    # Someone outside the group: refused even in the shared store.
    os.chown(entry, OTHER_UID, group.gr_gid)
    outsider = run_probe(probe, store, [256], env=shared)
    assert not outsider.from_store(256) and outsider.binary(256) == cold.binary(256)
    assert f"owned by uid {OTHER_UID}" in refusals(outsider)[0] and group.gr_name in refusals(outsider)[0]
    # Python sees the store as the runtime does under the same setting.
    os.chown(entry, member.pw_uid, group.gr_gid)
    os.environ["TJIT_CACHE_SHARED"] = group.gr_name
    try:
        assert kernel_store.info(store)["refused"] == [] and kernel_store.info(store)["entries"] == 1
    finally:
        del os.environ["TJIT_CACHE_SHARED"]
