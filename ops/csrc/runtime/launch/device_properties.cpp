#include <tjit/device_properties.h>

#include "launch/cuda_driver.h"

#include <array>
#include <atomic>
#include <string>

namespace tjit {

int multiprocessor_count(const c10::Device& device) {
  if (!device.is_cuda()) {
    return 0;
  }
  // Read once per device; a race only repeats the same query.
  static std::array<std::atomic<int>, 64> cache{};
  const int index = device.has_index() ? device.index() : 0;
  if (index >= 0 && index < static_cast<int>(cache.size())) {
    if (const int cached = cache[index].load(std::memory_order_relaxed); cached > 0) {
      return cached;
    }
  }
  const auto& cu = detail::cuda_driver();
  const std::string what = "device " + std::to_string(index);
  CUdevice dev = 0;
  detail::check_cuda(cu.cuDeviceGet(&dev, index), "cuDeviceGet", what);
  int count = 0;
  detail::check_cuda(cu.cuDeviceGetAttribute(&count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                     "cuDeviceGetAttribute", what);
  if (index >= 0 && index < static_cast<int>(cache.size())) {
    cache[index].store(count, std::memory_order_relaxed);
  }
  return count;
}

}  // namespace tjit
