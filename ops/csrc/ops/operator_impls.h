#pragma once
// The per-dispatch-key implementations behind tjit/operators.h, registered in registration.cpp.
// `*_triton` runs the Triton kernel on the inputs' device (CUDA compiled, CPU interpreted);
// `*_meta` computes only the output's shape, dtype and strides.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace tjit::impl {

at::Tensor add_triton(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor add_meta(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);

}  // namespace tjit::impl
