#include <tjit/device_properties.h>

#include "launch/cuda_driver.h"

#include <array>
#include <atomic>
#include <string>

namespace tjit {

namespace {

constexpr int kCachedDevices = 64;

// What `compute` returns for a device index, computed once per device (a race only repeats the
// query); the value is stored plus one, so that 0 means "not read yet".
template <int Tag, typename Compute>
int cached_per_device(int index, Compute compute) {
  static std::array<std::atomic<int>, kCachedDevices> cache{};
  const bool cacheable = index >= 0 && index < kCachedDevices;
  if (cacheable) {
    if (const int stored = cache[index].load(std::memory_order_relaxed); stored > 0) {
      return stored - 1;
    }
  }
  const int value = compute();
  if (cacheable) {
    cache[index].store(value + 1, std::memory_order_relaxed);
  }
  return value;
}

int device_attribute(int index, CUdevice_attribute attribute) {
  const auto& cu = detail::cuda_driver();
  const std::string what = "device " + std::to_string(index);
  CUdevice dev = 0;
  detail::check_cuda(cu.cuDeviceGet(&dev, index), "cuDeviceGet", what);
  int value = 0;
  detail::check_cuda(cu.cuDeviceGetAttribute(&value, attribute, dev), "cuDeviceGetAttribute", what);
  return value;
}

}  // namespace

int multiprocessor_count(const c10::Device& device) {
  if (!device.is_cuda()) {
    return 0;
  }
  const int index = device.has_index() ? device.index() : 0;
  return cached_per_device<0>(index,
                              [index] { return device_attribute(index, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); });
}

int memory_bandwidth_gbps(const c10::Device& device) {
  if (!device.is_cuda()) {
    return 0;
  }
  const int index = device.has_index() ? device.index() : 0;
  return cached_per_device<2>(index, [index] {
    const int64_t clock_khz = device_attribute(index, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    const int64_t bus_bits = device_attribute(index, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    return static_cast<int>(clock_khz * bus_bits / 4'000'000);  // 2 * kHz * 1e3 * bits / 8 / 1e9
  });
}

int compute_capability(const c10::Device& device) {
  if (!device.is_cuda()) {
    return 0;
  }
  const int index = device.has_index() ? device.index() : 0;
  return cached_per_device<3>(index, [index] {
    return 10 * device_attribute(index, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
           device_attribute(index, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  });
}

bool dependent_launch_supported(const c10::Device& device) {
  if (!device.is_cuda()) {
    return false;
  }
  const int index = device.has_index() ? device.index() : 0;
  return cached_per_device<1>(index, [index] {
           int driver = 0;
           detail::check_cuda(detail::cuda_driver().cuDriverGetVersion(&driver), "cuDriverGetVersion",
                              "the CUDA driver");
           return int(driver >= 12030 &&
                      device_attribute(index, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) >= 9);
         }) != 0;
}

}  // namespace tjit
