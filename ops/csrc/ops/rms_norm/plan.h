#pragma once
// rms_norm's launch plans: which kernels of kernels_py/rms_norm.py run a forward (alone or after the
// residual add) or a backward, with what.

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops {

inline constexpr const char* kRmsNormFwdKernel = "rms_norm_fwd_kernel";
inline constexpr const char* kRmsNormBwdFusedKernel = "rms_norm_bwd_fused_kernel";
inline constexpr const char* kRmsNormBwdTeamKernel = "rms_norm_bwd_team_kernel";
inline constexpr const char* kRmsNormBwdTeamLagKernel = "rms_norm_bwd_team_lag_kernel";
inline constexpr const char* kRmsNormBwdTeamRescueKernel = "rms_norm_bwd_team_rescue_kernel";
inline constexpr const char* kRmsNormBwdDxKernel = "rms_norm_bwd_dx_kernel";
inline constexpr const char* kRmsNormBwdDwPartialKernel = "rms_norm_bwd_dw_partial_kernel";
inline constexpr const char* kRmsNormBwdDwFinalizeKernel = "rms_norm_bwd_dw_finalize_kernel";

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

struct RmsNormBackwardPlan {
  enum class Kind { Nothing, Fused, DxThenColumns, Team };
  Kind kind = Kind::Nothing;
  bool index64 = false;
  // Fused: dx and per-program dw sums in one pass; DxThenColumns: the dx kernel's grid; Team: teams
  // of `chunks` programs, one block_n chunk of the row each, rows_per_program rows a team.
  uint32_t programs = 1;
  int num_warps = 4;
  int64_t block_m = 1;
  int64_t block_n = 1;
  int64_t rows_per_program = 0;
  // Team: programs a team (S), its power of two, the row loop's depth; whether the occupancy is
  // still to be asked. The row exchange's workspace: 2 + rows * chunks + groups words.
  int64_t chunks = 1;
  int64_t s_pow2 = 1;
  int stages = 1;
  bool needs_occupancy = false;
  // Team: the lag kernel (a row's dx one iteration after its sum), capped at maxnreg registers a
  // thread (0: the compiler's choice).
  bool lag = false;
  int maxnreg = 0;
  // Fused: columns past block_n in a tile beside each (0: none); the next tile loaded before this
  // one's row sums; w held in registers across rows.
  int64_t block_tail = 0;
  bool prefetch = false;
  bool preload_w = true;
  // DxThenColumns: dx one row a program (when dx is wanted), then dw by column blocks.
  bool dx = false;
  bool columns = false;
  uint32_t column_blocks = 1;
  int64_t columns_block_m = 1;
  int64_t columns_block_n = 1;
  int64_t rows_per_group = 0;
  // Rows of dw's partial sums: > 1 means a [groups, cols] buffer in the accumulator dtype and the
  // finalize launch; 1 means the kernel stores into dw directly. Team: the teams (one row each).
  int64_t groups = 1;
  // Team: the rescue kernel's columns a step (the rows of teams that gave up).
  int64_t rescue_block_n = 1;
  uint32_t finalize_programs = 1;
  int64_t finalize_block_g = 1;
  int64_t finalize_block_n = 1;
};

RmsNormBackwardPlan plan_rms_norm_backward(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device);

}  // namespace tjit::ops
