#pragma once
// The host side of kernels_py/row_exchange.py: programs that share a row exchange per-chunk
// statistics through a zeroed int64 workspace, and the autotuned long-row kernels built on it.

#include <tjit/kit/grid.h>
#include <tjit/kit/plans.h>
#include <tjit/kit/rows.h>
#include <tjit/launch_types.h>

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>

namespace tjit::kit {

// The zeroed workspace: int64 [2 + rows * chunks + teams], the ticket, one word per chunk of each
// row, then one mode word per team for kernels whose teams may give up (row_exchange.team_runs).
at::Tensor row_exchange_workspace(int64_t rows, int64_t chunks, const at::Tensor& like, int64_t teams = 0);

// The autotuned long-row kernels (softmax_fwd_long_kernel, layer_norm_fwd_long_kernel) split rows
// into chunks of at least kLongRowMinSplitBlock columns, at most kLongRowMaxChunks a row.
inline constexpr int64_t kLongRowMinSplitBlock = 4096;
inline constexpr int64_t kLongRowMaxChunks = 128;

// Whether rows of more than `min_cols` columns go to a long-row kernel: CUDA only (a split row's
// programs wait for each other, which the interpreter cannot run at once), not fp64 (the kernels
// keep statistics in fp32), and the row's chunks must fit on the GPU at once.
inline bool tuned_long_rows(int64_t rows, int64_t cols, c10::ScalarType dtype, const DeviceFacts& device,
                            int64_t min_cols) {
  const int64_t chunks = ceil_div(cols, kLongRowMinSplitBlock);
  return device.is_cuda && cols > min_cols && dtype != at::kDouble && chunks <= kLongRowMaxChunks &&
         rows * chunks < kInt32Limit / 2;
}

// The row count as the long-row kernels' tuning key has it: the next power of two, at most 4096.
inline int64_t long_row_bucket(int64_t rows) { return std::min<int64_t>(next_power_of_2(rows), 4096); }

// The long-row kernels' grid for the config the tuner picked: cdiv(cols, BLOCK_N) programs a row
// when the config splits rows, else one.
inline auto long_row_grid(int64_t rows, int64_t cols, const char* op) {
  return [rows, cols, op](const auto& meta) {
    return Grid(blocks_for(meta["SPLIT"] ? rows * ceil_div(cols, meta["BLOCK_N"]) : rows, 1, op));
  };
}

}  // namespace tjit::kit
