// How many programs of a binary one SM holds at once: the driver's occupancy for its warps,
// registers and dynamic shared memory, computed when the binary is loaded and kept in its cache
// entry, so that persistent kernels size their grids from what really fits.

#include "function/function_impl.h"

#include "launch/cuda_device.h"
#include "launch/cuda_driver.h"

namespace tjit {

// Per program, not per cluster.
int detail::resident_programs(const CachedKernel& k, const CompiledKernel& compiled) {
  const auto& cu = cuda_driver();
  check_cuda(cu.cuCtxPushCurrent(k.context), "cuCtxPushCurrent", k.description);
  int programs = 0;
  const CUresult result = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &programs, k.function, 32 * compiled.num_warps, static_cast<size_t>(compiled.shared_memory));
  CUcontext ignored = nullptr;
  cu.cuCtxPopCurrent(&ignored);
  check_cuda(result, "cuOccupancyMaxActiveBlocksPerMultiprocessor", k.description);
  return programs;
}

int TritonJitFunction::resident_programs_per_sm_packed(const LaunchOptions& options,
                                                       detail::ArgumentPackBase& pack) const {
  pack.complete();
  if (pack.has_device() && pack.device().is_cpu()) {
    return 1;  // the interpreter runs one program at a time
  }
  return impl_->loaded_kernel(pack, detail::cuda_device_of(pack, function_name_.c_str()), options).resident_per_sm;
}

}  // namespace tjit
