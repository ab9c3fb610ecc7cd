"""triton.compile for one specialisation of a loaded kernel, and the metadata of the result the
runtime launches it with (scratch sizes, launch flags, how tensor descriptors reach it)."""

import functools
import hashlib

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.compiler.errors import CompilationError

from . import state
from .values import python_constexpr, tuple_type
from .version import TRITON_VERSION


def _with_reason(error):
    # Triton 3.4: a call that fails inside a kernel (tl.arange(0, 3), a failing @jit helper) raises
    # a CompilationError with no message of its own, the reason only in __cause__, which the C++
    # side never shows. 3.5 and later put str(cause) into the message; do the same, down the chain.
    cause = error.__cause__
    if not isinstance(error, CompilationError) or error.error_message or cause is None:
        return error
    cause = _with_reason(cause)
    explained = CompilationError(error.src, error.node, str(cause))
    explained.__cause__ = cause
    return explained


class _SourceKeyedAST(ASTSource):
    """Triton 3.4: the compile cache key (ASTSource.hash) leaves out the values of globals a kernel
    reads from other modules (3.5 adds them), so after such a constant was edited triton.compile
    returned the old binary from Triton's cache. Key on the fingerprints of every source file too."""

    def __init__(self, fn, signature, constexprs, attrs, fingerprints):
        super().__init__(fn, signature, constexprs, attrs)
        self._fingerprints = fingerprints

    def hash(self):
        return hashlib.sha256((super().hash() + self._fingerprints).encode("utf-8")).hexdigest()


def _ast_source(path, fn, signature, consts, attrs):
    if TRITON_VERSION >= (3, 5):
        return ASTSource(fn, signature, consts, attrs)
    fingerprints = "-".join(blob for _, blob in state.source_files.get(path, ()))
    return _SourceKeyedAST(fn, signature, consts, attrs, fingerprints)


def compile(handle, types, constexprs, divisible, target, options, tuple_constexprs=(), tuple_divisible=()):
    """triton.compile for one specialisation; returns (cubin, metadata dict). Tuple parameters have
    their type as text ("[*fp32,i32]"), their constexpr and divisible elements by path."""
    path, _, fn = state.kernels[handle]
    backend_name, arch, warp_size = target
    gpu_target = GPUTarget(backend_name, arch, warp_size)
    backend = make_backend(gpu_target)
    signature = {p.name: tuple_type(t) for p, t in zip(fn.params, types)}
    consts = {(i, ): python_constexpr(v) for i, v in constexprs}
    consts.update({tuple(p): python_constexpr(v) for p, v in tuple_constexprs})
    attrs = {(i, ): backend.parse_attr("D") for i in divisible}
    attrs.update({tuple(p): backend.parse_attr("D") for p in tuple_divisible})
    opts = backend.parse_options(dict(options))
    with state.mode_lock:
        try:
            kernel = triton.compile(_ast_source(path, fn, signature, consts, attrs), target=gpu_target,
                                    options=opts.__dict__)
        except CompilationError as e:
            if TRITON_VERSION >= (3, 5):
                raise
            raise _with_reason(e) from e.__cause__
    md = kernel.metadata
    return kernel.asm["cubin"], {
        "name": md.name,
        "shared": int(md.shared),
        "num_warps": int(md.num_warps),
        "num_ctas": int(md.num_ctas),
        "global_scratch_size": int(getattr(md, "global_scratch_size", 0) or 0),
        "global_scratch_align": int(getattr(md, "global_scratch_align", 1) or 1),
        "profile_scratch_size": int(getattr(md, "profile_scratch_size", 0) or 0),
        "profile_scratch_align": int(getattr(md, "profile_scratch_align", 1) or 1),
        "launch_cooperative_grid": bool(getattr(md, "launch_cooperative_grid", False)),
        "launch_pdl": bool(getattr(md, "launch_pdl", False)),
        "tensor_descriptors": _descriptor_launches(types, getattr(md, "tensordesc_meta", None)),
    }


@functools.lru_cache(maxsize=None)
def _decomposed_descriptor_flags():
    """How many i1 flags Triton's launcher passes after a decomposed tensor descriptor's base,
    shape and strides (none in 3.4; padding == "nan" from 3.5; also round_f32_to_tf32 in 3.9),
    read off Triton's own decomposition of a one-dimensional stand-in."""
    import types as _types
    stand_in = _types.SimpleNamespace(base=0, shape=[1], strides=[1], block_shape=[1], padding="zero",
                                      round_f32_to_tf32=False)
    try:
        from triton.backends.driver import decompose_descriptor  # Triton 3.9+
        parts = decompose_descriptor(stand_in)
    except ImportError:
        from triton.backends.nvidia.driver import make_tensordesc_arg
        parts = make_tensordesc_arg(stand_in, None)
    return len(parts) - 5  # base, shape, strides, flags..., shape, strides


def _descriptor_launches(types, tensordesc_meta):
    """How each tensor-descriptor parameter reaches the compiled kernel (CompiledKernel's
    tensor_descriptors): the TMA metadata Triton compiled it with, element type as the host's
    CUtensorMapDataType; or, without metadata (no TMA below sm_90), the decomposition's flags."""
    count = sum(1 for t in types if t.startswith("tensordesc"))
    if count == 0:
        return []
    if not tensordesc_meta:
        flags = _decomposed_descriptor_flags()
        return [{"tma": False, "flags": flags} for _ in range(count)]
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST
    if len(tensordesc_meta) != count:
        raise RuntimeError(f"Triton compiled {len(tensordesc_meta)} tensor descriptors for {count} parameters")
    return [{"tma": True, "swizzle": int(m["swizzle"]), "elem_size": int(m["elem_size"]),
             "elem_type": int(TMA_DTYPE_DEVICE_TO_HOST[m["elem_type"]]),
             "block_size": [int(b) for b in m["block_size"]], "fp4_padded": bool(m["fp4_padded"])}
            for m in tensordesc_meta]
