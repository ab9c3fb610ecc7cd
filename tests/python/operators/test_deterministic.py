"""Every operator under torch.use_deterministic_algorithms(True), where torch fills new memory
(fill_uninitialized_memory) and tjit allocates its outputs through at::empty instead of its
direct allocator path: results must still match aten."""

import pytest
import torch
import torch.nn.functional as F
from conftest import poison_allocator, random_tensor


@pytest.fixture
def deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    fill_before = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(before)
    torch.utils.deterministic.fill_uninitialized_memory = fill_before


def test_operators_in_deterministic_mode(device, ops, deterministic):
    x = random_tensor((37, 129), torch.float32, device)
    y = random_tensor((37, 129), torch.float32, device)
    w = random_tensor((129, ), torch.float32, device)
    b = random_tensor((129, ), torch.float32, device)
    poison_allocator(4 * x.numel(), torch.float32, device)
    torch.testing.assert_close(ops.add(x, y, alpha=2), torch.add(x, y, alpha=2))
    torch.testing.assert_close(ops.sum(x, [1]), torch.sum(x, 1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ops.softmax(x, 0), torch.softmax(x, 0))
    torch.testing.assert_close(ops.layer_norm(x, [129], w, b, 1e-5), F.layer_norm(x, (129, ), w, b, 1e-5),
                               rtol=1e-4, atol=1e-5)
    out, mean, rstd = ops.layer_norm_forward(x, [129], w, b, 1e-5)
    ref_out, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm(x, [129], w, b, 1e-5)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mean, ref_mean.view(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd, ref_rstd.view(-1), rtol=1e-4, atol=1e-5)
