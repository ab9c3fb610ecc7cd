"""tjit.add and torch.ops.tjit.add (both entry points: conftest's `ops`) against torch.add: values,
shapes, strides, dtypes, errors, Meta, opcheck."""

import pytest
import torch
from conftest import poison_allocator, random_tensor, requires_cuda
from torch._subclasses.fake_tensor import FakeTensorMode

TOLERANCE = {
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-13, atol=1e-13),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.int32: dict(rtol=0, atol=0),
    torch.int64: dict(rtol=0, atol=0),
}
# Triton 3.6's interpreter runs every one of these on CPU too (bf16 included).
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def reference_add(x, y, alpha):
    # aten's CPU add of fp16/bf16 rounds alpha * y to the half type in its scalar tail (the elements
    # past its last vector: 768..776 of 777), so there it can be 2 ulps from the sum rounded once,
    # which its vectors and its CUDA kernel compute, and which is the reference here.
    expected = torch.add(x, y, alpha=alpha)
    if expected.dtype in (torch.float16, torch.bfloat16):
        expected = torch.add(x.double(), y.double(), alpha=alpha).to(expected.dtype)
    return expected


def check_add(ops, x, y, alpha=1):
    expected = reference_add(x, y, alpha)
    poison_allocator(expected.numel(), expected.dtype, expected.device)
    got = ops.add(x, y, alpha=alpha)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    assert got.device == expected.device
    assert got.is_contiguous()
    torch.testing.assert_close(got, expected, **TOLERANCE[x.dtype])


def sizes_for(device):
    # The interpreter runs one Python loop per program: keep CPU sizes small.
    return [1, 3, 1023, 4099] + ([2**20 + 3] if device == "cuda" else [])


def test_sizes_and_dtypes(device, ops):
    for dtype in DTYPES:
        for n in sizes_for(device):
            check_add(ops, random_tensor((n, ), dtype, device), random_tensor((n, ), dtype, device))


@pytest.mark.parametrize("alpha", [2, -3, 0])
def test_integer_alpha(device, ops, alpha):
    for dtype in DTYPES:
        check_add(ops, random_tensor((777, ), dtype, device), random_tensor((777, ), dtype, device), alpha=alpha)


@pytest.mark.parametrize("alpha", [0.5, -1.25, 0.1])
def test_float_alpha(device, ops, alpha):
    for dtype in DTYPES:
        if dtype.is_floating_point:
            check_add(ops, random_tensor((513, ), dtype, device), random_tensor((513, ), dtype, device), alpha=alpha)


@pytest.mark.parametrize("shapes", [
    ((4, 1, 5), (3, 1)),
    ((1, ), (17, 3)),
    ((2, 3, 4, 5), (5, )),
    ((), (6, 7)),
    ((3, 1, 4, 1, 5), (1, 2, 1, 6, 1)),
])
def test_broadcasting(device, ops, shapes):
    a, b = shapes
    check_add(ops, random_tensor(a, torch.float32, device), random_tensor(b, torch.float32, device), alpha=2.0)
    check_add(ops, random_tensor(b, torch.float32, device), random_tensor(a, torch.float32, device))


def test_non_contiguous(device, ops):
    t = random_tensor((33, 65), torch.float32, device)
    check_add(ops, t.t(), random_tensor((65, 33), torch.float32, device))
    check_add(ops, t[:, ::3], t[:, 1::3][:, :22])
    check_add(ops, t[5:20, 7:40], t[1:16, 0:33])
    # Six dims that do not collapse to four: materialised, then added flat.
    big = random_tensor((2, 3, 2, 3, 2, 3), torch.float64, device).permute(5, 3, 1, 0, 2, 4)
    check_add(ops, big, random_tensor((3, 1, 3, 2, 1, 2), torch.float64, device))
    # Broadcast by expand (stride 0).
    check_add(ops, random_tensor((1, 40), torch.float32, device).expand(30, 40),
              random_tensor((30, 40), torch.float32, device))


def test_empty(device, ops):
    for shapes in [((0, ), (0, )), ((0, 5), (5, )), ((3, 0), (1, 0)), ((0, ), (1, ))]:
        check_add(ops, random_tensor(shapes[0], torch.float32, device), random_tensor(shapes[1], torch.float32, device))


def test_alias_inputs(device, ops):
    x = random_tensor((100, ), torch.float32, device)
    check_add(ops, x, x, alpha=-1)


@requires_cuda
def test_large_64bit_offsets(ops):
    # 2**31 + 2**20 + 3 int8 elements would not be an allowed dtype; use 2**31 + 5 float16
    # elements (4 GiB): offsets past 2**31 - 1 must index in 64 bits.
    n = 2**31 + 5
    x = torch.ones(n, dtype=torch.float16, device="cuda")
    y = torch.full((n, ), 2.0, dtype=torch.float16, device="cuda")
    x[-3:] = torch.randn(3, device="cuda").half()
    out = ops.add(x, y)
    assert out[0].item() == 3.0
    torch.testing.assert_close(out[-3:], x[-3:] + 2.0)
    assert bool((out[2**31 - 8:2**31 + 2] == 3.0).all())
    del x, y, out
    torch.cuda.empty_cache()


def test_meta_shapes_and_strides(ops):
    for a, b in [((4, 1, 5), (3, 1)), ((0, 3), (3, )), ((7, ), (7, ))]:
        x = torch.empty(a, device="meta")
        y = torch.empty(b, device="meta")
        out = ops.add(x, y, alpha=3)
        real = ops.add(torch.randn(a), torch.randn(b), alpha=3)
        assert out.shape == real.shape
        assert out.stride() == real.stride()
        assert out.dtype == real.dtype


def test_fake_tensor_with_symbolic_shapes(ops):
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x = mode.from_tensor(torch.randn(6, 5), static_shapes=False)
        y = mode.from_tensor(torch.randn(5), static_shapes=False)
        out = ops.add(x, y)
        assert out.shape == x.shape
        assert out.dtype == torch.float32


def test_opcheck(device):
    x = random_tensor((5, 7), torch.float32, device)
    y = random_tensor((7, ), torch.float32, device)
    torch.library.opcheck(torch.ops.tjit.add.default, (x, y), {"alpha": 2}, test_utils=(
        "test_schema", "test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"))


def expect_error(pattern, fn):
    with pytest.raises(RuntimeError, match=pattern):
        fn()


def test_errors(device, ops):
    x = random_tensor((4, ), torch.float32, device)
    expect_error(r"tjit::add: shapes \[4\] \('self'\) and \[3\] \('other'\) cannot be broadcast",
                 lambda: ops.add(x, random_tensor((3, ), torch.float32, device)))
    expect_error(r"tjit::add: argument 'self' has dtype ComplexFloat, which is not supported",
                 lambda: ops.add(x.to(torch.complex64), x.to(torch.complex64)))
    expect_error(r"tjit::add: argument 'other' has dtype Float8_e5m2, which is not supported",
                 lambda: ops.add(x, x.to(torch.float8_e5m2)))
    expect_error(r"tjit::add: alpha=0.5 is a floating-point number but the result has dtype Int",
                 lambda: ops.add(x.int(), x.int(), alpha=0.5))


def test_undefined_tensor_error(ops):
    # None for a Tensor argument reaches the operator as an undefined tensor.
    expect_error(r"tjit::add: argument 'other' is an undefined tensor",
                 lambda: ops.add(torch.randn(3), None))


@requires_cuda
def test_device_mismatch(ops):
    expect_error(r"tjit::add: argument 'other' is on cpu but 'self' is on cuda:0",
                 lambda: ops.add(torch.randn(4, device="cuda"), torch.randn(4)))


@requires_cuda
def test_runs_on_current_stream(ops):
    s = torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    s.wait_stream(torch.cuda.current_stream())  # x and y are written on the default stream
    with torch.cuda.stream(s):
        out = ops.add(x, y)
        expected = x + y
    s.synchronize()
    torch.testing.assert_close(out, expected)
