#pragma once
// Shared by the GoogleTest suites: where the test kernels are, and which devices to run on.

#include <tjit/current_stream.h>
#include <tjit/launch_types.h>

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>
#include <c10/core/Device.h>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace tjit::testing {

inline std::string test_kernels() {
  const char* path = std::getenv("TJIT_TEST_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/runtime_test_kernels.py";
}

// Every device the operator tests run on here: CPU (Triton's interpreter) always, CUDA when
// present.
inline std::vector<c10::Device> test_devices() {
  std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
  if (at::hasCUDA()) {
    devices.emplace_back(c10::kCUDA, 0);
  }
  return devices;
}

// The message of the c10::Error that f throws, without backtrace; "(no error)" if none.
inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "(no error)";
}

// The stream a test launches on: the device's current torch stream for CUDA; none for CPU.
inline Stream stream_of(const at::Tensor& t) { return t.is_cuda() ? current_stream(t.device()) : nullptr; }

// Waits for the work on t's device's current stream.
inline void synchronize(const at::Tensor& t) {
  if (t.is_cuda()) {
    c10::impl::VirtualGuardImpl(t.device().type()).getStream(t.device()).synchronize();
  }
}

inline std::string device_label(const ::testing::TestParamInfo<c10::Device>& info) {
  return info.param.is_cuda() ? "cuda" : "cpu";
}

#define TJIT_SKIP_WITHOUT_CUDA()                                                            \
  if (!at::hasCUDA()) {                                                                     \
    GTEST_SKIP() << "needs a CUDA GPU (this torch build or machine has none); run on the " \
                    "CUDA machine";                                                         \
  }

}  // namespace tjit::testing
