#pragma once
// Output allocation for operator wrappers.

#include <ATen/core/Tensor.h>

namespace tjit::kit {

// A new contiguous tensor, as at::empty. On a CUDA device that is already current it allocates
// through the device allocator directly (what empty_cuda does after its checks), skipping a
// dispatcher round trip on every operator call.
at::Tensor empty_output(at::IntArrayRef shape, const at::TensorOptions& options);

}  // namespace tjit::kit
