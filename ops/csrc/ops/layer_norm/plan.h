#pragma once
// layer_norm's launch plans: which kernels of kernels_py/layer_norm/ (forward.py, backward.py) run a
// forward or a backward, with what.

#include "../norm_backward_forms.h"
#include "../norm_forward.h"

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops {

inline constexpr const char* kLayerNormFwdKernel = "layer_norm_fwd_kernel";
inline constexpr const char* kLayerNormFwdPersistentKernel = "layer_norm_fwd_persistent_kernel";
inline constexpr const char* kLayerNormFwdLongKernel = "layer_norm_fwd_long_kernel";
inline constexpr const char* kLayerNormBwdTeamKernel = "layer_norm_bwd_team_kernel";
inline constexpr const char* kLayerNormBwdTeamLagFinalizeKernel = "layer_norm_bwd_team_lag_finalize_kernel";

struct LayerNormForwardInputs {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  bool index64 = false;
  // Programs of the chosen kernel an SM holds at once (the driver's occupancy of its binary); 0:
  // not asked yet. A plan that needs it says so (needs_occupancy) and is asked again with it.
  int resident_programs_per_sm = 0;
};

struct LayerNormForwardPlan {
  enum class Kind { TunedLongRows, ShortRows, Persistent, OneProgramPerRow };
  Kind kind = Kind::OneProgramPerRow;
  int candidate = -1;            // the candidate form (plan_choice.h); -1: the long-row kernel
  const char* kernel = kLayerNormFwdKernel;
  bool needs_occupancy = false;  // Persistent without resident_programs_per_sm
  uint32_t programs = 1;         // the grid (TunedLongRows: the tuner's config decides)
  int num_warps = 4;
  int maxnreg = 0;
  int64_t block_m = 1;      // ShortRows: rows per program
  int64_t block_n = 1;
  int64_t block_tail = 0;   // columns past block_n in a second block (0: none)
  bool single_pass = true;  // OneProgramPerRow: the row stays in registers
  bool preload_affine = false;  // OneProgramPerRow: weight and bias load with the row (PRELOAD)
  bool keep_row = false;    // OneProgramPerRow, two passes: L2 keeps the row between them (KEEP_ROW)
  int64_t row_steps = 0;    // OneProgramPerRow, two passes: cdiv(cols, block_n) at compile time, or 0
  int stages = 2;           // Persistent: the row loop's pipeline depth
  int64_t row_bucket = 0;   // TunedLongRows: M_BUCKET
  int64_t exchange_chunks = 0;  // row-exchange workspace: 2 + rows * exchange_chunks words (0: none)
  bool index64 = false;
};

// The forward's plan: with the tuner available, CUDA rows past the one-pass limit go to the
// autotuned long-row kernel; otherwise the candidate is chosen (plan_choice.h), timed through
// `timer` at a first call where no table decides (nullptr: never timed).
LayerNormForwardPlan plan_layer_norm_forward(const LayerNormForwardInputs& in, const kit::DeviceFacts& device,
                                             kit::Tuner tuner, const kit::CandidateTimer* timer = nullptr,
                                             kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan (it must fit), and the names of those that fit.
LayerNormForwardPlan plan_layer_norm_forward_candidate(const LayerNormForwardInputs& in, int candidate,
                                                       const kit::DeviceFacts& device);
// A ShortRows plan's constexprs of the norm family's forward kernel: what the launch compiles and
// the description shows.
norm::ForwardSwitches short_rows_switches(const LayerNormForwardPlan& plan, bool has_weight, bool has_bias);
std::vector<std::string> layer_norm_forward_fitting(const LayerNormForwardInputs& in);

struct LayerNormBackwardInputs {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  bool want_dx = true;
  bool want_dw = true;
  bool want_db = true;
  bool index64 = false;
  int resident_programs_per_sm = 0;  // as for the forward (the team lag kernel's)
};

// The norm family's backward plan (norm_backward_forms.h).
using LayerNormBackwardPlan = norm::BackwardPlan;
using DwdbFinalizePlan = norm::FinalizePlan;

// The backward's candidate chosen as plan_choice.h says (`timer`: how this call may measure them at
// a first call; nullptr: never); then plan_layer_norm_backward_candidate makes its plan.
int choose_layer_norm_backward(const LayerNormBackwardInputs& in, const kit::DeviceFacts& device,
                               const kit::CandidateTimer* timer = nullptr, kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan for these inputs (one that fits them; Nothing when nothing is wanted).
LayerNormBackwardPlan plan_layer_norm_backward_candidate(const LayerNormBackwardInputs& in, int candidate,
                                                         const kit::DeviceFacts& device);
// The chosen candidate's plan, without measuring.
LayerNormBackwardPlan plan_layer_norm_backward(const LayerNormBackwardInputs& in, const kit::DeviceFacts& device);
// The candidates that fit these inputs, by name.
std::vector<std::string> layer_norm_backward_fitting(const LayerNormBackwardInputs& in,
                                                     const kit::DeviceFacts& device);

}  // namespace tjit::ops
