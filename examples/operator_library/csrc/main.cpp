// A C++ program using the library's typed entry point: forward and backward against ATen, on CUDA
// when there is a GPU, else on the CPU (Triton's interpreter). Prints "main passed" and exits 0, or
// names what differed and exits 1. With --expect-bundle it also checks that the library carries its
// embedded bundle (tjit_add_operator_library ... BUNDLE).

#include "scaled_silu.h"

#include <tjit/kernel_bundle.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

namespace {

int failures = 0;

void expect(const char* what, bool ok) {
  std::printf("%-34s %s\n", what, ok ? "ok" : "FAILED");
  failures += ok ? 0 : 1;
}

void expect_close(const char* what, const at::Tensor& actual, const at::Tensor& expected, double tolerance) {
  expect(what, actual.sizes() == expected.sizes() && actual.dtype() == expected.dtype() &&
                   at::allclose(actual.cpu().to(at::kDouble), expected.cpu().to(at::kDouble), tolerance, tolerance));
}

}  // namespace

int main(int argc, char** argv) {
  const bool expect_bundle = argc > 1 && std::strcmp(argv[1], "--expect-bundle") == 0;
  try {
    const at::Device device = at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    std::printf("device: %s\n", device.str().c_str());
    const double scale = 1.75;
    for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}) {
      const double tolerance = dtype == at::kDouble ? 1e-12 : dtype == at::kFloat ? 1e-5 : 2e-2;
      const auto options = at::TensorOptions().device(device).dtype(dtype);
      // An odd size (not a multiple of the block) and a non-contiguous view.
      const at::Tensor x = at::randn({37, 129}, options).t();
      const std::string name = std::string("scaled_silu ") + c10::toString(dtype);
      expect_close(name.c_str(), myops::scaled_silu(x, scale), at::silu(x.to(at::kDouble)).mul(scale).to(dtype),
                   tolerance);
    }

    // Backward through the entry point's autograd, against ATen's.
    const auto options = at::TensorOptions().device(device).dtype(at::kDouble);
    const at::Tensor x = at::randn({1000}, options).requires_grad_(true);
    const at::Tensor ref = x.detach().clone().requires_grad_(true);
    const at::Tensor weight = at::randn({1000}, options);
    (myops::scaled_silu(x, scale) * weight).sum().backward();
    (at::silu(ref) * scale * weight).sum().backward();
    expect_close("scaled_silu backward (float64)", x.grad(), ref.grad(), 1e-12);

    // Errors name the operator and the argument.
    try {
      myops::scaled_silu(at::arange(4, at::TensorOptions().device(device)), scale);
      expect("integer input rejected", false);
    } catch (const c10::Error& e) {
      const std::string message = e.what_without_backtrace();
      expect("integer input rejected", message.find("myops::scaled_silu") != std::string::npos &&
                                           message.find("'x'") != std::string::npos);
    }

    if (expect_bundle) {
      bool found = false;
      for (const tjit::KernelBundleInfo& b : tjit::loaded_bundles()) {
        std::printf("bundle %s%s: %zu kernels, %zu entries\n", b.name.c_str(), b.embedded ? " (embedded)" : "",
                    b.num_kernels, b.num_entries);
        found = found || (b.name == "myops" && b.embedded && b.num_entries > 0);
      }
      expect("myops bundle embedded", found);
    }
  } catch (const std::exception& e) {
    std::printf("main failed: %s\n", e.what());
    return 1;
  }
  if (failures != 0) {
    std::printf("main FAILED (%d checks)\n", failures);
    return 1;
  }
  std::printf("main passed\n");
  return 0;
}
