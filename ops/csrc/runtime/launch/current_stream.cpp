#include <tjit/current_stream.h>

#include "launch/cuda_driver.h"
#include "tuning/autotuner.h"

#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <cstdint>

namespace tjit {
namespace {

// torch before 2.10 has no device-generic way to a stream's native handle without CUDA headers.
// Its CUDA builds export AOTInductor's C shim from libtorch_cuda.so (loaded with libtorch):
// aoti_torch_get_current_cuda_stream(index, &handle) returns
// at::cuda::getCurrentCUDAStream(index).stream(), 0 on success. (This argument order is that of
// torch 2.7 to 2.9, checked in their shim.h; an older one had (&handle, index).)
[[maybe_unused]] Stream current_cuda_stream_from_shim(const c10::Device& device) {
  using ShimFn = int32_t (*)(int32_t, void**);
  static const ShimFn shim = []() -> ShimFn {
    void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    return lib == nullptr ? nullptr
                          : reinterpret_cast<ShimFn>(dlsym(lib, "aoti_torch_get_current_cuda_stream"));
  }();
  TORCH_CHECK(shim != nullptr, "tjit: cannot get the current stream of ", device,
              ": this torch has no c10::Stream::native_handle() (torch < 2.10) and no loaded "
              "libtorch_cuda.so exporting aoti_torch_get_current_cuda_stream");
  void* handle = nullptr;
  TORCH_CHECK(shim(device.index(), &handle) == 0, "tjit: aoti_torch_get_current_cuda_stream failed for ",
              device);
  return handle;
}

// c10::Stream::native_handle() where torch has it (2.10 and later), else the shim above (CUDA only).
template <typename S>
Stream native_handle(const S& stream) {
  if constexpr (requires { stream.native_handle(); }) {
    return stream.native_handle();
  } else {
    TORCH_CHECK(stream.device_type() == c10::DeviceType::CUDA, "tjit: no native stream handle for ",
                stream.device(), " with this torch (torch < 2.10 offers one for CUDA alone)");
    return current_cuda_stream_from_shim(stream.device());
  }
}

}  // namespace

Stream current_stream(const c10::Device& device) {
  if (device.is_cpu()) {
    return nullptr;
  }
  const c10::impl::VirtualGuardImpl guard_impl(device.type());
  return native_handle(guard_impl.getStream(device));
}

bool stream_is_capturing(Stream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  detail::check_cuda(detail::cuda_driver().cuStreamIsCapturing(static_cast<CUstream>(stream), &status),
                     "cuStreamIsCapturing", "the stream's capture status");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool stream_is_capturing(Stream stream, const c10::Device& device) {
  if (!device.is_cuda()) {
    return false;
  }
  const int index =
      device.has_index() ? device.index() : c10::impl::VirtualGuardImpl(device.type()).getDevice().index();
  const detail::DeviceContextScope context(index);
  return stream_is_capturing(stream);
}

}  // namespace tjit
