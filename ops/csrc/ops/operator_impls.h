#pragma once
// The per-dispatch-key implementations behind tjit/operators.h, registered in registration.cpp.
// `*_triton` runs the Triton kernel on the inputs' device (CUDA compiled, CPU interpreted);
// `*_meta` computes only the output's shape, dtype and strides (SymInt-aware); `*_autograd`
// (autograd.cpp) records the backward, which calls tjit's backward operators.

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Scalar.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/OptionalArrayRef.h>

#include <array>
#include <optional>
#include <tuple>

namespace tjit::impl {

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

at::Tensor add_triton(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor add_meta(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor add_autograd(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);

at::Tensor sum_triton(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype);
at::Tensor sum_meta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype);
at::Tensor sum_autograd(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype);

at::Tensor softmax_triton(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype);
at::Tensor softmax_meta(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype);
at::Tensor softmax_autograd(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype);
at::Tensor softmax_backward_triton(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                   at::ScalarType input_dtype);
at::Tensor softmax_backward_meta(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype);

at::Tensor layer_norm_triton(const at::Tensor& input, at::IntArrayRef normalized_shape,
                             const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                             double eps);
at::Tensor layer_norm_meta(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                           const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                           double eps);
at::Tensor layer_norm_autograd(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                               double eps);
Tensor3 layer_norm_forward_triton(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                  const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                  double eps);
Tensor3 layer_norm_forward_meta(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                                const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                double eps);
Tensor3 layer_norm_backward_triton(const at::Tensor& grad_out, const at::Tensor& input,
                                   at::IntArrayRef normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
                                   const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                   std::array<bool, 3> output_mask);
Tensor3 layer_norm_backward_meta(const at::Tensor& grad_out, const at::Tensor& input,
                                 c10::SymIntArrayRef normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
                                 const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                 std::array<bool, 3> output_mask);

}  // namespace tjit::impl
