"""The bundle builder: a manifest's specialisations compiled for each target (compile_workers), the
decisions of manifests and kernel stores attached to their kernels, one bundle file written."""

import dataclasses
import json
import os
import time
from typing import Callable, List, Optional, Sequence

from .bundle_format import BUNDLE_ENTRY_KEY, BuildError, encode_bundle
from .compile_workers import compile_all
from .files import make_escape, write_atomically
from .kernels import Kernel, load_kernel
from .keys import canonical, parse_target, target_string
from .manifest import Decision, ManifestError, merge_decisions, parse_decision, read_decisions, read_manifests
from .siblings import adapter, kernel_store


def count(n, word, plural=None):
    return f"{n} {word if n == 1 else plural or word + 's'}"


@dataclasses.dataclass
class BuildStats:
    output: str
    size: int  # bytes of the bundle
    entries: int  # compiled entries: specialisations x targets
    specializations: int
    kernels: int
    targets: List[str]
    seconds: float
    processes: int  # worker processes (1: compiled in this process)
    sources: List[str]  # every source file of every kernel (what the depfile lists after the manifests)
    decisions: int = 0  # heuristics values and autotune choices shipped


class _Progress:
    """A line on `log` at most every `interval` seconds or 10% of the compiles, and at the end."""

    def __init__(self, total, log, start, interval=2.0):
        self.total, self.log, self.start, self.interval = total, log, start, interval
        self.done = self.failed = 0
        self.last_time = start
        self.last_tenth = 0

    def __call__(self, result):
        self.done += 1
        self.failed += result[0] != "ok"
        if self.log is None:
            return
        now = time.monotonic()
        tenth = self.done * 10 // self.total
        if self.done == self.total or tenth > self.last_tenth or now - self.last_time >= self.interval:
            failed = f", {self.failed} failed" if self.failed else ""
            self.log(f"compiled {self.done}/{self.total} ({now - self.start:.1f} s{failed})")
            self.last_time, self.last_tenth = now, tenth


def _caller_params(kernel: Kernel) -> List[str]:
    """The parameters run() takes from its caller: those no config and no heuristic sets."""
    tuning = json.loads(kernel.tuning) if kernel.tuning else {}
    if not tuning or "unsupported" in tuning:
        return [p[0] for p in kernel.params]
    set_elsewhere = set(tuning.get("heuristics", [])) | {k for c in tuning.get("configs", []) for k in c["kwargs"]}
    return [p[0] for p in kernel.params if p[0] not in set_elsewhere]


def store_decisions(folder: str, kernels: Sequence[Kernel]) -> List[Decision]:
    """The heuristic values, autotune choices, config pre_hooks' effects and callers' decisions (plan
    choices) a kernel store at `folder` holds for `kernels`, made from their current sources by their Triton (others are stale and left
    out), as manifest decisions. Damaged records are left out too."""
    by_identity = {(k.file, k.function): k for k in kernels}
    found = []
    rules = kernel_store.policy()
    for path in kernel_store._store_files(folder):  # what the runtime would read (kernel_store.Refused)
        if not path.endswith(kernel_store.DECISION_SUFFIX):
            continue
        try:
            header, _ = kernel_store.decode(kernel_store._read_trusted(path, rules), kernel_store.DECISION_MAGIC)
            lines = header["key"].split("\n")
            fields = dict(line.split(" ", 1) for line in lines[1:] if " " in line)
            value = json.loads(header["value"]) if isinstance(header["value"], str) else header["value"]
        except (OSError, kernel_store.DamagedFile, KeyError, ValueError, TypeError):
            continue
        kernel = by_identity.get((os.path.realpath(fields.get("file", "")), fields.get("function")))
        if kernel is None:
            continue
        sources = [tuple(item.rsplit("@", 1)) for item in fields.get("sources", "").split()]
        if sources != [tuple(s) for s in kernel.sources] or fields.get("triton") != kernel.triton:
            continue  # made from other sources, or by another Triton
        where = f"{path} (kernel store)"
        try:
            if lines[0] == "tjit heuristic values v1":
                names = _caller_params(kernel)
                texts = fields["arguments"].split()
                if len(texts) != len(names):
                    continue
                params = [p[0] for p in kernel.params]
                decision = {"config": int(fields["config"]), "arguments": dict(zip(names, texts)),
                            "values": {params[index]: v for index, v in value}}
                kind = "heuristics"
            elif lines[0] == "tjit descriptor hook v1":
                constexprs = dict(item.split("=", 1) for item in fields.get("constexprs", "").split(", ") if item)
                decision = {"config": int(fields["config"]), "constexprs": constexprs,
                            "descriptors": fields.get("descriptors", "").split(), "values": value}
                kind = "descriptor_hook"
            elif lines[0] == "tjit autotune choice v1":
                decision = {"target": fields["target"], "key": fields["key"], "config": value["config_text"]}
                kind = "autotune"
            elif lines[0] == "tjit caller v1":
                # The runtime's key: five lines (kind, file, function, sources, triton), then `what`.
                decision = {"what": header["key"].split("\n", 5)[5], "value": value}
                kind = "caller"
            else:
                continue
        except (KeyError, ValueError, TypeError, IndexError):
            continue

        def fail(message, where=where):
            raise ManifestError(f"{where}: {message}")
        found.append(Decision(kernel.file, kernel.function, kind, parse_decision(kernel, kind, decision, fail), where))
    return found


def _launchable_on(options, target) -> bool:
    """Whether the runtime can launch an entry with these options on `target`: programmatic dependent
    launch (launch_pdl) needs compute capability 9.0, and its kernels use sm_90 instructions
    (griddepcontrol), so such entries are compiled for cuda:90 and newer only."""
    return not (dict(options).get("launch_pdl") and target[0] == "cuda" and target[1] < 90)


def build_bundle(manifests, targets, output, jobs: Optional[int] = None, depfile: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None, decisions_from: Sequence[str] = ()) -> BuildStats:
    """Compiles every entry of `manifests` (paths) for every target ("cuda:90", "cuda:90:32" or
    (backend, arch, warp_size)) in `jobs` processes (default os.cpu_count(); 1 compiles in this
    process) and writes the bundle to `output` atomically, and a Makefile depfile when asked.
    The manifests' heuristics and autotune entries go into the bundle, with those the kernel stores
    in `decisions_from` hold for its kernels. Raises ManifestError or BuildError (every failed
    compile listed) and then writes nothing. `log` receives progress lines."""
    start = time.monotonic()
    if isinstance(targets, (str, tuple)):
        targets = [targets]
    try:
        parsed = {parse_target(t) if isinstance(t, str) else parse_target(target_string(t)) for t in targets}
    except ValueError as e:
        raise BuildError(str(e)) from None
    if not parsed:
        raise BuildError("no compile target: give at least one, e.g. cuda:90")
    target_list = sorted(parsed, key=lambda t: (t[0], t[1], t[2]))
    manifests = [manifests] if isinstance(manifests, (str, os.PathLike)) else list(manifests)
    manifests = [os.path.abspath(os.fspath(m)) for m in manifests]
    specs = read_manifests(manifests)
    decisions = read_decisions(manifests)

    # Kernels in index order; the runtime names a bundle kernel by function and file name.
    kernel_keys = sorted({(s.function, os.path.basename(s.file), s.file) for s in [*specs, *decisions]})
    by_name = {}
    for function, file_name, file in kernel_keys:
        other = by_name.setdefault((function, file_name), file)
        if other != file:
            raise BuildError(f"two kernel files named {file_name} both define {function} ({other} and {file}): "
                             "a bundle tells its kernels apart by function and file name only")
    kernel_index = {(file, function): i for i, (function, _, file) in enumerate(kernel_keys)}
    kernels = [load_kernel(file, function) for function, _, file in kernel_keys]
    for folder in ([decisions_from] if isinstance(decisions_from, str) else decisions_from):
        decisions = merge_decisions([*decisions, *store_decisions(os.path.abspath(folder), kernels)])

    tasks, task_specs = [], []
    skipped = 0
    for spec in specs:
        for target in target_list:
            if not _launchable_on(spec.options, target):
                skipped += 1
                continue
            tasks.append((spec.file, spec.function, spec.types, spec.constexprs, spec.divisible, target,
                          spec.options, spec.tuple_constexprs, spec.tuple_divisible))
            task_specs.append((spec, target))
    processes = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    if log and skipped:
        log(f"skipping {count(skipped, 'entry', 'entries')} launched with programmatic dependent launch "
            "(launch_pdl) on targets older than cuda:90, which do not have it")
    if log and tasks:
        log(f"compiling {count(len(specs), 'specialisation')} x {count(len(target_list), 'target')} = "
            f"{count(len(tasks), 'entry', 'entries')} in {count(processes, 'process', 'processes')}")
    results = compile_all(tasks, processes, _Progress(len(tasks), log, start))

    failures, entries = [], []
    for (spec, target), result in zip(task_specs, results):
        kernel = kernels[kernel_index[(spec.file, spec.function)]]
        if result[0] == "ok" and [tuple(s) for s in result[3]] != kernel.sources:
            result = ("error", f"a source file of {spec.function} changed during the build ({spec.file} or one "
                      "it imports): build again")
        if result[0] != "ok":
            failures.append(f"{spec.describe()} for {target_string(target)} ({spec.origin}):\n    " +
                            result[1].replace("\n", "\n    "))
            continue
        _, cubin, md, _ = result
        specialization = {"types": list(spec.types), "constexprs": [[i, v] for i, v in spec.constexprs],
                          "divisible_by_16": list(spec.divisible)}
        if spec.tuple_constexprs or spec.tuple_divisible:  # as the runtime writes them: only with tuples
            specialization["tuple_constexprs"] = [[list(p), v] for p, v in sorted(spec.tuple_constexprs)]
            specialization["tuple_divisible_by_16"] = [list(p) for p in sorted(spec.tuple_divisible)]
        options = dict(spec.options)
        target_json = {"backend": target[0], "arch": target[1], "warp_size": target[2]}
        header = {"key": BUNDLE_ENTRY_KEY, "kernel": kernel.signature(), "specialization": specialization,
                  "options": options, "target": target_json,
                  "launch": {"symbol": md["name"], "shared_memory": int(md["shared"]),
                             "num_warps": int(md["num_warps"]), "num_ctas": int(md["num_ctas"]),
                             "global_scratch_size": int(md["global_scratch_size"]),
                             "global_scratch_align": int(md["global_scratch_align"]),
                             "profile_scratch_size": int(md["profile_scratch_size"]),
                             "profile_scratch_align": int(md["profile_scratch_align"]),
                             "launch_cooperative_grid": bool(md["launch_cooperative_grid"]),
                             "launch_pdl": bool(md["launch_pdl"]),
                             **({"tensor_descriptors": md["tensor_descriptors"]} if md["tensor_descriptors"] else {})},
                  "binary_format": "cubin"}
        order = (spec.function, os.path.basename(spec.file), spec.file,
                 canonical({**specialization, "options": options}), target)
        entries.append((order, kernel_index[(spec.file, spec.function)], header, cubin))
    if failures:
        raise BuildError(f"{len(failures)} of {len(tasks)} compiles failed; nothing written:\n  " +
                         "\n  ".join(failures))

    entries.sort(key=lambda e: e[0])
    kernel_records = [{"function": k.function, "file_name": os.path.basename(k.file), "signature": k.signature()}
                      for k in kernels]
    for d in sorted(decisions, key=lambda d: (d.kind, d.lookup_key)):
        kernel_records[kernel_index[(d.file, d.function)]].setdefault("decisions", []).append(
            {"kind": d.kind, "key": d.lookup_key, "value": d.value})
    triton_version = kernels[0].triton if kernels else adapter().triton.__version__
    data = encode_bundle(kernel_records, [(k, h, b) for _, k, h, b in entries],
                         [target_string(t) for t in target_list], triton_version)
    output = os.path.abspath(os.fspath(output))
    sources = list(dict.fromkeys(path for k in kernels for path, _ in k.sources))
    write_atomically(output, data)
    if depfile:
        deps = " \\\n  ".join(make_escape(p) for p in manifests + sources)
        write_atomically(os.path.abspath(depfile), f"{make_escape(output)}: \\\n  {deps}\n".encode("utf-8"))
    return BuildStats(output, len(data), len(entries), len(specs), len(kernels),
                      [target_string(t) for t in target_list], time.monotonic() - start, processes, sources,
                      len(decisions))
