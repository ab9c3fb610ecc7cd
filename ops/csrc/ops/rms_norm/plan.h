#pragma once
// rms_norm's launch plans: which kernels of kernels_py/rms_norm.py run a forward (alone or after the
// residual add) or a backward, with what.

#include "../norm_backward_forms.h"
#include "../norm_forward.h"

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops {

inline constexpr const char* kRmsNormBwdTeamKernel = "rms_norm_bwd_team_kernel";
inline constexpr const char* kRmsNormBwdTeamRescueKernel = "rms_norm_bwd_team_rescue_kernel";

struct RmsNormForwardInputs {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  bool index64 = false;
  bool has_residual = false;  // add_rms_norm: input + residual is normalised (and written)
};

struct RmsNormForwardPlan {
  enum class Kind { ShortRows, Row, Looped };
  Kind kind = Kind::Row;
  uint32_t programs = 1;
  int num_warps = 4;
  int64_t block_m = 1;      // rows per program
  int64_t block_n = 1;      // columns per program (per step when looped)
  bool single_pass = true;  // the rows stay in registers
  // Two passes: the first asks L2 to keep the row for the second, which goes from the row's start.
  bool keep_row = false;
  // Two passes: ceil(cols / block_n) as a compile-time constant (0: counted at run time).
  int64_t row_steps = 0;
  bool index64 = false;
  int maxnreg = 0;  // registers a thread may use (0: the compiler's choice)
  int candidate = -1;  // which of the plan's candidates (plan_choice.h) it is
};

// The forward's plan: its candidate chosen as plan_choice.h says (`timer`: how this call may
// measure them at a first call; nullptr: never), then made for these inputs.
RmsNormForwardPlan plan_rms_norm_forward(const RmsNormForwardInputs& in, const kit::DeviceFacts& device,
                                         const kit::CandidateTimer* timer = nullptr,
                                         kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan for these inputs (one that fits them).
RmsNormForwardPlan plan_rms_norm_forward_candidate(const RmsNormForwardInputs& in, int candidate);
// The kernel's constexprs for this plan: what the launch compiles and the description shows.
norm::ForwardSwitches forward_switches(const RmsNormForwardPlan& plan, bool has_residual, bool has_weight);
// The candidates that fit these inputs, by name.
std::vector<std::string> rms_norm_forward_fitting(const RmsNormForwardInputs& in);

struct RmsNormBackwardInputs {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  bool want_dx = true;
  bool want_dw = true;
  bool index64 = false;
  // add_rms_norm's backward: the gradient of input + residual is read too.
  bool with_grad_sum = false;
  // Programs of the team kernel an SM holds at once (the driver's occupancy of its binary); 0: not
  // asked yet. A Team plan says so (needs_occupancy) and is asked again with it.
  int resident_programs_per_sm = 0;
};

// The norm family's backward plan (norm_backward_forms.h).
using RmsNormBackwardPlan = norm::BackwardPlan;
// The team rescue kernel's columns a step (the rows of teams that gave up).
inline constexpr int64_t kRmsNormRescueBlock = 4096;

// The backward's candidate chosen as plan_choice.h says (`timer`: how this call may measure them at
// a first call; nullptr: never); then plan_rms_norm_backward_candidate makes its plan.
int choose_rms_norm_backward(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device,
                             const kit::CandidateTimer* timer = nullptr, kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan for these inputs (one that fits them; Nothing when nothing is wanted).
RmsNormBackwardPlan plan_rms_norm_backward_candidate(const RmsNormBackwardInputs& in, int candidate,
                                                     const kit::DeviceFacts& device);
// The chosen candidate's plan, without measuring.
RmsNormBackwardPlan plan_rms_norm_backward(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device);
// The candidates that fit these inputs, by name.
std::vector<std::string> rms_norm_backward_fitting(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device);

}  // namespace tjit::ops
