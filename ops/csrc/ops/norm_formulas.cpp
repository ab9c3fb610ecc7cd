#include "norm_formulas.h"

#include <tjit/kit/dtypes.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/SymInt.h>
#include <c10/util/SmallVector.h>

#include <vector>

namespace tjit::ops::norm {
namespace {

// The dims a normalisation reduces (the trailing ones) and those it keeps, and the statistics'
// shape broadcast against the input (kept sizes, then 1 per normalised dim).
struct NormDims {
  c10::SmallVector<int64_t, 8> normalized;
  c10::SmallVector<int64_t, 8> leading;
  std::vector<c10::SymInt> stat_shape;
};

NormDims norm_dims(const at::Tensor& input, int64_t normalized_dims) {
  NormDims d;
  const int64_t lead = input.dim() - normalized_dims;
  for (int64_t i = 0; i < input.dim(); ++i) {
    (i < lead ? d.leading : d.normalized).push_back(i);
    d.stat_shape.push_back(i < lead ? input.sym_size(i) : c10::SymInt(1));
  }
  return d;
}

at::Tensor mean_over(const at::Tensor& t, const NormDims& d) { return t.mean(d.normalized, /*keepdim=*/true); }

// A per-row sum over the kept dims (a weight's or bias's gradient); with none kept, `t` itself
// (aten's sum over an empty dim list would sum everything).
at::Tensor sum_rows(const at::Tensor& t, const NormDims& d) { return d.leading.empty() ? t : t.sum(d.leading); }

at::Tensor stat_view(const at::Tensor& stat, const NormDims& d, at::ScalarType compute) {
  return stat.to(compute).reshape_symint(d.stat_shape);
}

at::Tensor cast(const at::Tensor& t, const at::Tensor& like) {
  return t.scalar_type() == like.scalar_type() ? t : t.to(like.scalar_type());
}

// The input gradient of a normalisation from xhat, rstd and the weighted output gradient:
// rstd * (gw - [mean(gw)] - xhat * mean(gw * xhat)).
at::Tensor normalised_grad(const at::Tensor& gw, const at::Tensor& xhat, const at::Tensor& r, const NormDims& d,
                           bool centred) {
  at::Tensor inner = gw - xhat * mean_over(gw * xhat, d);
  if (centred) {
    inner = inner - mean_over(gw, d);
  }
  return r * inner;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                                   int64_t normalized_dims, const at::Tensor& mean,
                                                                   const at::Tensor& rstd,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias,
                                                                   std::array<bool, 3> output_mask) {
  const NormDims d = norm_dims(input, normalized_dims);
  const at::ScalarType compute = kit::accumulator_type(input.scalar_type());
  const at::Tensor g = grad_out.to(compute);
  const at::Tensor r = stat_view(rstd, d, compute);
  const at::Tensor xhat = (input.to(compute) - stat_view(mean, d, compute)) * r;
  at::Tensor dx;
  at::Tensor dw;
  at::Tensor db;
  if (output_mask[0]) {
    const at::Tensor gw = weight.has_value() ? g * weight->to(compute) : g;
    dx = cast(normalised_grad(gw, xhat, r, d, /*centred=*/true), input);
  }
  if (output_mask[1] && weight.has_value()) {
    dw = cast(sum_rows(g * xhat, d), *weight);
  }
  if (output_mask[2] && bias.has_value()) {
    db = cast(sum_rows(g, d), *bias);
  }
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                     int64_t normalized_dims, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> output_mask,
                                                     const std::optional<at::Tensor>& grad_sum) {
  const NormDims d = norm_dims(input, normalized_dims);
  const at::ScalarType compute = kit::accumulator_type(input.scalar_type());
  const at::Tensor g = grad_out.to(compute);
  const at::Tensor r = stat_view(rstd, d, compute);
  const at::Tensor xhat = input.to(compute) * r;
  at::Tensor dx;
  at::Tensor dw;
  if (output_mask[0]) {
    const at::Tensor gw = weight.has_value() ? g * weight->to(compute) : g;
    dx = normalised_grad(gw, xhat, r, d, /*centred=*/false);
    if (grad_sum.has_value() && grad_sum->defined()) {
      dx = dx + grad_sum->to(compute);
    }
    dx = cast(dx, input);
  }
  if (output_mask[1] && weight.has_value()) {
    dw = cast(sum_rows(g * xhat, d), *weight);
  }
  return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_tangents(
    const at::Tensor& input, int64_t normalized_dims, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, const at::Tensor& input_t, const at::Tensor& weight_t,
    const at::Tensor& bias_t, at::ScalarType out_dtype) {
  const NormDims d = norm_dims(input, normalized_dims);
  const at::ScalarType compute = kit::accumulator_type(input.scalar_type());
  const at::Tensor r = stat_view(rstd, d, compute);
  const at::Tensor xhat = (input.to(compute) - stat_view(mean, d, compute)) * r;
  at::Tensor t = at::zeros_like(xhat);
  at::Tensor mean_t;
  at::Tensor rstd_t;
  if (input_t.defined()) {
    const at::Tensor x_t = input_t.to(compute);
    // The input gradient's formula with the tangent for gw: the normalisation's Jacobian is
    // symmetric once the weight is taken out.
    const at::Tensor xhat_t = normalised_grad(x_t, xhat, r, d, /*centred=*/true);
    t = t + (weight.has_value() ? xhat_t * weight->to(compute) : xhat_t);
    mean_t = mean_over(x_t, d).reshape_as(mean).to(mean.scalar_type());
    // rstd = (var + eps)^-1/2: its tangent is -rstd^2 * mean(xhat * x_t).
    rstd_t = (-(r * r) * mean_over(xhat * x_t, d)).reshape_as(rstd).to(rstd.scalar_type());
  }
  if (weight_t.defined()) {
    t = t + xhat * weight_t.to(compute);
  }
  if (bias_t.defined()) {
    t = t + bias_t.to(compute);
  }
  return {t.to(out_dtype), mean_t, rstd_t};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_tangents(const at::Tensor& input, int64_t normalized_dims,
                                                     const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                                     const at::Tensor& input_t, const at::Tensor& weight_t,
                                                     at::ScalarType out_dtype) {
  const NormDims d = norm_dims(input, normalized_dims);
  const at::ScalarType compute = kit::accumulator_type(input.scalar_type());
  const at::Tensor r = stat_view(rstd, d, compute);
  const at::Tensor xhat = input.to(compute) * r;
  at::Tensor t = at::zeros_like(xhat);
  at::Tensor rstd_t;
  if (input_t.defined()) {
    const at::Tensor x_t = input_t.to(compute);
    const at::Tensor xhat_t = normalised_grad(x_t, xhat, r, d, /*centred=*/false);
    t = t + (weight.has_value() ? xhat_t * weight->to(compute) : xhat_t);
    rstd_t = (-(r * r) * mean_over(xhat * x_t, d)).reshape_as(rstd).to(rstd.scalar_type());
  }
  if (weight_t.defined()) {
    t = t + xhat * weight_t.to(compute);
  }
  return {t.to(out_dtype), rstd_t};
}

at::Tensor statistics_grad(const at::Tensor& input, int64_t normalized_dims, const at::Tensor& mean,
                           const at::Tensor& rstd, const at::Tensor& grad_mean, const at::Tensor& grad_rstd) {
  const NormDims d = norm_dims(input, normalized_dims);
  const at::ScalarType compute = kit::accumulator_type(input.scalar_type());
  c10::SymInt n = 1;
  for (int64_t i : d.normalized) {
    n = n * input.sym_size(i);
  }
  const at::Tensor x = input.to(compute);
  at::Tensor dx = at::zeros_like(x);
  const at::Tensor centred = mean.defined() ? x - stat_view(mean, d, compute) : x;
  if (grad_mean.defined()) {
    dx = dx + stat_view(grad_mean, d, compute) / c10::Scalar(n);  // d mean / dx = 1 / n
  }
  if (grad_rstd.defined()) {
    // d rstd / dx = -rstd^3 * (x - mean) / n (mean 0 for rms_norm)
    const at::Tensor r = stat_view(rstd, d, compute);
    dx = dx - stat_view(grad_rstd, d, compute) * r * r * r * centred / c10::Scalar(n);
  }
  return dx.to(input.scalar_type());
}

}  // namespace tjit::ops::norm
