#pragma once
// Helpers every operator wrapper uses: where kernel files live, which stream to launch on,
// and argument checks whose messages name the operator and the argument.

#include <tjit/launch_types.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <utility>
#include <string>
#include <string_view>

namespace tjit::detail {

// Absolute path of a kernel file shipped with tjit (ops/kernels_py/<file_name>). Searched, in
// order: $TJIT_KERNEL_DIR; kernels_py next to liboperators' lib/ folder (the Python package);
// share/tjit/kernels_py of an installed prefix; the source tree tjit was built from.
std::string kernel_path(std::string_view file_name);

void check_defined(const at::Tensor& t, const char* op, const char* arg);
// `t` must be on `device`; names both arguments otherwise.
void check_same_device(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg,
                       const char* op);
void check_dtype_in(const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed, const char* op,
                    const char* arg);
// CPU (interpreter), CUDA or Meta; anything else is an error naming the operator.
void check_supported_device(const at::Tensor& t, const char* op, const char* arg);

// Number of programs for n items in blocks of `block`, as a launch grid extent; throws if it
// exceeds what a grid dimension can hold.
uint32_t blocks_for(int64_t n, int64_t block, const char* op);

}  // namespace tjit::detail

namespace tjit::detail {

// A tensor seen as [rows, cols] with unit column stride and one row stride, when its layout
// allows it without a copy (the leading dims collapse into one stride).
struct RowsView {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;
};
std::optional<RowsView> as_rows(const at::Tensor& t, int64_t cols);

// `t` as rows of `cols` elements: a view when as_rows allows it, else a contiguous copy.
std::pair<at::Tensor, RowsView> rows_of(const at::Tensor& t, int64_t cols);

// 2**31: element offsets from here on need 64-bit index arithmetic in the kernels.
inline constexpr int64_t kInt32Limit = int64_t{1} << 31;

// Whether offsets into `t` (through its strides) or its element count can reach 2**31.
bool needs_index64(const at::Tensor& t);

// A new contiguous output tensor, as at::empty. On a CUDA device that is already current it
// allocates through the device allocator directly (at::detail::empty_generic, what empty_cuda
// does after its checks), skipping a dispatcher round trip on every operator call.
at::Tensor empty_output(at::IntArrayRef shape, const at::TensorOptions& options);

// Wraps a possibly negative dim into [0, ndim); errors name the operator and the argument.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const char* arg);

// The dtype kernels accumulate in for inputs of type `t`: fp64 for fp64, fp32 for the rest.
inline at::ScalarType accumulator_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// Multiprocessors to plan grids for: the device's count on CUDA. Triton's interpreter runs
// programs one after another, so CPU launches are planned as for a 4-SM device, which keeps
// grids small while still taking every multi-stage path for larger inputs.
int planning_multiprocessors(const at::Tensor& t);

// Smallest power of two >= n (1 for n <= 1), as triton.next_power_of_2.
int64_t next_power_of_2(int64_t n);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The autotuned long-row kernels (softmax.py's softmax_fwd_long_kernel, layer_norm.py's
// layer_norm_fwd_long_kernel): split configs need S = cdiv(N, 4096) <= 128 programs per row to fit on
// the GPU at once; fp64 keeps the hand-written plans (the kernels keep statistics in fp32); the
// interpreter would wait forever on a split row.
inline constexpr int64_t kLongRowMinSplitBlock = 4096;
inline constexpr int64_t kLongRowMaxChunks = 128;
// Whether rows of more than `min_cols` columns go to a long-row kernel.
inline bool tuned_long_rows(int64_t rows, int64_t cols, const at::Tensor& t, int64_t min_cols) {
  const int64_t chunks = ceil_div(cols, kLongRowMinSplitBlock);
  return t.is_cuda() && cols > min_cols && t.scalar_type() != at::kDouble && chunks <= kLongRowMaxChunks &&
         rows * chunks < kInt32Limit / 2;
}
// The zeroed workspace of the kernels whose programs share rows (softmax.py's split kernels, the
// layer_norm team and long-row kernels): int64 [2 + rows * chunks], the ticket, then one word per
// chunk of each row.
at::Tensor split_sync(int64_t rows, int64_t chunks, const at::Tensor& like);
// The row count as the kernels' tuning key has it: the next power of two, at most 4096.
inline int64_t long_row_bucket(int64_t rows) { return std::min<int64_t>(next_power_of_2(rows), 4096); }
// The long-row kernels' grid for the config the tuner picked: S = cdiv(cols, BLOCK_N) programs a row
// when it splits rows, else one.
inline auto long_row_grid(int64_t rows, int64_t cols, const char* op) {
  return [rows, cols, op](const auto& meta) {
    return Grid(blocks_for(meta["SPLIT"] ? rows * ceil_div(cols, meta["BLOCK_N"]) : rows, 1, op));
  };
}

}  // namespace tjit::detail
