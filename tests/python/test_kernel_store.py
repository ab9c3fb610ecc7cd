"""The kernel store across processes: a fresh process finds what earlier ones compiled (without
Python), never uses a stale or damaged entry, and survives concurrent writers and unwritable
folders. Each case runs tjit_store_probe (tests/cpp/store_probe.cpp), a C++ program that compiles
scale_kernel-shaped kernels for an explicit target through TritonJitFunction::compile, so all of it
runs without a GPU. The last test checks the same on CUDA from Python: operators' first calls."""

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

import tjit
from conftest import requires_cuda
from tjit import kernel_store

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("TJIT_BUILD_DIR", os.path.join(REPO, "build"))
PROBE = os.path.join(BUILD_DIR, "bin", "tjit_store_probe")
TEST_KERNELS = os.path.join(REPO, "tests", "cpp", "kernels", "runtime_test_kernels.py")
TARGET = "cuda:90"

KERNEL_SOURCE = textwrap.dedent("""\
    import triton
    import triton.language as tl
    from probe_helpers import apply
    from probe_consts import OFFSET


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, apply(x, scale) + OFFSET, mask=mask)
    """)
HELPERS_SOURCE = textwrap.dedent("""\
    import triton


    @triton.jit
    def apply(x, scale):
        return x * scale
    """)
CONSTS_SOURCE = "import triton.language as tl\n\nOFFSET = tl.constexpr(1.5)\n"


@pytest.fixture(scope="module")
def probe():
    if not os.path.exists(PROBE):
        pytest.fail(f"{PROBE} is missing: build tjit with its tests (./run.sh test, or TJIT_BUILD_DIR=<build>)")
    return PROBE


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "store")


@pytest.fixture
def kernels(tmp_path):
    """A kernel file importing a @triton.jit helper and a global constant from two other files."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "kernel.py").write_text(KERNEL_SOURCE)
    (folder / "probe_helpers.py").write_text(HELPERS_SOURCE)
    (folder / "probe_consts.py").write_text(CONSTS_SOURCE)
    (folder / "unrelated.py").write_text("VALUE = 1\n")
    return folder


class Run:

    def __init__(self, completed):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.blocks = {}
        self.counters = {}
        for line in completed.stdout.splitlines():
            if line.startswith("block="):
                fields = dict(part.split("=", 1) for part in line.split())
                self.blocks[int(fields["block"])] = fields
            elif line.startswith("python="):
                self.python = line == "python=1"
            elif line.startswith("counters "):
                self.counters = {k: int(v) for k, v in (p.split("=") for p in line.split()[1:])}
            elif line.startswith("directory="):
                self.directory = line.split("=", 1)[1]

    def from_store(self, block):
        return self.blocks[block]["store"] == "1"

    def binary(self, block):
        return self.blocks[block]["binary"]

    def warnings(self, text):
        return sum(1 for line in self.stderr.splitlines() if text in line)


def run_probe(probe, store, blocks, kernel_file=TEST_KERNELS, function="scale_kernel", target=TARGET, env=None,
              check=True, preexec_fn=None, pythonpath=None):
    environment = {k: v for k, v in os.environ.items() if k not in ("TJIT_CACHE_DIR", "TJIT_CACHE")}
    environment["TJIT_LOG_COMPILES"] = "0"
    if store is not None:
        environment["TJIT_CACHE_DIR"] = store
    if pythonpath:
        environment["PYTHONPATH"] = pythonpath
    environment.update(env or {})
    completed = subprocess.run([probe, str(kernel_file), function, target] + [str(b) for b in blocks],
                               capture_output=True, text=True, env=environment, preexec_fn=preexec_fn, timeout=300)
    run = Run(completed)
    if check:
        assert completed.returncode == 0, f"probe failed ({completed.returncode}):\n{completed.stderr}"
        assert sorted(run.blocks) == sorted(blocks), completed.stdout
    return run


def store_files(store, suffix):
    found = []
    for dirpath, _, names in os.walk(store):
        found.extend(os.path.join(dirpath, n) for n in names if n.endswith(suffix))
    return sorted(found)


def entry_for(store, block):
    """The entry file of scale_kernel's specialisation with BLOCK=block."""
    for item in kernel_store.read(store):
        if isinstance(item, kernel_store.Entry) and item.signature.endswith(f"BLOCK={block}"):
            return item.path
    raise AssertionError(f"no entry for BLOCK={block} in {store}")


def test_warm_store_needs_no_python(probe, store):
    cold = run_probe(probe, store, [256, 512])
    assert cold.python and not cold.from_store(256) and not cold.from_store(512)
    assert cold.counters["writes"] == 3  # the signature and two entries
    warm = run_probe(probe, store, [256, 512])
    assert not warm.python, "a warm store must not load libpython"
    assert warm.from_store(256) and warm.from_store(512)
    assert warm.counters["signature_hits"] == 1 and warm.counters["hits"] == 2 and warm.counters["writes"] == 0
    assert warm.binary(256) == cold.binary(256) and warm.binary(512) == cold.binary(512)
    assert warm.binary(256) != warm.binary(512)
    # Only what is missing is compiled.
    mixed = run_probe(probe, store, [256, 1024])
    assert mixed.from_store(256) and not mixed.from_store(1024) and mixed.python


def test_entries_are_per_target(probe, store):
    sm90 = run_probe(probe, store, [256], target="cuda:90")
    sm80 = run_probe(probe, store, [256], target="cuda:80")
    assert not sm80.from_store(256) and sm80.binary(256) != sm90.binary(256)
    assert run_probe(probe, store, [256], target="cuda:80").from_store(256)
    assert run_probe(probe, store, [256], target="cuda:90").from_store(256)


def test_editing_the_kernel_recompiles(probe, store, kernels):
    path = kernels / "kernel.py"
    first = run_probe(probe, store, [256], kernel_file=path, pythonpath=str(kernels))
    path.write_text(KERNEL_SOURCE.replace("+ OFFSET", "- OFFSET"))
    edited = run_probe(probe, store, [256], kernel_file=path, pythonpath=str(kernels))
    assert not edited.from_store(256) and edited.python
    assert edited.counters["signature_hits"] == 0  # the signature was recorded for the old source too
    assert edited.binary(256) != first.binary(256)
    again = run_probe(probe, store, [256], kernel_file=path, pythonpath=str(kernels))
    assert again.from_store(256) and not again.python and again.binary(256) == edited.binary(256)
    assert len(store_files(store, ".tjk")) == 1  # replaced in place


@pytest.mark.parametrize("file, old, new", [
    ("probe_helpers.py", "x * scale", "x * scale * scale"),  # a @triton.jit helper in another file
    ("probe_consts.py", "1.5", "2.5"),                       # a global constant in another file
])
def test_editing_an_imported_file_recompiles(probe, store, kernels, file, old, new):
    kernel = kernels / "kernel.py"
    first = run_probe(probe, store, [256], kernel_file=kernel, pythonpath=str(kernels))
    assert run_probe(probe, store, [256], kernel_file=kernel, pythonpath=str(kernels)).from_store(256)
    (kernels / file).write_text((kernels / file).read_text().replace(old, new))
    edited = run_probe(probe, store, [256], kernel_file=kernel, pythonpath=str(kernels))
    assert not edited.from_store(256)
    assert edited.binary(256) != first.binary(256), "the edit changes the code, so the binary must differ"
    recorded = {s["path"] for s in kernel_store.read(store).__next__().header["kernel"]["sources"]}
    assert str(kernels / "probe_helpers.py") in recorded and str(kernels / "probe_consts.py") in recorded
    assert str(kernels / "unrelated.py") not in recorded


def test_editing_an_unrelated_file_keeps_entries(probe, store, kernels):
    kernel = kernels / "kernel.py"
    run_probe(probe, store, [256], kernel_file=kernel, pythonpath=str(kernels))
    (kernels / "unrelated.py").write_text("VALUE = 2\n")
    warm = run_probe(probe, store, [256], kernel_file=kernel, pythonpath=str(kernels))
    assert warm.from_store(256) and not warm.python


PACKAGE_KERNEL_SOURCE = textwrap.dedent("""\
    import triton
    import triton.language as tl
    from {dots}row_exchange import HELP_AFTER


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x * scale + HELP_AFTER, mask=mask)
    """)


@pytest.mark.parametrize("where", ["probe_kernel.py", "layer_norm/probe_kernel.py"])
def test_editing_row_exchange_recompiles_a_kernel_importing_it(probe, store, tmp_path, where):
    # A copy of tjit's kernels package with one more kernel importing row_exchange (relative import,
    # beside softmax.py or in the layer_norm/ subpackage): the C++ process loads it as a module of
    # the package, records row_exchange.py among its sources, and recompiles when it changes.
    kernels = tmp_path / "kernels_py"
    shutil.copytree(os.path.join(REPO, "ops", "kernels_py"), kernels, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = kernels / where
    kernel.write_text(PACKAGE_KERNEL_SOURCE.format(dots="." * (where.count("/") + 1)))
    first = run_probe(probe, store, [256], kernel_file=kernel)
    assert run_probe(probe, store, [256], kernel_file=kernel).from_store(256)
    recorded = {s["path"] for s in kernel_store.read(store).__next__().header["kernel"]["sources"]}
    assert str(kernels / "row_exchange.py") in recorded
    assert str(kernels / "softmax.py") not in recorded  # not imported by the kernel
    exchange = kernels / "row_exchange.py"
    exchange.write_text(exchange.read_text().replace("HELP_AFTER = tl.constexpr(4096)", "HELP_AFTER = tl.constexpr(1)"))
    edited = run_probe(probe, store, [256], kernel_file=kernel)
    assert not edited.from_store(256) and edited.python
    assert edited.binary(256) != first.binary(256), "the edit changes the code, so the binary must differ"


def fake_triton(tmp_path, version):
    folder = tmp_path / f"triton-{version}"
    folder.mkdir()
    (folder / "__init__.py").write_text(f"__version__ = '{version}'\n")
    return str(folder)


def test_another_triton_recompiles(probe, store, tmp_path):
    run_probe(probe, store, [256])
    upgraded = run_probe(probe, store, [256], env={"TJIT_TRITON_DIR": fake_triton(tmp_path, "9.9.9")})
    assert not upgraded.from_store(256) and upgraded.counters["stale"] == 1
    assert upgraded.counters["signature_hits"] == 0


def test_without_triton_installed_entries_are_used(probe, store, tmp_path):
    """A host deployed without Triton cannot compile: the store is all there is, whatever made it."""
    run_probe(probe, store, [256])
    deployed = run_probe(probe, store, [256], env={"TJIT_TRITON_DIR": str(tmp_path / "no-triton-here")})
    assert deployed.from_store(256) and not deployed.python


def test_code_generation_environment_is_part_of_the_key(probe, store, tmp_path):
    run_probe(probe, store, [256])
    no_fusion = run_probe(probe, store, [256], env={"TRITON_DEFAULT_FP_FUSION": "0"})
    assert not no_fusion.from_store(256) and no_fusion.counters["stale"] == 0  # another key, not a stale one
    assert run_probe(probe, store, [256], env={"TRITON_DEFAULT_FP_FUSION": "0"}).from_store(256)
    # Folders and logging do not change the code.
    other_cache = run_probe(probe, store, [256], env={"TRITON_CACHE_DIR": str(tmp_path / "triton-cache")})
    assert other_cache.from_store(256)


def reframe(path, change_header):
    """Rewrites an entry with a changed JSON header and a checksum that matches it."""
    with open(path, "rb") as f:
        data = f.read()
    header, binary = kernel_store.decode(data, kernel_store.ENTRY_MAGIC)
    new_header = change_header(header)
    contents = new_header + binary
    frame = kernel_store._FRAME.pack(kernel_store.ENTRY_MAGIC, kernel_store.FORMAT_VERSION, len(new_header),
                                     len(binary), hashlib.sha1(contents).hexdigest().encode())
    with open(path, "wb") as f:
        f.write(frame + contents)


def flip_byte(path):
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x5A
        f.seek(0)
        f.write(data)


DAMAGE = {
    "flipped byte": flip_byte,
    "truncated": lambda p: os.truncate(p, os.path.getsize(p) // 3),
    "empty": lambda p: os.truncate(p, 0),
    "garbage": lambda p: open(p, "wb").write(os.urandom(5000)),
    "metadata without launch fields": lambda p: reframe(
        p, lambda h: json.dumps({k: v for k, v in h.items() if k != "launch"}).encode()),
    "metadata not JSON": lambda p: reframe(p, lambda h: b"{not json"),
    "metadata of wrong types": lambda p: reframe(
        p, lambda h: json.dumps({**h, "launch": {**h["launch"], "num_warps": "four"}}).encode()),
    "another key's entry": lambda p: reframe(p, lambda h: json.dumps({**h, "key": h["key"] + "x"}).encode()),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_logged_recompiled_and_replaced(probe, store, damage):
    cold = run_probe(probe, store, [256, 512])
    path = entry_for(store, 256)
    DAMAGE[damage](path)
    run = run_probe(probe, store, [256, 512])
    assert not run.from_store(256) and run.from_store(512)
    assert run.binary(256) == cold.binary(256)
    assert run.counters["corrupt"] == 1
    assert run.warnings(f"ignoring damaged {path}") == 1, run.stderr
    kernel_store.decode(open(path, "rb").read(), kernel_store.ENTRY_MAGIC)  # intact again
    warm = run_probe(probe, store, [256, 512])
    assert warm.from_store(256) and warm.counters["corrupt"] == 0 and not warm.python


def test_damaged_signature_is_replaced(probe, store):
    run_probe(probe, store, [256])
    signature = store_files(store, "signature.tjs")[0]
    flip_byte(signature)
    run = run_probe(probe, store, [256])
    assert run.python and run.counters["signature_hits"] == 0 and run.counters["corrupt"] == 1
    assert run.from_store(256)  # the entry itself is intact
    assert run.warnings(f"ignoring damaged {signature}") == 1
    assert not run_probe(probe, store, [256]).python


def test_signature_from_before_autotune_is_replaced_quietly(probe, store):
    # A record an earlier tjit wrote has no "tuning" field: intact, but it cannot say whether the
    # kernel is autotuned. It is a miss (counted stale, no warning) and is rewritten with the field.
    run_probe(probe, store, [256])
    signature = store_files(store, "signature.tjs")[0]
    with open(signature, "rb") as f:
        header, _ = kernel_store.decode(f.read(), kernel_store.SIGNATURE_MAGIC)
    del header["tuning"]
    with open(signature, "wb") as f:
        f.write(kernel_store.encode(header, b"", kernel_store.SIGNATURE_MAGIC))
    run = run_probe(probe, store, [256])
    assert run.python and run.counters["signature_hits"] == 0 and run.counters["corrupt"] == 0
    assert run.counters["stale"] >= 1 and "damaged" not in run.stderr
    with open(signature, "rb") as f:
        assert kernel_store.decode(f.read(), kernel_store.SIGNATURE_MAGIC)[0]["tuning"] == ""
    assert not run_probe(probe, store, [256]).python


def test_deleted_kernel_file_is_a_clear_error(probe, store, tmp_path):
    kernel = tmp_path / "deleted.py"
    shutil.copy(TEST_KERNELS, kernel)
    run_probe(probe, store, [256], kernel_file=kernel)
    kernel.unlink()
    run = run_probe(probe, store, [256], kernel_file=kernel, check=False)
    assert run.returncode == 3, (run.returncode, run.stderr)  # an error, not a crash or a launch
    assert f"{kernel} does not exist" in run.stderr


def test_renamed_or_replaced_kernel_file_never_runs_old_binaries(probe, store, tmp_path):
    kernel = tmp_path / "kernel.py"
    shutil.copy(TEST_KERNELS, kernel)
    first = run_probe(probe, store, [256], kernel_file=kernel)
    renamed = tmp_path / "renamed.py"
    kernel.rename(renamed)
    moved = run_probe(probe, store, [256], kernel_file=renamed)
    assert not moved.from_store(256) and moved.binary(256) == first.binary(256)
    # Another file moved into the old path: same name and function, other code.
    kernel.write_text(open(TEST_KERNELS).read().replace("* scale, mask=mask)", "* scale * scale, mask=mask)"))
    replaced = run_probe(probe, store, [256], kernel_file=kernel)
    assert not replaced.from_store(256) and replaced.binary(256) != first.binary(256)


def test_concurrent_processes_compile_and_leave_a_consistent_store(probe, store):
    blocks = [64, 128, 256, 512, 1024, 2048]
    environment = {**os.environ, "TJIT_CACHE_DIR": store, "TJIT_LOG_COMPILES": "0"}
    processes = [subprocess.Popen([probe, TEST_KERNELS, "scale_kernel", TARGET] + [str(b) for b in blocks],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
                 for _ in range(4)]
    runs = []
    for p in processes:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        runs.append(Run(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    for block in blocks:
        assert len({run.binary(block) for run in runs}) == 1, f"processes disagree on BLOCK={block}"
    assert not store_files(store, ".tmp")
    items = list(kernel_store.read(store))
    assert all(isinstance(i, kernel_store.Entry) for i in items), items
    assert sorted(int(i.signature.rsplit("=", 1)[1]) for i in items) == blocks
    assert len(store_files(store, "signature.tjs")) == 1
    warm = run_probe(probe, store, blocks)
    assert all(warm.from_store(b) for b in blocks) and not warm.python
    assert [warm.binary(b) for b in blocks] == [runs[0].binary(b) for b in blocks]


def store_bytes(store):
    """What counts against the bound: every file of the kernel folders (not the prune lock)."""
    return sum(os.path.getsize(p) for p in store_files(store, "") if os.path.basename(p) != ".prune.lock")


def test_many_processes_write_and_prune_a_bounded_store(probe, store):
    """Four writers compiling the same six kernels with a bound of three entries, while two more
    processes prune the store to half of it: every writer gets the right binaries, nothing damaged
    or half-written is ever read or left, and the store ends under its bound."""
    blocks = [64, 128, 256, 512, 1024, 2048]
    first = run_probe(probe, store, [32])
    one_entry = os.path.getsize(entry_for(store, 32))
    bound = store_bytes(store) + 2 * one_entry
    environment = {**os.environ, "TJIT_CACHE_DIR": store, "TJIT_LOG_COMPILES": "0", "TJIT_CACHE_MAX_BYTES": str(bound)}
    writers = [subprocess.Popen([probe, TEST_KERNELS, "scale_kernel", TARGET] + [str(b) for b in blocks],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
               for _ in range(4)]
    prune = [sys.executable, "-m", "tjit", "cache", "prune", "--dir", store, "--max-bytes", str(bound // 2)]
    pruners = [subprocess.Popen(["bash", "-c", " ; ".join([" ".join(prune)] * 6)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    runs = []
    for p in writers:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        runs.append(Run(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    for p in pruners:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert out.count("removed ") == 6, out
    reference = run_probe(probe, None, blocks)  # no store: compiled from scratch
    for run in runs:
        assert [run.binary(b) for b in blocks] == [reference.binary(b) for b in blocks]
        assert run.counters["corrupt"] == 0, run.stderr
    assert not store_files(store, ".tmp")
    assert all(isinstance(i, kernel_store.Entry) for i in kernel_store.read(store)), list(kernel_store.read(store))
    # Each writer prunes after its own write; one that found another process pruning left its
    # last write for the next: at most one entry each over the bound.
    assert store_bytes(store) <= bound + len(writers) * 2 * one_entry
    result = kernel_store.prune(store, bound)
    assert result["bytes_left"] == store_bytes(store) <= bound, result
    kept = sorted(int(i.signature.rsplit("=", 1)[1]) for i in kernel_store.read(store))
    assert kept, "the bound left no entry at all"
    warm = run_probe(probe, store, kept, env={"TJIT_CACHE_MAX_BYTES": str(bound)})
    assert all(warm.from_store(b) for b in kept) and not warm.python
    assert [warm.binary(b) for b in kept] == [reference.binary(b) for b in kept]
    assert first.binary(32) == run_probe(probe, None, [32]).binary(32)


def test_cache_prune_and_info_from_the_command_line(probe, store):
    run_probe(probe, store, [64, 128, 256])
    entries = {b: entry_for(store, b) for b in (64, 128, 256)}
    for age, block in enumerate((128, 64, 256)):  # 128 least recently used, then 64
        os.utime(entries[block], (1_000_000_000 + age, 1_000_000_000 + age))
    tool = [sys.executable, "-m", "tjit", "cache"]
    env = {**os.environ, "TJIT_CACHE_MAX_BYTES": "3M"}
    info = json.loads(subprocess.run(tool + ["info", "--dir", store, "--json"], capture_output=True, text=True,
                                     env=env, check=True).stdout)
    assert info["max_bytes"] == 3 << 20 and info["entries"] == 3 and info["bytes"] == store_bytes(store)
    text = subprocess.run(tool + ["info", "--dir", store], capture_output=True, text=True, env=env, check=True).stdout
    assert "bound: 3.0 MiB (3145728 bytes)" in text, text
    # Under the bound: nothing goes.
    out = subprocess.run(tool + ["prune", "--dir", store], capture_output=True, text=True, env=env, check=True).stdout
    assert out.startswith("removed 0 files") and len(store_files(store, ".tjk")) == 3, out
    # One byte under the store's size: the least recently used entry goes, and only it.
    target = store_bytes(store) - 1
    result = json.loads(subprocess.run(tool + ["prune", "--dir", store, "--max-bytes", str(target), "--json"],
                                       capture_output=True, text=True, check=True).stdout)
    assert result["removed"] == [entries[128]], result
    assert result["bytes_left"] == store_bytes(store) <= target
    # A dead write's temporary file goes once it is an hour old; a fresh one (a write under way) stays.
    folder = os.path.dirname(entries[64])
    dead, live = os.path.join(folder, ".x.tjk.1.0.tmp"), os.path.join(folder, ".x.tjk.2.0.tmp")
    for path in (dead, live):
        with open(path, "wb") as f:
            f.write(b"partial")
    os.utime(dead, (1_000_000_000, 1_000_000_000))
    removed = kernel_store.prune(store, 1 << 40)["removed"]
    assert removed == [dead] and os.path.exists(live)
    bad = subprocess.run(tool + ["prune", "--dir", store, "--max-bytes", "lots"], capture_output=True, text=True)
    assert bad.returncode == 2 and "'lots' is not a size" in bad.stderr
    # A store whose lock file cannot be opened (read-only, or, as here for root too, a folder in
    # its place): a clear error, no traceback, nothing removed.
    lock = os.path.join(store, "v1", ".prune.lock")
    os.remove(lock)
    os.mkdir(lock)
    before = store_files(store, ".tjk")
    try:
        bad_lock = subprocess.run(tool + ["prune", "--dir", store, "--max-bytes", "0"], capture_output=True, text=True)
        assert bad_lock.returncode == 1 and "cannot prune the kernel store" in bad_lock.stderr, bad_lock.stderr
        assert "Traceback" not in bad_lock.stderr and store_files(store, ".tjk") == before
    finally:
        os.rmdir(lock)
    # --max-bytes 0: every entry goes, the signature stays; the next run compiles again.
    subprocess.run(tool + ["prune", "--dir", store, "--max-bytes", "0"], check=True, capture_output=True)
    assert not store_files(store, ".tjk") and len(store_files(store, "signature.tjs")) == 1
    again = run_probe(probe, store, [64])
    assert not again.from_store(64)


def test_bundle_built_with_decisions_from_a_store(tmp_path):
    """The heuristic values, the autotune choices and a caller's decision (store_decision: an
    operator's plan choice) a run leaves in its kernel store are what it records in its manifest;
    `aot build --decisions-from` ships them from the store alone."""
    from tjit import aot
    recorder = os.path.join(BUILD_DIR, "bin", "tjit_bundle_tests")
    kernels = os.path.join(REPO, "tests", "cpp", "kernels")
    manifest, store = str(tmp_path / "recorded.json"), str(tmp_path / "store")
    env = {**os.environ, "TJIT_RECORD": manifest, "TJIT_CACHE_DIR": store, "TJIT_LOG_COMPILES": "0",
           "TJIT_TEST_KERNELS": os.path.join(kernels, "runtime_test_kernels.py"),
           "TJIT_AUTOTUNE_KERNELS": os.path.join(kernels, "autotune_test_kernels.py")}
    env.pop("TJIT_CACHE", None)
    subprocess.run([recorder, "--record-manifest"], env=env, check=True, capture_output=True, timeout=600)
    recorded = {(d.function, d.kind, d.lookup_key): d.value for d in aot.read_decisions(manifest)}
    # descriptor_hook_matmul_kernel: its choice, and what its configs' pre_hook set on descriptors.
    assert sum(kind == "heuristics" for _, kind, _ in recorded) == 3 and \
        sum(kind == "autotune" for _, kind, _ in recorded) == 2 and \
        sum(kind == "descriptor_hook" for _, kind, _ in recorded) == 2, recorded
    caller, = [(key, value) for (_, kind, key), value in recorded.items() if kind == "caller"]
    assert caller[0].startswith("plan test_plan\n") and caller[1]["candidate"] == "wide", caller
    kernel_objects = [aot.kernels.load_kernel(os.path.join(kernels, "autotune_test_kernels.py"), f)
                      for f in ("row_sum_kernel", "scale_kernel", "descriptor_hook_matmul_kernel")]
    kernel_objects.append(aot.kernels.load_kernel(os.path.join(kernels, "runtime_test_kernels.py"), "scale_kernel"))
    from_store = {(d.function, d.kind, d.lookup_key): d.value for d in aot.store_decisions(store, kernel_objects)}
    assert from_store == recorded
    assert kernel_store.info(store)["decisions"] == 8
    # A manifest of the specialisations alone, and the decisions from the store.
    specs_only = str(tmp_path / "specs.json")
    with open(specs_only, "w") as f:
        f.write(aot.manifest_json(aot.read_manifest(manifest), str(tmp_path)))
    bundle = str(tmp_path / "b.tjb")
    stats = aot.build_bundle(specs_only, ["cuda:90"], bundle, jobs=1, decisions_from=[store])
    assert stats.decisions == 8
    shipped = {(k["function"], d["kind"], d["key"]): d["value"] for k in aot.read_bundle(bundle).kernels
               for d in k.get("decisions", [])}
    assert shipped == recorded
    # Decisions made from other sources (the kernel edited since) or by another Triton are stale.
    import dataclasses
    row_sum = kernel_objects[0]
    edited = dataclasses.replace(row_sum, sources=[(row_sum.sources[0][0], "0" * 40)] + row_sum.sources[1:])
    assert [d.function for d in aot.store_decisions(store, [edited, kernel_objects[1]])] == ["scale_kernel"] * 3
    upgraded = dataclasses.replace(row_sum, triton="9.9.9")
    assert aot.store_decisions(store, [upgraded]) == []


def test_unwritable_store_folder_warns_once(probe, tmp_path):
    (tmp_path / "a-file").write_text("a file, so no folder can be made below it")
    run = run_probe(probe, str(tmp_path / "a-file" / "store"), [256, 512])
    assert run.counters["write_failures"] == 3 and run.counters["writes"] == 0
    assert run.warnings("kernel store: cannot write") == 1, run.stderr
    assert "Not a directory" in run.stderr


def no_file_writes():
    """A full disk, as far as this process can tell: no file may grow (root is not exempt)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_full_disk_warns_once_and_leaves_nothing_behind(probe, store):
    run = run_probe(probe, store, [256, 512], preexec_fn=no_file_writes)
    assert run.counters["write_failures"] == 3
    assert run.warnings("kernel store: cannot write") == 1, run.stderr
    assert "File too large" in run.stderr
    assert not store_files(store, ".tjk") and not store_files(store, ".tmp") and not store_files(store, ".tjs")


def test_read_only_store_serves_lookups_without_warnings(probe, store):
    cold = run_probe(probe, store, [256, 512])
    run = run_probe(probe, store, [256, 512], preexec_fn=no_file_writes)
    assert run.from_store(256) and run.from_store(512) and not run.python
    assert run.counters["write_failures"] == 0 and "[tjit]" not in run.stderr
    assert run.binary(256) == cold.binary(256)


def test_store_off(probe, store):
    run = run_probe(probe, store, [256], env={"TJIT_CACHE": "0"})
    assert run.directory == "(off)" and not os.path.exists(store)
    assert run.counters == {k: 0 for k in run.counters}
    assert not run_probe(probe, store, [256], env={"TJIT_CACHE": "0"}).from_store(256)


def default_directory(env):
    """The store folder chosen by the runtime (probe) and by tjit.kernel_store, in one environment."""
    base = {k: v for k, v in os.environ.items() if k not in ("TJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME")}
    runtime = subprocess.run([PROBE, TEST_KERNELS, "scale_kernel", TARGET, "256"], capture_output=True, text=True,
                             env={**base, **env}, timeout=300)
    assert runtime.returncode == 0, runtime.stderr
    python = subprocess.run([sys.executable, "-c", "from tjit import kernel_store; print(kernel_store.directory())"],
                            capture_output=True, text=True, env={**base, **env}, timeout=300)
    assert python.returncode == 0, python.stderr
    return Run(runtime).directory, python.stdout.strip()


def test_default_directory(probe, tmp_path):
    xdg = str(tmp_path / "xdg")
    assert default_directory({"XDG_CACHE_HOME": xdg, "HOME": str(tmp_path)}) == (xdg + "/tjit",) * 2
    assert default_directory({"HOME": str(tmp_path)}) == (str(tmp_path / ".cache" / "tjit"),) * 2
    assert os.path.isdir(os.path.join(xdg, "tjit", "v1"))
    explicit = str(tmp_path / "explicit")
    assert default_directory({"TJIT_CACHE_DIR": explicit, "HOME": str(tmp_path)}) == (explicit,) * 2


def cache_cli(*args, store):
    completed = subprocess.run([sys.executable, "-m", "tjit", "cache", *args], capture_output=True, text=True,
                               env={**os.environ, "TJIT_CACHE_DIR": store}, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_cache_command(probe, store, tmp_path):
    other = tmp_path / "other.py"
    shutil.copy(TEST_KERNELS, other)
    run_probe(probe, store, [256, 512])
    run_probe(probe, store, [128], kernel_file=other)
    run_probe(probe, store, [64], target="cuda:80")
    summary = json.loads(cache_cli("info", "--json", store=store))
    assert summary["directory"] == store and summary["entries"] == 4 and summary["kernels"] == 2
    assert summary["signatures"] == 2 and summary["damaged"] == 0
    assert summary["bytes"] == sum(os.path.getsize(p) for p in store_files(store, ""))
    assert f"4 entries of 2 kernels" in cache_cli("info", store=store)

    listing = json.loads(cache_cli("list", "--json", store=store))
    assert sorted(e["signature"].rsplit("=", 1)[1] for e in listing) == ["128", "256", "512", "64"]
    sm80 = [e for e in listing if e["target"] == "cuda:80:32"]
    assert len(sm80) == 1 and sm80[0]["signature"].startswith("x_ptr: *fp32:16, out_ptr: *fp32:16, n: i32:16")
    assert all(e["triton"] == __import__("importlib").metadata.version("triton") for e in listing)
    assert all(e["launch"]["symbol"] == "scale_kernel" and e["launch"]["num_warps"] == 4 for e in listing)
    text = cache_cli("list", store=store)
    assert "scale_kernel(x_ptr: *fp32:16" in text and "target cuda:80:32" in text and "num_warps=4" in text

    # A decision record (an autotune choice, as the runtime writes one) is counted, not listed as an
    # entry, and reported when damaged.
    kernel_dir = os.path.dirname(entry_for(store, 512))
    decision = os.path.join(kernel_dir, "decision-0123.tjd")
    with open(decision, "wb") as f:
        f.write(kernel_store.encode({"key": "tjit autotune choice v1\n", "value": {"config": 1}}, b"",
                                    kernel_store.DECISION_MAGIC))
    summary = json.loads(cache_cli("info", "--json", store=store))
    assert summary["decisions"] == 1 and summary["damaged"] == 0 and summary["entries"] == 4
    flip_byte(decision)
    assert json.loads(cache_cli("info", "--json", store=store))["damaged"] == 1
    os.remove(decision)

    flip_byte(entry_for(store, 512))
    assert json.loads(cache_cli("info", "--json", store=store))["damaged"] == 1
    assert "DAMAGED" in cache_cli("list", store=store)

    removed = cache_cli("clear", "--kernel", str(other), store=store)
    assert "removed 2 files" in removed  # its entry and its signature record
    left = json.loads(cache_cli("list", "--json", store=store))
    assert len(left) == 3 and all(e.get("file") != str(other) for e in left)  # 256, 64, damaged 512
    cache_cli("clear", "--kernel", "scale_kernel", store=store)
    assert json.loads(cache_cli("info", "--json", store=store))["entries"] == 0
    run_probe(probe, store, [256])
    (tmp_path / "store" / "keep-me.txt").write_text("not tjit's")
    cache_cli("clear", store=store)
    assert json.loads(cache_cli("info", "--json", store=store))["bytes"] == 0
    assert (tmp_path / "store" / "keep-me.txt").exists(), "clear removes tjit's files only"


OPS_SCRIPT = textwrap.dedent("""\
    import sys, time, torch
    import tjit
    torch.manual_seed(0)
    x = torch.randn(33, 1000, device="cuda", requires_grad=True)
    y = torch.randn(33, 1000, device="cuda")
    w = torch.randn(1000, device="cuda", requires_grad=True)
    b = torch.randn(1000, device="cuda", requires_grad=True)
    torch.cuda.synchronize()
    results = {
        "add": (torch.ops.tjit.add(x, y, alpha=2), torch.add(x, y, alpha=2)),
        "sum": (torch.ops.tjit.sum(x, [1]), torch.sum(x, [1])),
        "softmax": (torch.ops.tjit.softmax(x, 1), torch.softmax(x, 1)),
        "layer_norm": (torch.ops.tjit.layer_norm(x, [1000], w, b), torch.nn.functional.layer_norm(x, [1000], w, b)),
    }
    for name, (got, want) in results.items():
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=name)
        got.sum().backward()
    torch.cuda.synchronize()
    print("triton imported:", "triton" in sys.modules)
    """)


@requires_cuda
def test_warm_store_python_operators_import_no_triton(tmp_path):
    environment = {**os.environ, "TJIT_CACHE_DIR": str(tmp_path / "store"), "TJIT_LOG_COMPILES": "0"}
    cold = subprocess.run([sys.executable, "-c", OPS_SCRIPT], capture_output=True, text=True, env=environment,
                          timeout=600)
    assert cold.returncode == 0, cold.stderr
    assert "triton imported: True" in cold.stdout  # the cold process compiled
    warm = subprocess.run([sys.executable, "-c", OPS_SCRIPT], capture_output=True, text=True, env=environment,
                          timeout=600)
    assert warm.returncode == 0, warm.stderr
    assert "triton imported: False" in warm.stdout, "with a warm store no operator call may import triton"
