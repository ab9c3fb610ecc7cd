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
// bias), as layer_norm_backward: differentiable in grad_out, input, weight and bias, with mean and
// rstd the functions of input they are (as aten's native_layer_norm_backward).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                                   int64_t normalized_dims, const at::Tensor& rstd,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias,
                                                                   std::array<bool, 3> output_mask);

// Gradients of rms_norm for (input, weight), as rms_norm_backward (grad_sum added to the input's).
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                     int64_t normalized_dims, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> output_mask,
                                                     const std::optional<at::Tensor>& grad_sum);

// The output's tangent from the inputs' tangents (undefined where an input has none), given the
// forward's statistics; in `out_dtype`.
at::Tensor layer_norm_tangent(const at::Tensor& input, int64_t normalized_dims, const at::Tensor& mean,
                              const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                              const at::Tensor& input_t, const at::Tensor& weight_t, const at::Tensor& bias_t,
                              at::ScalarType out_dtype);
at::Tensor rms_norm_tangent(const at::Tensor& input, int64_t normalized_dims, const at::Tensor& rstd,
                            const std::optional<at::Tensor>& weight, const at::Tensor& input_t,
                            const at::Tensor& weight_t, at::ScalarType out_dtype);

}  // namespace tjit::ops::norm
