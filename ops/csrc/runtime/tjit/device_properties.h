#pragma once
// Device facts launch planners need (cached per device, read through the CUDA driver).

#include <c10/core/Device.h>

namespace tjit {

// Streaming multiprocessors of a CUDA device; 0 for any other device (plans then assume a
// small machine). Throws c10::Error if the driver cannot be queried.
int multiprocessor_count(const c10::Device& device);

}  // namespace tjit
