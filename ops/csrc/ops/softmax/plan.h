#pragma once
// softmax's launch plan: which kernel of kernels_py/softmax.py covers the rows, with what.

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops {

inline constexpr const char* kSoftmaxFwdKernel = "softmax_fwd_kernel";
inline constexpr const char* kSoftmaxFwdRowsKernel = "softmax_fwd_rows_kernel";
inline constexpr const char* kSoftmaxFwdSplitKernel = "softmax_fwd_split_kernel";
inline constexpr const char* kSoftmaxFwdPersistentKernel = "softmax_fwd_persistent_kernel";
inline constexpr const char* kSoftmaxFwdLongKernel = "softmax_fwd_long_kernel";
inline constexpr const char* kSoftmaxBwdKernel = "softmax_bwd_kernel";
inline constexpr const char* kSoftmaxBwdRowsKernel = "softmax_bwd_rows_kernel";
inline constexpr const char* kSoftmaxBwdSplitKernel = "softmax_bwd_split_kernel";

// One tensor's rows as the split kernels see them (for ALIGN).
struct SoftmaxRows {
  int64_t element_size = 4;
  int64_t base_offset = 0;  // data pointer modulo 16 bytes
  int64_t row_stride = 0;
};

struct SoftmaxInputs {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;  // forward: the input's; backward: the gradient's (input_dtype)
  bool backward = false;
  bool index64 = false;
  // Forward: out, in; backward: grad_in, grad_out, out.
  std::array<SoftmaxRows, 3> tensors{};
  int tensor_count = 2;
};

struct SoftmaxPlan {
  enum class Kind { TunedLongRows, ShortRows, OneProgramPerRow, SplitRows, Persistent };
  Kind kind = Kind::OneProgramPerRow;
  int candidate = -1;       // the candidate form (plan_choice.h); -1: the long-row kernel
  const char* kernel = kSoftmaxFwdKernel;
  uint32_t programs = 1;    // the grid (TunedLongRows: the tuner's config decides)
  int num_warps = 4;
  int maxnreg = 0;          // a register cap for the compiler (0: none)
  int64_t block_m = 1;      // ShortRows: rows per program
  int64_t block_n = 1;      // columns per program (per chunk when split, per step when looped)
  bool single_pass = true;  // OneProgramPerRow: the row stays in registers
  int64_t chunks = 1;       // SplitRows: programs per row (S)
  int64_t s_pow2 = 1;       // SplitRows: S_POW2; TunedLongRows: CHUNKS_POW2
  int64_t align = 1;        // SplitRows, TunedLongRows: ALIGN
  bool reread = false;      // SplitRows, backward: read the chunk again after the wait
  int num_stages = 3;       // Persistent: row-loop buffers in flight
  int64_t row_bucket = 0;   // TunedLongRows: M_BUCKET, the tuning key's row count
  int64_t exchange_chunks = 0;  // row-exchange workspace: 2 + rows * exchange_chunks words (0: none)
  bool index64 = false;
};

// The plan for softmax (or its backward) over `in.rows` rows of `in.cols` columns: with the tuner
// available, CUDA forward rows past the one-pass limit go to the autotuned long-row kernel;
// otherwise a candidate form is chosen (plan_choice.h: plans "softmax" and "softmax_backward"),
// timed through `timer` at a first call where no table decides (nullptr: never timed).
SoftmaxPlan plan_softmax(const SoftmaxInputs& in, const kit::DeviceFacts& device, kit::Tuner tuner,
                         const kit::CandidateTimer* timer = nullptr, kit::ChoiceSource* source = nullptr);
// Candidate `candidate`'s plan (it must fit), and the names of those that fit.
SoftmaxPlan plan_softmax_candidate(const SoftmaxInputs& in, int candidate, const kit::DeviceFacts& device);
std::vector<std::string> softmax_fitting(const SoftmaxInputs& in, const kit::DeviceFacts& device);

}  // namespace tjit::ops
