"""All four operators together, as training uses them: a small model under
torch.compile(fullgraph=True) against the same model eagerly and against aten, its gradients,
and CUDA graph capture and replay of a sequence of tjit ops; each through both entry points
(tjit.* and torch.ops.tjit.*: conftest's `ops`)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import requires_cuda


class TinyBlock(torch.nn.Module):
    """layer_norm -> linear -> softmax -> residual add -> sum, through `ops` (an entry point of
    tjit's operators), or aten's ops where `ops` is None."""

    def __init__(self, width, ops):
        super().__init__()
        self.norm_weight = torch.nn.Parameter(torch.randn(width))
        self.norm_bias = torch.nn.Parameter(torch.randn(width))
        self.proj = torch.nn.Parameter(torch.randn(width, width) / width**0.5)
        self.ops = ops

    def forward(self, x):
        ops = self.ops
        if ops is not None:
            h = ops.layer_norm(x, [x.shape[-1]], self.norm_weight, self.norm_bias, 1e-5)
            p = ops.softmax(h @ self.proj, -1)
            r = ops.add(x, p, alpha=0.5)
            return ops.sum(r, [1])
        h = F.layer_norm(x, [x.shape[-1]], self.norm_weight, self.norm_bias, 1e-5)
        p = torch.softmax(h @ self.proj, -1)
        return torch.sum(torch.add(x, p, alpha=0.5), [1])


def run_step(model, x):
    out = model(x)
    loss = (out * torch.arange(out.numel(), device=out.device, dtype=out.dtype).reshape(out.shape)).sum()
    grads = torch.autograd.grad(loss, [x] + list(model.parameters()))
    return out, grads


def test_compiled_model_matches_eager_and_aten(device, ops):
    torch.manual_seed(0)
    tjit_model = TinyBlock(32, ops).to(device)
    aten_model = TinyBlock(32, None).to(device)
    aten_model.load_state_dict(tjit_model.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(tjit_model, fullgraph=True)  # inductor
    x = torch.randn(6, 5, 32, device=device, requires_grad=True)
    out_c, grads_c = run_step(compiled, x)
    out_e, grads_e = run_step(tjit_model, x)
    out_a, grads_a = run_step(aten_model, x)
    torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out_e, out_a, rtol=1e-4, atol=1e-4)
    for gc, ge, ga in zip(grads_c, grads_e, grads_a):
        torch.testing.assert_close(gc, ge, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(ge, ga, rtol=1e-3, atol=1e-3)


def test_compiled_graph_contains_tjit_ops(device, ops):
    torch._dynamo.reset()
    seen = []

    def capture(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    model = TinyBlock(16, ops).to(device)
    torch.compile(model, fullgraph=True, backend=capture)(torch.randn(3, 4, 16, device=device))
    for op in ["tjit.layer_norm", "tjit.softmax", "tjit.add", "tjit.sum"]:
        assert any(op in s for s in seen), f"{op} missing from the traced graph: {seen}"


def test_dynamic_shapes(device, ops):
    torch._dynamo.reset()
    model = TinyBlock(16, ops).to(device)
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend="aot_eager")
    for batch in [2, 5, 9]:
        x = torch.randn(batch, 3, 16, device=device)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


@requires_cuda
def test_cuda_graph_capture_and_replay(ops):
    torch.manual_seed(0)
    x = torch.randn(64, 1000, device="cuda")
    w = torch.randn(1000, device="cuda")
    b = torch.randn(1000, device="cuda")

    def step(inp):
        h = ops.layer_norm(inp, [1000], w, b, 1e-5)
        s = ops.softmax(h, -1)
        r = ops.add(inp, s, alpha=2.0)
        return ops.sum(r, [1])

    static_in = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_in)  # warm up: compile and load every kernel before capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_in)
    for _ in range(3):
        new = torch.randn_like(x)
        static_in.copy_(new)
        static_out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        expected = torch.sum(torch.add(new, torch.softmax(F.layer_norm(new, [1000], w, b, 1e-5), -1), alpha=2.0), [1])
        torch.testing.assert_close(static_out, expected, rtol=1e-4, atol=1e-3)
