#pragma once
// tjit::sum for C++ programs (installed as <tjit/ops/sum.h>; <tjit/operators.h> has every operator).
// Calls go through torch's dispatcher, like at:: functions. Link tjit::operators.

#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>

#include <optional>

namespace tjit {

// Sum over `dim` (all dims when absent or empty); negative dims count from the end, as torch.sum.
// With `dtype` the input is converted first; without, bool and integer inputs sum to int64. Results
// float32, float16, bfloat16, float64, int32 or int64; half types accumulate in float32.
// Schema: sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim = std::nullopt, bool keepdim = false,
               std::optional<at::ScalarType> dtype = std::nullopt);

}  // namespace tjit

// The entry points above, for code generated over every operator (tjit._C's direct calls).
#define TJIT_SUM_OPERATORS(X) X(sum)
