"""Checks that the documentation runs: README.md and docs/*.md.

    python3 tests/docs/check_docs.py [--only python|cpp|links|json] [FILE.md ...]

1. Every ```python block runs, on the CPU (tjit's operators run there through Triton's
   interpreter). The blocks of one file run in order in one fresh interpreter, sharing names, as a
   reader pasting them one after another would. A block marked ```python cuda needs a GPU: it is
   only compiled (`compile()`), unless a GPU is present, where it runs too. A block marked
   ```python fragment (an excerpt needing what a page cannot give, such as several processes) is
   only compiled.
2. Every ```cpp block compiles (g++ -fsyntax-only, C++20) against the built tjit's public headers
   (`tjit.cmake_prefix_path`/include) and torch's, all blocks of all files in one translation unit.
   A plain ```cpp block is top-level code: its #include lines go to the top, the rest into a
   namespace of its own. A ```cpp fragment block is statements: it becomes the body of a function
   whose parameters (FRAGMENT_PARAMETERS below) are the names the pages use without defining them
   (x, y, out, stream, kernel, ...).
3. Every ```json block parses.
4. Every relative link ([text](path), [text](path#anchor), [text](#anchor)) names a file or folder
   that exists, and an anchor a heading of that Markdown file (GitHub's slugs).

Exits 1 with one line per failure (file:line: cause); prints one summary line.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Names a ```cpp fragment block may use without defining them, as the pages do.
FRAGMENT_PARAMETERS = """at::Tensor x, at::Tensor y, at::Tensor out, at::Tensor w, at::Tensor b, at::Tensor a,
    at::Tensor c, tjit::Stream stream, tjit::TritonJitFunction& kernel, tjit::TritonJitFunction& fn,
    int64_t n, int64_t rows, int64_t cols, int64_t M, int64_t N, int64_t K, int64_t blocks, int num_sms,
    tjit::Grid grid, tjit::TensorDescriptor b_desc"""

# Fragments see every public header (top-level blocks include what they use, as a reader would).
FRAGMENT_INCLUDES = ["<tjit/operators.h>", "<tjit/triton_jit_function.h>", "<tjit/autotune.h>",
                     "<tjit/current_stream.h>", "<tjit/device_properties.h>", "<tjit/tensor_descriptor.h>",
                     "<tjit/prepare.h>", "<tjit/kernel_store.h>", "<tjit/kernel_bundle.h>",
                     "<tjit/kernel_manifest.h>"]


def default_files():
    docs = os.path.join(ROOT, "docs")
    pages = sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [os.path.join(ROOT, "README.md")] + pages


def rel(path):
    return os.path.relpath(path, ROOT)


# ------------------------------------------------------------------------------- parsing

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)\s*([^`]*)$")


def code_blocks(text):
    """(language, words after it, first line number of the code, code) for each fenced block."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, rest = m.group(1), m.group(2), m.group(3).lower(), m.group(4).split()
        body = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and lines[j].strip().strip(fence[0]) == ""):
            line = lines[j]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            j += 1
        blocks.append((lang, rest, i + 2, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def prose_lines(text):
    """The lines outside fenced blocks, with their numbers, inline code removed."""
    return [(number, re.sub(r"`[^`]*`", "", line)) for number, line in prose_lines_raw(text)]


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped, spaces
    to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for _, line in prose_lines_raw(text):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def prose_lines_raw(text):
    """Lines outside fenced blocks, inline code kept (headings keep their code text in slugs)."""
    out = []
    in_fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if in_fence is None and m:
            in_fence = m.group(2)[0] * len(m.group(2))
            continue
        if in_fence is not None:
            if line.strip().startswith(in_fence) and line.strip().strip(in_fence[0]) == "":
                in_fence = None
            continue
        out.append((number, line))
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(\s+.*)?$")


# ------------------------------------------------------------------------------- checks


def check_links(path, text):
    failures = []
    targets = []
    for number, line in prose_lines(text):
        for m in LINK.finditer(line):
            targets.append((number, m.group(1)))
        m = REF_DEF.match(line)
        if m:
            targets.append((number, m.group(1)))
    for number, target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        where = f"{rel(path)}:{number}"
        dest = path if file_part == "" else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if not os.path.exists(dest):
            failures.append(f"{where}: link to a missing file: {target}")
            continue
        if anchor:
            if not dest.endswith(".md") or os.path.isdir(dest):
                failures.append(f"{where}: anchor #{anchor} on a file that is not Markdown: {target}")
            elif anchor not in anchors(dest):
                failures.append(f"{where}: link to a missing heading #{anchor} in {rel(dest)}")
    return failures, len(targets)


PYTHON_RUNNER = r"""
import sys
blocks = {blocks!r}
try:
    import torch
    has_cuda = torch.cuda.is_available()
except Exception:
    has_cuda = False
namespace = {{"__name__": "__docs__"}}
import os
for line, marks, code in blocks:
    where = "{path}:%d" % line
    # A real file per block: Triton reads a @triton.jit function's source from its file.
    source = os.path.abspath("{stem}_line%d.py" % line)
    with open(source, "w") as f:
        f.write(code)
    try:
        compiled = compile(code, source, "exec")
        if "fragment" in marks or ("cuda" in marks and not has_cuda):
            continue
        exec(compiled, namespace)
    except BaseException as error:
        import traceback
        traceback.print_exc()
        # The failing line of the page: the block's first line plus the line within the block.
        within = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == source]
        if isinstance(error, SyntaxError) and error.filename == source and error.lineno:
            within.append(error.lineno)
        if within:
            where = "{path}:%d" % (line + within[-1] - 1)
        print("FAILED %s: %s: %s" % (where, type(error).__name__, error), file=sys.stderr)
        sys.exit(1)
"""


def check_python(path, text):
    blocks = [(line, marks, code) for lang, marks, line, code in code_blocks(text) if lang in ("python", "py")]
    if not blocks:
        return [], 0
    script = PYTHON_RUNNER.format(blocks=blocks, path=rel(path), stem=re.sub(r"\W", "_", rel(path)))
    env = dict(os.environ)
    env.setdefault("TJIT_LOG_COMPILES", "0")
    with tempfile.TemporaryDirectory(prefix="tjit-docs-") as work:
        # A kernel store of its own, and the pages' files (kernels they write) in a scratch folder.
        env["TJIT_CACHE_DIR"] = os.path.join(work, "store")
        proc = subprocess.run([sys.executable, "-c", script], cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if l.startswith("FAILED ")]
        cause = lines[-1][len("FAILED "):] if lines else f"{rel(path)}: python exited {proc.returncode}"
        return [f"{cause}\n{_indent(proc.stderr)}"], len(blocks)
    return [], len(blocks)


def _indent(text, keep=25):
    lines = text.rstrip().splitlines()[-keep:]
    return "\n".join("    " + l for l in lines)


def cpp_translation_unit(snippets):
    """One translation unit of every C++ snippet: (text, {unit line: (file, line)})."""
    includes = list(FRAGMENT_INCLUDES)
    bodies = []
    for index, (path, line, marks, code) in enumerate(snippets):
        code_lines = code.rstrip("\n").split("\n")
        kept = []
        for offset, l in enumerate(code_lines):
            if l.strip().startswith("#include"):
                include = l.strip()[len("#include"):].strip()
                if include not in includes:
                    includes.append(include)
                kept.append((line + offset, ""))
            else:
                kept.append((line + offset, l))
        if "fragment" in marks:
            head = [f"namespace docs_snippet_{index} {{", f"[[maybe_unused]] void body({FRAGMENT_PARAMETERS}) {{ {{"]
            tail = ["}}", "}"]
        else:
            head = [f"namespace docs_snippet_{index} {{"]
            tail = ["}"]
        bodies.append((path, head, kept, tail))
    lines = [f"#include {i}" for i in includes] + ["#include <algorithm>", "#include <optional>", "#include <tuple>"]
    origin = {}
    for path, head, kept, tail in bodies:
        lines += head
        for source_line, l in kept:
            lines.append(l)
            origin[len(lines)] = (path, source_line)
        lines += tail
    return "\n".join(lines) + "\n", origin


def cpp_flags():
    code = ("import os, torch.utils.cpp_extension as c, tjit; "
            "print('\\n'.join(c.include_paths())); print(os.path.join(tjit.cmake_prefix_path, 'include'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cannot find the headers (is tjit built and installed?):\n{proc.stderr}")
    *torch_dirs, tjit_dir = proc.stdout.split()
    return [f"-I{tjit_dir}"] + [f"-isystem{d}" for d in torch_dirs]


def check_cpp(files_texts):
    snippets = []
    for path, text in files_texts:
        snippets += [(path, line, marks, code) for lang, marks, line, code in code_blocks(text)
                     if lang in ("cpp", "c++", "cxx")]
    if not snippets:
        return [], 0
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return ["no C++ compiler found (g++ or $CXX): the C++ snippets are unchecked"], len(snippets)
    unit, origin = cpp_translation_unit(snippets)
    with tempfile.TemporaryDirectory(prefix="tjit-docs-cpp-") as work:
        source = os.path.join(work, "docs_snippets.cpp")
        with open(source, "w") as f:
            f.write(unit)
        cmd = [compiler, "-std=c++20", "-fsyntax-only", "-Werror=return-type", *cpp_flags(), source]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return [], len(snippets)
    failures = []
    for m in re.finditer(r"docs_snippets\.cpp:(\d+):(?:\d+:)? error: (.*)", proc.stderr):
        path, line = origin.get(int(m.group(1)), ("(harness)", int(m.group(1))))
        failures.append(f"{rel(path) if path != '(harness)' else path}:{line}: C++ does not compile: {m.group(2)}")
    if not failures:
        failures.append(f"C++ snippets do not compile:\n{_indent(proc.stderr)}")
    return failures, len(snippets)


def check_json(path, text):
    import json
    failures = []
    blocks = [(line, code) for lang, marks, line, code in code_blocks(text) if lang == "json"]
    for line, code in blocks:
        try:
            json.loads(code)
        except ValueError as error:
            failures.append(f"{rel(path)}:{line}: JSON does not parse: {error}")
    return failures, len(blocks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/*.md)")
    parser.add_argument("--only", choices=("python", "cpp", "links", "json"), action="append")
    args = parser.parse_args(argv)
    kinds = set(args.only or ("python", "cpp", "links", "json"))
    files = [os.path.abspath(f) for f in args.files] or default_files()
    texts = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            texts.append((path, f.read()))
    failures = []
    counts = {k: 0 for k in kinds}
    for path, text in texts:
        for kind, check in (("links", check_links), ("json", check_json), ("python", check_python)):
            if kind in kinds:
                found, n = check(path, text)
                failures += found
                counts[kind] += n
    if "cpp" in kinds:
        found, n = check_cpp(texts)
        failures += found
        counts["cpp"] += n
    for failure in failures:
        print(failure)
    summary = ", ".join(f"{counts[k]} {k}" for k in ("python", "cpp", "json", "links") if k in counts)
    print(f"docs: {len(files)} files, {summary} checked: {'FAILED, ' + str(len(failures)) + ' failures' if failures else 'all pass'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
