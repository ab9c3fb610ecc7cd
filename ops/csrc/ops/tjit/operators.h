#pragma once
// tjit's operators for C++ programs. Each call goes through torch's dispatcher, like at::
// functions, so it runs the CUDA kernel, the CPU (Triton interpreter) kernel or the Meta
// kernel according to its inputs. Link tjit::operators (CMake: find_package(tjit)).

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace tjit {

// self + alpha * other, with broadcasting. Both tensors must have the same dtype (float32,
// float16, bfloat16, float64, int32 or int64) and be on the same device; alpha must be an
// integer for integer tensors. The result is contiguous. Schema:
//   tjit::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha = 1);

}  // namespace tjit
