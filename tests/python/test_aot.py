"""The ahead-of-time bundle builder (the ops/aot package): manifests, merging, building bundles for GPU
targets without a GPU, reading them back, and damaged bundles.

Needs neither a GPU nor tjit's C++ library: the package is loaded by path, as CMake runs it. Where tjit
is not built, run this file alone with `pytest --noconftest tests/python/test_aot.py` (conftest.py
imports tjit)."""

import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS = os.path.join(REPO, "ops")
AOT = os.path.join(OPS, "aot")  # a package that Python also runs as a folder
ADD = os.path.join(OPS, "kernels_py", "add.py")
TEST_KERNELS = os.path.join(REPO, "tests", "cpp", "kernels", "runtime_test_kernels.py")


def _load_aot():
    spec = importlib.util.spec_from_file_location("tjit_aot_under_test", os.path.join(AOT, "__init__.py"),
                                                  submodule_search_locations=[AOT])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


aot = _load_aot()
DamagedFile = aot.kernel_store.DamagedFile

ADD_FP32 = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16", "n_elements": "i32",
            "alpha": "fp32", "alpha_lo": "fp64", "HAS_ALPHA": False, "BLOCK": 1024, "INDEX_64": False}
ADD_BF16 = dict(ADD_FP32, x_ptr="*bf16:16", y_ptr="*bf16:16", out_ptr="*bf16", HAS_ALPHA=True)
EVERYTHING = {"ptr": "*fp32:16", "ptr_dnsoa": "*fp32", "const_ptr": "*kfp32:16", "n": "i32:16", "n_dns": "i32",
              "n_dnsoa": 1, "n_i64": "i64", "f": "fp32", "f64": "fp64", "flag": "u1", "maybe_ptr": None,
              "C_INT": 7, "C_BOOL": True, "C_FLOAT": 0.5, "C_NONE": None}
ACTIVATION = {"x_ptr": "*fp32:16", "out_ptr": "*bf16:16", "n": "i32", "ACTIVATION": "leaky_relu",
              "OUT_DTYPE": {"dtype": "bf16"}, "BLOCK": 256}


def test_the_operators_manifest_matches_todays_kernels():
    # ops/kernels_py/operators.manifest.json is what a TJIT_EMBED_KERNELS build bundles: every entry
    # must still name each parameter of its kernel (a constexpr added to a kernel leaves older entries
    # unbuildable) and each kernel file must still define its function.
    path = os.path.join(OPS, "kernels_py", "operators.manifest.json")
    specs = aot.read_manifest(path)
    with open(path) as f:
        functions = {(e["file"], e["function"]) for e in json.load(f)["entries"]}
    assert len(specs) > 0
    assert {"add_kernel", "sum_partial_kernel", "softmax_fwd_kernel", "layer_norm_fwd_kernel", "norm_fwd_kernel"} <= \
        {function for _, function in functions}


def _entry(file, function, args, options=None):
    entry = {"file": file, "function": function, "args": args}
    if options is not None:
        entry["options"] = options
    return entry


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data, indent=1))
    return str(path)


def _manifest(path, entries):
    return _write(path, {"tjit_manifest": 1, "entries": entries})


def _env(cache_dir):
    """A child environment: no PYTHONPATH, Triton's cache in cache_dir (so it really compiles)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRITON_CACHE_DIR"] = str(cache_dir)
    return env


def _script(args, cwd, env, extra_flags=()):
    return subprocess.run([sys.executable, *extra_flags, AOT, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


# --------------------------------------------------------------------------------------------
# Bundle keys (byte for byte the C++ runtime's bundle_key)

CUDA_90 = {"backend": "cuda", "arch": 90, "warp_size": 32}


def test_bundle_key():
    key = aot.bundle_key("add_kernel", "add.py", ["*fp32", "*fp32", "*fp32", "i32", "constexpr"], [[4, 1024]],
                         [0, 1, 2], dict(aot.OPTION_DEFAULTS), CUDA_90)
    assert key == "add_kernel\nadd.py\n*fp32,*fp32,*fp32,i32,constexpr,\n4=int:1024,\n0,1,2,\n4,3,1,1,0,0,\ncuda:90:32"
    # Every kind of constexpr value (bool before int), constexprs by index (10 after 9: numbers, not text),
    # divisible parameters sorted, every option, a (backend, arch, warp size) target.
    key = aot.bundle_key("k", "k.py", ["*kfp32"] + ["constexpr"] * 10,
                         [(10, -7), (1, 0.5), (2, True), (3, False), (4, None), (5, -1.5), (6, 0.0), (7, -0.0),
                          (8, 1), (9, 1.0)],
                         [3, 0, 12], {"num_warps": 8, "num_stages": 2, "num_ctas": 2, "enable_fp_fusion": False,
                                      "launch_cooperative_grid": True, "launch_pdl": True}, ("cuda", 80, 64))
    assert key.split("\n") == [
        "k", "k.py", "*kfp32," + "constexpr," * 10,
        "1=float:4602678819172646912,2=bool:1,3=bool:0,4=none,5=float:13832806255468478464,6=float:0,"
        "7=float:9223372036854775808,8=int:1,9=float:4607182418800017408,10=int:-7,",
        "0,3,12,", "8,2,2,0,1,1,", "cuda:80:64"]
    assert struct.unpack("<Q", struct.pack("<d", -1.5))[0] == 13832806255468478464
    assert aot.bundle_key("k", "k.py", [], [], [], dict(aot.OPTION_DEFAULTS), CUDA_90) == \
        "k\nk.py\n\n\n\n4,3,1,1,0,0,\ncuda:90:32"
    # maxnreg (a config's register limit) only when set, as the C++ runtime's bundle_key writes it.
    assert aot.bundle_key("k", "k.py", [], [], [], dict(aot.OPTION_DEFAULTS, maxnreg=128), CUDA_90) == \
        "k\nk.py\n\n\n\n4,3,1,1,0,0,maxnreg=128,\ncuda:90:32"
    assert aot.bundle_key("k", "k.py", [], [], [], dict(aot.OPTION_DEFAULTS, maxnreg=0), CUDA_90) == \
        "k\nk.py\n\n\n\n4,3,1,1,0,0,\ncuda:90:32"
    # Strings by their UTF-8 length (a string may hold the key's separators), dtypes by tl.dtype's name.
    key = aot.bundle_key("k", "k.py", ["constexpr"] * 4, [(0, "leaky_relu"), (1, {"dtype": "bf16"}), (2, ""),
                                                          (3, "é,\n3=int:1")], [], dict(aot.OPTION_DEFAULTS), CUDA_90)
    assert key.split("\n")[3] == "0=str:10:leaky_relu,1=dtype:bf16,2=str:0:,3=str:11:é,"
    assert key.split("\n")[4] == "3=int:1,"  # the string's own newline: the length tells it apart
    for constexprs, options, message in (([(0, {"dtype": "float"})], {}, "is not null, a boolean, an integer"),
                                         ([(0, [1])], {}, "is not null, a boolean, an integer, a float, a string"),
                                         ([("0", 1)], {}, "a constexpr's index"),
                                         ([(0, 1, 2)], {}, "not an (index, value) pair"),
                                         ([], {"num_warps": 4.0}, "option num_warps"),
                                         ([], {"num_warps": True}, "option num_warps"),
                                         ([], {"launch_pdl": 0}, "option launch_pdl"),
                                         ([], {"num_ctas": None}, "option num_ctas")):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            aot.bundle_key("k", "k.py", ["constexpr"], constexprs, [], dict(aot.OPTION_DEFAULTS, **options), CUDA_90)


# --------------------------------------------------------------------------------------------
# Manifests

def test_parse_target():
    assert aot.parse_target("cuda:90") == ("cuda", 90, 32)
    assert aot.parse_target("cuda:80:64") == ("cuda", 80, 64)
    for bad, message in (("hip:90", "only the cuda backend"), ("cuda", "BACKEND:ARCH"), ("cuda:x", "BACKEND:ARCH"),
                         ("cuda:90:32:1", "BACKEND:ARCH"), ("cuda:0", "positive")):
        with pytest.raises(ValueError, match=message):
            aot.parse_target(bad)


def test_manifest_values_paths_and_defaults(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(ADD, kernels / "add.py")
    path = _manifest(tmp_path / "sub" / "m.json", [
        _entry("../kernels/add.py", "add_kernel", ADD_FP32),  # relative to the manifest's folder
        _entry(TEST_KERNELS, "everything_kernel", EVERYTHING, {"num_warps": 2, "launch_pdl": True}),
        # the same entry again, arguments in another order and a default option spelled out: dropped
        _entry(str(kernels / "add.py"), "add_kernel", dict(reversed(list(ADD_FP32.items()))), {"num_stages": 3}),
        # 1, 1.0 and true are different constexprs
        _entry(TEST_KERNELS, "everything_kernel", dict(EVERYTHING, C_FLOAT=1)),
        _entry(TEST_KERNELS, "everything_kernel", dict(EVERYTHING, C_FLOAT=1.0)),
        _entry(TEST_KERNELS, "everything_kernel", dict(EVERYTHING, C_FLOAT=True)),
    ])
    specs = aot.read_manifest(path)
    assert len(specs) == 5
    add, everything = specs[0], specs[1]
    assert add.file == os.path.realpath(kernels / "add.py") and add.function == "add_kernel"
    assert add.types == ("*fp32", "*fp32", "*fp32", "i32", "fp32", "fp64", "constexpr", "constexpr", "constexpr")
    assert add.constexprs == ((6, False), (7, 1024), (8, False))
    assert [type(v) for _, v in add.constexprs] == [bool, int, bool]
    assert add.divisible == (0, 1, 2)
    assert dict(add.options) == {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "enable_fp_fusion": True,
                                 "launch_cooperative_grid": False, "launch_pdl": False}
    assert everything.file == TEST_KERNELS
    assert everything.types == ("*fp32", "*fp32", "*kfp32", "i32", "i32", "constexpr", "i64", "fp32", "fp64", "u1",
                                "constexpr", "constexpr", "constexpr", "constexpr", "constexpr")
    assert everything.constexprs == ((5, 1), (10, None), (11, 7), (12, True), (13, 0.5), (14, None))
    assert [type(v) for _, v in everything.constexprs] == [int, type(None), int, bool, float, type(None)]
    assert everything.divisible == (0, 2, 3)
    assert dict(everything.options) == dict(aot.OPTION_DEFAULTS, num_warps=2, launch_pdl=True)
    assert [type(dict(s.constexprs)[13]) for s in specs[2:]] == [int, float, bool]
    assert everything.describe().startswith("everything_kernel(ptr: *fp32:16, ptr_dnsoa: *fp32, const_ptr: *kfp32:16")
    assert everything.describe().endswith("C_INT=7, C_BOOL=True, C_FLOAT=0.5, C_NONE=None)")


def test_manifest_maxnreg_only_when_set(tmp_path):
    # A config's register limit (triton.Config(maxnreg=...)) is an option of its own; 0 is "none",
    # so an entry with maxnreg 0 is the entry without it.
    path = _manifest(tmp_path / "m.json", [_entry(ADD, "add_kernel", ADD_FP32, {"maxnreg": 128}),
                                           _entry(ADD, "add_kernel", ADD_FP32, {"maxnreg": 0}),
                                           _entry(ADD, "add_kernel", ADD_FP32)])
    specs = aot.read_manifest(path)
    assert len(specs) == 2
    assert dict(specs[0].options) == dict(aot.OPTION_DEFAULTS, maxnreg=128)
    assert dict(specs[1].options) == aot.OPTION_DEFAULTS
    assert aot.options_text(dict(specs[0].options)).endswith(" launch_pdl=0 maxnreg=128")


def _error_cases():
    ok = _entry(ADD, "add_kernel", ADD_FP32)
    entry = lambda **changes: dict(ok, **changes)  # noqa: E731
    args = lambda **changes: entry(args=dict(ADD_FP32, **changes))  # noqa: E731
    every = lambda **changes: _entry(TEST_KERNELS, "everything_kernel", dict(EVERYTHING, **changes))  # noqa: E731
    activation = lambda **changes: _entry(TEST_KERNELS, "activation_kernel", dict(ACTIVATION, **changes))  # noqa: E731
    top = "top"  # errors about the whole manifest: no entry named
    return [
        ("unknown top-level key", {"tjit_manifest": 1, "entries": [], "extra": 1}, top, "unknown key 'extra'"),
        ("no version", {"entries": []}, top, "\"tjit_manifest\" must be 1"),
        ("version 2", {"tjit_manifest": 2, "entries": []}, top, "\"tjit_manifest\" must be 1"),
        ("entries not a list", {"tjit_manifest": 1, "entries": {}}, top, "\"entries\" must be a list"),
        ("not JSON", "{\"tjit_manifest\": 1,", top, "not valid JSON"),
        ("duplicate key", "{\"tjit_manifest\": 1, \"entries\": [], \"entries\": []}", top, "duplicate key 'entries'"),
        ("NaN", "{\"tjit_manifest\": 1, \"entries\": [%s]}" % json.dumps(args(BLOCK=float("nan"))), top,
         "NaN is not JSON"),
        ("unknown entry key", [entry(grid=[1])], 0, "unknown key 'grid'"),
        ("missing args", [{"file": ADD, "function": "add_kernel"}], 0, "missing args"),
        ("file not a string", [entry(file=3)], 0, "file must be a non-empty string"),
        ("no such file", [entry(file="nowhere/add.py")], 0, "nowhere/add.py does not exist"),
        ("no such function", [entry(function="mul_kernel")], 0, "defines no function named 'mul_kernel'"),
        ("unknown option", [entry(options={"num_warp": 4})], 0, "unknown option 'num_warp'"),
        ("option type", [entry(options={"num_warps": "4"})], 0, "option num_warps must be an integer"),
        ("option bool", [entry(options={"launch_pdl": 1})], 0, "option launch_pdl must be true or false"),
        ("num_warps 3", [entry(options={"num_warps": 3})], 0, "power of two"),
        ("maxnreg 300", [entry(options={"maxnreg": 300})], 0, "option maxnreg must be in [0, 255]"),
        ("maxnreg bool", [entry(options={"maxnreg": True})], 0, "option maxnreg must be an integer"),
        ("missing parameter", [entry(args={k: v for k, v in ADD_FP32.items() if k != "alpha"})], 0,
         "missing alpha"),
        ("extra parameter", [args(beta="fp32")], 0, "unknown beta"),
        ("bad type", [args(x_ptr="*fp33")], 0, "x_ptr: '*fp33' is not a Triton type"),
        ("uncanonical type", [args(alpha="float32")], 0, "alpha: 'float32' is not a Triton type"),
        ("unknown dtype", [activation(OUT_DTYPE={"dtype": "float"})], 0, "OUT_DTYPE: \"float\" is not a Triton dtype"),
        ("dtype object with more", [activation(OUT_DTYPE={"dtype": "bf16", "x": 1})], 0,
         "neither a type string nor a constexpr value"),
        ("dtype for a runtime parameter", [activation(n={"dtype": "bf16"})], 0, "n is a runtime parameter"),
        ("float divisible", [args(alpha="fp32:16")], 0, "only pointers and integers"),
        ("value for a runtime parameter", [args(n_elements=4096)], 0, "n_elements is a runtime parameter"),
        ("list value", [args(BLOCK=[1024])], 0, "BLOCK: a tuple (a JSON array) is for a runtime parameter"),
        ("object value", [args(BLOCK={"x": 1})], 0, "neither a type string nor a constexpr value"),
        ("huge int", [args(BLOCK=2**64)], 0, "does not fit in 64 bits"),
        ("const pointer", [every(const_ptr="*fp32")], 0, "const_ptr is a tl.const parameter: its pointer type is "
         "'*kfp32'"),
        ("non-const pointer", [every(ptr="*kfp32")], 0, "ptr is not a tl.const parameter"),
        ("annotation", [every(n_i64="i32")], 0, "n_i64 is annotated i64"),
        ("do_not_specialize divisible", [every(n_dns="i32:16")], 0, "n_dns is do_not_specialize"),
        ("do_not_specialize one", [every(n_dns=1)], 0, "which do_not_specialize turns off"),
        ("second entry", [ok, entry(options=[])], 1, "options must be a JSON object"),
    ]


@pytest.mark.parametrize("data, entry, message", [case[1:] for case in _error_cases()],
                         ids=[case[0] for case in _error_cases()])
def test_manifest_errors(tmp_path, data, entry, message):
    if isinstance(data, list):
        data = {"tjit_manifest": 1, "entries": data}
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(aot.ManifestError) as error:
        aot.read_manifest(path)
    text = str(error.value)
    assert text.startswith(path + ": "), text
    assert message in text, text
    if entry != "top":
        function = data["entries"][entry]["function"] if isinstance(data, dict) else "add_kernel"
        assert f": entry {entry} ({function}): " in text, text


def test_merge(tmp_path):
    shutil.copy(ADD, tmp_path / "add.py")
    a = _manifest(tmp_path / "a" / "m.json", [_entry("../add.py", "add_kernel", ADD_FP32),
                                              _entry(TEST_KERNELS, "everything_kernel", EVERYTHING)])
    b = _manifest(tmp_path / "b" / "deeper" / "m.json", [
        _entry(TEST_KERNELS, "everything_kernel", EVERYTHING, {"num_warps": 4}),  # the same as a's second
        _entry("../../add.py", "add_kernel", ADD_BF16),
        _entry("../../add.py", "add_kernel", ADD_FP32),  # the same as a's first
    ])
    out = str(tmp_path / "out" / "merged.json")
    result = aot.merge_manifests([a, b], out)
    assert result["entries"] == 3
    with open(out) as f:
        merged = json.load(f)
    assert set(merged) == {"tjit_manifest", "entries"} and merged["tjit_manifest"] == 1
    assert [(e["file"], e["function"], e["args"]) for e in merged["entries"]] == [
        ("../add.py", "add_kernel", ADD_FP32),
        (os.path.relpath(TEST_KERNELS, tmp_path / "out"), "everything_kernel", EVERYTHING),
        ("../add.py", "add_kernel", ADD_BF16)]
    assert all(e["options"] == aot.OPTION_DEFAULTS for e in merged["entries"])
    # The merged manifest means the same entries (merging it again changes nothing).
    keys = [s.key for s in aot.read_manifests([a, b])]
    assert [s.key for s in aot.read_manifest(out)] == keys
    again = str(tmp_path / "again.json")
    aot.merge_manifests([out, a], again)
    assert [s.key for s in aot.read_manifest(again)] == keys
    # The command line (script form), run from elsewhere.
    cli = str(tmp_path / "b" / "cli.json")
    run = _script(["merge", a, b, "-o", cli], tmp_path / "a", _env(tmp_path / "unused"))
    assert run.returncode == 0 and run.stderr == f"tjit aot: 3 entries from 2 manifests: {cli}\n", run.stderr
    assert [s.key for s in aot.read_manifest(cli)] == keys
    run = _script(["merge", a, str(tmp_path / "missing.json"), "-o", str(tmp_path / "no.json")], tmp_path,
                  _env(tmp_path / "unused"))
    assert run.returncode == 1 and "missing.json: cannot read the manifest" in run.stderr
    assert not (tmp_path / "no.json").exists()


# --------------------------------------------------------------------------------------------
# Decisions: what @triton.heuristics and @triton.autotune decided, carried by manifests

DECORATED = os.path.join(REPO, "tests", "cpp", "kernels", "autotune_test_kernels.py")
CHOICE_128 = "BLOCK: 128, num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None"


def _heuristics(values=None, arguments=None, config=-1, function="row_sum_kernel"):
    return {"file": DECORATED, "function": function,
            "heuristics": {"config": config, "arguments": arguments or {"x": "Float", "out": "Float", "n_cols": "101"},
                           "values": {"BLOCK": 128} if values is None else values}}


def _autotune(config=CHOICE_128, target="cuda:90", key="n=1000, dtypes: Float Float"):
    return {"file": DECORATED, "function": "scale_kernel", "autotune": {"target": target, "key": key,
                                                                         "config": config}}


def test_decisions_in_manifests(tmp_path):
    a = _manifest(tmp_path / "a.json", [_heuristics(), _autotune(),
                                        _entry(DECORATED, "row_sum_kernel", {"x": "*fp32:16", "out": "*fp32:16",
                                                                             "n_cols": "i32", "BLOCK": 128})])
    b = _manifest(tmp_path / "b.json", [_heuristics(), _heuristics({"BLOCK": 64}, {"x": "Float", "out": "Float",
                                                                                    "n_cols": "33"})])
    assert len(aot.read_manifest(a)) == 1  # specialisations only
    decisions = aot.read_decisions([a, b])
    assert [(d.kind, d.lookup_key, d.value) for d in decisions] == [
        ("heuristics", "config -1\narguments x=Float, out=Float, n_cols=101", {"BLOCK": 128}),
        ("autotune", "target cuda:90:32\nkey n=1000, dtypes: Float Float", CHOICE_128),
        ("heuristics", "config -1\narguments x=Float, out=Float, n_cols=33", {"BLOCK": 64})]
    merged = str(tmp_path / "merged.json")
    assert aot.merge_manifests([a, b], merged)["decisions"] == 3
    assert [d.key for d in aot.read_decisions(merged)] == [d.key for d in decisions]
    # Two manifests that disagree on one decision: which one is right is not the builder's to guess.
    c = _manifest(tmp_path / "c.json", [_heuristics({"BLOCK": 256})])
    with pytest.raises(aot.ManifestError, match="says"):
        aot.read_decisions([a, c])


@pytest.mark.parametrize("entry, message", [
    (_heuristics({"BLOCK": 128, "EXTRA": 1}), "must give every parameter the heuristics set (BLOCK)"),
    (_heuristics({}), "must give every parameter the heuristics set (BLOCK)"),
    (_heuristics({"BLOCK": [1]}), "value of BLOCK must be a number"),
    (_heuristics(config=-2), "config must be -1 or a config's index"),
    (_heuristics(arguments={"n_cols": 101}), "arguments must be an object"),
    (dict(_heuristics(), function="ticket_kernel"), "ticket_kernel has no @triton.heuristics"),
    (dict(_autotune(), function="row_sum_kernel"), "row_sum_kernel has no @triton.autotune"),
    (_autotune(target="gpu"), "autotune target"),
    (_autotune(config=""), "autotune config must be a non-empty string"),
    ({"file": DECORATED, "function": "row_sum_kernel", "heuristics": {"config": -1}}, "heuristics has config, "
     "arguments, values"),
    (dict(_heuristics(), args={}), "a heuristics entry has file, function and heuristics only"),
])
def test_decision_errors(tmp_path, entry, message):
    path = _manifest(tmp_path / "bad.json", [entry])
    with pytest.raises(aot.ManifestError) as error:
        aot.read_decisions(path)
    assert message in str(error.value) and ": entry 0 (" in str(error.value), str(error.value)


def test_decisions_go_into_the_bundle(tmp_path):
    spec = _entry(DECORATED, "row_sum_kernel", {"x": "*fp32:16", "out": "*fp32:16", "n_cols": "i32", "BLOCK": 128})
    manifest = _manifest(tmp_path / "m.json", [spec, _heuristics(), _autotune()])
    out = str(tmp_path / "b.tjb")
    stats = aot.build_bundle(manifest, ["cuda:90"], out, jobs=1)
    assert stats.decisions == 2 and stats.entries == 1
    kernels = {k["function"]: k for k in aot.read_bundle(out).kernels}
    assert kernels["row_sum_kernel"]["decisions"] == [
        {"kind": "heuristics", "key": "config -1\narguments x=Float, out=Float, n_cols=101", "value": {"BLOCK": 128}}]
    # A kernel with decisions only (no specialisation) is in the index, for its decisions.
    assert kernels["scale_kernel"]["decisions"] == [
        {"kind": "autotune", "key": "target cuda:90:32\nkey n=1000, dtypes: Float Float", "value": CHOICE_128}]
    listing = subprocess.run([sys.executable, AOT, "list", out], capture_output=True, text=True, check=True).stdout
    assert "row_sum_kernel heuristics: config -1; arguments x=Float, out=Float, n_cols=101 -> {\"BLOCK\":128}" in listing


CALLER_WHAT = "plan rms_norm_forward\ncandidates row_w4 row_w8 \ncall bfloat16 rows_class 16 cols 4096 flags 0\n"


def _caller(what=CALLER_WHAT, value=None, function="row_sum_kernel"):
    return {"file": DECORATED, "function": function,
            "caller": {"what": what, "value": {"candidate": "row_w8"} if value is None else value}}


def test_caller_decisions_go_into_the_bundle(tmp_path):
    # A caller's decision (an operator's plan choice) is keyed by its text alone and carried as stated.
    manifest = _manifest(tmp_path / "m.json", [_caller(), _caller(what=CALLER_WHAT.replace("16", "256"))])
    decisions = aot.read_decisions(manifest)
    assert [(d.kind, d.lookup_key, d.value) for d in decisions] == [
        ("caller", CALLER_WHAT, {"candidate": "row_w8"}),
        ("caller", CALLER_WHAT.replace("16", "256"), {"candidate": "row_w8"})]
    out = str(tmp_path / "b.tjb")
    assert aot.build_bundle(manifest, ["cuda:90"], out, jobs=1).decisions == 2
    kernel, = aot.read_bundle(out).kernels
    assert {"kind": "caller", "key": CALLER_WHAT, "value": {"candidate": "row_w8"}} in kernel["decisions"]
    other = _manifest(tmp_path / "o.json", [_caller(value={"candidate": "row_w4"})])
    with pytest.raises(aot.ManifestError, match="says"):
        aot.read_decisions([manifest, other])


@pytest.mark.parametrize("entry, message", [
    (_caller(what=""), "caller what must be the non-empty text"),
    (_caller(value="row_w8"), "caller value must be a JSON object"),
    ({"file": DECORATED, "function": "row_sum_kernel", "caller": {"what": CALLER_WHAT}}, "caller has what and value"),
])
def test_caller_decision_errors(tmp_path, entry, message):
    path = _manifest(tmp_path / "bad.json", [entry])
    with pytest.raises(aot.ManifestError) as error:
        aot.read_decisions(path)
    assert message in str(error.value), str(error.value)


def _descriptor_hook(config=1, values=None, constexprs=None, descriptors=("a_desc", "b_desc", "c_desc")):
    return {"file": DECORATED, "function": "descriptor_hook_matmul_kernel",
            "descriptor_hook": {"config": config, "constexprs": {"SPLIT_STORE": "False"} if constexprs is None
                                else constexprs, "descriptors": list(descriptors),
                                "values": {"a_desc": {"block_shape": [32, 32]}, "c_desc": {"block_shape": [32, 16],
                                                                                        "padding": "zero"}}
                                if values is None else values}}


def test_descriptor_hook_decisions_go_into_a_version_2_bundle(tmp_path):
    manifest = _manifest(tmp_path / "m.json", [_descriptor_hook()])
    decision, = aot.read_decisions(manifest)
    assert decision.lookup_key == "config 1\nconstexprs SPLIT_STORE=False\ndescriptors a_desc b_desc c_desc"
    out = str(tmp_path / "b.tjb")
    assert aot.build_bundle(manifest, ["cuda:90"], out, jobs=1).decisions == 1
    bundle = aot.read_bundle(out)
    kernel, = bundle.kernels
    assert kernel["decisions"] == [{"kind": "descriptor_hook", "key": decision.lookup_key,
                                    "value": _descriptor_hook()["descriptor_hook"]["values"]}]
    # Index version 2 only where such a decision is: a runtime that cannot apply them refuses it.
    with open(out, "rb") as f:
        data = f.read()
    assert b'"version":2' in data
    plain = _manifest(tmp_path / "plain.json", [_autotune()])
    aot.build_bundle(plain, ["cuda:90"], str(tmp_path / "plain.tjb"), jobs=1)
    with open(tmp_path / "plain.tjb", "rb") as f:
        assert b'"version":1' in f.read()


@pytest.mark.parametrize("entry, message", [
    (_descriptor_hook(config=2), "must be the index of a config of descriptor_hook_matmul_kernel that has a pre_hook"),
    (dict(_descriptor_hook(), function="scale_kernel"), "that has a pre_hook"),
    (_descriptor_hook(values={"a_desc": {"shape": [1, 1]}}), "their block_shape and/or padding"),
    (_descriptor_hook(values={"M": {"block_shape": [16, 16]}}), "named in descriptors"),
    (_descriptor_hook(values={"a_desc": {"block_shape": [16, 24]}}), "a list of powers of two"),
    (_descriptor_hook(values={"a_desc": {"padding": "one"}}), "must be \"zero\" or \"nan\""),
    (_descriptor_hook(constexprs={"NOPE": "1"}), "constexprs must be an object"),
])
def test_descriptor_hook_decision_errors(tmp_path, entry, message):
    path = _manifest(tmp_path / "bad.json", [entry])
    with pytest.raises(aot.ManifestError) as error:
        aot.read_decisions(path)
    assert message in str(error.value), str(error.value)


# --------------------------------------------------------------------------------------------
# Building

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A bundle of add_kernel fp32 and bf16 and everything_kernel (float and None constexprs) for
    cuda:80 and cuda:90, built through the API with 2 worker processes and a fresh Triton cache."""
    folder = tmp_path_factory.mktemp("built")
    # Not in the bundle's order (kernels by name, then specialisation, then target), which the
    # bundle must not depend on.
    manifest = _manifest(folder / "m.json", [_entry(TEST_KERNELS, "everything_kernel", EVERYTHING,
                                                    {"num_warps": 2, "num_stages": 2}),
                                             _entry(ADD, "add_kernel", ADD_BF16, {"num_warps": 8}),
                                             _entry(ADD, "add_kernel", ADD_FP32)])
    output, depfile = str(folder / "out" / "kernels.tjb"), str(folder / "kernels.tjb.d")
    lines = []
    saved = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton-cache")  # the workers compile for real
    try:
        stats = aot.build_bundle([manifest], ["cuda:90", "cuda:80:32"], output, jobs=2, depfile=depfile,
                                 log=lines.append)
    finally:
        if saved is None:
            del os.environ["TRITON_CACHE_DIR"]
        else:
            os.environ["TRITON_CACHE_DIR"] = saved
    return {"folder": folder, "manifest": manifest, "output": output, "depfile": depfile, "stats": stats,
            "log": lines}


def test_build_string_and_dtype_constexprs(tmp_path):
    """A string and a dtype constexpr in a manifest: compiled (in this process), keyed, listed and
    read back as the C++ runtime writes them (its bundle tests look these entries up)."""
    manifest = _manifest(tmp_path / "m.json", [_entry(TEST_KERNELS, "activation_kernel", ACTIVATION),
                                               _entry(TEST_KERNELS, "activation_kernel",
                                                      dict(ACTIVATION, ACTIVATION="relu",
                                                           OUT_DTYPE={"dtype": "fp8e4nv"}))])
    specs = aot.read_manifest(manifest)
    assert [s.constexprs for s in specs] == [((3, "leaky_relu"), (4, {"dtype": "bf16"}), (5, 256)),
                                             ((3, "relu"), (4, {"dtype": "fp8e4nv"}), (5, 256))]
    output = str(tmp_path / "act.tjb")
    stats = aot.build_bundle([manifest], ["cuda:90"], output, jobs=1)
    assert (stats.entries, stats.specializations) == (2, 2)
    bundle = aot.read_bundle(output)
    assert [e.signature for e in bundle.entries] == [
        "x_ptr: *fp32:16, out_ptr: *bf16:16, n: i32, ACTIVATION='leaky_relu', OUT_DTYPE=tl.bfloat16, BLOCK=256",
        "x_ptr: *fp32:16, out_ptr: *bf16:16, n: i32, ACTIVATION='relu', OUT_DTYPE=tl.float8e4nv, BLOCK=256"]
    assert bundle.entries[0].key.split("\n")[3] == "3=str:10:leaky_relu,4=dtype:bf16,5=int:256,"
    assert bundle.entries[0].binary != bundle.entries[1].binary


def test_build_tuple_arguments(tmp_path):
    """Tuple parameters in a manifest (JSON arrays, nested; types, null and 1 as elements): parsed
    into Triton's tuple types and element paths, compiled, keyed and listed as the runtime does."""
    entry = _entry(TEST_KERNELS, "tuple_kernel", {"pair": ["*fp32:16", "*fp32:16"], "scales": ["fp32", ["i32:16", 1]],
                                                  "n": "i32", "BLOCK": 256})
    manifest = _manifest(tmp_path / "m.json", [entry])
    spec, = aot.read_manifest(manifest)
    assert spec.types == ("[*fp32,*fp32]", "[fp32,[i32,constexpr]]", "i32", "constexpr")
    assert spec.tuple_constexprs == (((1, 1, 1), 1), ) and spec.tuple_divisible == ((0, 0), (0, 1), (1, 1, 0))
    output = str(tmp_path / "t.tjb")
    aot.build_bundle([manifest], ["cuda:90"], output, jobs=1)
    e, = aot.read_bundle(output).entries
    assert e.signature == "pair: (*fp32:16, *fp32:16), scales: (fp32, (i32:16, 1)), n: i32, BLOCK=256"
    assert e.key.split("\n")[2:5] == ["[*fp32,*fp32],[fp32,[i32,constexpr]],i32,constexpr,",
                                       "3=int:256,1.1.1=int:1,", "0.0,0.1,1.1.0,"]
    good = {"pair": ["*fp32", "*fp32"], "scales": ["fp32", ["i32", 1]], "n": "i32", "BLOCK": 256}
    for changes, message in (({"BLOCK": [256]}, "BLOCK: a tuple (a JSON array) is for a runtime parameter"),
                             ({"pair": ["*fp32", 2]}, "pair[1]: a tuple's element is a type, or null or 1"),
                             ({"scales": ["fp32", ["*fp33"]]}, "scales[1, 0]: '*fp33' is not a Triton type")):
        args = dict(good, **changes)
        with pytest.raises(aot.ManifestError, match=re.escape(message)):
            aot.read_manifest(_manifest(tmp_path / "bad.json", [_entry(TEST_KERNELS, "tuple_kernel", args)]))


def test_build_tensor_descriptors(tmp_path):
    """Host tensor descriptors in a manifest (Triton's type text): TMA metadata for sm_90, the
    decomposed form for sm_80, each in the entry's launch fields, which the runtime launches from."""
    kernels = os.path.join(REPO, "tests", "cpp", "kernels", "conformance_kernels.py")
    desc = "tensordesc<fp16[32, 32]>"
    args = {"a_desc": desc, "b_desc": desc, "c_desc": desc, "M": "i32", "N": "i32", "K": "i32:16", "BLOCK_M": 32,
            "BLOCK_N": 32, "BLOCK_K": 32, "NUM_SMS": 4}
    manifest = _manifest(tmp_path / "m.json", [_entry(kernels, "persistent_matmul_tma_kernel", args)])
    spec, = aot.read_manifest(manifest)
    assert spec.types[:4] == (desc, desc, desc, "i32")
    output = str(tmp_path / "d.tjb")
    aot.build_bundle([manifest], ["cuda:80", "cuda:90"], output, jobs=1)
    by_arch = {e.header["target"]["arch"]: e for e in aot.read_bundle(output).entries}
    assert by_arch[90].signature.startswith(f"a_desc: {desc}, b_desc: {desc}, c_desc: {desc}, M: i32, N: i32, K: i32:16")
    sm90 = by_arch[90].launch["tensor_descriptors"]
    assert [(d["tma"], d["elem_size"], d["elem_type"], d["block_size"]) for d in sm90] == [(True, 2, 6, [32, 32])] * 3
    sm80 = by_arch[80].launch["tensor_descriptors"]
    assert len(sm80) == 3 and all(not d["tma"] and 0 <= d["flags"] <= 2 for d in sm80)
    for bad, message in (("tensordesc<fp16[32, 24]>", "is not a tensor descriptor type"),
                         ("tensordesc<fp17[32, 32]>", "is not a tensor descriptor type")):
        with pytest.raises(aot.ManifestError, match=re.escape(message)):
            aot.read_manifest(_manifest(tmp_path / "bad.json", [_entry(kernels, "persistent_matmul_tma_kernel",
                                                                       dict(args, a_desc=bad))]))


def test_build_dependent_launch_targets(tmp_path):
    """An entry launched with programmatic dependent launch (launch_pdl, sm_90's griddepcontrol in its
    code) compiles for cuda:90 only; the same kernel without it compiles for every target."""
    sum_py = os.path.join(REPO, "ops", "kernels_py", "sum.py")
    args = {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16", "M": 1, "N": "i32", "stride_in_row": "i32",
            "BLOCK_N": 1024, "INDEX_64": False}
    manifest = _manifest(tmp_path / "m.json", [
        _entry(sum_py, "sum_rows_kernel", dict(args, PDL=True), {"num_warps": 2, "launch_pdl": True}),
        _entry(sum_py, "sum_rows_kernel", dict(args, PDL=False), {"num_warps": 2})])
    output = str(tmp_path / "pdl.tjb")
    lines = []
    stats = aot.build_bundle([manifest], ["cuda:80", "cuda:90"], output, jobs=1, log=lines.append)
    assert (stats.entries, stats.specializations) == (3, 2)
    assert any("skipping 1 entry launched with programmatic dependent launch" in line for line in lines), lines
    got = sorted((e.header["target"]["arch"], e.launch["launch_pdl"]) for e in aot.read_bundle(output).entries)
    assert got == [(80, False), (90, False), (90, True)]


def test_build(built):
    stats = built["stats"]
    assert (stats.entries, stats.specializations, stats.kernels, stats.processes) == (6, 3, 2, 2)
    assert stats.targets == ["cuda:80:32", "cuda:90:32"] and stats.size == os.path.getsize(built["output"])
    assert built["log"][-1].startswith("compiled 6/6 (")
    bundle = aot.read_bundle(built["output"])
    assert bundle.created_by == {"tjit": aot.TJIT_VERSION, "triton": aot.siblings.adapter().triton.__version__}
    assert bundle.targets == ["cuda:80:32", "cuda:90:32"]
    assert [(k["function"], k["file_name"]) for k in bundle.kernels] == [("add_kernel", "add.py"),
                                                                      ("everything_kernel",
                                                                       "runtime_test_kernels.py")]
    assert bundle.kernels[1]["signature"]["file"] == TEST_KERNELS
    assert bundle.kernels[1]["signature"]["sources"][0]["path"] == TEST_KERNELS
    params = {p["name"]: p for p in bundle.kernels[1]["signature"]["params"]}
    assert params["const_ptr"]["const"] and params["n_dns"]["do_not_specialize"] and params["C_NONE"]["constexpr"]
    assert params["n_i64"]["annotation"] == "i64" and params["C_INT"]["annotation"] == ""
    assert len(bundle.entries) == 6
    seen = set()
    for e in bundle.entries:
        assert e.binary.startswith(b"\x7fELF")
        assert e.launch["symbol"] == e.function  # Triton names the cubin's kernel after the function
        assert e.launch["num_warps"] == e.options["num_warps"] and e.launch["num_ctas"] == 1
        assert e.header["target"]["arch"] == int(e.target.split(":")[1]) in (80, 90)
        assert e.header["kernel"] == bundle.kernels[e.record["kernel"]]["signature"]
        assert set(e.record) == {"kernel", "key", "offset", "size"}
        assert e.key == aot.entry_key(bundle.kernels[e.record["kernel"]], e.header)
        assert e.header["key"] == "tjit bundle entry" and e.header["binary_format"] == "cubin"
        # Every field the C++ decode_entry reads.
        assert set(e.header) == {"key", "kernel", "specialization", "options", "target", "launch", "binary_format"}
        assert set(e.header["launch"]) == set(aot.bundle_format._LAUNCH_FIELDS)
        assert set(e.header["options"]) == set(aot.OPTION_DEFAULTS)
        assert set(e.header["specialization"]) == {"types", "constexprs", "divisible_by_16"}
        assert set(e.header["kernel"]) == {"file", "function", "params", "sources", "triton", "tuning",
                                            "param_defaults"}
        seen.add((e.function, e.signature, e.target))
    assert len(seen) == 6
    everything = [e for e in bundle.entries if e.function == "everything_kernel"]
    assert [e.target for e in everything] == ["cuda:80:32", "cuda:90:32"]  # sorted by arch within a specialisation
    assert everything[0].specialization["constexprs"] == [[5, 1], [10, None], [11, 7], [12, True], [13, 0.5],
                                                          [14, None]]
    assert everything[0].options == dict(aot.OPTION_DEFAULTS, num_warps=2, num_stages=2)
    assert [(e.function, e.specialization["types"][0], e.target) for e in bundle.entries] == [
        ("add_kernel", "*fp32", "cuda:80:32"), ("add_kernel", "*fp32", "cuda:90:32"),
        ("add_kernel", "*bf16", "cuda:80:32"), ("add_kernel", "*bf16", "cuda:90:32"),
        ("everything_kernel", "*fp32", "cuda:80:32"), ("everything_kernel", "*fp32", "cuda:90:32")]
    assert [e.record["offset"] for e in bundle.entries] == [sum(e.size for e in bundle.entries[:i]) for i in range(6)]
    with open(built["depfile"]) as f:
        assert f.read() == f"{built['output']}: \\\n  {built['manifest']} \\\n  {ADD} \\\n  {TEST_KERNELS}\n"
    assert sorted(os.listdir(os.path.dirname(built["output"]))) == ["kernels.tjb"]  # no temporary left


def test_script_form_is_reproducible(built, tmp_path):
    """`python ops/aot build` from elsewhere, without PYTHONPATH, imports neither tjit nor torch
    (in the workers neither) and, compiling afresh, writes the same bytes as the API build."""
    output = str(tmp_path / "again.tjb")
    run = _script(["build", "--manifest", built["manifest"], "--target", "cuda:90", "--target", "cuda:80:32",
                   "-o", output, "-j", "2"], tmp_path, _env(tmp_path / "triton-cache"), ["-X", "importtime"])
    assert run.returncode == 0, run.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")]
    assert imported.count("triton") == 3  # the check sees the imports of the two workers too
    assert not {m for m in imported if m.split(".")[0] in ("tjit", "torch")}
    messages = [line for line in run.stderr.splitlines() if line.startswith("tjit aot: ")]
    assert messages[-1].startswith("tjit aot: 6 entries (3 specialisations of 2 kernels x 2 targets: "
                                   "cuda:80:32, cuda:90:32) in ")
    assert f"with 2 processes: {output} (" in messages[-1]
    assert "tjit aot: compiled 6/6 (" in messages[-2]
    with open(output, "rb") as a, open(built["output"], "rb") as b:
        assert a.read() == b.read()


def test_list(built):
    run = _script(["list", built["output"]], REPO, _env(built["folder"] / "unused"))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith(f"{built['output']}: tjit {aot.TJIT_VERSION}, triton ")
    assert "targets cuda:80:32, cuda:90:32; 2 kernels, 6 entries" in lines[0]
    assert len(lines) == 7
    assert lines[1].startswith("add_kernel(x_ptr: *fp32:16, y_ptr: *fp32:16, out_ptr: *fp32:16, n_elements: i32, "
                               "alpha: fp32, alpha_lo: fp64, HAS_ALPHA=False, BLOCK=1024, INDEX_64=False) "
                               "num_warps=4 num_stages=3 num_ctas=1 enable_fp_fusion=1 "
                               "launch_cooperative_grid=0 launch_pdl=0 cuda:80:32 ")
    assert "C_FLOAT=0.5, C_NONE=None) num_warps=2 num_stages=2" in lines[6] and " cuda:90:32 " in lines[6]
    listed = json.loads(_script(["list", "--json", built["output"]], REPO, os.environ).stdout)
    assert set(listed) == {"path", "bytes", "created_by", "targets", "kernels", "entries"}
    assert listed["kernels"][1] == {"function": "everything_kernel", "file_name": "runtime_test_kernels.py",
                                    "file": TEST_KERNELS}
    assert len(listed["entries"]) == 6 and listed["entries"][0]["launch"]["symbol"] == "add_kernel"
    first, last = listed["entries"][0], listed["entries"][5]
    assert set(first) == {"function", "file_name", "signature", "types", "constexprs", "divisible_by_16", "options",
                          "target", "offset", "size", "binary_bytes", "launch"}
    assert (first["function"], first["file_name"], first["target"], first["offset"]) == \
        ("add_kernel", "add.py", "cuda:80:32", 0)
    assert first["types"][:4] == ["*fp32", "*fp32", "*fp32", "i32"] and first["divisible_by_16"] == [0, 1, 2]
    assert first["constexprs"] == [[6, False], [7, 1024], [8, False]] and first["options"] == aot.OPTION_DEFAULTS
    assert first["signature"] == lines[1].split("(", 1)[1].split(") num_warps=")[0]
    assert last["constexprs"][4] == [13, 0.5] and last["target"] == "cuda:90:32"
    assert last["options"] == dict(aot.OPTION_DEFAULTS, num_warps=2, num_stages=2)
    assert sum(e["size"] for e in listed["entries"]) == last["offset"] + last["size"]


def test_package_command_line(built, tmp_path):
    """`python -m tjit aot` goes through ops/__main__.py (here with a stand-in `tjit` package, since
    the real one loads the C++ library); `cache` still works."""
    code = textwrap.dedent(f"""\
        import sys, types
        package = types.ModuleType("tjit")
        package.__path__ = [{OPS!r}]
        sys.modules["tjit"] = package
        from tjit import __main__
        sys.exit(__main__.main(sys.argv[1:]))
        """)
    run = subprocess.run([sys.executable, "-c", code, "aot", "list", built["output"]], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].endswith("2 kernels, 6 entries, " + aot.cli._size(built["stats"].size))
    run = subprocess.run([sys.executable, "-c", code, "aot", "build", "--manifest", built["manifest"], "--target",
                          "hip:90", "-o", str(tmp_path / "x.tjb")], capture_output=True, text=True)
    assert run.returncode == 1 and "only the cuda backend is supported" in run.stderr
    run = subprocess.run([sys.executable, "-c", code, "cache", "info", "--dir", str(tmp_path)], capture_output=True,
                         text=True)
    assert run.returncode == 0 and "0 entries of 0 kernels" in run.stdout, run.stderr


def test_failed_compile_writes_nothing(tmp_path):
    manifest = _manifest(tmp_path / "m.json", [_entry(ADD, "add_kernel", ADD_FP32),
                                               _entry(ADD, "add_kernel", dict(ADD_FP32, BLOCK=1000))])
    output, depfile = tmp_path / "out.tjb", tmp_path / "out.d"
    output.write_bytes(b"the previous bundle")
    run = _script(["build", "--manifest", manifest, "--target", "cuda:90", "-o", str(output), "--depfile",
                   str(depfile), "-j", "2"], tmp_path, _env(tmp_path / "triton-cache"))
    assert run.returncode == 1
    assert "1 of 2 compiles failed; nothing written" in run.stderr
    assert "add_kernel(x_ptr: *fp32:16, y_ptr: *fp32:16, out_ptr: *fp32:16, n_elements: i32, alpha: fp32, " \
           "alpha_lo: fp64, HAS_ALPHA=False, BLOCK=1000, INDEX_64=False) for cuda:90:32 " \
           f"({manifest}: entry 1 (add_kernel))" in run.stderr
    assert "power of 2" in run.stderr  # Triton's reason
    assert "tjit aot: compiled 2/2 (" in run.stderr and " s, 1 failed)" in run.stderr
    assert "BLOCK=1024" not in run.stderr
    assert output.read_bytes() == b"the previous bundle" and not depfile.exists()
    assert sorted(os.listdir(tmp_path)) == ["m.json", "out.tjb", "triton-cache"]


def test_empty_manifest(tmp_path):
    manifest = _manifest(tmp_path / "m.json", [])
    stats = aot.build_bundle(manifest, ["cuda:90"], tmp_path / "empty.tjb")
    assert (stats.entries, stats.kernels, stats.processes) == (0, 0, 1)
    bundle = aot.read_bundle(tmp_path / "empty.tjb")
    assert bundle.entries == [] and bundle.kernels == [] and bundle.targets == ["cuda:90:32"]
    assert bundle.size == os.path.getsize(tmp_path / "empty.tjb")


def test_one_file_name_and_function_per_bundle(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(ADD, tmp_path / folder / "add.py")
    manifest = _manifest(tmp_path / "m.json", [_entry("a/add.py", "add_kernel", ADD_FP32),
                                               _entry("b/add.py", "add_kernel", ADD_FP32)])
    with pytest.raises(aot.BuildError, match="two kernel files named add.py both define add_kernel"):
        aot.build_bundle(manifest, "cuda:90", tmp_path / "out.tjb", jobs=1)
    assert not (tmp_path / "out.tjb").exists()


# --------------------------------------------------------------------------------------------
# Reading bundles

def test_read_bundle_round_trip(built):
    with open(built["output"], "rb") as f:
        data = f.read()
    bundle = aot.decode_bundle(data)
    entries = [(e.record["kernel"], e.header, e.binary) for e in bundle.entries]
    assert aot.encode_bundle(bundle.kernels, entries, bundle.targets, bundle.created_by["triton"]) == data
    for e in bundle.entries:  # each entry is a store entry file of its own
        start = 64 + struct.unpack_from("<I", data, 12)[0] + e.record["offset"]
        header, binary = aot.kernel_store.decode(data[start:start + e.size], aot.kernel_store.ENTRY_MAGIC)
        assert header == e.header and binary == e.binary


def _split(data):
    """A bundle's parts: (index JSON bytes, records [[kernel, key bytes, offset, size]], payload), read
    by the layout alone."""
    index_size = struct.unpack_from("<I", data, 12)[0]
    index = data[64:64 + index_size]
    json_size = struct.unpack_from("<I", index, 0)[0]
    count = struct.unpack_from("<I", index, 4 + json_size)[0]
    position, records = 8 + json_size, []
    for _ in range(count):
        kernel, key_size, offset, size = struct.unpack_from("<IIQQ", index, position)
        records.append([kernel, index[position + 24:position + 24 + key_size], offset, size])
        position += 24 + key_size
    assert position == len(index)
    return index[4:4 + json_size], records, data[64 + index_size:]


def _join(json_bytes, records, count=None):
    """An index region of that JSON and records (count: the entry count to write, if not theirs)."""
    count = len(records) if count is None else count
    return (struct.pack("<I", len(json_bytes)) + json_bytes + struct.pack("<I", count) +
            b"".join(struct.pack("<IIQQ", k, len(key), offset, size) + key for k, key, offset, size in records))


EVERYTHING_KEY_90 = (b"everything_kernel\nruntime_test_kernels.py\n"  # the built bundle's last entry
                     b"*fp32,*fp32,*kfp32,i32,i32,constexpr,i64,fp32,fp64,u1,"
                     b"constexpr,constexpr,constexpr,constexpr,constexpr,\n"
                     b"5=int:1,10=none,11=int:7,12=bool:1,13=float:4602678819172646912,14=none,\n"
                     b"0,2,3,\n2,2,1,1,0,0,\ncuda:90:32")


def test_bundle_layout(built):
    with open(built["output"], "rb") as f:
        data = f.read()
    magic, version, index_size, payload_size, checksum = struct.unpack_from("<8sIIQ40s", data)
    assert (magic, version, 64 + index_size + payload_size) == (b"TJITBNDL", 1, len(data))
    json_bytes, records, payload = _split(data)
    assert checksum == hashlib.sha1(json_bytes).hexdigest().encode()  # the JSON only
    assert _join(json_bytes, records) == data[64:64 + index_size]
    index = json.loads(json_bytes)
    assert list(index) == ["format", "version", "created_by", "targets", "kernels"]  # no "entries"
    assert (index["format"], index["version"]) == ("tjit kernel bundle", 1)
    bundle = aot.decode_bundle(data)
    assert bundle.index == index
    assert [r[0] for r in records] == [0, 0, 0, 0, 1, 1]
    assert [r[2] for r in records] == [sum(r[3] for r in records[:i]) for i in range(6)]
    assert sum(r[3] for r in records) == len(payload) == payload_size
    for (kernel, key, offset, size), e in zip(records, bundle.entries):
        assert e.record == {"kernel": kernel, "key": key.decode(), "offset": offset, "size": size}
        s = e.header["specialization"]
        assert key.decode() == aot.bundle_key(e.function, e.file_name, s["types"], s["constexprs"],
                                              s["divisible_by_16"], e.header["options"], e.header["target"])
    assert records[0][1] == (b"add_kernel\nadd.py\n*fp32,*fp32,*fp32,i32,fp32,fp64,constexpr,constexpr,constexpr,\n"
                             b"6=bool:0,7=int:1024,8=bool:0,\n0,1,2,\n4,3,1,1,0,0,\ncuda:80:32")
    assert records[3][1].startswith(b"add_kernel\nadd.py\n*bf16,*bf16,*bf16,i32,")
    assert records[3][1].endswith(b"\n6=bool:1,7=int:1024,8=bool:0,\n0,1,\n8,3,1,1,0,0,\ncuda:90:32")
    assert records[5][1] == EVERYTHING_KEY_90


def test_encode_bundle_errors(built):
    bundle = aot.read_bundle(built["output"])
    e = bundle.entries[0]
    encode = lambda entries: aot.encode_bundle(bundle.kernels, entries, bundle.targets, "3.6.0")  # noqa: E731
    with pytest.raises(aot.BuildError, match="entries 0 and 1 have the same key"):
        encode([(0, e.header, e.binary), (0, e.header, e.binary)])
    with pytest.raises(aot.BuildError, match="kernel 2 is not an index into the 2 kernels"):
        encode([(2, e.header, e.binary)])
    with pytest.raises(ValueError, match="constexpr value \\['x'\\]"):
        encode([(0, dict(e.header, specialization=dict(e.specialization, constexprs=[[6, ["x"]]])), e.binary)])


def test_kernel_store_encode_matches_decode():
    header = {"key": "k", "values": [1, 1.0, True, None, "é"]}
    data = aot.kernel_store.encode(header, b"\x7fELF\x00", aot.kernel_store.ENTRY_MAGIC)
    assert data[:8] == b"TJITKRNL" and struct.unpack_from("<IIQ", data, 8) == (1, len(data) - 64 - 5, 5)
    assert data[24:64] == hashlib.sha1(data[64:]).hexdigest().encode()
    decoded, binary = aot.kernel_store.decode(data, aot.kernel_store.ENTRY_MAGIC)
    assert decoded == header and [type(v) for v in decoded["values"]] == [int, float, bool, type(None), str]
    assert binary == b"\x7fELF\x00"


def _reframe(data, index=None, payload=None, version=1):
    """A bundle with its index region (bytes) or payload replaced and a correct frame."""
    index_size = struct.unpack_from("<I", data, 12)[0]
    index = data[64:64 + index_size] if index is None else index
    payload = data[64 + index_size:] if payload is None else payload
    json_size = struct.unpack_from("<I", index)[0] if len(index) >= 4 else 0
    return (struct.pack("<8sIIQ40s", b"TJITBNDL", version, len(index), len(payload),
                        hashlib.sha1(index[4:4 + json_size]).hexdigest().encode()) + index + payload)


def _with_index(data, json_change=None, records_change=None, count=None, extra=b""):
    """A bundle with its index JSON (bytes -> bytes) or records (changed in place) changed, a correct frame."""
    json_bytes, records, _ = _split(data)
    if json_change:
        json_bytes = json_change(json_bytes)
    if records_change:
        records_change(records)
    return _reframe(data, index=_join(json_bytes, records, count) + extra)


def _with_header(data, i, change):
    """A bundle whose entry i has its header changed (change(header) in place) and is encoded again, the
    records and frame adjusted: it is intact, and its record's key is the old header's."""
    json_bytes, records, payload = _split(data)
    start, size = records[i][2], records[i][3]
    header, binary = aot.kernel_store.decode(payload[start:start + size], aot.kernel_store.ENTRY_MAGIC)
    change(header)
    entry = aot.kernel_store.encode(header, binary, aot.kernel_store.ENTRY_MAGIC)
    for record in records[i + 1:]:
        record[2] += len(entry) - size
    records[i][3] = len(entry)
    return _reframe(data, index=_join(json_bytes, records), payload=payload[:start] + entry + payload[start + size:])


def _damage_cases():
    def flip(offset_of):
        def damage(data):
            data = bytearray(data)
            data[offset_of(data)] ^= 0x20
            return bytes(data)
        return damage

    def cubin_byte(data):  # a byte in the middle of entry 2's cubin
        start = 64 + struct.unpack_from("<I", data, 12)[0] + _split(data)[1][2][2]
        header_size = struct.unpack_from("<I", data, start + 12)[0]
        return start + 64 + header_size + 100

    def index_json(change):  # the index JSON, parsed, changed and written again
        return lambda d: _with_index(d, json_change=lambda j: json.dumps(change(json.loads(j))).encode())

    def records(change):
        return lambda d: _with_index(d, records_change=change)

    def swap_keys(r):  # entry 0's record claims what entry 2 holds: each is intact on its own
        r[0][1], r[2][1] = r[2][1], r[0][1]

    def resize_index(d, size):  # the index region cut or padded to `size` bytes
        index = d[64:64 + struct.unpack_from("<I", d, 12)[0]]
        return _reframe(d, index=index[:size] + b"\0" * (size - len(index)))

    def set_json_size(d, size):
        index = d[64:64 + struct.unpack_from("<I", d, 12)[0]]
        return _reframe(d, index=struct.pack("<I", size) + index[4:])

    def short_payload(data):  # the payload one byte longer than its entries
        index_size = struct.unpack_from("<I", data, 12)[0]
        return _reframe(data, payload=data[64 + index_size:] + b"\0")

    def options(**changes):
        return lambda header: header["options"].update(changes)

    def constexpr(index, value):
        def change(header):
            header["specialization"]["constexprs"] = [[i, value if i == index else v]
                                                      for i, v in header["specialization"]["constexprs"]]
        return change

    return [
        # The frame
        ("flipped index byte", flip(lambda d: 64 + 10), "index checksum mismatch"),
        ("flipped record byte", flip(lambda d: 64 + struct.unpack_from("<I", d, 12)[0] - 3),
         "disagrees with its index record"),
        ("truncated", lambda d: d[:-1000], "its frame says"),
        ("empty", lambda d: b"", "shorter (0 bytes) than a bundle's 64-byte frame"),
        ("wrong magic", lambda d: b"TJITKRNL" + d[8:], "wrong magic"),
        ("version 2", lambda d: _reframe(d, version=2), "bundle format 2, this tjit reads 1"),
        # The index region: JSON size, JSON, count and records must add up to its size
        ("no JSON size", lambda d: _reframe(d, index=b"\0\0"), "index: its JSON size runs past the index's 2 bytes"),
        ("JSON size past the index", lambda d: set_json_size(d, struct.unpack_from("<I", d, 12)[0]),
         "-byte JSON runs past the index's"),
        ("no entry count", lambda d: resize_index(d, 4 + len(_split(d)[0]) + 3),
         "index: its entry count runs past the index's"),
        ("count one more", lambda d: _with_index(d, count=7), "index: record 6 of 7 runs past the index's"),
        ("count one fewer", lambda d: _with_index(d, count=5), "bytes after its 5 records"),
        ("byte after the records", lambda d: _with_index(d, extra=b"\0"), "index: 1 bytes after its 6 records"),
        ("last key cut short", lambda d: resize_index(d, struct.unpack_from("<I", d, 12)[0] - 1),
         f"index: record 5's {len(EVERYTHING_KEY_90)}-byte key runs past the index's"),
        ("key not UTF-8", records(lambda r: r[2].__setitem__(1, b"\xff" + r[2][1][1:])),
         "index: record 2's key is not UTF-8"),
        ("index not JSON", lambda d: _with_index(d, json_change=lambda j: b"{\"format\":"), "index is not valid JSON"),
        ("index of another format", index_json(lambda i: dict(i, version=3)), "index version is 3"),
        ("kernel without a signature", index_json(lambda i: dict(i, kernels=[i["kernels"][0], {"function": "f"}])),
         "index: kernel 1 misses function, file_name or signature"),
        # Records
        ("kernel out of range", records(lambda r: r[3].__setitem__(0, 2)),
         "index: record 3: kernel 2 does not exist (the index has 2)"),
        ("same key twice", records(lambda r: r[1].__setitem__(1, r[0][1])), "index: records 0 and 1 have the same key"),
        ("entries not contiguous", records(lambda r: r[1].__setitem__(2, r[1][2] + 1)),
         "entry 1 (add_kernel for cuda:90:32): at offset"),
        ("entry past the payload", records(lambda r: r[5].__setitem__(3, r[5][3] + 1)),
         "run past the payload's"),
        ("offset past the payload", records(lambda r: r[5].__setitem__(2, 2**40)), f"at offset {2**40} run past"),
        ("payload longer than its entries", short_payload, "the entries end at"),
        # Entries against their records
        ("flipped cubin byte", flip(cubin_byte), "entry 2 (add_kernel for cuda:80:32): checksum mismatch"),
        ("keys swapped", records(swap_keys), "entry 0 (add_kernel for cuda:80:32) disagrees with its index record: "
         "key 'add_kernel\\nadd.py\\n*bf16,"),
        ("record names another kernel", records(lambda r: r[0].__setitem__(0, 1)),
         "entry 0 (everything_kernel for cuda:80:32) disagrees with its index record: its header's kernel"),
        ("key of another target", records(lambda r: r[0].__setitem__(1, r[0][1].replace(b"cuda:80:32", b"cuda:86:32"))),
         "entry 0 (add_kernel for cuda:86:32) disagrees with its index record"),
        ("float constexpr's bits", records(lambda r: r[4].__setitem__(
            1, r[4][1].replace(b"float:4602678819172646912", b"float:4602678819172646913"))),
         "entry 4 (everything_kernel for cuda:80:32) disagrees with its index record"),
        ("header's options changed", lambda d: _with_header(d, 0, options(num_warps=8)),
         "entry 0 (add_kernel for cuda:80:32) disagrees with its index record: key "),
        ("header's 1024 a float", lambda d: _with_header(d, 1, constexpr(7, 1024.0)),
         "entry 1 (add_kernel for cuda:90:32) disagrees with its index record"),
        ("header's constexpr a string", lambda d: _with_header(d, 4, constexpr(13, "0.5")),
         "entry 4 (everything_kernel for cuda:80:32) disagrees with its index record: key "),
        ("header's constexpr a list", lambda d: _with_header(d, 4, constexpr(13, [0.5])),
         "entry 4 (everything_kernel for cuda:80:32): its header makes no key: constexpr value [0.5]"),
        ("header's option mistyped", lambda d: _with_header(d, 2, options(launch_pdl=0)),
         "entry 2 (add_kernel for cuda:80:32): option launch_pdl is missing or mistyped"),
        ("header's types cut short", lambda d: _with_header(d, 3, lambda h: h["specialization"]["types"].pop()),
         "entry 3 (add_kernel for cuda:90:32): 8 types for a kernel of 9 parameters"),
        ("header without launch", lambda d: _with_header(d, 5, lambda h: h.pop("launch")),
         "entry 5 (everything_kernel for cuda:90:32): its header misses 'launch'"),
    ]


@pytest.mark.parametrize("damage, reason", [c[1:] for c in _damage_cases()], ids=[c[0] for c in _damage_cases()])
def test_damaged_bundle(built, tmp_path, damage, reason):
    with open(built["output"], "rb") as f:
        data = f.read()
    damaged = damage(data)
    assert damaged != data
    path = tmp_path / "damaged.tjb"
    path.write_bytes(damaged)
    with pytest.raises(DamagedFile) as error:
        aot.read_bundle(path)
    assert reason in str(error.value)


def test_list_damaged_bundle(built, tmp_path):
    path = tmp_path / "damaged.tjb"
    with open(built["output"], "rb") as f:
        path.write_bytes(f.read()[:-1])
    run = _script(["list", str(path)], tmp_path, os.environ)
    assert run.returncode == 1 and f"tjit aot: {path} is damaged: size" in run.stderr
