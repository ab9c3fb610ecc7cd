#pragma once
// myops::scaled_silu for C++ programs: typed entry points that call through torch's dispatcher, so
// a call reaches the CUDA kernel, the CPU kernel (Triton's interpreter) or the Meta kernel by the
// input's device, and records autograd when the input requires grad. Link the library `myops`.

#include <ATen/core/Tensor.h>

namespace myops {

// scale * x * sigmoid(x) (torch.nn.functional.silu, scaled); x floating (float32, float16, bfloat16,
// float64). The result is contiguous, of x's shape and dtype. Differentiable with respect to x.
// Schema: myops::scaled_silu(Tensor x, float scale=1.0) -> Tensor
at::Tensor scaled_silu(const at::Tensor& x, double scale = 1.0);

// The gradient of scaled_silu with respect to x, for an output gradient `grad` of x's shape and dtype.
// Schema: myops::scaled_silu_backward(Tensor grad, Tensor x, float scale) -> Tensor
at::Tensor scaled_silu_backward(const at::Tensor& grad, const at::Tensor& x, double scale);

}  // namespace myops
