#pragma once
// sum's launch plans: which kernels of kernels_py/sum.py reduce rows ([M, N] -> [M]) or the middle
// dim of [M, R, K], with what.

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops {

inline constexpr const char* kSumRowsKernel = "sum_rows_kernel";
inline constexpr const char* kSumRowsBlockedKernel = "sum_rows_blocked_kernel";
inline constexpr const char* kSumPartialKernel = "sum_partial_kernel";
inline constexpr const char* kSumPartialStridedKernel = "sum_partial_strided_kernel";
inline constexpr const char* kSumMidKernel = "sum_mid_kernel";
inline constexpr const char* kSumMidSplitKernel = "sum_mid_split_kernel";

struct SumRowsInputs {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  bool index64 = false;
};

struct SumRowsPlan {
  enum class Kind { Rows, Blocked, TwoStageStrided, TwoStageChunked };
  Kind kind = Kind::Rows;
  int candidate = -1;  // the candidate form (plan_choice.h)
  // The one launch (Rows, Blocked) or the first stage (TwoStage*: rows into a [rows, splits] partial).
  const char* kernel = kSumRowsKernel;
  uint32_t programs = 1;
  int num_warps = 4;
  int maxnreg = 0;
  bool launch_pdl = false;  // both stages of a two-stage plan, and their PDL constexpr
  int64_t block_m = 1;      // Blocked
  int64_t block_n = 1;
  int64_t splits = 1;       // TwoStage*: partial sums a row
  int64_t chunk = 0;        // TwoStageChunked: columns a program
  // TwoStage*: the second stage, sum_rows_kernel over the partial's rows.
  int64_t second_block_n = 1;
  int second_num_warps = 1;
  bool index64 = false;
};

// The rows' plan is a measured choice among candidate forms (plan_choice.h): the card's table, else
// first-call tuning through `timer`, else the default rule.
SumRowsPlan plan_sum_rows(const SumRowsInputs& in, const kit::DeviceFacts& device,
                          const kit::CandidateTimer* timer = nullptr, kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan, whether or not it is the choice (tuning, tests).
SumRowsPlan plan_sum_rows_candidate(const SumRowsInputs& in, int candidate, const kit::DeviceFacts& device);
// The names of the candidates that fit these inputs.
std::vector<std::string> sum_rows_fitting(const SumRowsInputs& in, const kit::DeviceFacts& device);

struct SumMiddleInputs {
  int64_t m = 1;
  int64_t r = 1;
  int64_t k = 1;
  bool index64 = false;
};

struct SumMiddlePlan {
  bool split = false;  // sum_mid_split_kernel into a [m, splits, k] partial first
  int64_t block_r = 1;
  int64_t block_k = 1;
  uint32_t programs = 1;  // sum_mid_kernel's grid (column blocks of every m)
  int64_t splits = 1;
  int64_t rows_per_split = 0;
  uint32_t split_programs = 1;
  int64_t second_block_r = 1;  // sum_mid_kernel over the partial
  bool index64 = false;
};

SumMiddlePlan plan_sum_middle(const SumMiddleInputs& in, const kit::DeviceFacts& device);

}  // namespace tjit::ops
