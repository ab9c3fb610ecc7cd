#pragma once
// tjit's operators for C++ programs. Each call goes through torch's dispatcher, like at::
// functions: it runs the CUDA kernel, the CPU kernel (Triton's interpreter) or the Meta kernel
// according to its inputs, and records autograd when an input requires grad. Link
// tjit::operators (CMake: find_package(tjit)).
//
// Supported dtypes: add takes float32, float16, bfloat16, float64, int32, int64; the others take
// the four floating types. All tensors of one call must be on the same device.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/OptionalArrayRef.h>

#include <array>
#include <optional>
#include <tuple>

namespace tjit {

// self + alpha * other, with broadcasting; both of one dtype; alpha an integer for integer
// tensors. The result is contiguous.
// Schema: add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha = 1);

// Sum over `dim` (all dims when absent or empty); negative dims count from the end. Half types
// accumulate in float32. With `dtype`, the input is converted first (as torch.sum).
// Schema: sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false,
               std::optional<at::ScalarType> dtype = std::nullopt);

// Softmax over `dim`; rows of any length (one program per row up to 32768 columns; longer rows
// are shared by several programs on CUDA, or read twice).
// Schema: softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor
at::Tensor softmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype = std::nullopt);

// Gradient of softmax with respect to its input, from the forward's output.
// Schema: softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype);

// Layer normalisation over the trailing `normalized_shape` dims, biased variance.
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
