"""Derivatives of every order and torch.func's transforms, for every operator, against torch.

Each case is an operator as a function of its differentiable tensors and a reference composed of
elementary aten operators (torch's own F.layer_norm is not a reference for forward-over-forward:
its jvp of jvp treats the statistics as constants). Inputs are fresh random float64 tensors of odd
sizes; gradgradcheck checks second derivatives numerically, the transforms compare with the
reference to 1e-10."""

import math
import warnings

import pytest
import torch
import torch.func as func
import torch.nn.functional as F
from conftest import random_tensor

import tjit

ROWS, COLS = 3, 7  # odd sizes: no power-of-two block fits exactly


def _layer_norm_ref(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) * (var + eps).rsqrt() * w + b


def _rms_norm_ref(x, w, eps=1e-6):
    return x * ((x * x).mean(-1, keepdim=True) + eps).rsqrt() * w


def cases(device):
    """name -> (tjit function, reference, inputs): functions of tensors only."""
    t = lambda *shape: random_tensor(shape, torch.float64, device)  # noqa: E731
    x, y, w, b = t(ROWS, COLS), t(ROWS, COLS), t(COLS), t(COLS)
    return {
        "add": (lambda a, c: tjit.add(a, c, alpha=1.5), lambda a, c: a + 1.5 * c, (x, y)),
        "add_broadcast": (lambda a, c: tjit.add(a, c), lambda a, c: a + c, (x, w)),
        "sum": (lambda a: tjit.sum(a, 1), lambda a: a.sum(1), (x, )),
        "softmax": (lambda a: tjit.softmax(a, -1), lambda a: torch.softmax(a, -1), (x, )),
        "softmax_dim0": (lambda a: tjit.softmax(a, 0), lambda a: torch.softmax(a, 0), (x, )),
        "layer_norm": (lambda a, c, d: tjit.layer_norm(a, (COLS, ), c, d), _layer_norm_ref, (x, w, b)),
        "rms_norm": (lambda a, c: tjit.rms_norm(a, (COLS, ), c, 1e-6), _rms_norm_ref, (x, w)),
        "add_rms_norm": (lambda a, r, c: tjit.add_rms_norm(a, r, (COLS, ), c, 1e-6),
                         lambda a, r, c: (_rms_norm_ref(a + r, c), a + r), (x, y, w)),
    }


CASES = list(cases("cpu"))


def scalar_loss(fn):
    """A scalar of `fn`'s outputs that is not linear in them (a linear loss hides second-order
    errors)."""

    def loss(*args):
        out = fn(*args)
        outs = out if isinstance(out, tuple) else (out, )
        return sum((o**3).sum() + (o.sin() * o).sum() for o in outs)

    return loss


def assert_trees_close(got, want):
    got_leaves, _ = torch.utils._pytree.tree_flatten(got)
    want_leaves, _ = torch.utils._pytree.tree_flatten(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


@pytest.fixture(autouse=True)
def no_vmap_fallback():
    # torch's per-sample fallback warns; every operator has a batching rule, so any warning fails.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*batching rule.*")
        yield


@pytest.mark.parametrize("name", CASES)
def test_gradgradcheck(device, name):
    fn, _, inputs = cases(device)[name]
    leaves = tuple(i.clone().requires_grad_() for i in inputs)
    assert torch.autograd.gradcheck(fn, leaves)
    assert torch.autograd.gradgradcheck(fn, leaves)


@pytest.mark.parametrize("name", CASES)
def test_second_derivative_is_torchs(device, name):
    # The silent zero this guards against: a create_graph backward whose result did not depend on
    # the inputs (an undifferentiable backward kernel) gave second derivatives of 0.
    fn, ref, inputs = cases(device)[name]

    def second(f):
        leaves = tuple(i.clone().requires_grad_() for i in inputs)
        (g, ) = torch.autograd.grad(scalar_loss(f)(*leaves), leaves[:1], create_graph=True)
        return torch.autograd.grad((g * g).sum(), leaves)

    got, want = second(fn), second(ref)
    assert any(w.abs().max() > 1e-3 for w in want)
    assert_trees_close(got, want)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian"])
def test_torch_func(device, name, transform):
    fn, ref, inputs = cases(device)[name]
    argnums = tuple(range(len(inputs)))
    tangents = tuple(torch.randn_like(i) for i in inputs)

    def run(f):
        if transform == "grad":
            return func.grad(scalar_loss(f), argnums=argnums)(*inputs)
        if transform == "vjp":
            out, vjp_fn = func.vjp(f, *inputs)
            cotangents = torch.utils._pytree.tree_map(lambda o: torch.ones_like(o) * 0.7, out)
            return out, vjp_fn(cotangents)
        if transform == "jvp":
            return func.jvp(f, inputs, tangents)
        if transform == "jacrev":
            return func.jacrev(f, argnums=argnums)(*inputs)
        if transform == "jacfwd":
            return func.jacfwd(f, argnums=argnums)(*inputs)
        return func.hessian(scalar_loss(f), argnums=argnums)(*inputs)

    assert_trees_close(run(fn), run(ref))


@pytest.mark.parametrize("name", CASES)
def test_forward_over_forward_and_reverse_over_forward(device, name):
    fn, ref, inputs = cases(device)[name]
    first = inputs[0]
    for outer, inner in [(func.jacfwd, func.jacfwd), (func.jacrev, func.jacfwd), (func.jacrev, func.jacrev)]:

        def nested(f):
            return outer(inner(scalar_loss(lambda a: f(a, *inputs[1:]))))(first)

        assert_trees_close(nested(fn), nested(ref))


@pytest.mark.parametrize("name", CASES)
def test_vmap_runs_batching_rules(device, name):
    fn, ref, inputs = cases(device)[name]
    batch = 4
    batched = tuple(random_tensor((batch, ) + tuple(i.shape), torch.float64, device) for i in inputs)
    # Every input batched, then each one batched alone (the rest shared), on a batch dim that is not
    # the first.
    assert_trees_close(func.vmap(fn)(*batched), func.vmap(ref)(*batched))
    for k in range(len(inputs)):
        args = tuple(batched[j].movedim(0, -1) if j == k else inputs[j] for j in range(len(inputs)))
        in_dims = tuple(-1 if j == k else None for j in range(len(inputs)))
        assert_trees_close(func.vmap(fn, in_dims=in_dims)(*args), func.vmap(ref, in_dims=in_dims)(*args))


@pytest.mark.parametrize("name", CASES)
def test_per_sample_gradients(device, name):
    # vmap over grad: the shared parameters' gradients are per sample (rows summed per sample, not
    # over the batch).
    fn, ref, inputs = cases(device)[name]
    batch = 3
    samples = random_tensor((batch, ) + tuple(inputs[0].shape), torch.float64, device)
    argnums = tuple(range(len(inputs)))
    in_dims = (0, ) + (None, ) * (len(inputs) - 1)

    def per_sample(f):
        return func.vmap(func.grad(scalar_loss(f), argnums=argnums), in_dims=in_dims)(samples, *inputs[1:])

    assert_trees_close(per_sample(fn), per_sample(ref))


def test_statistics_are_differentiable(device):
    # layer_norm_forward's mean and rstd, and rms_norm_forward's rstd, carry the input's gradient.
    x = random_tensor((ROWS, COLS), torch.float64, device).requires_grad_()
    _, mean, rstd = tjit.layer_norm_forward(x, [COLS])
    got = torch.autograd.grad((mean * 2 + rstd.sin()).sum(), x)[0]
    var = x.var(-1, unbiased=False)
    want = torch.autograd.grad((x.mean(-1) * 2 + (var + 1e-5).rsqrt().sin()).sum(), x)[0]
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    _, rstd = tjit.rms_norm_forward(x, [COLS], None, 1e-6)
    got = torch.autograd.grad(rstd.exp().sum(), x)[0]
    want = torch.autograd.grad(((x * x).mean(-1) + 1e-6).rsqrt().exp().sum(), x)[0]
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_double_backward_in_low_precision(device, dtype):
    # gradgradcheck needs float64; in the other dtypes the second derivatives match torch's own
    # float64 ones to the dtype's precision. The loss is scaled by a power of two that brings the
    # float64 second derivatives near 1: unscaled they reach 1e5 for some inputs, past float16's
    # largest value, and softmax's are small enough to lose float16's precision.
    x = random_tensor((ROWS, 33), torch.float64, device)
    w = random_tensor((33, ), torch.float64, device)

    def hvp(f, dt, scale=1.0):
        leaves = (x.to(dt).requires_grad_(), w.to(dt).requires_grad_())
        (g, ) = torch.autograd.grad(scalar_loss(f)(*leaves), leaves[:1], create_graph=True)
        return [t.double() for t in torch.autograd.grad((g.float()**2).sum() * scale, leaves)]

    tol = {torch.float32: 1e-3, torch.bfloat16: 1e-1, torch.float16: 2e-2}[dtype]
    for f, r in [(lambda a, c: tjit.rms_norm(a, (33, ), c, 1e-6), _rms_norm_ref),
                 (lambda a, c: tjit.layer_norm(a, (33, ), c), lambda a, c: _layer_norm_ref(a, c, 0)),
                 (lambda a, c: tjit.softmax(a * c, -1), lambda a, c: torch.softmax(a * c, -1))]:
        want = hvp(r, torch.float64)
        scale = 2.0**-round(math.log2(max(e.abs().max().item() for e in want)))
        got, want = hvp(f, dtype, scale), [e * scale for e in want]
        largest = max(e.abs().max().item() for e in want)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e, rtol=tol, atol=tol * largest)


def test_backward_operators_are_differentiable(device):
    # Called directly, the backward operators differentiate in their tensor arguments like any
    # other operator (F.layer_norm's native_layer_norm_backward, softmax's _softmax_backward_data).
    y = torch.softmax(random_tensor((ROWS, COLS), torch.float64, device), -1).requires_grad_()
    g = random_tensor((ROWS, COLS), torch.float64, device).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: tjit.softmax_backward(a, b, -1, torch.float64), (g, y))
    x = random_tensor((ROWS, COLS), torch.float64, device)
    w = random_tensor((COLS, ), torch.float64, device).requires_grad_()
    _, mean, rstd = tjit.layer_norm_forward(x, [COLS], w.detach())
    assert torch.autograd.gradcheck(
        lambda a, c: tjit.layer_norm_backward(a, x, [COLS], mean, rstd, c, None, [True, True, False])[:2], (g, w))
    _, rstd = tjit.rms_norm_forward(x, [COLS], w.detach())
    assert torch.autograd.gradcheck(lambda a, c: tjit.rms_norm_backward(a, x, [COLS], rstd, c, [True, True]), (g, w))


def test_vmap_sum_and_softmax_of_one_element_rows(device):
    # A vmapped scalar is a 0-dim tensor per sample: its sum and softmax are defined (dim 0 / -1).
    v = random_tensor((5, ), torch.float64, device)
    torch.testing.assert_close(func.vmap(lambda s: tjit.sum(s))(v), v)
    torch.testing.assert_close(func.vmap(lambda s: tjit.softmax(s, 0))(v), torch.ones_like(v))
    torch.testing.assert_close(func.vmap(lambda s: tjit.softmax(s, -1))(F.pad(v, (0, 0))), torch.ones_like(v))
