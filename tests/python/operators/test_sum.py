"""tjit.sum and torch.ops.tjit.sum (both entry points: conftest's `ops`) against torch.sum: full and
partial reductions, keepdim, dtype, layouts, every launch plan (rows, blocked, two-stage, middle dim,
split), errors, Meta, autograd."""

import pytest
import torch
from conftest import poison_allocator, random_tensor, requires_cuda

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-4),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=2e-2, atol=5e-2),
}


def check_sum(ops, x, dim=None, keepdim=False, dtype=None):
    expected = torch.sum(x, dim, keepdim, dtype=dtype) if dim is not None else torch.sum(x, dtype=dtype)
    if keepdim and dim is None:
        expected = expected.reshape([1] * x.dim())
    poison_allocator(max(expected.numel(), 1), expected.dtype, x.device)
    got = ops.sum(x, dim, keepdim, dtype=dtype)
    assert got.shape == expected.shape and got.dtype == expected.dtype and got.device == x.device
    # Compare with a float64 reference on the same inputs, scaled by the number of terms.
    reference = torch.sum(x.double(), dim if dim is not None else (), keepdim) if dim is not None else x.double().sum()
    if keepdim and dim is None:
        reference = reference.reshape([1] * x.dim())
    tol = TOL[got.dtype]
    torch.testing.assert_close(got.double(), reference, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, x.numel() ** 0.5 / 10))


def sizes(device):
    # 70001 > 64K takes the two-stage path; the interpreter is slow, so CPU stays small.
    return [1, 3, 1000, 70001] + ([2**22 + 3] if device == "cuda" else [])


def test_full_reduction(device, ops):
    for dtype in FLOATS:
        for n in sizes(device):
            check_sum(ops, random_tensor((n, ), dtype, device))


@pytest.mark.parametrize("dim", [[0], [1], [2], [-1], [0, 2], [1, 2], [0, 1, 2], [-3, -1]])
@pytest.mark.parametrize("keepdim", [False, True])
def test_dims(device, ops, dim, keepdim):
    check_sum(ops, random_tensor((5, 6, 7), torch.float32, device), dim, keepdim)


def test_non_contiguous(device, ops):
    x = random_tensor((9, 10, 11), torch.float32, device)
    check_sum(ops, x.permute(2, 0, 1), [1])
    check_sum(ops, x.transpose(0, 2), [0, 2], True)
    check_sum(ops, x[:, ::2, 3:], [-1])
    check_sum(ops, x[1:8, :, 2:9].permute(1, 2, 0), None)


def test_launch_plans(device, ops):
    # rows x short columns: blocked kernel; long rows; few very long rows: two stages;
    # dim 0 of a tall matrix: split middle reduction; middle dim.
    check_sum(ops, random_tensor((300, 7), torch.float32, device), [1])
    check_sum(ops, random_tensor((40, 600), torch.float32, device), [1])
    check_sum(ops, random_tensor((3, 70000), torch.float32, device), [1])
    check_sum(ops, random_tensor((2000, 8), torch.float32, device), [0])
    check_sum(ops, random_tensor((4, 300, 9), torch.float64, device), [1])


@requires_cuda
def test_two_stage_switch_points_cuda(ops):
    # One program up to 8192 elements where launches are dependent (compute capability 9.0+), 16384
    # elsewhere; past that two stages: 4-byte elements in round-robin blocks of 4096 (a ragged last
    # block, fewer blocks than 8 programs per SM, more), 2- and 8-byte ones in contiguous chunks.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for dtype in FLOATS:
        for n in (8191, 8192, 8193, 16384, 16385, 4096 * 3 + 1, 4096 * 8 * sms - 1, 4096 * 8 * sms + 4097):
            check_sum(ops, random_tensor((n, ), dtype, "cuda"))
    # 2-byte chunks: 4 programs per SM until chunks of 8 blocks of 8192 give more, at most 16 per SM:
    # one row of 32 * sms + 7 blocks still takes 4 per SM, one more block (32 * sms + 8) takes
    # blocks // 8 programs; past the cap 16 per SM, and 3 rows sharing the SMs.
    for dtype in (torch.float16, torch.bfloat16):
        for n in (8192 * 32 * sms - 1, 8192 * (32 * sms + 7), 8192 * (32 * sms + 7) + 1, 8192 * 128 * sms + 1):
            check_sum(ops, random_tensor((n, ), dtype, "cuda"))
    check_sum(ops, random_tensor((3, 8192 * 8 * (16 * sms // 3) + 5), torch.bfloat16, "cuda"), [1])
    # Few long rows (fewer than 2 per SM): each row in parts; many rows: one program per row.
    for rows in (1, 5, 2 * sms - 1, 2 * sms):
        for dtype in (torch.float32, torch.bfloat16):
            check_sum(ops, random_tensor((rows, 9001), dtype, "cuda"), [1])
    # Rows of a strided view (the row stride is not the row length).
    check_sum(ops, random_tensor((3, 40000), torch.float32, "cuda")[:, 5:30005], [1])


def test_two_stage_switch_points_cpu(ops):
    # The interpreter plans for 4 SMs and never launches dependently: one program up to 16384
    # elements, then two stages (round-robin blocks for 4-byte elements, chunks for the rest); few
    # long rows are fewer than 8.
    for dtype in FLOATS:
        for n in (16384, 16385, 4096 * 32 + 1):
            check_sum(ops, random_tensor((n, ), dtype, "cpu"))
    # 2-byte chunks: at most 16 programs (4 per SM) up to 135 blocks of 8192 (there 15 chunks of 9
    # blocks); from 136 blocks, blocks // 8 (17 chunks of 8); at most 64 (16 per SM).
    for n in (8192 * 135, 8192 * 135 + 1, 8192 * 128 * 4 + 1):
        check_sum(ops, random_tensor((n, ), torch.bfloat16, "cpu"))
    for rows in (1, 7, 8):
        check_sum(ops, random_tensor((rows, 16385), torch.float32, "cpu"), [1])
    check_sum(ops, random_tensor((3, 20000), torch.bfloat16, "cpu")[:, 7:16400], [1])


@requires_cuda
def test_two_stage_is_deterministic_cuda(ops):
    for dtype in (torch.float32, torch.bfloat16):
        x = random_tensor((3 * 2**20 + 7, ), dtype, "cuda")
        first = ops.sum(x)
        for _ in range(3):
            assert torch.equal(ops.sum(x), first)


@requires_cuda
def test_two_stage_after_a_writer_and_in_a_cuda_graph(ops):
    # The first stage may launch while the kernel before it runs (dependent launch): it must still
    # read what that kernel wrote. Each sum follows the add that writes its input, with no sync.
    x = random_tensor((2**20 + 3, ), torch.float32, "cuda")
    for i in range(5):
        y = ops.add(x, x, alpha=float(i + 1))
        torch.testing.assert_close(ops.sum(y).double(), (x.double() * (i + 2)).sum(), rtol=1e-5, atol=1e-2)
    # Captured and replayed in a CUDA graph (dependent launches become graph edges).
    for dtype in (torch.float32, torch.bfloat16):
        static_in = random_tensor((2**20 + 3, ), dtype, "cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ops.sum(static_in)  # compiled before the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = ops.sum(ops.add(static_in, static_in))
        for _ in range(3):
            new = random_tensor(static_in.shape, dtype, "cuda")
            static_in.copy_(new)
            static_out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            tol = TOL[dtype]
            torch.testing.assert_close(static_out.double(), (2 * new.double()).sum(), rtol=tol["rtol"],
                                       atol=tol["atol"] * new.numel() ** 0.5)


def test_dtype_argument(device, ops):
    x = random_tensor((33, 17), torch.float16, device)
    check_sum(ops, x, [1], dtype=torch.float32)
    check_sum(ops, random_tensor((33, 17), torch.float32, device), None, dtype=torch.float64)
    check_sum(ops, random_tensor((33, 17), torch.float32, device), [0], dtype=torch.bfloat16)


def test_empty(device, ops):
    x = random_tensor((0, 5), torch.float32, device)
    check_sum(ops, x, [0])  # sum of nothing: zeros
    check_sum(ops, x, [1])  # empty result
    check_sum(ops, x)       # 0.0
    check_sum(ops, random_tensor((0, ), torch.float64, device), [0], True)


def test_scalar_and_size_one_dims(device, ops):
    check_sum(ops, torch.tensor(3.5, device=device))
    check_sum(ops, random_tensor((1, 5, 1), torch.float32, device), [0, 2])
    check_sum(ops, random_tensor((4, 1, 5), torch.float32, device), [1])


def test_errors(device, ops):
    x = random_tensor((4, 5), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"tjit::sum: dim 2 is out of range for a tensor of 2 dimensions"):
        ops.sum(x, [2])
    with pytest.raises(RuntimeError, match=r"tjit::sum: dim -1 appears more than once"):
        ops.sum(x, [1, -1])
    with pytest.raises(RuntimeError, match=r"tjit::sum: dtype=Bool is not supported \(supported: Float"):
        ops.sum(x, dtype=torch.bool)
    with pytest.raises(RuntimeError, match=r"tjit::sum: dtype=Float8_e4m3fn is not supported"):
        ops.sum(x, dtype=torch.float8_e4m3fn)


def test_dtype_converts_integer_inputs_first(device, ops):
    # As torch.sum: with dtype= the input is converted first, so integer and bool inputs work.
    for x in (torch.arange(8, device=device), torch.arange(-7, 8, device=device, dtype=torch.int32).reshape(3, 5),
              random_tensor((4, 9), torch.int16, device), torch.rand(5, 6, device=device) > 0.5):
        for dtype in (torch.float32, torch.float64):
            check_sum(ops, x, None, dtype=dtype)
            if x.dim() > 1:
                check_sum(ops, x, [1], True, dtype=dtype)
    meta = ops.sum(torch.empty(3, 4, dtype=torch.int64, device="meta"), [1], dtype=torch.bfloat16)
    assert meta.shape == (3, ) and meta.dtype == torch.bfloat16
    with pytest.raises(RuntimeError, match=r"tjit::sum: argument 'self' has dtype ComplexFloat; complex inputs"):
        ops.sum(torch.zeros(3, dtype=torch.complex64, device=device), dtype=torch.float32)


def test_meta(ops):
    x = torch.empty(4, 5, 6, device="meta")
    for dim, keepdim in [([1], False), ([0, 2], True), (None, False)]:
        out = ops.sum(x, dim, keepdim)
        real = ops.sum(torch.randn(4, 5, 6), dim, keepdim)
        assert out.shape == real.shape and out.stride() == real.stride() and out.dtype == real.dtype


def test_backward_and_gradcheck(device, ops):
    x = random_tensor((4, 5, 3), torch.float64, device).requires_grad_()
    for dim, keepdim, dtype in [([1], False, None), ([0, 2], True, None), (None, False, None), ([2], False, torch.float32)]:
        grad = torch.autograd.grad(ops.sum(x, dim, keepdim, dtype=dtype).sum() * 1.0, x)[0]
        assert grad.dtype == x.dtype
        torch.testing.assert_close(grad, torch.ones_like(x))
        torch.autograd.gradcheck(lambda t: ops.sum(t, dim, keepdim), (x, ))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck(device, requires_grad):
    x = random_tensor((6, 7), torch.float32, device).requires_grad_(requires_grad)
    torch.library.opcheck(torch.ops.tjit.sum.default, (x, [1], True))
    torch.library.opcheck(torch.ops.tjit.sum.default, (x, ), {"dtype": torch.float64})
