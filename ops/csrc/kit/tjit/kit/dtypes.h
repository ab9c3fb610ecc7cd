#pragma once
// Dtype rules shared by operator wrappers.

#include <c10/core/ScalarType.h>

namespace tjit::kit {

// The dtype kernels accumulate in for inputs of type `t`: fp64 for fp64, int64 for integers and
// bool, fp32 for the rest.
inline c10::ScalarType accumulator_type(c10::ScalarType t) {
  if (c10::isIntegralType(t, /*includeBool=*/true)) {
    return c10::kLong;
  }
  return t == c10::kDouble ? c10::kDouble : c10::kFloat;
}

}  // namespace tjit::kit
