"""tjit's operators in distributed training, on two processes: each operator on sharded DTensors
against aten on the whole tensor (values and placements, and no collective where the sharding
allows none), then a small transformer block whose layer_norm, softmax, adds and loss sum are
tjit's, trained under FSDP2, tensor + sequence parallelism and DDP against the same block with
aten's ops on one process, and the tensor-parallel block under torch.compile.

Run by tests/python/test_distributed.py (which reads the results), or by hand:
    torchrun --nproc-per-node 2 tests/python/distributed_checks.py --device cuda --out /tmp/dist
    python tests/python/distributed_checks.py --device cpu --out /tmp/dist   # spawns two processes
Each rank writes <out>/rank<r>.json: {check: "ok" | the failure}. Checks run in order and each is
independent: one failing does not stop the others (a collective left half-done would; they end in
a barrier)."""

import argparse
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tjit

from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor  # noqa: E402
from torch.distributed.tensor.debug import CommDebugMode  # noqa: E402

WORLD = 2
CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def tolerance(dtype=torch.float32):
    return dict(rtol=1e-4, atol=1e-5) if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2)


class Env:
    def __init__(self, device, mesh, rank):
        self.device, self.mesh, self.rank = device, mesh, rank

    def same_everywhere(self, *shape, seed, dtype=torch.float32):
        """A tensor every rank draws alike (the whole tensor)."""
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(self.device, dtype)

    def partial(self, *shape, seed, kind="sum"):
        """(a Partial DTensor, the whole tensor it stands for): each rank holds its own random part."""
        parts = [self.same_everywhere(*shape, seed=seed * 10 + r) for r in range(WORLD)]
        whole = torch.stack(parts).sum(0) if kind == "sum" else torch.stack(parts).mean(0)
        return DTensor.from_local(parts[self.rank], self.mesh, [Partial(kind)], run_check=False), whole

    def shard(self, t, placement):
        return distribute_tensor(t, self.mesh, [placement])


def collectives(fn):
    """fn()'s result and the number of collectives it ran."""
    with CommDebugMode() as comm:
        out = fn()
    return out, comm.get_total_counts()


def expect(dt, whole, placements, what, dtype=torch.float32):
    assert isinstance(dt, DTensor), f"{what}: expected a DTensor, got {type(dt)}"
    assert tuple(dt.placements) == tuple(placements), f"{what}: placements {dt.placements}, expected {placements}"
    torch.testing.assert_close(dt.full_tensor(), whole, **tolerance(dtype), msg=lambda m: f"{what}: {m}")


# --- each operator on sharded DTensors


@check
def every_operator_has_a_strategy(env):
    from torch.distributed.tensor import DTensor as D
    funcs = D._op_dispatcher.sharding_propagator.op_strategy_funcs
    ops = [n for n in dir(torch.ops.tjit) if isinstance(getattr(torch.ops.tjit, n), torch._ops.OpOverloadPacket)]
    missing = [n for n in ops if getattr(torch.ops.tjit, n).default not in funcs]
    assert not missing, f"tjit operators without a DTensor sharding strategy: {missing} (ops/distributed.py)"
    assert {"add", "sum", "softmax", "layer_norm_backward"} <= set(ops), ops


@check
def operator_add(env):
    x = env.same_everywhere(5, 6, 4, seed=1)  # 5 rows over two ranks: uneven shards
    y = env.same_everywhere(5, 6, 4, seed=2)
    for d in range(3):
        xs, ys = env.shard(x, Shard(d)), env.shard(y, Shard(d))
        out, n = collectives(lambda: torch.ops.tjit.add(xs, ys, alpha=3))
        expect(out, x + 3 * y, [Shard(d)], f"add Shard({d})")
        assert n == 0, f"add Shard({d}) ran {n} collectives"
    # Broadcasting: a [6, 1] other is replicated where the output is sharded on its size-1 dim.
    b = env.same_everywhere(6, 1, seed=3)
    xs, bs = env.shard(x, Shard(1)), env.shard(b, Shard(0))
    out, n = collectives(lambda: torch.ops.tjit.add(xs, bs))
    expect(out, x + b, [Shard(1)], "add broadcast, Shard(1)")
    assert n == 0, f"add broadcast ran {n} collectives"
    out = torch.ops.tjit.add(env.shard(x, Shard(2)), env.shard(b, Replicate()))
    expect(out, x + b, [Shard(2)], "add broadcast over the sharded dim")
    out = torch.ops.tjit.add(env.shard(x, Replicate()), env.shard(y, Replicate()), alpha=-2)
    expect(out, x - 2 * y, [Replicate()], "add Replicate")
    # Partial: sums of partial sums stay partial, as do averages plus a replicated term.
    px, wx = env.partial(5, 6, 4, seed=4)
    py, wy = env.partial(5, 6, 4, seed=5)
    out, n = collectives(lambda: torch.ops.tjit.add(px, py, alpha=2))
    expect(out, wx + 2 * wy, [Partial("sum")], "add Partial + Partial")
    assert n == 0
    pa, wa = env.partial(5, 6, 4, seed=6, kind="avg")
    out = torch.ops.tjit.add(pa, env.shard(y, Replicate()), alpha=0.5)
    expect(out, wa + 0.5 * y, [Partial("avg")], "add Partial(avg) + Replicate")
    out = torch.ops.tjit.add(px, env.shard(y, Replicate()))  # must not add y once per rank
    torch.testing.assert_close(out.full_tensor(), wx + y, **tolerance())
    # Backward through DTensor: the broadcast operand's gradient is summed (tjit.sum) over the rows.
    xs = env.shard(x, Shard(0)).requires_grad_()
    bs = env.shard(b, Replicate()).requires_grad_()
    g = env.same_everywhere(5, 6, 4, seed=7)
    torch.ops.tjit.add(xs, bs, alpha=2).backward(env.shard(g, Shard(0)))
    torch.testing.assert_close(xs.grad.full_tensor(), g, **tolerance())
    torch.testing.assert_close(bs.grad.full_tensor(), 2 * g.sum(0).sum(-1, keepdim=True), **tolerance())


@check
def operator_sum(env):
    x = env.same_everywhere(5, 6, 4, seed=11)
    xs = env.shard(x, Shard(0))
    # The same input with other dims: each call has its own placements (no stale cache entry).
    cases = [([1], False, [Shard(0)]), ([0], False, [Partial("sum")]), ([2], True, [Shard(0)]),
             ([0, 2], True, [Partial("sum")]), (None, False, [Partial("sum")]), ([-1, 1], False, [Shard(0)])]
    for dims, keepdim, placements in cases:
        out, n = collectives(lambda: torch.ops.tjit.sum(xs, dims, keepdim))
        whole = x.sum(dims, keepdim=keepdim) if dims is not None else x.sum()
        expect(out, whole, placements, f"sum dims={dims} keepdim={keepdim} of Shard(0)")
        assert n == 0, f"sum {dims} ran {n} collectives"
    out = torch.ops.tjit.sum(env.shard(x, Shard(1)), [0])
    expect(out, x.sum(0), [Shard(0)], "sum of Shard(1) over dim 0 (the sharded dim shifts)")
    out = torch.ops.tjit.sum(env.shard(x, Shard(2)), [1], True, dtype=torch.float64)
    expect(out, x.sum(1, keepdim=True, dtype=torch.float64), [Shard(2)], "sum keepdim, dtype", torch.float64)
    px, wx = env.partial(5, 6, 4, seed=12)
    expect(torch.ops.tjit.sum(px, [1]), wx.sum(1), [Partial("sum")], "sum of Partial")
    xg = env.shard(x, Shard(1)).requires_grad_()
    tjit.sum(xg, [1]).full_tensor().pow(2).sum().backward()
    torch.testing.assert_close(xg.grad.full_tensor(), (2 * x.sum(1, keepdim=True)).expand_as(x), **tolerance())


@check
def operator_softmax(env):
    x = env.same_everywhere(3, 5, 7, seed=21)
    for d in (0, 1):
        xs = env.shard(x, Shard(d)).requires_grad_()
        out, n = collectives(lambda: torch.ops.tjit.softmax(xs, -1))
        expect(out, torch.softmax(x, -1), [Shard(d)], f"softmax over -1 of Shard({d})")
        g = env.same_everywhere(3, 5, 7, seed=22)
        gs = env.shard(g, Shard(d))
        _, nb = collectives(lambda: out.backward(gs))
        xr = x.clone().requires_grad_()
        torch.softmax(xr, -1).backward(g)
        expect(xs.grad, xr.grad, [Shard(d)], f"softmax backward, Shard({d})")
        assert n == 0 and nb == 0, f"softmax Shard({d}) ran {n} + {nb} collectives"
    # Non-contiguous shards (a transposed DTensor), the softmax dim first.
    xt = env.shard(x, Shard(0)).transpose(0, 2)
    out, n = collectives(lambda: tjit.softmax(xt, 0))
    expect(out, torch.softmax(x.transpose(0, 2), 0), [Shard(2)], "softmax of a transposed DTensor")
    assert n == 0, n
    # Sharded on the softmax dim: gathered first, the result still right.
    out = tjit.softmax(env.shard(x, Shard(2)), 2)
    assert not any(isinstance(p, Shard) and p.dim == 2 for p in out.placements), out.placements
    torch.testing.assert_close(out.full_tensor(), torch.softmax(x, 2), **tolerance())
    out = torch.ops.tjit.softmax(env.shard(x, Shard(2)), 1, torch.float64)
    expect(out, torch.softmax(x, 1, dtype=torch.float64), [Shard(2)], "softmax dtype", torch.float64)
    # The backward is linear in the incoming gradient: a Partial one gives a Partial result.
    y = torch.softmax(x, 1)
    pg, wg = env.partial(3, 5, 7, seed=23)
    out = torch.ops.tjit.softmax_backward(pg, env.shard(y, Replicate()), 1, torch.float32)
    expect(out, torch.ops.aten._softmax_backward_data(wg, y, 1, torch.float32), [Partial("sum")],
           "softmax_backward of a Partial gradient")


def _layer_norm_case(env, shape, normalized, placement, affine, seed):
    x = env.same_everywhere(*shape, seed=seed)
    w = env.same_everywhere(*normalized, seed=seed + 1) if affine else None
    b = env.same_everywhere(*normalized, seed=seed + 2) if affine else None
    g = env.same_everywhere(*shape, seed=seed + 3)
    what = f"layer_norm {shape} over {normalized}, {placement}, affine={affine}"
    xs = env.shard(x, placement).requires_grad_()
    ws = env.shard(w, Replicate()).requires_grad_() if affine else None
    bs = env.shard(b, Replicate()).requires_grad_() if affine else None
    out, n = collectives(lambda: tjit.layer_norm(xs, normalized, ws, bs, 1e-5))
    xr = x.clone().requires_grad_()
    wr = w.clone().requires_grad_() if affine else None
    br = b.clone().requires_grad_() if affine else None
    ref = F.layer_norm(xr, normalized, wr, br, 1e-5)
    expect(out, ref, [placement], what)
    gs = env.shard(g, placement)
    _, nb = collectives(lambda: out.backward(gs))
    ref.backward(g)
    expect(xs.grad, xr.grad, [placement], what + ": input gradient")
    assert n == 0 and nb == 0, f"{what}: {n} collectives forward, {nb} backward"
    if affine:
        # Summed over each rank's rows: Partial until someone needs them whole.
        expect(ws.grad, wr.grad, [Partial("sum")], what + ": weight gradient")
        expect(bs.grad, br.grad, [Partial("sum")], what + ": bias gradient")
    return x, w, b, g


@check
def operator_layer_norm(env):
    for placement in (Shard(0), Shard(1)):
        for affine in (True, False):
            _layer_norm_case(env, (5, 3, 8), [8], placement, affine, seed=31)
    _layer_norm_case(env, (4, 3, 6), [3, 6], Shard(0), True, seed=35)
    _layer_norm_case(env, (2, 0, 8), [8], Shard(0), True, seed=38)  # no rows: zero parameter gradients
    # The forward and backward operators themselves, every output's placement.
    x, w, b, g = _layer_norm_case(env, (3, 4, 8), [8], Shard(1), True, seed=41)
    xs, gs = env.shard(x, Shard(1)), env.shard(g, Shard(1))
    ws, bs = env.shard(w, Replicate()), env.shard(b, Replicate())
    out, mean, rstd = torch.ops.tjit.layer_norm_forward(xs, [8], ws, bs, 1e-5)
    ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)
    expect(out, ref_out, [Shard(1)], "layer_norm_forward out")
    expect(mean, ref_mean.squeeze(-1), [Shard(1)], "layer_norm_forward mean")
    expect(rstd, ref_rstd.squeeze(-1), [Shard(1)], "layer_norm_forward rstd")
    ref = torch.ops.aten.native_layer_norm_backward(g, x, [8], ref_mean, ref_rstd, w, b, [True, True, True])
    for mask in ([True, True, True], [True, False, True], [False, True, False]):
        got = torch.ops.tjit.layer_norm_backward(gs, xs, [8], mean, rstd, ws, bs, mask)
        for i, (o, r, want) in enumerate(zip(got, ref, [Shard(1), Partial("sum"), Partial("sum")])):
            if not mask[i]:
                assert o is None, f"layer_norm_backward mask {mask}: output {i} is {type(o)}"
            else:
                expect(o, r, [want], f"layer_norm_backward mask {mask} output {i}")
    # Linear in grad_out: a Partial gradient in, Partial gradients out.
    pg, wg = env.partial(3, 4, 8, seed=45)
    reps = [env.shard(t, Replicate()) for t in (x, mean.full_tensor(), rstd.full_tensor())]
    got = torch.ops.tjit.layer_norm_backward(pg, reps[0], [8], reps[1], reps[2], ws, bs, [True, True, True])
    ref = torch.ops.aten.native_layer_norm_backward(wg, x, [8], ref_mean, ref_rstd, w, b, [True, True, True])
    for i, (o, r) in enumerate(zip(got, ref)):
        expect(o, r, [Partial("sum")], f"layer_norm_backward of a Partial gradient, output {i}")
    # Sharded on a normalised dim: the result is still right (gathered for the call).
    out = tjit.layer_norm(env.shard(x, Shard(2)), [8], ws, bs)
    torch.testing.assert_close(out.full_tensor(), F.layer_norm(x, [8], w, b), **tolerance())
    # Reduced precision keeps the placements.
    xh = x.to(torch.bfloat16)
    out = tjit.layer_norm(env.shard(xh, Shard(0)), [8], env.shard(w.bfloat16(), Replicate()),
                          env.shard(b.bfloat16(), Replicate()))
    expect(out, F.layer_norm(xh, [8], w.bfloat16(), b.bfloat16()), [Shard(0)], "layer_norm bf16", torch.bfloat16)


@check
def operator_rms_norm(env):
    """rms_norm and add_rms_norm, where this build has them."""
    if not hasattr(torch.ops.tjit, "rms_norm"):
        return "this build has no rms_norm"
    x = env.same_everywhere(5, 3, 8, seed=51)
    r = env.same_everywhere(5, 3, 8, seed=52)
    w = env.same_everywhere(8, seed=53)
    g = env.same_everywhere(5, 3, 8, seed=54)
    for placement in (Shard(0), Shard(1)):
        xs = env.shard(x, placement).requires_grad_()
        ws = env.shard(w, Replicate()).requires_grad_()
        out, n = collectives(lambda: torch.ops.tjit.rms_norm(xs, [8], ws, 1e-6))
        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
        ref = F.rms_norm(xr, [8], wr, 1e-6)
        expect(out, ref, [placement], f"rms_norm {placement}")
        gs = env.shard(g, placement)
        _, nb = collectives(lambda: out.backward(gs))
        ref.backward(g)
        expect(xs.grad, xr.grad, [placement], f"rms_norm {placement} input gradient")
        expect(ws.grad, wr.grad, [Partial("sum")], f"rms_norm {placement} weight gradient")
        assert n == 0 and nb == 0, f"rms_norm {placement}: {n} + {nb} collectives"
    if hasattr(torch.ops.tjit, "add_rms_norm"):
        xs, rs = env.shard(x, Shard(1)).requires_grad_(), env.shard(r, Shard(1)).requires_grad_()
        ws = env.shard(w, Replicate()).requires_grad_()
        out, total = torch.ops.tjit.add_rms_norm(xs, rs, [8], ws, 1e-6)
        xr, rr, wr = (t.clone().requires_grad_() for t in (x, r, w))
        ref_total = xr + rr
        ref = F.rms_norm(ref_total, [8], wr, 1e-6)
        expect(out, ref, [Shard(1)], "add_rms_norm out")
        expect(total, ref_total, [Shard(1)], "add_rms_norm sum")
        # The gradients as the operator returns them (torch.autograd.grad): input and residual get
        # the same tensor, so leaves' .grad would be a copy of it, whose placement is torch's (2.11:
        # Replicate, from AccumulateGrad's new_empty_strided).
        grads = torch.autograd.grad(out, (xs, rs, ws), env.shard(g, Shard(1)))  # the sum unused
        want = torch.autograd.grad(ref, (xr, rr, wr), g)
        for got, expected, name in zip(grads[:2], want[:2], ("input", "residual")):
            expect(got, expected, [Shard(1)], f"add_rms_norm {name} gradient")
        expect(grads[2], want[2], [Partial("sum")], "add_rms_norm weight gradient")


# --- a transformer block trained under FSDP2, tensor + sequence parallelism and DDP


class LayerNorm(torch.nn.Module):
    def __init__(self, dim, ops):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.bias = torch.nn.Parameter(torch.zeros(dim))
        self.ops = ops

    def forward(self, x):
        if self.ops is None:
            return F.layer_norm(x, [x.shape[-1]], self.weight, self.bias, 1e-5)
        return self.ops.layer_norm(x, [x.shape[-1]], self.weight, self.bias, 1e-5)


class Attention(torch.nn.Module):
    def __init__(self, dim, heads, ops):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim) for _ in range(4))
        self.head_dim = dim // heads
        self.ops = ops

    def forward(self, x):
        b, s, _ = x.shape
        # Heads first ([heads, batch, seq, head_dim]): the matmuls flatten heads with the batch, and
        # DTensor (torch 2.11) flattens a sharded dim only when it leads the flattened ones.
        q, k, v = (p(x).view(b, s, -1, self.head_dim).permute(2, 0, 1, 3) for p in (self.q, self.k, self.v))
        scores = q @ k.transpose(-2, -1) * self.head_dim**-0.5
        p = torch.softmax(scores, -1) if self.ops is None else self.ops.softmax(scores, -1)
        return self.o((p @ v).permute(1, 2, 0, 3).reshape(b, s, -1))


class Block(torch.nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then h + mlp(norm2(h)); tjit's operators
    (`ops`: the module tjit) or aten's (None)."""

    def __init__(self, dim=16, heads=4, hidden=32, ops=None):
        super().__init__()
        self.norm1, self.attn = LayerNorm(dim, ops), Attention(dim, heads, ops)
        self.norm2, self.up, self.down = LayerNorm(dim, ops), torch.nn.Linear(dim, hidden), torch.nn.Linear(hidden, dim)
        self.ops = ops

    def add(self, a, b):
        return a + b if self.ops is None else self.ops.add(a, b)

    def forward(self, x):
        h = self.add(x, self.attn(self.norm1(x)))
        return self.add(h, self.down(F.gelu(self.up(self.norm2(h)))))


def loss_of(model_ops, out, target, scale):
    """sum(out * target) * scale, summed by tjit.sum where the model is tjit's."""
    prod = out * target
    return (prod.sum() if model_ops is None else model_ops.sum(prod)) * scale


def batches(env, steps, batch, seq, dim):
    for step in range(steps):
        yield (env.same_everywhere(batch, seq, dim, seed=1000 + step),
               env.same_everywhere(batch, seq, dim, seed=2000 + step))


def reference_and_copy(env, seed=0):
    torch.manual_seed(seed)
    ref = Block().to(env.device)
    mine = Block(ops=tjit).to(env.device)
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def whole(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def compare_grads(ref, model, what):
    named = dict(model.named_parameters())
    for name, p in ref.named_parameters():
        name = name.replace("_orig_mod.", "")
        mine = named.get(name, named.get("module." + name))
        assert mine is not None and mine.grad is not None, f"{what}: no gradient for {name}"
        torch.testing.assert_close(whole(mine.grad), p.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{what}: gradient of {name}: {m}")


def train(env, model, forward_loss, steps, what):
    """Trains `model` and aten's block (env.reference) side by side with SGD, the same data, losses
    and gradients compared every step. forward_loss(x, target) -> (the loss to call backward on,
    the whole batch's loss, alike on every rank)."""
    ref = env.reference
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, target) in enumerate(batches(env, steps, 4, 8, 16)):
        opt_ref.zero_grad()
        opt.zero_grad()
        ref_loss = loss_of(None, ref(x), target, 1.0 / target.numel())
        ref_loss.backward()
        loss, value = forward_loss(x, target)
        loss.backward()
        torch.testing.assert_close(value.detach().reshape(()), ref_loss.detach(), rtol=1e-4, atol=1e-6,
                                   msg=lambda m: f"{what}: loss at step {step}: {m}")
        compare_grads(ref, model, f"{what}, step {step}")
        opt_ref.step()
        opt.step()


def data_parallel_loss(env, model):
    def forward_loss(x, target):
        # This rank's share of the batch, scaled so that the averaged gradients are the batch's.
        share = [t.chunk(WORLD)[env.rank] for t in (x, target)]
        local = loss_of(tjit, model(share[0]), share[1], WORLD / target.numel())
        total = local.detach().clone()
        dist.all_reduce(total)
        return local, total / WORLD

    return forward_loss


def steps_for(env):
    return int(os.environ.get("TJIT_DIST_STEPS", 20 if env.device.type == "cuda" else 3))


@check
def ddp(env):
    from torch.nn.parallel import DistributedDataParallel

    env.reference, mine = reference_and_copy(env)
    model = DistributedDataParallel(mine, device_ids=[env.device.index] if env.device.type == "cuda" else None)
    train(env, model, data_parallel_loss(env, model), steps_for(env), "DDP")


@check
def fsdp2(env):
    from torch.distributed.fsdp import fully_shard

    env.reference, mine = reference_and_copy(env)
    for module in (mine.attn, mine):
        fully_shard(module, mesh=env.mesh)
    train(env, mine, data_parallel_loss(env, mine), steps_for(env), "FSDP2")


def tensor_parallel(env, mine):
    """Tensor parallel attention heads and MLP columns, sequence parallel norms and residual adds:
    activations stay DTensors (sharded on the sequence between the blocks' parts, on heads inside
    attention), so tjit's add, layer_norm, softmax and sum run on DTensors."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    col = dict(input_layouts=Shard(1), use_local_output=False)
    row = dict(output_layouts=Shard(1), use_local_output=False)
    return parallelize_module(mine, env.mesh, {
        "norm1": SequenceParallel(), "norm2": SequenceParallel(),
        "attn.q": ColwiseParallel(**col), "attn.k": ColwiseParallel(**col), "attn.v": ColwiseParallel(**col),
        "attn.o": RowwiseParallel(**row), "up": ColwiseParallel(**col), "down": RowwiseParallel(**row),
    })


def tensor_parallel_loss(env, model):
    def forward_loss(x, target):
        out = model(env.shard(x, Shard(1)))
        assert isinstance(out, DTensor) and tuple(out.placements) == (Shard(1), ), out
        loss = loss_of(tjit, out, env.shard(target, Shard(1)), 1.0 / target.numel())
        assert tuple(loss.placements) == (Partial("sum"), ), loss.placements
        whole_loss = loss.full_tensor()
        return whole_loss, whole_loss

    return forward_loss


class RecordTjitCalls(torch.utils._python_dispatch.TorchDispatchMode):
    """The tjit operators called on DTensors."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "tjit" and any(isinstance(a, DTensor) for a in args):
            self.seen.add(func._opname)
        return func(*args, **(kwargs or {}))


@check
def tensor_and_sequence_parallel(env):
    env.reference, mine = reference_and_copy(env)
    model = tensor_parallel(env, mine)
    forward_loss = tensor_parallel_loss(env, model)
    x, target = next(batches(env, 1, 4, 8, 16))
    with RecordTjitCalls() as calls:
        forward_loss(x, target)[0].backward()
    expected = {"layer_norm_forward", "layer_norm_backward", "softmax", "softmax_backward", "add", "sum"}
    assert expected <= calls.seen, f"tjit operators not called on DTensors: {expected - calls.seen}"
    model.zero_grad()
    train(env, model, forward_loss, steps_for(env), "tensor + sequence parallel")


@check
def tensor_parallel_compiled(env):
    env.reference, mine = reference_and_copy(env, seed=1)
    model = tensor_parallel(env, mine)
    torch._dynamo.reset()
    backend = "inductor" if env.device.type == "cuda" else "aot_eager"  # CPU: no C++ compile of the graph
    traced = set()

    def recording(gm, example_inputs):
        traced.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.lookup_backend(backend)(gm, example_inputs)

    compiled = torch.compile(model, backend=recording, fullgraph=True)
    train(env, mine, tensor_parallel_loss(env, compiled), min(steps_for(env), 3),
          f"tensor parallel, torch.compile ({backend})")
    for op in ("tjit.layer_norm", "tjit.softmax", "tjit.add"):
        assert any(op in t for t in traced), f"{op} is not in the compiled graph: {sorted(traced)}"


def run(rank, device_type, out_dir, only):
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    if device_type == "cuda":
        torch.cuda.set_device(device)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device_type, (WORLD, ))
    env = Env(device, mesh, rank)
    results = {}
    for name, fn in CHECKS.items():
        if only and name not in only:
            continue
        start = time.time()
        try:
            note = fn(env)
            results[name] = {"status": "ok", "note": note or "", "seconds": round(time.time() - start, 1)}
        except Exception:  # noqa: BLE001  (recorded; the test reports it)
            results[name] = {"status": "failed", "error": traceback.format_exc(limit=6),
                             "seconds": round(time.time() - start, 1)}
        dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f, indent=1)
    dist.barrier()  # both files written before anyone reports


def _spawned(rank, device_type, out_dir, only, init_file):
    backend = "nccl" if device_type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        run(rank, device_type, out_dir, only)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--out", required=True, help="folder for rank<r>.json")
    parser.add_argument("--only", nargs="*", default=[], help=f"checks to run (all: {', '.join(CHECKS)})")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if "RANK" in os.environ:  # under torchrun
        assert int(os.environ["WORLD_SIZE"]) == WORLD, "run with --nproc-per-node 2"
        rank = int(os.environ["RANK"])
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        try:
            run(rank, args.device, args.out, args.only)
        finally:
            dist.destroy_process_group()
    else:
        import tempfile

        import torch.multiprocessing as mp

        init_file = os.path.join(tempfile.mkdtemp(prefix="tjit-dist-"), "store")
        mp.spawn(_spawned, args=(args.device, args.out, args.only, init_file), nprocs=WORLD)
    failed = False
    for r in range(WORLD):
        path = os.path.join(args.out, f"rank{r}.json")
        results = json.load(open(path)) if os.path.exists(path) else {"(no results)": {"status": "failed",
                                                                                       "error": path, "seconds": 0}}
        for name, result in results.items():
            failed |= result["status"] != "ok"
            if int(os.environ.get("RANK", 0)) == 0:
                print(f"rank {r} {name}: {result['status']} ({result['seconds']} s) {result.get('note', '')}")
                if result["status"] != "ok":
                    print(result["error"], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
