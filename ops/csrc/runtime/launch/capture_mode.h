#pragma once
// Driver work that a CUDA graph capture elsewhere in the process must not fail: loading a
// module, asking a function's attributes, tuning's events and syncs on a stream nobody captures.
// While any thread captures in the global mode, CUDA refuses such "potentially unsafe" calls on
// every thread (and may invalidate that capture); this thread opts out for the scope, as torch's
// allocator does around cudaMalloc. None of tjit's calls touch a captured stream.

#include "launch/cuda_driver.h"

namespace tjit::detail {

class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope() {
    mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    cuda_driver().cuThreadExchangeStreamCaptureMode(&mode_);
  }
  ~RelaxedCaptureScope() { cuda_driver().cuThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  CUstreamCaptureMode mode_;
};

}  // namespace tjit::detail
