#pragma once
// The normalisations' derivatives composed of aten's differentiable operators, for layer_norm,
// rms_norm and add_rms_norm: their backward operators' own autograd (second and higher
// derivatives, torch.func) and their forward-mode tangents (jvp, jacfwd, hessian). First
// derivatives run the Triton backward kernels; these run only where a graph of the backward or a
// tangent is asked for. Statistics are computed in the kernels' accumulator dtype.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <optional>
#include <tuple>

namespace tjit::ops::norm {

// Gradients of layer_norm over the trailing `normalized_dims` dims of `input` for (input, weight,
// bias), as layer_norm_backward: differentiable in every tensor argument. mean and rstd are
// differentiable outputs of the forward, so their dependence on the input reaches the input
// through the forward's own graph node (statistics_grad).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                                   int64_t normalized_dims, const at::Tensor& mean,
                                                                   const at::Tensor& rstd,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias,
                                                                   std::array<bool, 3> output_mask);

// Gradients of rms_norm for (input, weight), as rms_norm_backward (grad_sum added to the input's).
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                     int64_t normalized_dims, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> output_mask,
                                                     const std::optional<at::Tensor>& grad_sum);

// The tangents of (out, mean, rstd) from the inputs' tangents (undefined where an input has none),
// given the forward's statistics; out's in `out_dtype`, the statistics' undefined without an
// input tangent.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_tangents(
    const at::Tensor& input, int64_t normalized_dims, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, const at::Tensor& input_t, const at::Tensor& weight_t,
    const at::Tensor& bias_t, at::ScalarType out_dtype);
// (out, rstd) likewise for rms_norm.
std::tuple<at::Tensor, at::Tensor> rms_norm_tangents(const at::Tensor& input, int64_t normalized_dims,
                                                     const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                                     const at::Tensor& input_t, const at::Tensor& weight_t,
                                                     at::ScalarType out_dtype);

// The input gradient that the statistics' gradients give (either undefined when unused): mean
// undefined for rms_norm, whose rstd is of the uncentred input. In the input's dtype.
at::Tensor statistics_grad(const at::Tensor& input, int64_t normalized_dims, const at::Tensor& mean,
                           const at::Tensor& rstd, const at::Tensor& grad_mean, const at::Tensor& grad_rstd);

}  // namespace tjit::ops::norm
