#include <tjit/kit/rows.h>

#include <cstdlib>

namespace tjit::kit {

std::optional<RowsView> as_rows(const at::Tensor& t, int64_t cols) {
  const int64_t ndim = t.dim();
  const int64_t numel = t.numel();
  if (cols <= 0 || numel % cols != 0) {
    return std::nullopt;
  }
  RowsView view{numel / cols, cols, cols};
  if (ndim == 0) {
    return view;
  }
  // The trailing dims that make up `cols` must be contiguous among themselves.
  int64_t expected = 1;
  int64_t covered = 1;
  int64_t d = ndim - 1;
  for (; d >= 0 && covered < cols; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) {
      return std::nullopt;
    }
    expected *= t.size(d);
    covered *= t.size(d);
  }
  if (covered != cols) {
    return std::nullopt;
  }
  // The leading dims must collapse into one row stride.
  std::optional<int64_t> row_stride;
  int64_t inner = 1;
  for (; d >= 0; --d) {
    if (t.size(d) == 1) {
      continue;
    }
    if (!row_stride.has_value()) {
      row_stride = t.stride(d);
    } else if (t.stride(d) != *row_stride * inner) {
      return std::nullopt;
    }
    inner *= t.size(d);
  }
  view.row_stride = row_stride.value_or(cols);
  if (view.row_stride < 0) {
    return std::nullopt;
  }
  return view;
}

std::pair<at::Tensor, RowsView> rows_of(const at::Tensor& t, int64_t cols) {
  if (auto view = as_rows(t, cols)) {
    return {t, *view};
  }
  at::Tensor c = t.contiguous();
  return {c, RowsView{cols == 0 ? 0 : c.numel() / cols, cols, cols}};
}

bool needs_index64(const at::Tensor& t) {
  if (t.numel() >= kInt32Limit) {
    return true;
  }
  int64_t max_offset = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 0) {
      max_offset += (t.size(d) - 1) * std::abs(t.stride(d));
    }
  }
  return max_offset >= kInt32Limit - 65536;  // headroom for a block past the last row
}

}  // namespace tjit::kit
