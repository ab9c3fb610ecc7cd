#pragma once
// tjit::add for C++ programs (installed as <tjit/ops/add.h>; <tjit/operators.h> has every operator).
// Calls go through torch's dispatcher, like at:: functions: the CUDA kernel, the CPU kernel
// (Triton's interpreter) or the Meta kernel by the inputs' device, autograd when an input requires
// grad. Link tjit::operators.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace tjit {

// self + alpha * other, with broadcasting; both of one dtype (float32, float16, bfloat16, float64,
// int32, int64) and on one device; alpha an integer for integer tensors. The result is contiguous.
// Schema: add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha = 1);

}  // namespace tjit

// The entry points above, for code generated over every operator (tjit._C's direct calls).
#define TJIT_ADD_OPERATORS(X) X(add)
