#include "launch/cuda_driver.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

namespace tjit::detail {
namespace {

// Expands a cuda.h name first, so `cuCtxPushCurrent` resolves to `cuCtxPushCurrent_v2`.
#define TJIT_STRINGIFY_EXPANDED(name) TJIT_STRINGIFY(name)
#define TJIT_STRINGIFY(name) #name

template <typename Fn>
void resolve(void* library, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  TORCH_CHECK(fn != nullptr, "tjit: libcuda.so.1 lacks ", symbol,
              "; the NVIDIA driver is too old for this build of tjit");
}

CudaDriver open_driver() {
  // Intentionally never closed: modules and functions live as long as the process.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(library != nullptr,
              "tjit: cannot launch on a GPU: libcuda.so.1 (the NVIDIA driver) could not be loaded (",
              dlerror(), ")");
  CudaDriver d;
#define TJIT_RESOLVE(name) resolve(library, d.name, TJIT_STRINGIFY_EXPANDED(name))
  TJIT_RESOLVE(cuGetErrorName);
  TJIT_RESOLVE(cuGetErrorString);
  TJIT_RESOLVE(cuInit);
  TJIT_RESOLVE(cuDriverGetVersion);
  TJIT_RESOLVE(cuDeviceGet);
  TJIT_RESOLVE(cuDeviceGetAttribute);
  TJIT_RESOLVE(cuDevicePrimaryCtxRetain);
  TJIT_RESOLVE(cuCtxGetCurrent);
  TJIT_RESOLVE(cuCtxGetDevice);
  TJIT_RESOLVE(cuCtxPushCurrent);
  TJIT_RESOLVE(cuCtxPopCurrent);
  d.cuCtxGetId = reinterpret_cast<decltype(d.cuCtxGetId)>(dlsym(library, TJIT_STRINGIFY_EXPANDED(cuCtxGetId)));
  TJIT_RESOLVE(cuThreadExchangeStreamCaptureMode);
  TJIT_RESOLVE(cuModuleLoadData);
  TJIT_RESOLVE(cuModuleGetFunction);
  TJIT_RESOLVE(cuFuncGetAttribute);
  TJIT_RESOLVE(cuFuncSetAttribute);
  TJIT_RESOLVE(cuFuncSetCacheConfig);
  TJIT_RESOLVE(cuLaunchKernel);
  TJIT_RESOLVE(cuLaunchKernelEx);
  TJIT_RESOLVE(cuOccupancyMaxActiveBlocksPerMultiprocessor);
  TJIT_RESOLVE(cuEventCreate);
  TJIT_RESOLVE(cuEventDestroy);
  TJIT_RESOLVE(cuEventRecord);
  // cuda.h 12.8+ names the _v2 (same signature); older drivers have only the first.
  d.cuEventElapsedTime = reinterpret_cast<decltype(d.cuEventElapsedTime)>(
      dlsym(library, TJIT_STRINGIFY_EXPANDED(cuEventElapsedTime)));
  if (d.cuEventElapsedTime == nullptr) {
    resolve(library, d.cuEventElapsedTime, "cuEventElapsedTime");
  }
  TJIT_RESOLVE(cuStreamSynchronize);
  TJIT_RESOLVE(cuStreamIsCapturing);
  TJIT_RESOLVE(cuMemsetD8Async);
  TJIT_RESOLVE(cuMemsetD32Async);
  TJIT_RESOLVE(cuMemcpyDtoDAsync);
  // CUDA 12 drivers and newer: host tensor descriptors check for it when they need it.
  d.cuTensorMapEncodeTiled = reinterpret_cast<decltype(d.cuTensorMapEncodeTiled)>(
      dlsym(library, TJIT_STRINGIFY_EXPANDED(cuTensorMapEncodeTiled)));
#undef TJIT_RESOLVE
  check_cuda(d.cuInit(0), "cuInit", "the CUDA driver");
  return d;
}

}  // namespace

const CudaDriver& cuda_driver() {
  static const CudaDriver driver = open_driver();
  return driver;
}

void check_cuda(CUresult result, const char* what, const std::string& context) {
  if (result == CUDA_SUCCESS) {
    return;
  }
  // The driver object may still be under construction (cuInit failing): describe by hand then.
  const char* name = nullptr;
  void* self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  std::string detail = "error " + std::to_string(static_cast<int>(result));
  if (self != nullptr) {
    auto get_name = reinterpret_cast<decltype(&::cuGetErrorName)>(dlsym(self, "cuGetErrorName"));
    auto get_text = reinterpret_cast<decltype(&::cuGetErrorString)>(dlsym(self, "cuGetErrorString"));
    const char* text = nullptr;
    if (get_name != nullptr && get_name(result, &name) == CUDA_SUCCESS && get_text != nullptr &&
        get_text(result, &text) == CUDA_SUCCESS) {
      detail = std::string(name) + ": " + text;
    }
    dlclose(self);
  }
  TORCH_CHECK(false, "tjit: ", what, " failed for ", context, ": ", detail);
}

}  // namespace tjit::detail
