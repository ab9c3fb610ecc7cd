#pragma once
// tjit::layer_norm, its forward with statistics and its backward for C++ programs (installed as
// <tjit/ops/layer_norm.h>; <tjit/operators.h> has every operator). Calls go through torch's
// dispatcher, like at:: functions. Link tjit::operators.

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>

namespace tjit {

// Layer normalisation over the trailing `normalized_shape` dims, biased variance; input, weight
// and bias share one dtype (float32, float16, bfloat16, float64) and device.
// Schema: layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None,
//                    float eps=1e-05) -> Tensor
at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight = std::nullopt,
                      const std::optional<at::Tensor>& bias = std::nullopt, double eps = 1e-5);

// layer_norm that also returns mean and rstd (float32; float64 for float64 input), shaped as the
// input's leading dims: what layer_norm_backward needs.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(
    const at::Tensor& input, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight = std::nullopt,
    const std::optional<at::Tensor>& bias = std::nullopt, double eps = 1e-5);

// Gradients of layer_norm for input, weight and bias; an entry is undefined where output_mask
// is false or the parameter is absent.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask);

}  // namespace tjit

// The entry points above, for code generated over every operator (tjit._C's direct calls).
#define TJIT_LAYER_NORM_OPERATORS(X) X(layer_norm) X(layer_norm_forward) X(layer_norm_backward)
