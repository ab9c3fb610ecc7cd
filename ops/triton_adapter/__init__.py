"""Python half of tjit's embedded Triton runtime.

The C++ runtime (libtjit_python) runs this package inside its embedded interpreter, as
`tjit_triton_adapter`, and calls load_kernel, compile, run_interpreted, prune_configs,
heuristic_values and descriptor_hook (tjit's tests also call triton_specialization). Everything that
depends on Triton's Python API lives here, so a new Triton release means changing this package only.

Supported: Triton 3.4 to 3.9 (tests/compat/triton_compat.sh runs the version-sensitive tests
against each). Where releases differ, the code says which versions need what, checked against
each release's sources; version.TRITON_VERSION is the installed one as (major, minor).

Modules, each after those it imports (the order the runtime embeds them in):
    version         the installed Triton's version, refused when unsupported
    state           the locks and the tables of loaded kernels, shared by all the modules
    values          constexpr values, arguments from the runtime, tuple type text
    sources         the source files a kernel depends on, and their fingerprints
    autotune        @triton.autotune / @triton.heuristics: description, pruning, heuristics' values
    loading         importing kernel files and packages; load_kernel
    compiler        compile: triton.compile of one specialisation, and its launch metadata
    specialization  triton_specialization: Python Triton's own classification of a launch
    interpreter     run_interpreted: Triton's interpreter, confined to the run
    descriptors     descriptor_hook: what a config's pre_hook does to tensor descriptors
"""

# version first: it refuses an unsupported Triton before the other modules import from it.
from .version import TRITON_VERSION  # noqa: F401

import triton  # noqa: F401  (the bundle builder reads triton.__version__ through this package)

from .autotune import heuristic_values, prune_configs
from .compiler import compile
from .descriptors import descriptor_hook
from .interpreter import run_interpreted
from .loading import load_kernel
from .sources import source_fingerprint
from .specialization import triton_specialization
from .values import tuple_type

__all__ = ["load_kernel", "compile", "run_interpreted", "prune_configs", "heuristic_values", "descriptor_hook",
           "triton_specialization", "source_fingerprint", "tuple_type"]
