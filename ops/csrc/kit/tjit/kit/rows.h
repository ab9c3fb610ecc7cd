#pragma once
// Tensors seen as rows for row kernels, and when their offsets need 64-bit arithmetic.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace tjit::kit {

// A tensor seen as [rows, cols] with unit column stride and one row stride.
struct RowsView {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;
};

// `t` as rows of `cols` elements when its layout allows it without a copy (the trailing dims
// making up `cols` are contiguous and the leading dims collapse into one stride).
std::optional<RowsView> as_rows(const at::Tensor& t, int64_t cols);

// `t` as rows of `cols` elements: itself when as_rows allows it, else a contiguous copy.
std::pair<at::Tensor, RowsView> rows_of(const at::Tensor& t, int64_t cols);

// 2**31: element offsets from here on need 64-bit index arithmetic in the kernels.
inline constexpr int64_t kInt32Limit = int64_t{1} << 31;

// Whether offsets into `t` (through its strides) or its element count can reach 2**31.
bool needs_index64(const at::Tensor& t);

}  // namespace tjit::kit
