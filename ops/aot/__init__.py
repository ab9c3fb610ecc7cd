"""tjit's ahead-of-time bundle builder: a manifest of kernel specialisations in, one bundle file of
compiled kernels for several GPU targets out, which the C++ runtime embeds in a program and loads
without Python or Triton.

    python -m tjit aot build --manifest M.json [--manifest M2.json ...] --target cuda:80 --target cuda:90
                             -o OUT.tjb [-j N] [--depfile OUT.tjb.d] [--decisions-from STORE]
    python -m tjit aot list OUT.tjb [--json]
    python -m tjit aot merge A.json B.json ... -o C.json

The package also runs as a plain script, `python <tjit>/aot build ...`, without importing the
`tjit` package (whose __init__ loads tjit's C++ library and torch): CMake builds bundles that way.
It then loads kernel_store.py and the triton_adapter package from its parent folder by path
(siblings.py).
Compiles go through triton_adapter, in `spawn` worker processes (-j, default os.cpu_count());
nothing is written unless every compile succeeds.

Its modules, each using only those above it:
    keys.py             targets, Triton's type names, launch options, bundle_key() (the runtime's key)
    siblings.py         kernel_store and triton_adapter, found without importing tjit
    kernels.py          kernels loaded through triton_adapter, as the store's signature describes them
    files.py            atomic writes, depfile escaping
    manifest.py         the manifest format (its docstring): specialisations and decisions
    bundle_format.py    the bundle format (its docstring): encode, decode with every check
    compile_workers.py  compiles in worker processes
    builder.py          build_bundle(): manifests (and kernel stores' decisions) to a bundle file
    cli.py              the command line

Python API: read_manifest, read_manifests, read_decisions, merge_manifests, manifest_json,
build_bundle, store_decisions, read_bundle and decode_bundle (raise DamagedFile, saying why, for a
damaged bundle), encode_bundle, bundle_key, entry_key, main.
"""

from .keys import (OPTION_DEFAULTS, OPTIONAL_OPTIONS, TJIT_VERSION, bundle_key, describe, options_text,
                   parse_target, target_string)
from .siblings import DamagedFile, kernel_store
from .manifest import (DECISION_KINDS, MANIFEST_VERSION, Decision, ManifestError, Spec, manifest_json,
                       merge_manifests, read_decisions, read_manifest, read_manifests)
from .bundle_format import (BUNDLE_FORMAT, BUNDLE_MAGIC, BUNDLE_VERSION, BuildError, Bundle, BundleEntry,
                            decode_bundle, encode_bundle, entry_key, read_bundle)
from .builder import BuildStats, build_bundle, store_decisions
from .cli import main

__all__ = ["OPTION_DEFAULTS", "OPTIONAL_OPTIONS", "TJIT_VERSION", "bundle_key", "describe", "options_text",
           "parse_target", "target_string", "DamagedFile", "kernel_store", "DECISION_KINDS", "MANIFEST_VERSION",
           "Decision", "ManifestError", "Spec", "manifest_json", "merge_manifests", "read_decisions",
           "read_manifest", "read_manifests", "BUNDLE_FORMAT", "BUNDLE_MAGIC", "BUNDLE_VERSION", "BuildError",
           "Bundle", "BundleEntry", "decode_bundle", "encode_bundle", "entry_key", "read_bundle", "BuildStats",
           "build_bundle", "store_decisions", "main"]
