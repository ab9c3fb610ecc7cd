#pragma once
// The CUDA driver API, opened at run time from libcuda.so.1: tjit links no CUDA library, so it
// builds and loads on machines without a GPU and fails only when a GPU launch is asked for.

#include <cuda.h>

#include <string>

namespace tjit::detail {

struct CudaDriver {
  // Entry points, resolved under the versioned names cuda.h maps them to.
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
  decltype(&::cuGetErrorString) cuGetErrorString = nullptr;
  decltype(&::cuInit) cuInit = nullptr;
  decltype(&::cuDriverGetVersion) cuDriverGetVersion = nullptr;
  decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) cuCtxGetDevice = nullptr;
  decltype(&::cuCtxPushCurrent) cuCtxPushCurrent = nullptr;
  decltype(&::cuCtxPopCurrent) cuCtxPopCurrent = nullptr;
  // A context's id, unique for the process's lifetime (a handle may be reused once a context is
  // destroyed); nullptr on a driver older than CUDA 12.
  decltype(&::cuCtxGetId) cuCtxGetId = nullptr;
  // Graph capture by other threads: whether a call may touch the driver in ways a capture forbids.
  decltype(&::cuThreadExchangeStreamCaptureMode) cuThreadExchangeStreamCaptureMode = nullptr;
  decltype(&::cuModuleLoadData) cuModuleLoadData = nullptr;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction = nullptr;
  decltype(&::cuFuncGetAttribute) cuFuncGetAttribute = nullptr;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute = nullptr;
  decltype(&::cuFuncSetCacheConfig) cuFuncSetCacheConfig = nullptr;
  decltype(&::cuLaunchKernel) cuLaunchKernel = nullptr;
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx = nullptr;
  // How many programs of a function an SM holds at once (persistent kernels' grids).
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) cuOccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  // Autotuning: timing with events, resets between timed runs, graph-capture check.
  decltype(&::cuEventCreate) cuEventCreate = nullptr;
  decltype(&::cuEventDestroy) cuEventDestroy = nullptr;
  decltype(&::cuEventRecord) cuEventRecord = nullptr;
  decltype(&::cuEventElapsedTime) cuEventElapsedTime = nullptr;
  decltype(&::cuStreamSynchronize) cuStreamSynchronize = nullptr;
  decltype(&::cuStreamIsCapturing) cuStreamIsCapturing = nullptr;
  decltype(&::cuMemsetD8Async) cuMemsetD8Async = nullptr;
  decltype(&::cuMemsetD32Async) cuMemsetD32Async = nullptr;
  decltype(&::cuMemcpyDtoDAsync) cuMemcpyDtoDAsync = nullptr;
  // Host tensor descriptors lowered to TMA (sm_90+); nullptr on a driver older than CUDA 12.
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;
};

// The process-wide driver; opens libcuda.so.1 and calls cuInit on first use. Throws
// c10::Error saying why when there is no usable driver.
const CudaDriver& cuda_driver();

// Throws c10::Error "<what> failed for <context>: CUDA_ERROR_X: ..." unless result is success.
void check_cuda(CUresult result, const char* what, const std::string& context);

}  // namespace tjit::detail
