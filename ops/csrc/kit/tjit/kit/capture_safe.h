#pragma once
// CUDA kernels of an operator that another thread's CUDA graph capture does not break.
//
//   TORCH_LIBRARY_IMPL(myops, CUDA, m) { m.impl("scaled_silu", tjit::kit::capture_safe<&scaled_silu_triton>); }
//
// The operator then runs in the relaxed capture mode (tjit/relaxed_capture.h): while a thread
// captures a graph in the global mode, another thread's call (its outputs' cudaMalloc, a first
// call's module load and tuning, all on streams nobody captures) is not refused by CUDA. Register
// the CPU kernel as it is: the scope needs the CUDA driver.

#include <utility>

#include <tjit/relaxed_capture.h>

namespace tjit::kit {

template <auto Kernel>
struct CaptureSafe;

template <typename Result, typename... Args, Result (*Kernel)(Args...)>
struct CaptureSafe<Kernel> {
  static Result call(Args... args) {
    const RelaxedCaptureMode relaxed;
    return Kernel(std::forward<Args>(args)...);
  }
};

template <auto Kernel>
constexpr auto capture_safe = &CaptureSafe<Kernel>::call;

}  // namespace tjit::kit
