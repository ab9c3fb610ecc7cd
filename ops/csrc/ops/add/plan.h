#pragma once
// add's launch plan: the flat kernel or the strided one of kernels_py/add.py, with what.

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops {

inline constexpr const char* kAddKernel = "add_kernel";
inline constexpr const char* kAddStridedKernel = "add_strided_kernel";

struct AddInputs {
  int64_t numel = 0;                   // of the broadcast output
  c10::ScalarType dtype = c10::kFloat;  // the result's
  bool same_shape_contiguous = false;  // both inputs contiguous with the output's shape
  bool collapsed = true;               // the broadcast fits four dims (add.cpp's collapse)
  int64_t x_max_offset = 0;            // largest element offset through the collapsed strides
  int64_t y_max_offset = 0;
  bool has_alpha = false;
};

struct AddPlan {
  int candidate = -1;        // the candidate (plan_choice.h)
  const char* kernel = kAddKernel;
  bool flat = true;          // add_kernel over contiguous inputs of the output's shape
  bool materialise = false;  // the inputs are expanded into contiguous copies first
  uint32_t programs = 1;
  int64_t block = 1024;
  int num_warps = 4;
  bool has_alpha = false;
  bool index64 = false;
};

// The elements a program adds and its warps are a measured choice among candidates (plan_choice.h):
// the card's table, else first-call tuning through `timer`, else the default (1024 elements, 4 warps).
AddPlan plan_add(const AddInputs& in, const kit::DeviceFacts& device, const kit::CandidateTimer* timer = nullptr,
                 kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan, whether or not it is the choice (tuning, tests).
AddPlan plan_add_candidate(const AddInputs& in, int candidate);
std::vector<std::string> add_candidates();

}  // namespace tjit::ops
