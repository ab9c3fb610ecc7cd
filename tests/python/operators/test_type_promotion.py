"""torch's type rules in tjit.add and tjit.sum (both entry points: conftest's `ops`): the result's
dtype and values against torch.add / torch.sum over a table of dtype pairs, Python numbers and 0-dim
tensors, alpha's rules, gradients of mixed-dtype sums, and sums of bool and integer tensors."""

import itertools

import pytest
import torch
from conftest import poison_allocator, requires_cuda

REAL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.float16, torch.bfloat16, torch.float32, torch.float64]
NUMBERS = [True, 3, -7, 2.5, -0.1]


def random_of(shape, dtype, device):
    """Fresh random values over each dtype's range (small integers wrap around when summed)."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -10**6), min(info.max, 10**6)
    return torch.randint(low, high + 1, shape, dtype=dtype, device=device)


def tolerance(dtype):
    return {torch.float16: dict(rtol=1e-3, atol=1e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
            torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.float64: dict(rtol=1e-13, atol=1e-13)}.get(
                dtype, dict(rtol=0, atol=0))


def check_like_torch_add(ops, x, y, **kwargs):
    """tjit's add of x and y (tensors or numbers) gives torch.add's dtype, device and values, or
    refuses what torch.add refuses."""
    try:
        expected = torch.add(x, y, **kwargs)
    except RuntimeError:
        with pytest.raises(RuntimeError, match=r"tjit::add: "):
            ops.add(x, y, **kwargs)
        return
    if expected.dtype in (torch.float16, torch.bfloat16):
        # aten's CPU half add can round alpha * y to the half type first (test_add.py says where).
        wide = [v.double() if isinstance(v, torch.Tensor) else v for v in (x, y)]
        expected = torch.add(*wide, **kwargs).to(expected.dtype)
    poison_allocator(expected.numel(), expected.dtype, expected.device)
    got = ops.add(x, y, **kwargs)
    assert (got.dtype, got.device, got.shape) == (expected.dtype, expected.device, expected.shape), (x, y)
    torch.testing.assert_close(got, expected, **tolerance(expected.dtype))


@pytest.mark.parametrize("self_dtype", REAL_DTYPES)
def test_tensor_pairs(device, ops, self_dtype):
    # Both broadcast ways, so each dtype is loaded through the flat and the strided kernel.
    for other_dtype in REAL_DTYPES:
        x = random_of((5, 3), self_dtype, device)
        check_like_torch_add(ops, x, random_of((5, 3), other_dtype, device))
        check_like_torch_add(ops, x, random_of((3, ), other_dtype, device))


@pytest.mark.parametrize("self_dtype", REAL_DTYPES)
def test_zero_dim_tensors(device, ops, self_dtype):
    # A 0-dim tensor takes part by category only: float32 + 0-dim float64 stays float32. One 0-dim
    # dtype of each category (and float16 beside float64) covers the rule; every pair would add a
    # few hundred specialisations to the suite's kernel bundle (tests/deploy/suite_bundle.sh).
    x = random_of((7, ), self_dtype, device)
    for other_dtype in [torch.bool, torch.int64, torch.float16, torch.float64]:
        scalar = random_of((), other_dtype, device)
        check_like_torch_add(ops, x, scalar)
        check_like_torch_add(ops, scalar, x)
    check_like_torch_add(ops, random_of((), torch.float16, device), random_of((), self_dtype, device))


@pytest.mark.parametrize("self_dtype", REAL_DTYPES)
def test_python_numbers(device, ops, self_dtype):
    x = random_of((6, ), self_dtype, device)
    for number in NUMBERS:
        check_like_torch_add(ops, x, number)
        check_like_torch_add(ops, number, x)
        check_like_torch_add(ops, number, x, alpha=3)


def test_alpha_rules(device, ops):
    ints = random_of((9, ), torch.int32, device)
    floats = random_of((9, ), torch.float32, device)
    bools = random_of((9, ), torch.bool, device)
    for x, y in [(ints, ints), (ints, floats), (floats, ints), (bools, bools), (bools, ints), (ints, 2.5),
                 (ints, 4), (bools, True)]:
        for alpha in [2, -3, 0.5, True, False]:
            check_like_torch_add(ops, x, y, alpha=alpha)


def test_refusals_name_the_cause(device, ops):
    ints = random_of((4, ), torch.int64, device)
    with pytest.raises(RuntimeError, match=r"tjit::add: alpha=0.5 is a floating-point number but the result "
                       r"has dtype Long; integer results take an integer alpha"):
        ops.add(ints, ints, alpha=0.5)
    with pytest.raises(RuntimeError, match=r"tjit::add: alpha=1 is a bool, which only a Bool result takes"):
        ops.add(ints, ints, alpha=True)
    complex_tensor = torch.ones(4, dtype=torch.complex64, device=device)
    with pytest.raises(RuntimeError, match=r"tjit::add: argument 'other' has dtype ComplexFloat, which is not "
                       r"supported"):
        ops.add(ints.float(), complex_tensor)


def test_number_overloads(device):
    x = random_of((5, ), torch.int32, device)
    for number, dtype in [(2, torch.int32), (2.5, torch.float32), (True, torch.int32)]:
        got = torch.ops.tjit.add.Scalar(x, number, 3)
        assert got.dtype == dtype
        torch.testing.assert_close(got, torch.add(x, number, alpha=3))
        got = torch.ops.tjit.add.Scalar_Tensor(number, x, alpha=3)
        assert got.dtype == dtype
        torch.testing.assert_close(got, torch.add(number, x, alpha=3))
    import tjit
    assert "Python number" in tjit.operator_doc(torch.ops.tjit.add.Scalar)
    assert "result_type" in tjit.operator_doc("tjit::add")


def test_scalar_overload_opcheck(device):
    x = random_of((5, 7), torch.float32, device)
    for op, args in [(torch.ops.tjit.add.Scalar, (x, 2.5)), (torch.ops.tjit.add.Scalar_Tensor, (3, x))]:
        torch.library.opcheck(op, args, {"alpha": 2}, test_utils=(
            "test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
    y = random_of((7, ), torch.float64, device)
    torch.library.opcheck(torch.ops.tjit.add.default, (x, y.requires_grad_()), {}, test_utils=(
        "test_schema", "test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))


@requires_cuda
def test_cpu_scalar_tensor_with_cuda_tensors(ops):
    x = random_of((1000, ), torch.float16, "cuda")
    for scalar in [torch.tensor(2.5, dtype=torch.float64), torch.tensor(3), torch.tensor(True)]:
        check_like_torch_add(ops, x, scalar)
        check_like_torch_add(ops, scalar, x)
    # Inside a CUDA graph: the number is filled on the device, never copied from the host.
    static = torch.randn(4096, device="cuda")
    ops.add(static, 0.5)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.add(static, torch.tensor(0.5))
    static.copy_(torch.randn(4096, device="cuda"))
    graph.replay()
    torch.testing.assert_close(out, static + 0.5)
    with pytest.raises(RuntimeError, match=r"tjit::add: argument 'other' is on cpu but 'self' is on cuda:0"):
        ops.add(x, torch.ones(3))


def test_mixed_dtype_gradients(device):
    import tjit
    x = torch.randn(4, 3, dtype=torch.float32, device=device, requires_grad=True)
    y = torch.randn(3, dtype=torch.float64, device=device, requires_grad=True)
    z = torch.randn(4, 3, dtype=torch.bfloat16, device=device, requires_grad=True)
    for a, b in [(x, y), (x, z), (z, x), (x, 2.5), (3, y)]:
        out = tjit.add(a, b, alpha=2)
        expected = torch.add(a, b, alpha=2)
        assert out.dtype == expected.dtype
        inputs = [t for t in (a, b) if isinstance(t, torch.Tensor)]
        grad_out = torch.randn_like(expected)
        got = torch.autograd.grad(out, inputs, grad_out)
        want = torch.autograd.grad(expected, inputs, grad_out)
        for g, w, t in zip(got, want, inputs):
            assert g.dtype == t.dtype
            torch.testing.assert_close(g, w, **tolerance(t.dtype))
    # Forward mode: the tangent has the result's dtype.
    primal, tangent = torch.func.jvp(lambda a: tjit.add(a, y.detach()), (x.detach(), ), (torch.ones_like(x), ))
    assert primal.dtype == tangent.dtype == torch.float64


def test_python_number_under_torch_compile(device):
    import tjit
    compiled = torch.compile(lambda x: tjit.add(x, 2.5, alpha=2) + tjit.add(3, x), fullgraph=True)
    x = random_of((8, ), torch.int32, device)
    got = compiled(x)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.add(x, 2.5, alpha=2) + torch.add(3, x))


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_sum_of_integers_is_int64(device, ops, dtype):
    x = random_of((37, 129), dtype, device)
    cases = [dict(), dict(dim=1), dict(dim=0, keepdim=True), dict(dim=[0, 1]), dict(dtype=torch.int32),
             dict(dim=1, dtype=torch.float64)]
    for kwargs in cases:
        expected = torch.sum(x, **kwargs)
        got = ops.sum(x, **kwargs)
        assert got.dtype == expected.dtype, kwargs
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    # Non-contiguous, and the two-stage plan's int64 partial sums.
    transposed = random_of((65, 33), dtype, device).t()
    torch.testing.assert_close(ops.sum(transposed, 1), torch.sum(transposed, 1), rtol=0, atol=0)
    long_rows = random_of((2, 70000 if device == "cuda" else 9000), dtype, device)
    torch.testing.assert_close(ops.sum(long_rows), torch.sum(long_rows), rtol=0, atol=0)


def test_sum_dtype_table(device, ops):
    # Every input dtype with every result dtype torch.sum takes here: dtype and value as torch's.
    for in_dtype, out_dtype in itertools.product(REAL_DTYPES, [None, torch.int32, torch.int64, torch.float32,
                                                               torch.float64, torch.float16, torch.bfloat16]):
        x = random_of((3, 50), in_dtype, device)
        if out_dtype is not None and out_dtype.is_floating_point and not in_dtype.is_floating_point:
            x = x % 100 if in_dtype != torch.bool else x  # exact in half types
        kwargs = {} if out_dtype is None else dict(dtype=out_dtype)
        expected = torch.sum(x, 1, **kwargs)
        got = ops.sum(x, 1, **kwargs)
        assert got.dtype == expected.dtype, (in_dtype, out_dtype)
        torch.testing.assert_close(got, expected, **tolerance(expected.dtype))


def test_sum_refusals(device, ops):
    x = random_of((3, 4), torch.int32, device)
    with pytest.raises(RuntimeError, match=r"tjit::sum: dtype=Bool is not supported"):
        ops.sum(x, dtype=torch.bool)
    with pytest.raises(RuntimeError, match=r"tjit::sum: argument 'self' has dtype ComplexFloat; complex"):
        ops.sum(x.to(torch.complex64))
