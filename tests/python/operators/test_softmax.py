"""tjit.softmax (and softmax_backward) and torch.ops.tjit.softmax (both entry points: conftest's
`ops`) against torch.softmax: dims, row lengths on both sides of the single-pass limit, dtypes,
layouts, -inf, errors, Meta, autograd, opcheck."""

import pytest
import torch
from conftest import kernels_helping_at_once, poison_allocator, random_tensor, requires_cuda

TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float64: dict(rtol=1e-12, atol=1e-14),
    torch.float16: dict(rtol=2e-3, atol=1e-4),
    torch.bfloat16: dict(rtol=2e-2, atol=1e-3),
}


def check_softmax(ops, x, dim, dtype=None):
    # The reference is computed in float64: torch's own float32 CPU softmax of a 32769-column row
    # is off by up to 1.3e-5 relative, more than TOL allows, while tjit's stays near 2e-6.
    expected = torch.softmax(x.double(), dim).to(dtype or x.dtype)
    poison_allocator(expected.numel(), expected.dtype, x.device)
    got = ops.softmax(x, dim, dtype)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, **TOL[got.dtype])


def columns(device):
    # Forward: one pass up to 32768 columns (2-byte types: looped for 16385..20480, persistent
    # programs past that), beyond that split across programs (CUDA, 4-byte types) or looped
    # (online); backward: one pass up to 16384. Rows of at most 256 columns go several to a
    # program. CUDA also checks a row of 2**20 + 3 (past the split limit: looped).
    return [1, 3, 200, 1000, 16385, 32769] + ([2**20 + 3] if device == "cuda" else [])


def test_row_lengths_and_dtypes(device, ops):
    for dtype in TOL:
        for n in columns(device):
            check_softmax(ops, random_tensor((3, n), dtype, device) * 4, -1)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
def test_dims(device, ops, dim):
    check_softmax(ops, random_tensor((4, 5, 33), torch.float32, device), dim)


def test_layouts(device, ops):
    x = random_tensor((40, 70), torch.float32, device)
    check_softmax(ops, x.t(), -1)          # transposed
    check_softmax(ops, x[:, 5:50], -1)     # rows with a stride
    check_softmax(ops, x[::3], 1)
    check_softmax(ops, x.t()[3:9], 0)


def test_many_rows(device, ops):
    rows = 20000 if device == "cuda" else 300
    check_softmax(ops, random_tensor((rows, 64), torch.float32, device), -1)


def test_persistent_rows(device, ops):
    # fp16/bf16 forward of 20481..32768 columns: on the CPU a program per SM (4) walks the rows, so
    # most programs take several rows; on CUDA the autotuned long-row kernel takes these rows (the
    # persistent plan there only serves CUDA graph captures of row lengths not tuned yet). Also rows
    # with a row stride, fewer rows than programs, and 16385..20480 columns (looped).
    rows = 300 if device == "cuda" else 9
    for dtype, n in [(torch.float16, 20481), (torch.bfloat16, 32768), (torch.bfloat16, 20000)]:
        check_softmax(ops, random_tensor((rows, n), dtype, device) * 4, -1)
    wide = random_tensor((rows, 40000), torch.bfloat16, device)
    check_softmax(ops, wide[:, :27000], -1)
    check_softmax(ops, random_tensor((2, 30000), torch.float16, device), -1)


@requires_cuda
def test_split_rows_cuda(ops):
    # On CUDA, long rows are shared by several programs (softmax.py's *_split_kernel): forward for
    # 4-byte types past 32768 columns, backward past 16384. Chunk counts that are not powers of
    # two, the 128-chunk limit and one past it (looped), row strides, many rows.
    # Forward rows past 32768 columns (2-byte rows: past 20480) of up to 4096 * 128 columns (not
    # fp64) go to the autotuned softmax_fwd_long_kernel (looped or split configs, tuned per row
    # length), longer ones to the hand-written plans.
    for dtype, shape in [(torch.float32, (300, 40000)), (torch.float32, (2, 8192 * 128)), (torch.float32, (1, 8192 * 128 + 1)),
                         (torch.float16, (5, 24577)), (torch.bfloat16, (7, 70001)), (torch.bfloat16, (2, 4096 * 128)),
                         (torch.bfloat16, (3, 4096 * 128 + 1)), (torch.float16, (33, 32769))]:
        x = random_tensor(shape, dtype, "cuda") * 4
        check_softmax(ops, x, -1)
        g = random_tensor(shape, dtype, "cuda")
        y = torch.softmax(x, -1)
        poison_allocator(y.numel(), dtype, "cuda")
        got = ops.softmax_backward(g, y, -1, dtype)
        want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).to(dtype)
        torch.testing.assert_close(got, want, **TOL[dtype])
    wide = random_tensor((6, 2 * 40000), torch.float32, "cuda")
    check_softmax(ops, wide[:, ::2], -1)  # rows with a stride (a copy) and
    check_softmax(ops, wide[:, :40000], -1)  # rows with a row stride
    x = random_tensor((3, 50000), torch.float32, "cuda")
    x[0, :20000] = float("-inf")  # whole chunks of -inf
    x[1, :] = float("-inf")  # an all -inf row: NaN, as torch
    torch.testing.assert_close(ops.softmax(x, -1), torch.softmax(x, -1), equal_nan=True)


@requires_cuda
def test_backward_split_switch_points_cuda(ops):
    # The backward's split plans (softmax.cpp): 2-byte rows of up to 32 chunks of 4096 columns
    # re-read their chunk after the wait, longer ones take 8192-column chunks with 8 warps; fp32
    # switches to 8192-column chunks past 48. Each side of each switch, odd lengths (misaligned
    # rows, ALIGN > 1, at both chunk sizes), a row count that is not a power of two, a strided view.
    for dtype, n in [(torch.bfloat16, 32 * 4096), (torch.bfloat16, 32 * 4096 + 1), (torch.float16, 32 * 4096 - 3),
                     (torch.float16, 33 * 4096), (torch.float32, 48 * 4096), (torch.float32, 48 * 4096 + 1),
                     (torch.float32, 48 * 4096 - 1), (torch.bfloat16, 64 * 4096 - 7)]:
        rows = 5
        y = torch.softmax(random_tensor((rows, n), torch.float32, "cuda") * 4, -1).to(dtype)
        g = random_tensor((rows, n), dtype, "cuda")
        want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).to(dtype)
        poison_allocator(y.numel(), dtype, "cuda")
        torch.testing.assert_close(ops.softmax_backward(g, y, -1, dtype), want, **TOL[dtype])
    wide = random_tensor((3, 33 * 4096 + 64), torch.bfloat16, "cuda")
    g_view = wide[:, 8:33 * 4096 + 8]  # rows 16-byte aligned, a row stride other than N
    y = torch.softmax(random_tensor((3, 33 * 4096), torch.float32, "cuda"), -1).to(torch.bfloat16)
    want = torch.ops.aten._softmax_backward_data(g_view.double(), y.double(), -1, torch.float64).to(torch.bfloat16)
    poison_allocator(y.numel(), torch.bfloat16, "cuda")
    torch.testing.assert_close(ops.softmax_backward(g_view, y, -1, torch.bfloat16), want, **TOL[torch.bfloat16])


@requires_cuda
def test_misaligned_long_rows_cuda(ops):
    # Rows whose length is not a multiple of 16 bytes (a 50257-token vocabulary): the split
    # kernels cut each row into a head, whole 16-byte vectors and a tail, and load and store the
    # vectors (views whose bases are not aligned go one element at a time).
    # Forward (autotuned) and backward, each dtype the split kernels take, a row count that is not
    # a power of two, lengths just past a chunk multiple and just below it, views with row strides.
    for dtype, n in [(torch.bfloat16, 50257), (torch.float16, 5 * 8192 - 3), (torch.bfloat16, 4 * 8192 + 1),
                     (torch.float32, 5 * 8192 - 1), (torch.float32, 50257), (torch.bfloat16, 4 * 4096 * 8 - 5)]:
        rows = 37
        x = random_tensor((rows, n), dtype, "cuda") * 4
        check_softmax(ops, x, -1)
        g = random_tensor((rows, n), dtype, "cuda")
        y = torch.softmax(x, -1)
        want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).to(dtype)
        poison_allocator(y.numel(), dtype, "cuda")
        torch.testing.assert_close(ops.softmax_backward(g, y, -1, dtype), want, **TOL[dtype])
        # Unequal strides: grad_output a view into wider rows, output contiguous.
        wide = random_tensor((rows, n + 5), dtype, "cuda")
        g_view = wide[:, 3:n + 3]
        want = torch.ops.aten._softmax_backward_data(g_view.double(), y.double(), -1, torch.float64).to(dtype)
        poison_allocator(y.numel(), dtype, "cuda")
        torch.testing.assert_close(ops.softmax_backward(g_view, y, -1, dtype), want, **TOL[dtype])
        check_softmax(ops, random_tensor((rows, n + 5), dtype, "cuda")[:, 1:n + 1], -1)  # input view, output not
    # Rows cut into whole 16-byte vectors at the same columns in each tensor although the strides
    # differ (every stride the same modulo a vector, every base aligned): input, grad_output.
    for dtype, n in [(torch.bfloat16, 50257), (torch.float32, 5 * 4096 + 3)]:
        per_vector = 16 // torch.empty((), dtype=dtype).element_size()
        x = random_tensor((19, n + 3 * per_vector), dtype, "cuda")[:, :n] * 4
        check_softmax(ops, x, -1)
        y = torch.softmax(x.float(), -1).to(dtype)
        g = random_tensor((19, n + per_vector), dtype, "cuda")[:, :n]
        want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).to(dtype)
        poison_allocator(y.numel(), dtype, "cuda")
        torch.testing.assert_close(ops.softmax_backward(g, y, -1, dtype), want, **TOL[dtype])
        # grad_input of another element size: no common cut, one element at a time.
        want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).float()
        poison_allocator(y.numel(), torch.float32, "cuda")
        torch.testing.assert_close(ops.softmax_backward(g, y, -1, torch.float32), want, **TOL[dtype])
    # The programs of a row exchange their statistics as one word that is 0 until written, so
    # statistics of exactly +0.0 must count as written: a chunk whose max is 0.0, and a row whose
    # backward dot is 0 (grad_output zero).
    x = -random_tensor((5, 50257), torch.float32, "cuda").abs()
    x[2, 5000] = 0.0
    check_softmax(ops, x, -1)
    y = torch.softmax(x, -1)
    g = random_tensor((5, 50257), torch.float32, "cuda")
    g[1] = 0.0
    g[3, :4096] = 0.0
    want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).float()
    poison_allocator(y.numel(), torch.float32, "cuda")
    torch.testing.assert_close(ops.softmax_backward(g, y, -1, torch.float32), want, **TOL[torch.float32])
    # Whole chunks of -inf and an all -inf row.
    x = random_tensor((3, 50257), torch.float32, "cuda")
    x[0, :20003] = float("-inf")
    x[1, :] = float("-inf")
    torch.testing.assert_close(ops.softmax(x, -1), torch.softmax(x, -1), equal_nan=True)


@requires_cuda
def test_split_help_path_cuda():
    # The split kernels' help path (a program that has polled HELP_AFTER times reads the chunks
    # still missing and publishes their words) does not run at GPU speed on its own. A private copy
    # of softmax.py with HELP_AFTER = 1 makes every program whose first poll misses a chunk help at
    # once, racing that chunk's own program: the first word in each slot must win and be what
    # every program of the row reads, and each program must still write its own chunk. Rows cut
    # into head, vectors and tail (ALIGN 8), whole vectors (fp32), 4096/4 and 8192/8 chunks.
    import triton
    sm = kernels_helping_at_once("softmax")
    for dtype, rows, n, block, warps in [(torch.bfloat16, 300, 50257, 4096, 4), (torch.float32, 64, 262144, 8192, 8),
                                         (torch.bfloat16, 97, 128256, 8192, 8)]:
        chunks = triton.cdiv(n, block)
        align = 16 // torch.empty((), dtype=dtype).element_size()  # contiguous rows, aligned bases
        x = random_tensor((rows, n), dtype, "cuda") * 4
        y = torch.full_like(x, float("nan"))
        sm.softmax_fwd_split_kernel[(rows * chunks, )](y, x, torch.zeros(2 + rows * chunks, dtype=torch.int64,
                                                                         device="cuda"),
                                                       rows, n, chunks, n, n, BLOCK_N=block,
                                                       S_POW2=triton.next_power_of_2(chunks), ALIGN=align,
                                                       INDEX_64=False, num_warps=warps)
        torch.testing.assert_close(y, torch.softmax(x.double(), -1).to(dtype), **TOL[dtype])
        g = random_tensor((rows, n), dtype, "cuda")
        want = torch.ops.aten._softmax_backward_data(g.double(), y.double(), -1, torch.float64).to(dtype)
        for reread in (False, True):
            grad_in = torch.full_like(x, float("nan"))
            sm.softmax_bwd_split_kernel[(rows * chunks, )](grad_in, g, y, torch.zeros(2 + rows * chunks,
                                                                                      dtype=torch.int64,
                                                                                      device="cuda"),
                                                           rows, n, chunks, n, n, n, BLOCK_N=block,
                                                           S_POW2=triton.next_power_of_2(chunks), ALIGN=align,
                                                           INDEX_64=False, REREAD=reread, num_warps=warps)
            torch.testing.assert_close(grad_in, want, **TOL[dtype])


@requires_cuda
def test_long_rows_in_a_cuda_graph(ops):
    # A row length never tuned cannot be timed inside a capture: the capture records the
    # hand-written plan (its binary loaded first by a row past the tuned range with the same
    # specialisation). Once tuned, the capture records the tuned kernel.
    ops.softmax(random_tensor((64, 4096 * 128 + 1), torch.bfloat16, "cuda"), -1)
    for cols, tuned_first in ((45001, False), (45000, True)):
        static_in = random_tensor((64, cols), torch.bfloat16, "cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        if tuned_first:
            with torch.cuda.stream(side):
                ops.softmax(static_in, -1)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = ops.softmax(static_in, -1)
        new = random_tensor(static_in.shape, static_in.dtype, "cuda") * 4
        static_in.copy_(new)
        static_out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, torch.softmax(new.float(), -1).to(new.dtype), **TOL[new.dtype])


def test_dtype_argument(device, ops):
    check_softmax(ops, random_tensor((5, 300), torch.float16, device), -1, torch.float32)
    check_softmax(ops, random_tensor((5, 300), torch.float32, device), 0, torch.float64)


def test_infinities(device, ops):
    x = random_tensor((4, 20000), torch.float32, device)
    x[0, 5] = float("-inf")
    x[1, :] = float("-inf")  # all -inf: NaN, as torch
    x[2, 7] = 80.0
    expected = torch.softmax(x, -1)
    got = ops.softmax(x, -1)
    torch.testing.assert_close(got, expected, equal_nan=True)
    small = x[:, :100].clone()
    torch.testing.assert_close(ops.softmax(small, -1), torch.softmax(small, -1), equal_nan=True)


def test_empty_and_scalar(device, ops):
    for shape in [(0, 5), (5, 0), (0, )]:
        x = random_tensor(shape, torch.float32, device)
        assert ops.softmax(x, -1).shape == x.shape
    check_softmax(ops, torch.tensor(2.0, device=device), 0)


def test_errors(device, ops):
    x = random_tensor((4, 5), torch.float32, device)
    with pytest.raises(RuntimeError, match=r"tjit::softmax: argument 'self' has dtype Long; softmax needs a floating"):
        ops.softmax(x.long(), 0)
    with pytest.raises(RuntimeError, match=r"tjit::softmax: dim 2 is out of range for a tensor of 2 dimensions"):
        ops.softmax(x, 2)


def test_dtype_converts_integer_inputs_first(device, ops):
    # As torch.softmax: with dtype= the input is converted first, so integer inputs work.
    for x in (torch.arange(8, device=device).reshape(2, 4), random_tensor((3, 7), torch.int32, device) // 100):
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            for dim in (0, -1):
                check_softmax(ops, x, dim, dtype)
    meta = ops.softmax(torch.empty(3, 4, dtype=torch.int64, device="meta"), 0, torch.float16)
    assert meta.shape == (3, 4) and meta.dtype == torch.float16
    with pytest.raises(RuntimeError, match=r"tjit::softmax: dtype=Int is not supported"):
        ops.softmax(torch.arange(8, device=device), 0, torch.int32)


def test_meta(ops):
    for shape, dim in [((4, 5, 6), 1), ((4, 5), -1), ((), 0)]:
        out = ops.softmax(torch.empty(shape, device="meta"), dim)
        real = ops.softmax(torch.randn(shape), dim)
        assert out.shape == real.shape and out.stride() == real.stride()


@pytest.mark.parametrize("dim", [0, -1])
def test_backward(device, ops, dim):
    for dtype in [torch.float32, torch.float64]:
        x = random_tensor((6, 300), dtype, device).requires_grad_()
        g = random_tensor((6, 300), dtype, device)
        got = torch.autograd.grad(ops.softmax(x, dim), x, g)[0]
        want = torch.autograd.grad(torch.softmax(x, dim), x, g)[0]
        torch.testing.assert_close(got, want, **TOL[dtype])
    long_row = random_tensor((2, 16385), torch.float32, device).requires_grad_()
    g = random_tensor((2, 16385), torch.float32, device)
    torch.testing.assert_close(torch.autograd.grad(ops.softmax(long_row, -1), long_row, g)[0],
                               torch.autograd.grad(torch.softmax(long_row, -1), long_row, g)[0], rtol=1e-4, atol=1e-7)


def test_gradcheck(device, ops):
    x = random_tensor((3, 7), torch.float64, device).requires_grad_()
    torch.autograd.gradcheck(lambda t: ops.softmax(t, 1), (x, ))
    torch.autograd.gradcheck(lambda t: ops.softmax(t, 0), (x, ))


@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck(device, requires_grad):
    x = random_tensor((6, 7), torch.float32, device).requires_grad_(requires_grad)
    torch.library.opcheck(torch.ops.tjit.softmax.default, (x, 1))
    out = torch.softmax(x.detach(), 1)
    torch.library.opcheck(torch.ops.tjit.softmax_backward.default, (torch.randn_like(out), out, 1, torch.float32))
