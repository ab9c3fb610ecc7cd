#include "op_support.h"

#include <tjit/device_properties.h>

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace tjit::detail {
namespace {

namespace fs = std::filesystem;

fs::path find_kernel_dir() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("TJIT_KERNEL_DIR"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_kernel_dir), &info) != 0 && info.dli_fname != nullptr) {
    const fs::path lib_dir = fs::path(info.dli_fname).parent_path();
    candidates.push_back(lib_dir.parent_path() / "kernels_py");
    candidates.push_back(lib_dir.parent_path() / "share" / "tjit" / "kernels_py");
  }
  candidates.emplace_back(TJIT_SOURCE_KERNEL_DIR);
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::exists(dir / "add.py", ec)) {
      return fs::weakly_canonical(dir, ec);
    }
  }
  // None has the kernel files: a deployment whose kernels all come from bundles needs none (they
  // match kernels by file name). A kernel missing from them names this path in its error.
  return candidates.front();
}

}  // namespace

std::string kernel_path(std::string_view file_name) {
  static const fs::path dir = find_kernel_dir();
  return (dir / file_name).string();
}

void check_defined(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor");
}

void check_same_device(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg,
                       const char* op) {
  TORCH_CHECK(t.device() == ref.device(), op, ": argument '", arg, "' is on ", t.device(), " but '", ref_arg,
              "' is on ", ref.device(), "; all tensors must be on the same device");
}

void check_dtype_in(const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed, const char* op,
                    const char* arg) {
  for (c10::ScalarType s : allowed) {
    if (t.scalar_type() == s) {
      return;
    }
  }
  std::string names;
  for (c10::ScalarType s : allowed) {
    names += (names.empty() ? "" : ", ") + std::string(c10::toString(s));
  }
  TORCH_CHECK(false, op, ": argument '", arg, "' has dtype ", t.scalar_type(),
              ", which is not supported (supported: ", names, ")");
}

void check_supported_device(const at::Tensor& t, const char* op, const char* arg) {
  const auto type = t.device().type();
  TORCH_CHECK(type == c10::DeviceType::CUDA || type == c10::DeviceType::CPU || type == c10::DeviceType::Meta,
              op, ": argument '", arg, "' is on ", t.device(), "; tjit runs on CUDA and CPU");
}

uint32_t blocks_for(int64_t n, int64_t block, const char* op) {
  const int64_t blocks = (n + block - 1) / block;
  TORCH_CHECK(blocks <= int64_t{0x7fffffff}, op, ": ", n, " elements need ", blocks,
              " programs, more than a CUDA grid holds");
  return static_cast<uint32_t>(blocks);
}

}  // namespace tjit::detail

namespace tjit::detail {

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

at::Tensor empty_output(at::IntArrayRef shape, const at::TensorOptions& options) {
  const c10::Device device = options.device();
  // empty_cuda fills new memory only when deterministic algorithms are on *and* the fill flag
  // (default true) is set; then the output takes at::empty's path, fill included.
  const at::Context& context = at::globalContext();
  const bool fills = context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory();
  if (device.is_cuda() && !fills) {
    const auto* guard_impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    if (guard_impl->getDevice() == device) {
      return at::Tensor(at::detail::empty_generic(shape, c10::GetAllocator(c10::DeviceType::CUDA),
                                                  c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                  c10::typeMetaToScalarType(options.dtype()), std::nullopt));
    }
  }
  return at::empty(shape, options);
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

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const char* arg) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor takes dim 0 and -1
  TORCH_CHECK(dim >= -n && dim < n, op, ": ", arg, " ", dim, " is out of range for a tensor of ", ndim,
              " dimension", ndim == 1 ? "" : "s", " (expected in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

int planning_multiprocessors(const at::Tensor& t) {
  return t.is_cuda() ? multiprocessor_count(t.device()) : 4;
}

int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) {
    p <<= 1;
  }
  return p;
}

at::Tensor split_sync(int64_t rows, int64_t chunks, const at::Tensor& like) {
  return at::zeros({2 + rows * chunks}, like.options().dtype(at::kLong));
}

}  // namespace tjit::detail
