#pragma once
// tjit::add for C++ programs (installed as <tjit/ops/add.h>; <tjit/operators.h> has every operator).
// Calls go through torch's dispatcher, like at:: functions: the CUDA kernel, the CPU kernel
// (Triton's interpreter) or the Meta kernel by the inputs' device, autograd when an input requires
// grad. Link tjit::operators.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace tjit {

// self + alpha * other, with broadcasting and torch's type promotion (at::result_type), as
// torch.add: real dtypes; a CPU 0-dim tensor may meet a CUDA one; alpha an integer for an integer
// result. The result is contiguous. A number: the operators tjit::add.Scalar (tensor + number) and
// tjit::add.Scalar_Tensor (number + tensor), through the dispatcher, give at::add(x, 2.5)'s dtype.
// Schema: add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha = 1);

}  // namespace tjit

// The entry points above, for code generated over every operator (tjit._C's direct calls).
#define TJIT_ADD_OPERATORS(X) X(add)
