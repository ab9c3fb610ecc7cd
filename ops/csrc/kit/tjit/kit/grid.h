#pragma once
// Grid arithmetic for launch plans.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tjit::kit {

// Number of programs for n items in blocks of `block`, as a launch grid extent; throws, naming
// `op`, when it exceeds what a grid dimension holds.
uint32_t blocks_for(int64_t n, int64_t block, const char* op);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Smallest power of two >= n (1 for n <= 1), as triton.next_power_of_2.
int64_t next_power_of_2(int64_t n);

// Multiprocessors to plan grids for: the device's count on CUDA. Triton's interpreter runs
// programs one after another, so CPU launches are planned as for a 4-SM device, which keeps grids
// small while still taking every multi-stage path for larger inputs.
int planning_multiprocessors(const at::Tensor& t);

}  // namespace tjit::kit
