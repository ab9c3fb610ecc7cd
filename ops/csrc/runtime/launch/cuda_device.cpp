#include "launch/cuda_device.h"

#include "launch/cuda_driver.h"

#include <string>

namespace tjit::detail {

int current_cuda_device() {
  const auto& cu = cuda_driver();
  CUcontext ctx = nullptr;
  check_cuda(cu.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent", "finding the current device");
  if (ctx == nullptr) {
    return 0;  // no context yet: the runtime API would pick device 0 too
  }
  CUdevice dev = 0;
  check_cuda(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice", "finding the current device");
  return static_cast<int>(dev);
}

CompileTarget target_of_device(int device) {
  const auto& cu = cuda_driver();
  CUdevice dev = 0;
  const std::string what = "device " + std::to_string(device);
  check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", what);
  int major = 0;
  int minor = 0;
  check_cuda(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
             "cuDeviceGetAttribute", what);
  check_cuda(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
             "cuDeviceGetAttribute", what);
  CompileTarget target;
  target.arch = major * 10 + minor;
  return target;
}

}  // namespace tjit::detail
