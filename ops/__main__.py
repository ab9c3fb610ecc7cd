"""tjit's command line: `python -m tjit cache {info,list,clear,prune}`, `python -m tjit aot {build,list,merge}`
and `python -m tjit tune`.

    python -m tjit cache info                  where the kernel store is, its bound, kernels, entries, bytes
    python -m tjit cache list [--kernel NAME]  each entry: kernel, specialisation, options, target, Triton, size
    python -m tjit cache clear [--kernel NAME] remove every entry, or one kernel's (function name or file path)
    python -m tjit cache prune [--max-bytes N] remove the least recently used entries until the store holds
                                               at most N bytes (default: its bound, TJIT_CACHE_MAX_BYTES)

--dir DIR works on another store folder than the one the runtime would use (TJIT_CACHE_DIR, else
$XDG_CACHE_HOME/tjit, else ~/.cache/tjit); --json prints machine-readable output.

    python -m tjit aot build --manifest M.json --target cuda:90 -o OUT.tjb   compile a bundle (tjit.aot)
    python -m tjit aot list OUT.tjb                                          a bundle's entries
    python -m tjit aot merge A.json B.json -o C.json                         merge manifests

    python -m tjit tune -o TABLE.json    measure this GPU's plan table (tjit.tune)
"""

import argparse
import json
import sys

from . import kernel_store


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _max_bytes(text):
    try:
        return kernel_store.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _cache(args):
    folder = args.dir or kernel_store.directory()
    if folder is None:
        print("tjit: the kernel store is off (TJIT_CACHE=0); pass --dir DIR to inspect a store folder",
              file=sys.stderr)
        return 1
    if args.command == "info":
        summary = kernel_store.info(folder)
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print(f"kernel store: {summary['directory']}" + ("" if summary["exists"] else " (not created yet)"))
            print(f"  {summary['entries']} entries of {summary['kernels']} kernels, "
                  f"{summary['signatures']} signature records, {summary['decisions']} decision records "
                  f"(autotune choices, heuristic values), {_size(summary['bytes'])}")
            bound = summary["max_bytes"]
            print(f"  bound: {_size(bound) + ' (' + str(bound) + ' bytes)' if bound else 'none'}; "
                  "set by TJIT_CACHE_MAX_BYTES, least recently used entries are removed past it")
            if summary["damaged"]:
                print(f"  {summary['damaged']} damaged files (ignored by the runtime, replaced on next use)")
            for refused in summary["refused"]:
                print(f"  refused: {refused['path']}: {refused['reason']} (the runtime does not read it; "
                      + ("`cache prune` removes it)" if refused["yours"] else "not yours: its owner or root can remove "
                         "it, or set TJIT_CACHE_DIR to a folder of your own)"))
        return 0
    if args.command == "list":
        items = [item for item in kernel_store.read(folder) if kernel_store.matches(item, args.kernel)]
        if args.json:
            print(json.dumps([item.as_dict() if isinstance(item, kernel_store.Entry) else
                              {"path": item.path, "bytes": item.size, "refused": item.reason}
                              if isinstance(item, kernel_store.Refused) else
                              {"path": item.path, "bytes": item.size, "damaged": item.reason} for item in items],
                             indent=2))
            return 0
        for item in items:
            if isinstance(item, kernel_store.Damaged):
                print(f"DAMAGED {item.path}: {item.reason}")
                continue
            if isinstance(item, kernel_store.Refused):
                print(f"REFUSED {item.path}: {item.reason}")
                continue
            print(f"{item.function}({item.signature})\n    file {item.file}\n    {item.options}\n"
                  f"    target {item.target}, triton {item.triton}, {_size(item.size)}: {item.path}")
        if not items:
            print("no entries" + (f" for {args.kernel}" if args.kernel else "") + f" in {folder}")
        return 0
    if args.command == "prune":
        try:
            result = kernel_store.prune(folder, args.max_bytes)
        except PermissionError as e:
            print(f"tjit: {e}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps(result, indent=2))
        elif result["max_bytes"] is None:
            print(f"the kernel store {folder} has no bound (TJIT_CACHE_MAX_BYTES=0) and --max-bytes was not given: "
                  f"removed {len(result['removed'])} files of dead writes; {_size(result['bytes_left'])} left")
        else:
            print(f"removed {len(result['removed'])} files ({_size(result['bytes_removed'])}) from {folder}; "
                  f"{_size(result['bytes_left'])} left, bound {_size(result['max_bytes'])}")
        for path in result["refused_kept"]:
            print(f"kept {path}: the runtime refuses it, but it is not yours to remove (see `cache info`)")
        return 0
    removed = kernel_store.clear(folder, args.kernel)
    print(f"removed {len(removed)} files" + (f" of {args.kernel}" if args.kernel else "") + f" from {folder}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tjit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    tools = parser.add_subparsers(dest="tool", required=True)
    cache = tools.add_parser("cache", help="inspect or clear the kernel store")
    cache.add_argument("command", choices=("info", "list", "clear", "prune"))
    cache.add_argument("--kernel", help="only this kernel: its function name or its file's path")
    cache.add_argument("--dir", help="the store folder (default: where the runtime looks)")
    cache.add_argument("--json", action="store_true", help="machine-readable output (info, list, prune)")
    cache.add_argument("--max-bytes", type=_max_bytes, metavar="N",
                       help="prune: the size to prune to (bytes, or with a K, M, G or T suffix such as 512M; "
                            "0 removes every entry); default: the store's bound")
    tools.add_parser("aot", add_help=False,
                     help="ahead-of-time kernel bundles: build, list, merge (python -m tjit aot --help)")
    tools.add_parser("tune", add_help=False,
                     help="measure this GPU's plan table (python -m tjit tune --help)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "tune":
        from . import tune
        return tune.main(argv[1:], prog="python -m tjit tune")
    if argv and argv[0] == "aot":  # its own command line (tjit.aot.main), which also runs as a plain script
        from . import aot
        return aot.main(argv[1:], prog="python -m tjit aot")
    args = parser.parse_args(argv)
    return _cache(args)


if __name__ == "__main__":
    sys.exit(main())
