#include <tjit/kit/outputs.h>

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace tjit::kit {

at::Tensor empty_output(at::IntArrayRef shape, const at::TensorOptions& options) {
  const c10::Device device = options.device();
  // empty_cuda fills new memory only when deterministic algorithms are on *and* the fill flag
  // (default true) is set; then the output takes at::empty's path, fill included.
  const at::Context& context = at::globalContext();
  const bool fills = context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory();
  if (device.is_cuda() && !fills) {
    const auto* guard_impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    if (guard_impl->getDevice() == device) {
      return at::Tensor(at::detail::empty_generic(shape, c10::GetAllocator(c10::DeviceType::CUDA),
                                                  c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                  c10::typeMetaToScalarType(options.dtype()), std::nullopt));
    }
  }
  return at::empty(shape, options);
}

}  // namespace tjit::kit
