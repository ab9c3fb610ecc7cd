#pragma once
// add's launch plan: the flat kernel or the strided one of kernels_py/add.py, with what.

#include <tjit/kit/plans.h>

#include <cstdint>

namespace tjit::ops {

inline constexpr const char* kAddKernel = "add_kernel";
inline constexpr const char* kAddStridedKernel = "add_strided_kernel";

struct AddInputs {
  int64_t numel = 0;                   // of the broadcast output
  bool same_shape_contiguous = false;  // both inputs contiguous with the output's shape
  bool collapsed = true;               // the broadcast fits four dims (add.cpp's collapse)
  int64_t x_max_offset = 0;            // largest element offset through the collapsed strides
  int64_t y_max_offset = 0;
  bool has_alpha = false;
};

struct AddPlan {
  const char* kernel = kAddKernel;
  bool flat = true;          // add_kernel over contiguous inputs of the output's shape
  bool materialise = false;  // the inputs are expanded into contiguous copies first
  uint32_t programs = 1;
  int64_t block = 1024;
  int num_warps = 4;
  bool has_alpha = false;
  bool index64 = false;
};

AddPlan plan_add(const AddInputs& in, const kit::DeviceFacts& device);

}  // namespace tjit::ops
