#include <tjit/timing.h>

#include <tjit/relaxed_capture.h>

#include "tuning/autotuner.h"

namespace tjit {

double time_launches(Stream stream, const c10::Device& device, const std::function<void()>& run, double warmup_ms,
                     double rep_ms) {
  size_t runs = 0;
  const auto nothing = [] {};
  if (!device.is_cuda()) {
    return detail::time_on_cpu(nothing, run, runs);
  }
  const int index = device.has_index() ? device.index() : 0;
  detail::DeviceContextScope context(index);
  RelaxedCaptureMode relaxed;  // another thread may be capturing a graph (its syncs would break it)
  return detail::time_on_gpu(stream, index, nothing, run, warmup_ms, rep_ms, runs);
}

}  // namespace tjit
