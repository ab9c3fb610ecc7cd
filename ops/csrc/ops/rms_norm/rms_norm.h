#pragma once
// tjit::rms_norm, tjit::add_rms_norm (the residual add fused in), their forwards with the reciprocal
// RMS and their backward for C++ programs (installed as <tjit/ops/rms_norm.h>; <tjit/operators.h>
// has every operator). Calls go through torch's dispatcher, like at:: functions. Link tjit::operators.

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>

namespace tjit {

// RMS normalisation over the trailing `normalized_shape` dims, as torch.nn.functional.rms_norm:
// input / sqrt(mean(input^2) + eps) * weight. input and weight share one dtype (float32, float16,
// bfloat16, float64) and device; eps absent is the accumulation dtype's epsilon, as torch's.
// Schema: rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor
at::Tensor rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                    const std::optional<at::Tensor>& weight = std::nullopt, std::optional<double> eps = std::nullopt);

// rms_norm that also returns rstd = 1 / sqrt(mean(input^2) + eps) (float32; float64 for float64
// input), shaped as the input's leading dims: what rms_norm_backward needs.
std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                    const std::optional<at::Tensor>& weight = std::nullopt,
                                                    std::optional<double> eps = std::nullopt);

// (rms_norm(input + residual), input + residual), the sum in the input's dtype.
std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& input, const at::Tensor& residual,
                                                at::IntArrayRef normalized_shape,
                                                const std::optional<at::Tensor>& weight = std::nullopt,
                                                std::optional<double> eps = std::nullopt);

// add_rms_norm that also returns rstd: (output, input + residual, rstd).
std::tuple<at::Tensor, at::Tensor, at::Tensor> add_rms_norm_forward(
    const at::Tensor& input, const at::Tensor& residual, at::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight = std::nullopt, std::optional<double> eps = std::nullopt);

// Gradients of rms_norm for (input, weight) from the normalised tensor `input` and its rstd; an
// entry is undefined where output_mask is false or the weight is absent. `grad_sum`, when given, is
// added to the input's gradient (add_rms_norm: the gradient of its second output).
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                     at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> output_mask,
                                                     const std::optional<at::Tensor>& grad_sum = std::nullopt);

}  // namespace tjit

// The entry points above, for code generated over every operator (tjit._C's direct calls).
#define TJIT_RMS_NORM_OPERATORS(X) \
  X(rms_norm) X(rms_norm_forward) X(add_rms_norm) X(add_rms_norm_forward) X(rms_norm_backward)
