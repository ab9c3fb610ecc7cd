"""Kernels as the builder sees them: loaded through triton_adapter once per process, with the
parameters, sources and Triton version that the kernel store's signature JSON holds."""

import dataclasses

from .siblings import adapter


@dataclasses.dataclass
class Kernel:
    file: str
    function: str
    handle: int
    params: list  # (name, is_constexpr, is_const, do_not_specialize, do_not_specialize_on_alignment, annotation,
    #               (has_default, default as JSON))
    sources: list  # (path, fingerprint), the kernel file first
    triton: str
    tuning: str = ""  # what @triton.autotune / @triton.heuristics add (JSON; empty for a plain kernel)

    def signature(self) -> dict:
        """The store's signature JSON (signature_to_json in kernel_entry.cpp)."""
        return {"file": self.file, "function": self.function,
                "params": [{"name": name, "constexpr": is_constexpr, "const": is_const, "do_not_specialize": dns,
                            "do_not_specialize_on_alignment": dnsoa, "annotation": annotation,
                            **({"default": default[1]} if default[0] else {})}
                           for name, is_constexpr, is_const, dns, dnsoa, annotation, default in self.params],
                "sources": [{"path": path, "fingerprint": fingerprint} for path, fingerprint in self.sources],
                "triton": self.triton, "tuning": self.tuning, "param_defaults": True}


_loaded = {}  # (file, function) -> Kernel


def load_kernel(file: str, function: str) -> Kernel:
    kernel = _loaded.get((file, function))
    if kernel is None:
        handle, params, sources, triton_version, tuning = adapter().load_kernel(file, function)
        kernel = Kernel(file, function, handle, [tuple(p[:6]) + (tuple(p[6]),) for p in params],
                        [tuple(s) for s in sources],
                        triton_version, tuning)
        _loaded[(file, function)] = kernel
    return kernel
