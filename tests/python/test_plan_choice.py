"""Plans as measured choices (tjit/kit/plan_choice.h), with rms_norm's forward as the plan: every
candidate computes the right result wherever it fits; a card's table is read by its nearest measured
neighbour among fitting candidates; the default rule serves where no table does; on a GPU without a
table the first call tunes, and a second process reads the stored choice; the tuning command writes
a table the runtime reads."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tjit
import tjit.plans as plans
from tjit import _C, tune

PLAN = "rms_norm_forward"
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="first-call tuning times kernels on a CUDA device")
# A card no real one is: its table is only ever read through these facts.
CARD = {"name": "test card", "capability": 75, "multiprocessors": 7, "memory_gbps": 700}
FACTS = plans.device_facts(is_cuda=True, multiprocessors=7, memory_gbps=700, capability=75)


def reference(x, w, r, eps):
    v = (x.double() + r.double()) if r is not None else x.double()
    y = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    return y.to(x.dtype), (v.to(x.dtype) if r is not None else None)


@pytest.fixture
def forced(forced_plan):
    return lambda name: forced_plan(PLAN, name)


def test_the_candidates_are_listed():
    names = _C.plan_candidates(PLAN)
    assert len(names) == len(set(names)) >= 10
    assert PLAN in _C.plans_with_candidates()
    with pytest.raises(RuntimeError, match="no candidate 'nope'"):
        _C.force_plan_candidate(PLAN, "nope")


# Widths that give every candidate a size it fits: short rows, one block, whole and partial steps,
# past the one-pass limit (fp32 and bf16; fp64 halves the limits).
@pytest.mark.parametrize("cols", [100, 1000, 4096, 4097, 6000, 20480])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("residual", [False, True])
def test_every_fitting_candidate_is_right(cols, dtype, residual, forced):
    rows = 3
    fitting = plans.plan(PLAN, rows=rows, cols=cols, dtype=dtype, device="cpu", has_residual=int(residual))["fitting"]
    assert fitting
    x = torch.randn(rows, cols, dtype=dtype)
    w = torch.randn(cols, dtype=dtype)
    r = torch.randn_like(x) if residual else None
    # fp64 rows are computed in fp64: a form that reduces in fp32 is off by ~1e-7.
    tolerance = {torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float32: dict(rtol=1e-5, atol=1e-5),
                 torch.float64: dict(rtol=1e-10, atol=1e-10)}[dtype]
    expected, expected_sum = reference(x, w, r, 1e-6)
    for name in fitting:
        forced(name)
        if residual:
            got, got_sum = torch.ops.tjit.add_rms_norm(x, r, [cols], w, 1e-6)
            torch.testing.assert_close(got_sum, expected_sum, **tolerance, msg=name)
        else:
            got = torch.ops.tjit.rms_norm(x, [cols], w, 1e-6)
        torch.testing.assert_close(got, expected, **tolerance, msg=name)


def test_a_forced_candidate_that_does_not_fit_is_refused(forced):
    forced("short_rows")
    with pytest.raises(RuntimeError, match="forced candidate 'short_rows' does not fit"):
        torch.ops.tjit.rms_norm(torch.randn(2, 5000), [5000], None, 1e-6)


def test_fits_rules():
    def fitting(cols, dtype=torch.float32):
        return plans.plan(PLAN, rows=4, cols=cols, dtype=dtype, device="cpu")["fitting"]

    assert "short_rows" in fitting(1024) and "short_rows" not in fitting(1025)
    assert "row_w32" in fitting(32768) and not any(n.startswith("row") for n in fitting(32769))
    assert not any(n.startswith("row") for n in fitting(16385, torch.float64))  # fp64 holds half
    assert "keep2048_w8" not in fitting(40000)  # 20 steps: more than a compile-time count unrolls
    assert "loop2048_w8" in fitting(40000)
    assert not any(n.startswith(("loop4096", "keep4096")) for n in fitting(4096))  # one step: not a loop


def test_default_rule_without_a_table():
    for cols, expected in [(512, "short_rows"), (2048, "row_w4"), (4096, "row_w8"), (8192, "row_w16"),
                           (16384, "row_w32"), (40000, "loop4096_w16")]:
        p = plans.plan(PLAN, rows=100, cols=cols, dtype=torch.bfloat16, device=FACTS)
        assert (p["candidate"], p["source"]) == (expected, "default"), cols


def _table(entries):
    return {"format": tune.FORMAT, "card": CARD, "plans": {PLAN: {"bfloat16": {"0": entries}}}}


_DESCRIBE = textwrap.dedent("""\
    import json, sys, torch, tjit.plans as plans
    facts = json.loads(sys.argv[1])
    out = []
    for rows, cols, dtype, residual in json.loads(sys.argv[2]):
        p = plans.plan("rms_norm_forward", rows=rows, cols=cols, dtype=getattr(torch, dtype), device=facts,
                       has_residual=residual)
        out.append([p["candidate"], p["source"]])
    print(json.dumps(out))
    """)


def _describe(tables, facts, queries):
    env = dict(os.environ, TJIT_PLAN_TABLES=str(tables))
    proc = subprocess.run([sys.executable, "-c", _DESCRIBE, json.dumps(facts), json.dumps(queries)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [tuple(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])]


def test_a_table_is_read_by_nearest_measured_neighbour(tmp_path):
    table = tmp_path / "card.json"
    table.write_text(json.dumps(_table([[1, 4096, "row_w4"], [1, 8192, "keep4096_w8"],
                                        [4096, 4096, "keep2048_w16"], [4096, 8192, "row_w16"]])))
    got = _describe(table, FACTS, [
        [1, 4096, "bfloat16", 0],      # measured
        [2, 5000, "bfloat16", 0],      # row class 2: nearest is 1; columns nearest 4096
        [1, 7000, "bfloat16", 0],      # nearest 8192 (keep4096_w8 fits 7000: two steps)
        [1, 4200, "bfloat16", 0],      # nearest 4096's row_w4 fits (one block of 8192 columns)
        [3000, 8000, "bfloat16", 0],   # class 4096
        [1, 4096, "float32", 0],       # the table has no float32: default
        [1, 4096, "bfloat16", 1],      # nor add_rms_norm's switch
    ])
    assert got == [("row_w4", "table"), ("row_w4", "table"), ("keep4096_w8", "table"), ("row_w4", "table"),
                   ("row_w16", "table"), ("row_w8", "default"), ("row_w8", "default")]
    # The nearest entry's candidate does not fit (one step of 4096 is no loop): the next nearest's does.
    table.write_text(json.dumps(_table([[1, 5000, "keep4096_w8"], [1, 2048, "row_w4"]])))
    assert _describe(table, FACTS, [[1, 4096, "bfloat16", 0]]) == [("row_w4", "table")]


def test_a_table_serves_only_its_card(tmp_path):
    table = tmp_path / "card.json"
    table.write_text(json.dumps(_table([[1, 4096, "row_w4"]])))
    near = dict(FACTS, memory_gbps=760)   # within 10% of its bandwidth
    far = dict(FACTS, memory_gbps=800)
    other = dict(FACTS, multiprocessors=8)
    got = _describe(table, near, [[1, 4096, "bfloat16", 0]]) + _describe(table, far, [[1, 4096, "bfloat16", 0]]) + \
        _describe(table, other, [[1, 4096, "bfloat16", 0]])
    assert got == [("row_w4", "table"), ("row_w8", "default"), ("row_w8", "default")]
    # A folder of tables, and tables hidden altogether.
    assert _describe(tmp_path, FACTS, [[1, 4096, "bfloat16", 0]]) == [("row_w4", "table")]
    assert _describe("0", FACTS, [[1, 4096, "bfloat16", 0]]) == [("row_w8", "default")]


def test_a_damaged_table_is_an_error_that_names_it(tmp_path):
    table = tmp_path / "card.json"
    table.write_text(json.dumps({"format": "something else", "card": CARD, "plans": {}}))
    env = dict(os.environ, TJIT_PLAN_TABLES=str(table))
    proc = subprocess.run([sys.executable, "-c", _DESCRIBE, json.dumps(FACTS), "[[1, 4096, \"bfloat16\", 0]]"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and str(table) in proc.stderr and "tjit plan table 1" in proc.stderr


def test_tune_merge_and_write_round_trip(tmp_path):
    a = _table([[1, 4096, "row_w4"], [1, 8192, "row_w16"]])
    b = _table([[1, 8192, "keep4096_w8"], [8, 8192, "row_w8"]])
    a["generated_by"], b["generated_by"] = "python -m tjit tune --cols 4096", "python -m tjit tune --cols 8192"
    merged = tune.merge([a, b, b])
    # Every command that measured a part of it, once.
    assert merged["generated_by"] == "python -m tjit tune --cols 4096 ; python -m tjit tune --cols 8192"
    assert merged["plans"][PLAN]["bfloat16"]["0"] == [[1, 4096, "row_w4"], [1, 8192, "keep4096_w8"],
                                                       [8, 8192, "row_w8"]]
    path = tmp_path / "t.json"
    tune.write(merged, path)
    assert json.loads(path.read_text())["plans"] == merged["plans"]
    # The runtime reads what the command writes.
    assert _describe(path, FACTS, [[8, 8000, "bfloat16", 0]]) == [("row_w8", "table")]
    with pytest.raises(ValueError, match="different cards"):
        tune.merge([a, dict(b, card=dict(CARD, multiprocessors=9))])


def test_the_timings_go_beside_the_table_and_the_runtime_reads_the_choices_only(tmp_path):
    table = _table([[1, 4096, "row_w4"], [1, 8192, "row_w16"]])
    table["generated_by"] = "python -m tjit tune --cols 4096,8192"
    table["measurements"] = {PLAN: {"bfloat16": {"0": [[1, 4096, {"row_w4": 1.5, "row_w8": 1.7}],
                                                         [1, 8192, {"row_w8": 2.9, "row_w16": 2.5}]]}}}
    path = tmp_path / "card.json"
    tune.write(table, path)
    sidecar = tmp_path / "card.measurements.json"
    assert tune.measurements_path(path) == str(sidecar)
    assert "measurements" not in json.loads(path.read_text())
    assert json.loads(sidecar.read_text())["measurements"] == table["measurements"]
    # --merge carries the timings on; a table without its file reads as one without timings.
    assert tune.read(path) == table
    assert tune.merge([tune.read(path)])["measurements"] == table["measurements"]
    alone = tmp_path / "alone.json"
    alone.write_text(path.read_text())
    assert tune.read(alone)["measurements"] == {}
    # A folder holding both: the runtime reads the table and passes over its timings (a timings
    # file is no table: read as one, it would be an error).
    assert _describe(tmp_path, FACTS, [[1, 8192, "bfloat16", 0]]) == [("row_w16", "table")]
    # Named alone, the timings file is refused with the reason.
    env = dict(os.environ, TJIT_PLAN_TABLES=str(sidecar))
    proc = subprocess.run([sys.executable, "-c", _DESCRIBE, json.dumps(FACTS), "[[1, 4096, \"bfloat16\", 0]]"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and str(sidecar) in proc.stderr and "name the table" in proc.stderr
    # Timings of another card beside a table are an error that names both files.
    sidecar.write_text(sidecar.read_text().replace('"multiprocessors": 7', '"multiprocessors": 8'))
    with pytest.raises(ValueError, match="is not the measurements of"):
        tune.read(path)


def test_a_table_names_the_command_that_measures_it_again():
    # What was measured, not where it was written nor the time budget of that run.
    args = tune.build_parser("python -m tjit tune").parse_args(
        ["-o", "/tmp/x.json", "--budget-s", "300", "--plans", PLAN, "--dtypes", "bfloat16", "--rows", "1,16",
         "--cols", "512,4097"])
    assert tune.generated_by("python -m tjit tune", args) == (
        f"python -m tjit tune --plans {PLAN} --dtypes bfloat16 --rows 1,16 --cols 512,4097")


def test_tune_needs_a_gpu_on_the_cpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU message")
    proc = subprocess.run([sys.executable, "-m", "tjit", "tune", "-o", str(tmp_path / "t.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "no CUDA device" in proc.stderr


_FIRST_CALL = textwrap.dedent("""\
    import sys, torch, tjit
    x = torch.randn(37, 5000, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(5000, device="cuda", dtype=torch.bfloat16)
    y = torch.ops.tjit.rms_norm(x, [5000], w, 1e-6)
    ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).to(x.dtype)
    torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
    print("ok")
    """)


@CUDA
def test_first_call_tunes_without_a_table_and_a_second_process_reads_it(tmp_path):
    env = dict(os.environ, TJIT_PLAN_TABLES="0", TJIT_CACHE_DIR=str(tmp_path / "store"), TJIT_LOG_COMPILES="1")
    first = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "tuned plan rms_norm_forward for bfloat16, 37 rows (class 64) of 5000 columns" in first.stderr
    second = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "tuned plan" not in second.stderr and "compiled norm_fwd_kernel" not in second.stderr
    # TJIT_TUNE=0: the default rule, nothing timed.
    env_off = dict(env, TJIT_TUNE="0", TJIT_CACHE_DIR=str(tmp_path / "other"))
    third = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env_off, capture_output=True, text=True,
                           timeout=600)
    assert third.returncode == 0 and "tuned plan" not in third.stderr, third.stderr


_DESCRIBED = textwrap.dedent("""\
    import json, torch, tjit
    x = torch.randn(37, 5000, device="cuda", dtype=torch.bfloat16)
    torch.ops.tjit.rms_norm(x, [5000], None, 1e-6)
    torch.cuda.synchronize()
    print(json.dumps(tjit.plans.plan("rms_norm_forward", rows=37, cols=5000, dtype=torch.bfloat16,
                                     device=x.device, has_weight=0)))
    """)


@CUDA
def test_a_description_names_the_choice_the_first_call_tuned(tmp_path):
    # tjit.plans.plan for the device a call ran on shows that call's tuned choice (then the store's),
    # not the default rule's; made-up facts of the same card still show the rule.
    env = dict(os.environ, TJIT_PLAN_TABLES="0", TJIT_CACHE_DIR=str(tmp_path / "store"), TJIT_LOG_COMPILES="1")
    for expected_source in ("tuned", "stored"):
        proc = subprocess.run([sys.executable, "-c", _DESCRIBED], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        described = json.loads(proc.stdout.strip().splitlines()[-1])
        assert described["source"] == expected_source, described
        if expected_source == "tuned":
            [line] = [l for l in proc.stderr.splitlines() if "tuned plan rms_norm_forward" in l]
            best = line.split("; best ", 1)[1].split()[0]
            assert described["candidate"] == best, (described, line)
    made_up = plans.plan("rms_norm_forward", rows=37, cols=5000, dtype=torch.bfloat16,
                         device=plans.device_facts(is_cuda=True, multiprocessors=132, memory_gbps=4800, capability=0),
                         has_weight=0)
    assert made_up["source"] == "default", made_up


@CUDA
def test_inside_a_graph_capture_the_default_rule_runs_then_a_later_call_tunes(tmp_path):
    script = textwrap.dedent("""\
        import sys, torch, tjit
        x = torch.randn(5, 3000, device="cuda")
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            y = torch.ops.tjit.rms_norm(x, [3000], None, 1e-6)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        print("captured", file=sys.stderr, flush=True)
        torch.testing.assert_close(torch.ops.tjit.rms_norm(x, [3000], None, 1e-6), y)
        """)
    env = dict(os.environ, TJIT_PLAN_TABLES="0", TJIT_CACHE_DIR=str(tmp_path / "store"), TJIT_LOG_COMPILES="1")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    during, _, after = proc.stderr.partition("captured")
    assert "tuned plan" not in during and after.count("tuned plan rms_norm_forward") == 1, proc.stderr


@CUDA
def test_prepare_tunes_ahead_by_running_the_candidates(tmp_path):
    # tjit.prepare holds the call's launches back, but not a candidate's timing: a time of launches
    # held back would be an empty pair of events (a few us), and the choice noise, kept in the store.
    script = textwrap.dedent("""\
        import torch, tjit
        x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
        tjit.prepare(torch.ops.tjit.rms_norm, x, [8192], w, 1e-6)
        torch.cuda.synchronize()
        """)
    env = dict(os.environ, TJIT_PLAN_TABLES="0", TJIT_CACHE_DIR=str(tmp_path / "store"), TJIT_LOG_COMPILES="1")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    tuned = [line for line in proc.stderr.splitlines() if "tuned plan rms_norm_forward" in line]
    assert len(tuned) == 1, proc.stderr
    # 256 MiB read and 256 MiB written: more than 50 us on any card (8 TB/s: 67 us).
    best_ms = float(tuned[0].rsplit(" at ", 1)[1].split()[0])
    assert best_ms > 0.05, tuned[0]


@CUDA
def test_the_embedded_table_serves_this_card_or_says_it_has_none():
    text, origin = _C.plan_table(f"cuda:{torch.cuda.current_device()}")
    if text:
        table = json.loads(text)
        facts = plans.device_facts(torch.device("cuda"))
        assert table["card"]["capability"] == facts["capability"]
        assert table["card"]["multiprocessors"] == facts["multiprocessors"]
        p = plans.plan(PLAN, rows=4096, cols=4096, dtype=torch.bfloat16, device="cuda")
        assert p["source"] == "table"
    else:
        assert origin == ""


def _table_point_inputs(plan, flags, rows, cols):
    """The describer's inputs at a table point (tune.TunedPlan: add's points are one row of numel)."""
    if plan == "add":
        return {"numel": cols, "same_shape_contiguous": int(flags == 0)}
    return dict(rows=rows, cols=cols, **({"has_residual": flags & 1} if plan == "rms_norm_forward" else {}))


def _committed_tables():
    import glob
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "ops", "plan_tables")
    return sorted(p for p in glob.glob(os.path.join(folder, "*.json")) if not p.endswith(tune.MEASUREMENTS_SUFFIX))


def test_the_committed_tables_choose_what_their_timings_show():
    # Each entry is a measured point, and its candidate was at most the tuner's noise margin slower
    # than the fastest there (the default rule's candidate is kept within that margin): a table
    # edited by hand, or merged from timings it does not hold, fails here.
    for path in _committed_tables():
        table = tune.read(path)
        for plan, by_dtype in table["plans"].items():
            for dtype, by_flags in by_dtype.items():
                for flags, entries in by_flags.items():
                    measured = {(r, c): times for r, c, times in table["measurements"][plan][dtype][flags]}
                    assert len(measured) == len(entries), (path, plan, dtype, flags)
                    for rows, cols, name in entries:
                        times = measured[(rows, cols)]
                        # Times are stored in us to 3 decimals: a tie may round either way.
                        assert times[name] <= min(times.values()) * (1 + tune.NOISE) + 1e-3, \
                            (path, plan, dtype, flags, rows, cols, name, times)


def test_the_committed_tables_name_candidates_that_fit():
    # A table entry names a candidate of its plan that fits its point: a renamed or re-ruled form
    # leaves no entry the runtime would pass over in silence.
    tables = _committed_tables()
    assert tables
    for path in tables:
        table = json.load(open(path))
        card = table["card"]
        facts = plans.device_facts(is_cuda=True, multiprocessors=card["multiprocessors"],
                                   memory_gbps=card["memory_gbps"], capability=card["capability"])
        for plan, by_dtype in table["plans"].items():
            names = _C.plan_candidates(plan)
            for dtype, by_flags in by_dtype.items():
                for flags, entries in by_flags.items():
                    for rows, cols, name in entries:
                        assert name in names, (path, plan, dtype, rows, cols, name)
                        fitting = plans.plan(plan, dtype=getattr(torch, dtype), device=facts,
                                             **_table_point_inputs(plan, int(flags), rows, cols)).get("fitting", [])
                        assert name in fitting, (path, plan, dtype, rows, cols, name, fitting)
