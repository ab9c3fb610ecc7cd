"""Shared fixtures: every operator test runs on each device present (CPU through Triton's
interpreter always; CUDA where there is a GPU), and through each entry point of the operators.

`ops` is the namespace a test calls the operators through, `ops.add(x, y, alpha=2)`: the module
`tjit` (its functions call C++ directly) and `torch.ops.tjit` (the registered ops, through the
dispatcher's boxed path). Both must behave the same, so every operator test runs once per entry
point; ENTRY_POINTS maps the ids to the namespaces for tests that loop without the fixture.
Tests of the registered op itself (opcheck, schemas) keep `torch.ops.tjit.<name>.default`."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import pytest
import torch

# A kernel store of the session's own, so tests neither read nor fill the user's ~/.cache/tjit
# (set before tjit runs a kernel: the runtime reads it on first use).
SESSION_STORE = tempfile.mkdtemp(prefix="tjit-test-store-")
os.environ["TJIT_CACHE_DIR"] = SESSION_STORE

import tjit  # noqa: E402  (registers torch.ops.tjit)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pytest_addoption(parser):
    parser.addoption("--tjit-sample", type=int, default=1, metavar="K",
                     help="run about one in K of each test function's parametrized cases (its first always, the "
                     "rest chosen by a hash of the test id, the same in every run): the wheel's and the other "
                     "Triton releases' runs in CI check every test function without repeating every case")


def pytest_collection_modifyitems(config, items):
    k = config.getoption("--tjit-sample")
    if k <= 1:
        return
    seen, keep, drop = set(), [], []
    for item in items:
        function = item.nodeid.split("[", 1)[0]
        first = function not in seen
        seen.add(function)
        (keep if first or zlib.crc32(item.nodeid.encode()) % k == 0 else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    return f"tjit test devices: {', '.join(DEVICES)} (torch {torch.__version__}); kernel store {SESSION_STORE}"


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_STORE, ignore_errors=True)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


ENTRY_POINTS = {"tjit": tjit, "torch.ops": torch.ops.tjit}


@pytest.fixture(params=list(ENTRY_POINTS))
def ops(request):
    return ENTRY_POINTS[request.param]


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason="needs a CUDA GPU; runs on the CUDA machine (run.sh test there)")


@pytest.fixture
def forced_plan():
    """force(plan, name): every call of `plan` takes its candidate `name` (plan_choice.h) until the
    test ends."""
    from tjit import _C
    forced = []

    def force(plan, name):
        forced.append(plan)
        _C.force_plan_candidate(plan, name)

    yield force
    for plan in forced:
        _C.force_plan_candidate(plan, None)


def poison_allocator(numel, dtype, device):
    """Fills memory the allocator will hand out next with NaN/garbage, so an output element the
    kernel forgets to write shows up instead of reading as a plausible zero."""
    if numel == 0:
        return
    if dtype.is_floating_point:
        fill = float("nan")
    elif dtype == torch.bool:
        fill = True
    else:
        fill = torch.iinfo(dtype).min + 17  # unlikely as a result; fits every integer dtype
    block = torch.full((numel, ), fill, dtype=dtype, device=device)
    del block


def random_tensor(shape, dtype, device):
    """Fresh random values (never zeros); integers in [-1000, 1000)."""
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device)
    return torch.randint(-1000, 1000, shape, dtype=dtype, device=device)


def kernels_helping_at_once(name):
    """A private copy of the kernel module ops/kernels_py/<name> ("softmax", "layer_norm.forward")
    with HELP_AFTER = 1: a program of a shared row whose first poll misses a chunk reads that chunk
    itself at once (row_exchange's help path), so the path runs on every row, racing the chunks' own
    programs. Kernels compile separately from the operators' (their own package, module and
    constant)."""
    import importlib
    import importlib.util

    import triton.language as tl
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "ops", "kernels_py")
    package = "kernels_helping_at_once"
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(package, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        sys.modules[package] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[package])
    module = importlib.import_module(f"{package}.{name}")
    module.HELP_AFTER = tl.constexpr(1)
    return module


def run_script_under_interpreter(path, timeout, hang_message):
    """Runs the test file `path` as a script with TRITON_INTERPRET=1, from the repository root, and
    returns the JSON its last printed line holds. Programs that share rows run one after another
    there, so a run past `timeout` seconds means one waited forever: it fails with `hang_message`."""
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
    env = dict(os.environ, TRITON_INTERPRET="1")
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(path)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=root)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(hang_message) from exc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
