"""tjit's Python functions (tjit.add, tjit.sum, tjit.softmax, tjit.layer_norm and the backward
operators): their signatures mirror the operator schemas, their values match aten on fresh random
inputs of odd sizes in every supported dtype, they equal torch.ops.tjit.* on the same inputs, and
autograd flows through them."""

import builtins
import inspect

import pytest
import torch
import torch.nn.functional as F
from conftest import random_tensor

import tjit

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
}
# Every operator the library binds (an operator folder adds its own without an edit here).
OPERATORS = list(tjit._C.operator_names)
assert {"add", "sum", "softmax", "softmax_backward", "layer_norm", "layer_norm_forward",
        "layer_norm_backward"} <= set(OPERATORS)


def close(got, want, dtype=None, scale=1.0):
    """got against aten's want, with `dtype`'s tolerance (atol times `scale`, for sums of many terms)."""
    tol = TOL[dtype or want.dtype]
    assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device
    torch.testing.assert_close(got, want, rtol=tol["rtol"], atol=tol["atol"] * scale)


def same(got, op_result):
    """The function returns what the operator returns: same values bit for bit (or both None)."""
    if op_result is None:
        assert got is None
        return
    assert got.dtype == op_result.dtype and got.shape == op_result.shape and got.stride() == op_result.stride()
    assert torch.equal(got, op_result)


@pytest.mark.parametrize("name", OPERATORS)
def test_exported_and_documented(name):
    fn = getattr(tjit, name)
    assert name in tjit.__all__
    assert callable(fn) and fn.__module__ == "tjit"
    assert f"torch.ops.tjit.{name}" in fn.__doc__
    assert all(p.annotation is not inspect.Parameter.empty for p in inspect.signature(fn).parameters.values())
    assert inspect.signature(fn).return_annotation is not inspect.Signature.empty


def test_sum_shadows_builtin_only_as_attribute():
    assert tjit.sum is not builtins.sum
    assert builtins.sum([1, 2]) == 3  # the builtin itself is untouched


@pytest.mark.parametrize("name", OPERATORS)
def test_signature_mirrors_schema(name):
    """Parameter names, order, keyword-only markers and defaults as in the registered schema."""
    schema = getattr(torch.ops.tjit, name).default._schema
    params = list(inspect.signature(getattr(tjit, name)).parameters.values())
    assert [p.name for p in params] == [a.name for a in schema.arguments]
    for p, a in zip(params, schema.arguments):
        assert (p.kind is inspect.Parameter.KEYWORD_ONLY) == a.kwarg_only, p.name
        if a.has_default_value():
            assert p.default == a.default_value and type(p.default) is type(a.default_value), p.name
        else:
            assert p.default is inspect.Parameter.empty, p.name


def test_add(device):
    for dtype in FLOATS + [torch.int32, torch.int64]:
        x = random_tensor((3, 1, 7), dtype, device)
        y = random_tensor((5, 7), dtype, device)
        alpha = 3 if not dtype.is_floating_point else 0.5
        got = tjit.add(x, y, alpha=alpha)
        if dtype.is_floating_point:
            close(got, torch.add(x, y, alpha=alpha))
        else:
            assert torch.equal(got, torch.add(x, y, alpha=alpha))
        same(got, torch.ops.tjit.add(x, y, alpha=alpha))
        same(tjit.add(x, y), torch.ops.tjit.add(x, y))


@pytest.mark.parametrize("dim, keepdim", [(None, False), (None, True), (1, False), (-1, True), ((0, 2), False),
                                          ([], False)])
def test_sum(device, dim, keepdim):
    for dtype in FLOATS:
        x = random_tensor((5, 3, 37), dtype, device)
        got = tjit.sum(x, dim, keepdim)
        # torch.sum(x, None, keepdim) is not accepted; an empty dim list means every dim.
        want = torch.sum(x, dim if dim is not None else [], keepdim)
        close(got, want, scale=10)
        same(got, torch.ops.tjit.sum(x, dim, keepdim))
    x = random_tensor((4, 33), torch.float16, device)
    for dtype in (torch.float32, torch.float64):
        close(tjit.sum(x, 1, dtype=dtype), torch.sum(x, 1, dtype=dtype))
        same(tjit.sum(x, dim=1, dtype=dtype), torch.ops.tjit.sum(x, 1, dtype=dtype))
    close(tjit.sum(x), torch.sum(x), scale=10)  # every default


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(device, dim):
    for dtype in FLOATS:
        x = random_tensor((6, 5, 19), dtype, device)
        got = tjit.softmax(x, dim)
        close(got, torch.softmax(x, dim))
        same(got, torch.ops.tjit.softmax(x, dim))
    x = random_tensor((3, 21), torch.bfloat16, device)
    close(tjit.softmax(x, dim, torch.float32), torch.softmax(x, dim, torch.float32))
    same(tjit.softmax(x, dim, dtype=torch.float64), torch.ops.tjit.softmax(x, dim, torch.float64))


def test_softmax_backward(device):
    for dtype in FLOATS:
        out = torch.softmax(random_tensor((4, 23), dtype, device), -1)
        g = random_tensor((4, 23), dtype, device)
        got = tjit.softmax_backward(g, out, -1, dtype)
        close(got, torch.ops.aten._softmax_backward_data(g, out, -1, dtype))
        same(got, torch.ops.tjit.softmax_backward(g, out, -1, dtype))


@pytest.mark.parametrize("normalized", [(29, ), (3, 11)])
@pytest.mark.parametrize("affine", [(True, True), (False, False), (True, False)])
def test_layer_norm(device, normalized, affine):
    for dtype in FLOATS:
        x = random_tensor((5, ) + normalized, dtype, device) * 2 + 1
        w = random_tensor(normalized, dtype, device) if affine[0] else None
        b = random_tensor(normalized, dtype, device) if affine[1] else None
        for kwargs in ({}, dict(eps=0.01)):
            got = tjit.layer_norm(x, normalized, w, b, **kwargs)
            close(got, F.layer_norm(x, normalized, w, b, **kwargs))
            same(got, torch.ops.tjit.layer_norm(x, list(normalized), w, b, **kwargs))
    x = random_tensor((2, 7), torch.float32, device)
    close(tjit.layer_norm(x, torch.Size([7])), F.layer_norm(x, [7]))  # torch.Size, as F.layer_norm takes


def test_layer_norm_forward_and_backward(device):
    for dtype in FLOATS:
        n = 13
        x = random_tensor((3, 4, n), dtype, device)
        w = random_tensor((n, ), dtype, device)
        b = random_tensor((n, ), dtype, device)
        out, mean, rstd = tjit.layer_norm_forward(x, [n], w, b, 1e-3)
        ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-3)
        close(out, ref_out)
        # aten keeps a trailing 1, and (on CPU) the input's dtype for half types: its tolerance then.
        for got, want in ((mean, ref_mean), (rstd, ref_rstd)):
            close(got, want.reshape(got.shape).to(got.dtype), dtype=want.dtype)
        for got, op in zip((out, mean, rstd), torch.ops.tjit.layer_norm_forward(x, [n], w, b, 1e-3)):
            same(got, op)

        g = random_tensor((3, 4, n), dtype, device)
        for mask in ([True, True, True], [True, False, True], [False, True, False]):
            got = tjit.layer_norm_backward(g, x, [n], mean, rstd, w, b, mask)
            want = torch.ops.aten.native_layer_norm_backward(g, x, [n], ref_mean, ref_rstd, w, b, mask)
            for i, (a, e) in enumerate(zip(got, want)):
                if not mask[i]:
                    assert a is None
                    continue
                close(a, e, scale=3 if i else 1)  # dw/db: sums over the 12 rows
            for a, op in zip(got, torch.ops.tjit.layer_norm_backward(g, x, [n], mean, rstd, w, b, mask)):
                same(a, op)
    # Absent parameters give no gradient even when asked for.
    _, mean, rstd = tjit.layer_norm_forward(x, [n])
    assert tjit.layer_norm_backward(g, x, [n], mean, rstd, None, None, [True, True, True])[1:] == (None, None)


def grads(fn, inputs, g):
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = fn(*leaves)
    assert out.requires_grad and out.grad_fn is not None
    return out, torch.autograd.grad(out, leaves, g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_autograd_flows_through_functions(device, dtype):
    """Gradients through the Python functions, against the same computation in aten."""
    x = random_tensor((6, 17), dtype, device)
    y = random_tensor((17, ), dtype, device)
    w = random_tensor((17, ), dtype, device)
    b = random_tensor((17, ), dtype, device)
    cases = [
        ("add", lambda a, c: tjit.add(a, c, alpha=2.5), lambda a, c: torch.add(a, c, alpha=2.5), (x, y)),
        ("sum", lambda a: tjit.sum(a, 0, keepdim=True), lambda a: torch.sum(a, 0, keepdim=True), (x, )),
        ("sum all", lambda a: tjit.sum(a), lambda a: torch.sum(a), (x, )),
        ("softmax", lambda a: tjit.softmax(a, 1), lambda a: torch.softmax(a, 1), (x, )),
        ("layer_norm", lambda a, c, d: tjit.layer_norm(a, [17], c, d, 1e-3),
         lambda a, c, d: F.layer_norm(a, [17], c, d, 1e-3), (x, w, b)),
    ]
    for name, tjit_fn, aten_fn, inputs in cases:
        want_out = aten_fn(*inputs)
        g = random_tensor(want_out.shape, dtype, device)
        out, got = grads(tjit_fn, inputs, g)
        _, want = grads(aten_fn, inputs, g)
        close(out.detach(), want_out, scale=3)
        for i, (a, e) in enumerate(zip(got, want)):
            torch.testing.assert_close(a, e, **TOL[dtype], msg=lambda m, i=i, name=name: f"{name}, input {i}: {m}")
    # A chain of them: gradients reach the first input through every function.
    def chain(add, sum_, softmax, layer_norm):
        leaves = [t.detach().requires_grad_() for t in (x, w, b)]
        loss = sum_(softmax(add(layer_norm(leaves[0], [17], leaves[1], leaves[2]), x), -1) * x)
        return torch.autograd.grad(loss, leaves)

    for a, e in zip(chain(tjit.add, tjit.sum, tjit.softmax, tjit.layer_norm),
                    chain(torch.add, torch.sum, torch.softmax, F.layer_norm)):
        torch.testing.assert_close(a, e, **TOL[dtype])


def test_meta():
    x = torch.empty(4, 9, device="meta")
    assert tjit.sum(x, 1, keepdim=True).shape == (4, 1)
    assert tjit.softmax(x, 0, torch.float64).dtype == torch.float64
    assert tjit.layer_norm(x, [9]).shape == (4, 9)
    assert tjit.add(x, x).device.type == "meta"


def test_operator_doc_by_any_name():
    # The documentation given to kit::define, for tjit's operators by every handle, and for an
    # operator library's own namespace (a library defined with the kit registers its docs the same
    # way; torch leaves its packets' __doc__ empty).
    want = tjit.softmax.__doc__
    assert want and "Softmax" in want
    for handle in ("softmax", "tjit::softmax", torch.ops.tjit.softmax, torch.ops.tjit.softmax.default, tjit.softmax):
        assert tjit.operator_doc(handle) == want
    assert tjit.operator_doc("myops_not_loaded::nothing") == ""
    with pytest.raises(TypeError, match="tjit.operator_doc: expected an operator"):
        tjit.operator_doc(42)
