"""TJIT_RECORD: the manifest a process writes of the specialisations it launches (CPU launches,
through Triton's interpreter, specialise as CUDA launches do). Each case runs fresh processes."""

import json
import os
import subprocess
import sys

import pytest

import tjit

# One process: tjit.add on CPU tensors of the given dtypes (each dtype one specialisation of
# add_kernel), twice each (the second launch must not add an entry).
_LAUNCH = """
import sys, torch, tjit
for name in sys.argv[1:]:
    dtype = getattr(torch, name)
    x = torch.randn(37).to(dtype)
    for _ in range(2):
        assert torch.equal(tjit.add(x, x), x + x)
"""


def _record(manifest, *dtypes, check=True):
    env = dict(os.environ, TJIT_RECORD=str(manifest), TJIT_LOG_COMPILES="0", TJIT_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", _LAUNCH, *dtypes], env=env, capture_output=True, text=True,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _entries(manifest):
    with open(manifest) as f:
        data = json.load(f)
    assert data["tjit_manifest"] == 1
    return data["entries"]


def _add_entries(entries):
    return [e for e in entries if e["function"] == "add_kernel"]


def test_records_each_specialisation_once(tmp_path):
    manifest = tmp_path / "m.json"
    _record(manifest, "float32", "bfloat16")
    adds = _add_entries(_entries(manifest))
    assert [e["args"]["x_ptr"] for e in adds] == ["*fp32:16", "*bf16:16"]
    kernel_file = os.path.join(tjit.KERNEL_DIR, "add.py")
    for e in adds:
        assert e["file"] == kernel_file  # outside the manifest's folder: absolute
        assert e["args"]["n_elements"] == "i32"  # 37: neither 1 nor a multiple of 16
        assert e["args"]["BLOCK"] == 1024 and e["args"]["HAS_ALPHA"] is False
        assert e["options"] == {"num_warps": 4, "num_stages": 3}
    # One entry per line: manifests diff and merge line by line.
    lines = manifest.read_text().splitlines()
    assert lines[0] == '{"tjit_manifest": 1, "entries": [' and lines[-1] == "]}"
    assert len(lines) == len(_entries(manifest)) + 2


def test_later_processes_merge(tmp_path):
    manifest = tmp_path / "m.json"
    _record(manifest, "float32")
    first = _entries(manifest)
    _record(manifest, "float32", "float16")  # one known, one new
    merged = _entries(manifest)
    assert merged[:len(first)] == first
    assert [e["args"]["x_ptr"] for e in _add_entries(merged)] == ["*fp32:16", "*fp16:16"]


def test_concurrent_processes_lose_nothing(tmp_path):
    manifest = tmp_path / "m.json"
    env = dict(os.environ, TJIT_RECORD=str(manifest), TJIT_LOG_COMPILES="0", TJIT_CACHE="0")
    dtypes = ["float32", "float16", "bfloat16", "float64"]
    procs = [subprocess.Popen([sys.executable, "-c", _LAUNCH, d], env=env, stderr=subprocess.PIPE, text=True)
             for d in dtypes]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    assert sorted(e["args"]["x_ptr"] for e in _add_entries(_entries(manifest))) == sorted(
        ["*fp32:16", "*fp16:16", "*bf16:16", "*fp64:16"])


def test_paths_inside_the_manifest_folder_are_relative(tmp_path):
    # A manifest beside the kernels (as ops/kernels_py/operators.manifest.json is) names them by file.
    if not os.access(tjit.KERNEL_DIR, os.W_OK):
        pytest.skip("the kernel folder is read-only here")
    manifest = os.path.join(tjit.KERNEL_DIR, f"test-{os.getpid()}.manifest.json")
    try:
        _record(manifest, "float32")
        assert {e["file"] for e in _add_entries(_entries(manifest))} == {"add.py"}
    finally:
        os.remove(manifest)


def test_a_file_that_is_not_a_manifest_is_left_alone(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text('{"something": "else"}\n')
    proc = _record(manifest, "float32")
    assert "not recording a manifest" in proc.stderr and "not a version 1 tjit manifest" in proc.stderr
    assert manifest.read_text() == '{"something": "else"}\n'
