"""The command line: `python -m tjit aot {build,list,merge}`, or `python <tjit>/aot ...` as CMake runs it."""

import argparse
import json
import os
import sys

from .builder import build_bundle, count as _count
from .bundle_format import BuildError, read_bundle
from .keys import canonical, options_text
from .manifest import ManifestError, merge_manifests
from .siblings import DamagedFile


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _say(message):
    print(f"tjit aot: {message}", file=sys.stderr, flush=True)


def _build(args):
    stats = build_bundle(args.manifest, args.target, args.output, jobs=args.jobs, depfile=args.depfile, log=_say,
                         decisions_from=args.decisions_from or ())
    _say(f"{_count(stats.entries, 'entry', 'entries')} "
         f"({_count(stats.specializations, 'specialisation')} of {_count(stats.kernels, 'kernel')} x "
         f"{_count(len(stats.targets), 'target')}: {', '.join(stats.targets)}"
         f"{'; ' + _count(stats.decisions, 'decision') if stats.decisions else ''}) in {stats.seconds:.1f} s with "
         f"{_count(stats.processes, 'process', 'processes')}: {stats.output} ({_size(stats.size)})")
    return 0


def _list(args):
    bundle = read_bundle(args.bundle)
    if args.json:
        print(json.dumps({"path": os.path.abspath(args.bundle), "bytes": bundle.size, "created_by": bundle.created_by,
                          "targets": bundle.targets,
                          "kernels": [{"function": k["function"], "file_name": k["file_name"],
                                       "file": k["signature"]["file"],
                                       **({"decisions": k["decisions"]} if k.get("decisions") else {})}
                                      for k in bundle.kernels],
                          "entries": [e.as_dict() for e in bundle.entries]}, indent=2))
        return 0
    print(f"{args.bundle}: tjit {bundle.created_by['tjit']}, triton {bundle.created_by['triton']}; targets "
          f"{', '.join(bundle.targets) or 'none'}; {_count(len(bundle.kernels), 'kernel')}, "
          f"{_count(len(bundle.entries), 'entry', 'entries')}, {_size(bundle.size)}")
    for e in bundle.entries:
        print(f"{e.function}({e.signature}) {options_text(e.options)} {e.target} {_size(e.size)}")
    for k in bundle.kernels:
        for d in k.get("decisions", []):
            print(f"{k['function']} {d['kind']}: {d['key'].replace(chr(10), '; ')} -> {canonical(d['value'])}")
    return 0


def _merge(args):
    result = merge_manifests(args.manifests, args.output)
    _say(f"{_count(result['entries'], 'entry', 'entries')} from {_count(result['manifests'], 'manifest')}: "
         f"{result['output']}")
    return 0


def main(argv=None, prog=None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description="tjit's ahead-of-time bundle builder.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile a manifest's entries for each target into a bundle")
    build.add_argument("--manifest", action="append", required=True, help="a manifest (repeat to merge several)")
    build.add_argument("--target", action="append", required=True, help="cuda:ARCH[:WARP_SIZE] (repeatable)")
    build.add_argument("-o", "--output", required=True, help="the bundle file to write")
    build.add_argument("-j", "--jobs", type=int, help="compile processes (default: os.cpu_count())")
    build.add_argument("--depfile", help="also write a Makefile depfile (for CMake's DEPFILE)")
    build.add_argument("--decisions-from", action="append", metavar="STORE",
                       help="also ship the heuristic values, autotune choices and config pre_hooks' effects this "
                            "kernel store folder holds for the bundle's kernels (repeatable)")
    listing = commands.add_parser("list", help="a bundle's entries")
    listing.add_argument("bundle")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    merge = commands.add_parser("merge", help="merge manifests, each distinct entry once")
    merge.add_argument("manifests", nargs="+")
    merge.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    if args.command == "build" and args.jobs is not None and args.jobs < 1:
        parser.error("-j must be at least 1")
    try:
        return {"build": _build, "list": _list, "merge": _merge}[args.command](args)
    except DamagedFile as e:
        _say(f"{args.bundle} is damaged: {e}")
    except (ManifestError, BuildError) as e:
        _say(str(e))
    except OSError as e:
        _say(f"{e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}")
    return 1

