"""Shared fixtures: every operator test runs on each device present (CPU through Triton's
interpreter always; CUDA where there is a GPU)."""

import pytest
import torch

import tjit  # noqa: F401  (registers torch.ops.tjit)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pytest_report_header(config):
    return f"tjit test devices: {', '.join(DEVICES)} (torch {torch.__version__})"


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason="needs a CUDA GPU; runs on the CUDA machine (run.sh test there)")


def poison_allocator(numel, dtype, device):
    """Fills memory the allocator will hand out next with NaN/garbage, so an output element the
    kernel forgets to write shows up instead of reading as a plausible zero."""
    if numel == 0:
        return
    fill = float("nan") if dtype.is_floating_point else -123456
    block = torch.full((numel, ), fill, dtype=dtype, device=device)
    del block


def random_tensor(shape, dtype, device):
    """Fresh random values (never zeros); integers in [-1000, 1000)."""
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device)
    return torch.randint(-1000, 1000, shape, dtype=dtype, device=device)
