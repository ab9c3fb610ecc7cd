"""The source files a kernel's compile depends on, and their fingerprints: what tjit's kernel store
records per kernel, so a stored kernel is refused once any of them changes."""

import ast
import functools
import hashlib
import importlib.util
import os
import site
import sys
import sysconfig

from . import state


def source_fingerprint(data):
    """The git blob id of a file's bytes: what tjit's kernel store records per source file (the
    C++ runtime computes the same to check a stored kernel against the files on disk)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@functools.lru_cache(maxsize=None)
def _installed_roots():
    """Folders of the standard library and of installed packages (not the user's own code)."""
    paths = sysconfig.get_paths()
    stdlib = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    packages = {os.path.realpath(paths[k]) for k in ("purelib", "platlib") if paths.get(k)}
    try:
        packages.update(os.path.realpath(p) for p in site.getsitepackages())
        packages.add(os.path.realpath(site.getusersitepackages()))
    except AttributeError:  # some virtual environments' site module lacks these
        pass
    return stdlib, packages


def _under(path, roots):
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _imported_module_names(source, package):
    """Absolute names of the modules an import statement of `source` names, parents included
    (`import a.b` runs a/__init__.py too; `from a import b` may import the submodule a.b)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except (ImportError, ValueError):
                    continue
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return names


def source_files(path, module):
    """[(path, fingerprint)] of the kernel file and of every source file whose change can change
    what it compiles to: the modules it imports (its @triton.jit helpers and the globals it
    reads), followed through the user's own files. Installed packages are recorded where a user
    file imports them but not followed; the standard library is left out, and Triton is covered
    by its version."""
    with state.lock:
        if path in state.source_files:
            return state.source_files[path]
    stdlib, packages = _installed_roots()
    found = {path: state.fingerprints[path]}
    pending = [(path, module)]
    while pending:
        current, current_module = pending.pop()
        try:
            with open(current, "rb") as f:
                names = _imported_module_names(f.read(), getattr(current_module, "__package__", None) or "")
        except (OSError, SyntaxError):
            continue
        for name in sorted(names):
            imported = sys.modules.get(name)
            file = getattr(imported, "__file__", None)
            if not file or name == "triton" or name.startswith("triton."):
                continue
            file = os.path.realpath(file)
            if file in found or not os.path.isfile(file):
                continue
            in_packages = _under(file, packages)
            if not in_packages and _under(file, stdlib):
                continue
            if file in state.fingerprints:  # the bytes a kernel package's module ran from
                found[file] = state.fingerprints[file]
            else:
                with open(file, "rb") as f:
                    found[file] = source_fingerprint(f.read())
            if not in_packages:
                pending.append((file, imported))
    result = sorted(found.items(), key=lambda item: (item[0] != path, item[0]))
    with state.lock:
        state.source_files[path] = result
    return result
