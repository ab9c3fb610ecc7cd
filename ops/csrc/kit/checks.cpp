#include <tjit/kit/checks.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

namespace tjit::kit {

void check_defined(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor");
}

void check_same_device(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg,
                       const char* op) {
  TORCH_CHECK(t.device() == ref.device(), op, ": argument '", arg, "' is on ", t.device(), " but '", ref_arg,
              "' is on ", ref.device(), "; all tensors must be on the same device");
}

void check_same(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg, const char* op) {
  check_defined(t, op, arg);
  check_defined(ref, op, ref_arg);
  check_same_device(t, arg, ref, ref_arg, op);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": argument '", arg, "' has dtype ", t.scalar_type(),
              " but '", ref_arg, "' has dtype ", ref.scalar_type(), "; both must have the same dtype (convert one with .to())");
  TORCH_CHECK(t.sym_sizes() == ref.sym_sizes(), op, ": argument '", arg, "' has shape ", t.sym_sizes(), " but '",
              ref_arg, "' has shape ", ref.sym_sizes(), "; they must be equal");
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

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const char* arg) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  TORCH_CHECK(dim >= -n && dim < n, op, ": ", arg, " ", dim, " is out of range for a tensor of ", ndim,
              " dimension", ndim == 1 ? "" : "s", " (expected in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

}  // namespace tjit::kit
