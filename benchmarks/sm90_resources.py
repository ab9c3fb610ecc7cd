"""What the sm_90 binaries of bandwidth_variants.py's launches use, compiled on this machine, no GPU needed:
registers, spills (local memory), shared memory, the programs an SM can hold (registers, warps and
shared memory, the smallest; no L1 carve-out modelled) and the binary's global memory instructions
(LDG.E.128 is a 16-byte load a thread; LDGSTS a cp.async into shared memory; ATOMG an atomic).

    python3 benchmarks/sm90_resources.py                 # both cases' launches at the issue shapes
    python3 benchmarks/sm90_resources.py --case softmax_fwd_bf16

Compiles through triton.compile(ASTSource(...)) for GPUTarget("cuda", 90, 32), as
tests/python/kernels_interpreter_check.py --compile-only does, with every pointer and every
integer argument but M marked divisible by 16 (the shapes here are), and reads the cubin with
Triton's bundled cuobjdump. A few seconds a binary.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def launches(case):
    """(label, kernel, signature, constexprs, num_warps, maxnreg) of the case's launches."""
    sys.path.insert(0, os.path.join(HERE, "kernels"))
    import bandwidth_candidates as cand
    import triton_wrappers as tw
    out = []
    if case == "softmax_fwd_bf16":
        sk = tw.softmax_k
        for n in (128256, 262144):
            chunks_pow2 = 1 << (-(-n // 4096) - 1).bit_length()
            sig = {"out_ptr": "*bf16", "in_ptr": "*bf16", "sync_ptr": "*i64", "M_BUCKET": "i32", "N": "i32",
                   "stride_in_row": "i32", "stride_out_row": "i32"}
            for config in sk._long_row_configs():
                k = config.kwargs
                label = f"N={n} {'split' if k['SPLIT'] else 'loop'}_{k['BLOCK_N']}w{config.num_warps}"
                constexprs = dict(CHUNKS_POW2=chunks_pow2, ALIGN=1, INDEX_64=False, **k)
                out.append((label, sk.softmax_fwd_long_kernel.fn, sig, constexprs, config.num_warps, 0))
                if k["SPLIT"] and config.num_warps <= 8:  # bandwidth_variants.py's _r32 variants
                    out.append((label + "_r32", sk.softmax_fwd_long_kernel.fn, sig, constexprs, config.num_warps, 32))
            split_sig = {"out_ptr": "*bf16", "in_ptr": "*bf16", "sync_ptr": "*i64", "M": "i32", "N": "i32", "S": "i32",
                         "stride_in_row": "i32", "stride_out_row": "i32"}
            for block, warps, maxnreg in ((8192, 8, 0), (8192, 8, 48), (4096, 4, 0), (16384, 16, 0)):
                s_pow2 = 1 << (-(-n // block) - 1).bit_length()
                out.append((f"N={n} peek_{block}w{warps}" + (f"_r{maxnreg}" if maxnreg else ""),
                            cand.softmax_fwd_split_peek_kernel, split_sig,
                            dict(BLOCK_N=block, S_POW2=s_pow2, ALIGN=1, INDEX_64=False, PEEK=True), warps, maxnreg))
            team_sig = dict(split_sig, rows_per_team="i32")
            team_sig = {k: team_sig[k] for k in ("out_ptr", "in_ptr", "sync_ptr", "M", "N", "S", "rows_per_team",
                                                 "stride_in_row", "stride_out_row")}
            for block, warps, stages in ((8192, 8, 3), (8192, 8, 2), (4096, 4, 3), (16384, 16, 2)):
                s_pow2 = 1 << (-(-n // block) - 1).bit_length()
                out.append((f"N={n} team_{block}w{warps}_s{stages}", cand.softmax_fwd_team_kernel, team_sig,
                            dict(BLOCK_N=block, S_POW2=s_pow2, STAGES=stages, INDEX_64=False), warps, 0))
    else:
        lk = tw.layer_norm_k
        sig = {"dx_ptr": "*fp32", "dw_partial_ptr": "*fp32", "db_partial_ptr": "*fp32", "dy_ptr": "*fp32",
               "x_ptr": "*fp32", "w_ptr": "*fp32", "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "M": "i32", "N": "i32",
               "stride_dx_row": "i32", "stride_dy_row": "i32", "stride_x_row": "i32", "rows_per_program": "i32"}
        flags = dict(HAS_WEIGHT=True, COMPUTE_DX=True, COMPUTE_DW=True, COMPUTE_DB=True, INDEX_64=False, BLOCK_TAIL=0)
        for label, block_m, block_n, warps, maxnreg in (
                ("2048 gate_shut (main)", 2, 2048, 8, 0), ("2048 rows_x2 (H200 plan)", 4, 2048, 16, 0),
                ("2048 two_per_sm", 2, 2048, 8, 128), ("2048 half_rows", 1, 2048, 8, 0),
                ("2048 half_rows_warps", 1, 2048, 4, 0), ("4096 plan", 2, 4096, 16, 0)):
            out.append((label, lk.layer_norm_bwd_fused_kernel, sig, dict(flags, BLOCK_M=block_m, BLOCK_N=block_n), warps,
                        maxnreg))
        out.append(("2048 finalize G=132", lk.layer_norm_bwd_dwdb_finalize_kernel,
                    {"dw_ptr": "*fp32", "db_ptr": "*fp32", "dw_partial_ptr": "*fp32", "db_partial_ptr": "*fp32",
                     "G": "i32", "N": "i32"},
                    dict(COMPUTE_DW=True, COMPUTE_DB=True, BLOCK_G=128, BLOCK_N=16, INDEX_64=False), 4, 0))
    return out


def resources(kernel, signature, constexprs, num_warps, maxnreg):
    """{regs, spill_bytes, shared, per_sm, memory_ops} of the sm_90 binary."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    attrs = {}
    for i, name in enumerate(kernel.arg_names):
        kind = signature.get(name, "")
        if kind.startswith("*") or (kind in ("i32", "i64") and name != "M"):
            attrs[(i, )] = [["tt.divisibility", 16]]
    sig = dict(signature, **{k: "constexpr" for k in constexprs if k not in signature})
    options = {"num_warps": num_warps, **({"maxnreg": maxnreg} if maxnreg else {})}
    compiled = triton.compile(ASTSource(kernel, signature=sig, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options=options)
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(compiled.asm["cubin"])
        usage = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True, check=True).stdout
    regs, local = (int(v) for v in re.search(r"REG:(\d+) .*LOCAL:(\d+)", usage).groups())
    shared = compiled.metadata.shared
    threads = 32 * num_warps
    by_regs = 65536 // (threads * ((max(regs, 1) + 7) // 8 * 8))
    by_shared = 228 * 1024 // (shared + 1024) if shared else 32  # 1 KB reserved a program
    per_sm = min(by_regs, 64 // num_warps, by_shared, 32)
    ops = collections.Counter(re.findall(r"\b((?:LDGSTS|LDG|STG|ATOMG|RED)(?:\.[A-Z0-9_]+)*)", sass))
    return dict(regs=regs, spill_bytes=local, shared=shared, per_sm=per_sm, memory_ops=dict(sorted(ops.items())))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=("softmax_fwd_bf16", "layer_norm_bwd_fp32", "both"), default="both")
    args = p.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)  # compiled, not interpreted
    sys.path.insert(0, HERE)
    for case in (("softmax_fwd_bf16", "layer_norm_bwd_fp32") if args.case == "both" else (args.case, )):
        print(case)
        for label, kernel, sig, constexprs, warps, maxnreg in launches(case):
            r = resources(kernel, sig, constexprs, warps, maxnreg)
            print(f"  {label:28s} w{warps:<2d} {r['regs']:3d} regs {r['spill_bytes']:3d} B spilled "
                  f"{r['shared']:6d} B shared {r['per_sm']:2d}/SM  {r['memory_ops']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
