"""deploy.sh's comparison with Python Triton, on a GPU of sm_90+.

tjit_consumer (JIT, under TJIT_RECORD) ran the autotuned TMA matmul and the attention forward of
tests/cpp/kernels/corpus_kernels.py through run(), tuning at the first call, and wrote their inputs,
outputs and chosen configs (records; read_io). Here Python Triton calls the same kernels as the
tutorials' wrappers do, on the same inputs, with the one config the recorded manifest chose, and the
outputs must equal tjit's bit for bit. The manifest must also hold that config's descriptor_hook
decision as Python's own pre_hook sets the descriptors (what the deployed program applies).

Usage: python tests/deploy/python_triton_check.py MANIFEST IO_FILE; exit 1 on any difference.
"""

import importlib.util
import json
import sys

import torch
import triton
from triton.runtime.autotuner import Autotuner
from triton.tools.tensor_descriptor import TensorDescriptor


def read_io(path):
    """The records consumer.cpp's write_io writes: "tensor NAME DTYPE SIZES..." and the bytes, or
    "value NAME TEXT". Tensors on the CPU, values as text."""
    dtypes = {"Half": torch.float16, "Float": torch.float32}
    io = {}
    with open(path, "rb") as f:
        while line := f.readline():
            kind, name, rest = line.decode().rstrip("\n").split(" ", 2)
            if kind == "tensor":
                dtype, *sizes = rest.split()
                shape = [int(s) for s in sizes]
                nbytes = dtypes[dtype].itemsize * torch.Size(shape).numel()
                data = bytearray(f.read(nbytes))
                if len(data) != nbytes:
                    sys.exit(f"python_triton_check: {path} is cut short in tensor {name}")
                io[name] = torch.frombuffer(data, dtype=dtypes[dtype]).view(shape)
            else:
                io[name] = rest
    return io


def recorded(entries, function):
    """The kernel file, the chosen config's text and the descriptor_hook decisions the manifest has
    for `function`."""
    mine = [e for e in entries if e["function"] == function]
    files = {e["file"] for e in mine}
    choices = {e["autotune"]["config"] for e in mine if "autotune" in e}
    if len(files) != 1 or len(choices) != 1:
        sys.exit(f"python_triton_check: the manifest should name one file and one autotune choice for {function}, "
                 f"not files {sorted(files)} and choices {sorted(choices)}")
    return files.pop(), choices.pop(), [e["descriptor_hook"] for e in mine if "descriptor_hook" in e]


def placeholder(t):
    return TensorDescriptor.from_tensor(t, [1, 1])  # the pre_hook sets the config's block shape


def check(what, ok):
    print(f"{what:56} {'ok' if ok else 'FAILED'}")
    return ok


def run_pinned(module, function, entries, call, named_args):
    """Python Triton's launch `call(kernel)` with the manifest's choice as the only config; checks
    that choice's descriptor_hook decision against the hook run on `named_args` (placeholder
    descriptors where the call has descriptors)."""
    _, text, hooks = recorded(entries, function)
    kernel = getattr(module, function)
    tuner = kernel
    while not isinstance(tuner, Autotuner):
        tuner = tuner.fn
    index = [str(c) for c in tuner.configs].index(text)
    config = tuner.configs[index]
    # What Python's hook does to placeholder descriptors, against what the manifest recorded.
    nargs = {**named_args, **config.all_kwargs()}
    config.pre_hook(nargs)
    expected = {name: {"block_shape": list(d.block_shape)} for name, d in nargs.items()
                if isinstance(d, TensorDescriptor) and list(d.block_shape) != [1, 1]}
    values = [h["values"] for h in hooks if h["config"] == index]
    ok = check(f"{function}: manifest's descriptor_hook of config {index}",
               len(values) >= 1 and all({n: {"block_shape": f.get("block_shape")} for n, f in v.items()} == expected
                                        for v in values))
    tuner.configs = [config]
    print(f"{function}: Python Triton with config {index} ({text})")
    call(kernel)
    torch.cuda.synchronize()
    return ok


def main(manifest, io_file):
    entries = json.load(open(manifest))["entries"]
    io = read_io(io_file)
    path = recorded(entries, "matmul_tma_kernel")[0]
    spec = importlib.util.spec_from_file_location("tjit_deploy_corpus_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ok = True

    a, b = io["a"].cuda(), io["b"].cuda()
    M, K = a.shape
    N = b.shape[0]
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    ok &= run_pinned(module, "matmul_tma_kernel", entries, lambda kernel: kernel[
        lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)](
            placeholder(a), placeholder(b), placeholder(c), M, N, K),
        {"a_desc": placeholder(a), "b_desc": placeholder(b), "c_desc": placeholder(c), "M": M, "N": N, "K": K})
    ok &= check("matmul_tma_kernel: tjit's output bit-identical", torch.equal(c.cpu(), io["c"]))
    ok &= check("matmul_tma_kernel: config as tjit chose", io["matmul_config"] == recorded(
        entries, "matmul_tma_kernel")[1])

    q, k, v = io["q"].cuda(), io["k"].cuda(), io["v"].cuda()
    Z, H, N_CTX, HEAD_DIM, STAGE = (int(io[n]) for n in ("Z", "H", "N_CTX", "HEAD_DIM", "STAGE"))
    sm_scale = float.fromhex(io["sm_scale"])
    o = torch.full_like(q, float("nan"))
    lse2 = torch.full((Z * H * N_CTX,), float("nan"), dtype=torch.float32, device="cuda")
    ok &= run_pinned(module, "attn_fwd_kernel", entries, lambda kernel: kernel[
        lambda META: (triton.cdiv(N_CTX, META["BLOCK_M"]), Z * H)](
            sm_scale, lse2, Z, H, placeholder(q), placeholder(k), placeholder(v), placeholder(o),
            N_CTX=N_CTX, HEAD_DIM=HEAD_DIM, STAGE=STAGE),
        {"sm_scale": sm_scale, "M": lse2, "Z": Z, "H": H, "desc_q": placeholder(q), "desc_k": placeholder(k),
         "desc_v": placeholder(v), "desc_o": placeholder(o), "N_CTX": N_CTX, "HEAD_DIM": HEAD_DIM, "STAGE": STAGE})
    ok &= check("attn_fwd_kernel: tjit's outputs bit-identical",
                torch.equal(o.cpu(), io["o"]) and torch.equal(lse2.cpu(), io["lse2"]))
    ok &= check("attn_fwd_kernel: config as tjit chose", io["attention_config"] == recorded(
        entries, "attn_fwd_kernel")[1])
    print("python triton check passed" if ok else "python triton check FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
