"""The documentation runs: every Python snippet of README.md and docs/*.md runs on the CPU, every
C++ snippet compiles against the built headers, every relative link and anchor resolves
(tests/docs/check_docs.py), the performance page matches benchmarks/results, and the README's two
commands are the ones run.sh and CI run."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tests", "docs", "check_docs.py")


def _run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True)


def test_readme_and_docs_run():
    proc = _run(CHECK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all pass" in proc.stdout


def test_performance_page_matches_results():
    proc = _run(os.path.join(ROOT, "benchmarks", "performance_page.py"), "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_commands_are_the_ones_ci_runs():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    block = re.search(r"## The two commands\n\n```bash\n(.*?)```", readme, re.S)
    assert block, "README.md has no bash block under 'The two commands'"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["./run.sh demo", "./run.sh test"]
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert re.search(r"\./run\.sh test\b", f.read()), ".ci/run no longer runs the README's test command"
    with open(os.path.join(ROOT, "run.sh")) as f:
        run_sh = f.read()
    assert "  demo) " in run_sh and "  test) " in run_sh


BROKEN = '''# A page

## A heading

[fine](#a-heading) [missing file](no_such_file.md) [missing anchor](#no-such-heading)

```python
import torch
assert torch.ones(2).sum() == 3, "the snippet's own assertion"
```

```python cuda
def broken(:
```

```cpp
#include <tjit/triton_jit_function.h>
void f() { tjit::TritonJitFunction::no_such_member(); }
```

```cpp fragment
at::Tensor z = tjit::add(x, y, 2);
```

```json
{"a": 1,}
```
'''


def test_check_fails_on_broken_snippets_and_links(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text(BROKEN)
    proc = _run(CHECK, str(page), cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "link to a missing file: no_such_file.md" in out
    assert "missing heading #no-such-heading" in out
    assert "#a-heading" not in out
    assert "the snippet's own assertion" in out
    assert "broken.md:18: C++ does not compile" in out and "no_such_member" in out
    assert "broken.md:23" not in out  # the fragment, with the names pages use, compiles
    assert "JSON does not parse" in out
    # The cuda block only compiles on a CPU: a syntax error there fails the run before it runs.
    page.write_text("```python cuda\ndef broken(:\n```\n")
    proc = _run(CHECK, "--only", "python", str(page), cwd=str(tmp_path))
    assert proc.returncode == 1 and "SyntaxError" in proc.stdout, proc.stdout
