#pragma once
// tjit::softmax and its backward for C++ programs (installed as <tjit/ops/softmax.h>;
// <tjit/operators.h> has every operator). Calls go through torch's dispatcher, like at::
// functions. Link tjit::operators.

#include <ATen/core/Tensor.h>

#include <optional>

namespace tjit {

// Softmax over `dim`, rows of any length; float32, float16, bfloat16, float64. With `dtype` the
// input is converted first (as torch.softmax).
// Schema: softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor
at::Tensor softmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype = std::nullopt);

// Gradient of softmax with respect to its input, from the forward's output; the result has
// `input_dtype`.
// Schema: softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype);

}  // namespace tjit

// The entry points above, for code generated over every operator (tjit._C's direct calls).
#define TJIT_SOFTMAX_OPERATORS(X) X(softmax) X(softmax_backward)
