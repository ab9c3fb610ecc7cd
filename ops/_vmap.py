"""Batching rules for tjit's operators: `torch.vmap` (and torch.func transforms built on it:
jacrev, jacfwd, hessian, per-sample gradients) runs each operator's own kernel once over the whole
batch instead of torch's per-sample fallback.

A rule gets the tensors with their batch dim where `in_dims` says (None: not batched), moves it to
the front, and calls the operator on the physical tensors: the batch becomes leading dims, which
every operator here treats as independent rows. Where a batched argument is one the kernels take
once per call (a norm's weight or bias), the rule applies it with aten operators around an
unweighted call instead. The weight and bias gradients of the backward operators are per-row sums,
and a batch is summed per sample, so the rules form those with aten operators from the forward's
statistics.
"""

import torch

_ops = torch.ops.tjit


def _front(t, bdim):
    """`t` with its batch dim first (unchanged when not batched)."""
    return t if bdim is None or bdim == 0 else t.movedim(bdim, 0)


def _batched(t, bdim, batch_size):
    """`t` with a batch dim first, expanded from an unbatched `t` where it has none."""
    if bdim is None:
        return t.expand(batch_size, *t.shape)
    return _front(t, bdim)


def _logical_dim(t, bdim):
    return t.dim() - (bdim is not None)


def _aligned(t, bdim, ndim):
    """A batched `t` (batch first) viewed with `ndim` logical dims (size-1 dims inserted after the
    batch), so that broadcasting aligns its logical dims, not its batch dim, with the other's."""
    t = _front(t, bdim)
    missing = ndim - _logical_dim(t, 0)
    return t.reshape(t.shape[:1] + (1,) * missing + t.shape[1:]) if missing > 0 else t


def _wrap(dim, ndim):
    """A logical dim (negative counts from the end; a 0-dim tensor takes 0 and -1) as a physical
    one behind the batch dim."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise IndexError(f"tjit: dim {dim} is out of range for a tensor of {ndim} dims")
    return (dim % size) + 1


def _add(info, in_dims, self, other, *, alpha=1):
    self_bdim, other_bdim = in_dims
    # Batched ones get at least the other's logical dims, so that broadcasting aligns logical dims
    # and an unbatched one broadcasts against the batch.
    ndim = max(_logical_dim(self, self_bdim), _logical_dim(other, other_bdim))
    self = _aligned(self, self_bdim, ndim) if self_bdim is not None else self
    other = _aligned(other, other_bdim, ndim) if other_bdim is not None else other
    return _ops.add(self, other, alpha=alpha), 0


def _sum(info, in_dims, self, dim=None, keepdim=False, *, dtype=None):
    (bdim,) = in_dims[:1]
    x = _front(self, bdim)
    ndim = _logical_dim(x, 0)
    if ndim == 0:
        # The sum of one element over its only (or no) dim: the element, in the sum's dtype.
        return _ops.sum(x.unsqueeze(-1), [1], False, dtype=dtype), 0
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        dims = list(range(1, ndim + 1))
    else:
        dims = [_wrap(d, ndim) for d in ([dim] if isinstance(dim, int) else dim)]
    return _ops.sum(x, dims, keepdim, dtype=dtype), 0


def _softmax(info, in_dims, self, dim, dtype=None):
    x = _front(self, in_dims[0])
    if _logical_dim(x, 0) == 0:
        _wrap(dim, 0)
        return _ops.softmax(x.unsqueeze(-1), 1, dtype).squeeze(-1), 0
    return _ops.softmax(x, _wrap(dim, _logical_dim(x, 0)), dtype), 0


def _softmax_backward(info, in_dims, grad_output, output, dim, input_dtype):
    g = _batched(grad_output, in_dims[0], info.batch_size)
    y = _batched(output, in_dims[1], info.batch_size)
    if _logical_dim(y, 0) == 0:
        _wrap(dim, 0)
        return _ops.softmax_backward(g.unsqueeze(-1), y.unsqueeze(-1), 1, input_dtype).squeeze(-1), 0
    return _ops.softmax_backward(g, y, _wrap(dim, _logical_dim(y, 0)), input_dtype), 0


def _affine(out, weight, weight_bdim, bias=None, bias_bdim=None):
    """out * weight + bias for a batched `out` (batch first) and weight/bias batched or not, each
    of the normalised shape (with its batch first when batched)."""

    def per_sample(t, bdim):
        t = _front(t, bdim)
        return t.reshape(t.shape[:1] + (1,) * (out.dim() - t.dim()) + t.shape[1:])

    if weight is not None:
        out = out * (per_sample(weight, weight_bdim) if weight_bdim is not None else weight)
    if bias is not None:
        out = out + (per_sample(bias, bias_bdim) if bias_bdim is not None else bias)
    return out


def _layer_norm_forward(info, in_dims, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = _batched(input, in_dims[0], info.batch_size)
    if in_dims[2] is not None or in_dims[3] is not None:
        out, mean, rstd = _ops.layer_norm_forward(x, normalized_shape, None, None, eps)
        return (_affine(out, weight, in_dims[2], bias, in_dims[3]).to(out.dtype), mean, rstd), (0, 0, 0)
    return _ops.layer_norm_forward(x, normalized_shape, weight, bias, eps), (0, 0, 0)


def _layer_norm(info, in_dims, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    outputs, _ = _layer_norm_forward(info, in_dims, input, normalized_shape, weight, bias, eps)
    return outputs[0], 0


def _rms_norm_forward(info, in_dims, input, normalized_shape, weight=None, eps=None):
    x = _batched(input, in_dims[0], info.batch_size)
    if in_dims[2] is not None:
        out, rstd = _ops.rms_norm_forward(x, normalized_shape, None, eps)
        return (_affine(out, weight, in_dims[2]).to(out.dtype), rstd), (0, 0)
    return _ops.rms_norm_forward(x, normalized_shape, weight, eps), (0, 0)


def _rms_norm(info, in_dims, input, normalized_shape, weight=None, eps=None):
    outputs, _ = _rms_norm_forward(info, in_dims, input, normalized_shape, weight, eps)
    return outputs[0], 0


def _add_rms_norm_forward(info, in_dims, input, residual, normalized_shape, weight=None, eps=None):
    x = _batched(input, in_dims[0], info.batch_size)
    r = _batched(residual, in_dims[1], info.batch_size)
    if in_dims[3] is not None:
        out, total, rstd = _ops.add_rms_norm_forward(x, r, normalized_shape, None, eps)
        return (_affine(out, weight, in_dims[3]).to(out.dtype), total, rstd), (0, 0, 0)
    return _ops.add_rms_norm_forward(x, r, normalized_shape, weight, eps), (0, 0, 0)


def _add_rms_norm(info, in_dims, input, residual, normalized_shape, weight=None, eps=None):
    outputs, _ = _add_rms_norm_forward(info, in_dims, input, residual, normalized_shape, weight, eps)
    return outputs[:2], (0, 0)


def _stats_view(stat, x, normalized_dims):
    """A per-row statistic (the input's leading dims) viewed to broadcast against `x`."""
    return stat.reshape(x.shape[:x.dim() - normalized_dims] + (1,) * normalized_dims)


def _accumulator(dtype):
    """The dtype tjit's norm kernels accumulate in (kit::accumulator_type): float64 or float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _normalised(x, mean, rstd, normalized_dims):
    """xhat = (x - mean) * rstd of a norm's input (batch first) in the accumulator dtype (mean None
    for rms_norm). The statistics are differentiable outputs of the forward, so this is
    differentiable in x through them too."""
    compute = _accumulator(x.dtype)
    x = x.to(compute)
    if mean is not None:
        x = x - _stats_view(mean, x, normalized_dims).to(compute)
    return x * _stats_view(rstd, x, normalized_dims).to(compute)


def _dims_of(outputs):
    """out_dims for outputs that are batched first, or None where not computed."""
    return tuple(None if t is None else 0 for t in outputs)


def _per_sample_sum(t, normalized_dims):
    """A weight's or bias's gradient per sample: `t` summed over every leading dim but the batch."""
    rows = tuple(range(1, t.dim() - normalized_dims))
    return t.sum(rows) if rows else t


def _layer_norm_backward(info, in_dims, grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    n = info.batch_size
    g = _batched(grad_out, in_dims[0], n)
    x = _batched(input, in_dims[1], n)
    mean_b = _batched(mean, in_dims[3], n)
    rstd_b = _batched(rstd, in_dims[4], n)
    k = len(normalized_shape)
    dx = dw = db = None
    if output_mask[0]:
        # The weight enters the input gradient only through grad_out * weight.
        if in_dims[5] is not None:
            g_w, w = _affine(g, weight, in_dims[5]).to(g.dtype), None
        else:
            g_w, w = g, weight
        dx = _ops.layer_norm_backward(g_w, x, normalized_shape, mean_b, rstd_b, w, None, [True, False, False])[0]
    if output_mask[1] and weight is not None:
        xhat = _normalised(x, mean_b, rstd_b, k)
        dw = _per_sample_sum(g.to(xhat.dtype) * xhat, k).to(weight.dtype)
    if output_mask[2] and bias is not None:
        db = _per_sample_sum(g.to(_accumulator(g.dtype)), k).to(bias.dtype)
    return (dx, dw, db), _dims_of((dx, dw, db))


def _rms_norm_backward(info, in_dims, grad_out, input, normalized_shape, rstd, weight, output_mask, grad_sum=None):
    n = info.batch_size
    g = _batched(grad_out, in_dims[0], n)
    x = _batched(input, in_dims[1], n)
    rstd_b = _batched(rstd, in_dims[3], n)
    s = _batched(grad_sum, in_dims[6], n) if grad_sum is not None else None
    k = len(normalized_shape)
    dx = dw = None
    if output_mask[0]:
        if in_dims[4] is not None:
            g_w, w = _affine(g, weight, in_dims[4]).to(g.dtype), None
        else:
            g_w, w = g, weight
        dx = _ops.rms_norm_backward(g_w, x, normalized_shape, rstd_b, w, [True, False], s)[0]
    if output_mask[1] and weight is not None:
        xhat = _normalised(x, None, rstd_b, k)
        dw = _per_sample_sum(g.to(xhat.dtype) * xhat, k).to(weight.dtype)
    return (dx, dw), _dims_of((dx, dw))


RULES = {
    "add": _add,
    "sum": _sum,
    "softmax": _softmax,
    "softmax_backward": _softmax_backward,
    "layer_norm": _layer_norm,
    "layer_norm_forward": _layer_norm_forward,
    "layer_norm_backward": _layer_norm_backward,
    "rms_norm": _rms_norm,
    "rms_norm_forward": _rms_norm_forward,
    "add_rms_norm": _add_rms_norm,
    "add_rms_norm_forward": _add_rms_norm_forward,
    "rms_norm_backward": _rms_norm_backward,
}


def _with_every_in_dim(rule, positional):
    """`rule` given one in_dim per positional parameter: torch passes them only for the arguments
    of the call, not for those left at their defaults."""

    def padded(info, in_dims, *args, **kwargs):
        return rule(info, tuple(in_dims) + (None,) * (positional - len(in_dims)), *args, **kwargs)

    return padded


def install():
    """Registers a batching rule for every overload of every operator in RULES."""
    for name, rule in RULES.items():
        packet = getattr(_ops, name)
        for overload in packet.overloads():
            schema = getattr(packet, overload)._schema
            positional = sum(not a.kwarg_only for a in schema.arguments)
            torch.library.register_vmap(f"tjit::{name}" + ("" if overload == "default" else f".{overload}"),
                                        _with_every_in_dim(rule, positional))
