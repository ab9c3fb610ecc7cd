#include <tjit/relaxed_capture.h>

#include "launch/cuda_driver.h"

namespace tjit {

RelaxedCaptureMode::RelaxedCaptureMode() {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  detail::cuda_driver().cuThreadExchangeStreamCaptureMode(&mode);
  previous_mode_ = static_cast<int>(mode);
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  auto mode = static_cast<CUstreamCaptureMode>(previous_mode_);
  detail::cuda_driver().cuThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace tjit
