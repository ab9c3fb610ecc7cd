"""The installed Triton's version, refused when older than tjit supports.

Every other module of the package imports from Triton after this one has run (the package's
__init__ imports it first, and the runtime embeds it first), so an unsupported Triton gives this
message rather than an ImportError about a name an older release lacks (3.3 has no triton.knobs)."""

import os
import re

import triton

SUPPORTED = "3.4 to 3.9"
_match = re.match(r"(\d+)\.(\d+)", triton.__version__)
TRITON_VERSION = (int(_match[1]), int(_match[2])) if _match else (0, 0)  # (major, minor)
if TRITON_VERSION < (3, 4):
    raise ImportError(f"tjit supports Triton {SUPPORTED}, but the Triton found is {triton.__version__} "
                      f"({os.path.dirname(triton.__file__)}); install a supported one, e.g. "
                      "pip install triton==3.6.0")
