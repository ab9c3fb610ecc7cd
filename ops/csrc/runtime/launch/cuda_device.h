#pragma once
// Which CUDA device a launch runs on, and what a device compiles for.

#include <tjit/argument_pack.h>
#include <tjit/launch_types.h>

#include <c10/util/Exception.h>

namespace tjit::detail {

// The device current on this thread (its context's; 0 when there is no context yet).
int current_cuda_device();
// The compile target of a CUDA device.
CompileTarget target_of_device(int device);

// The CUDA device a completed pack that is not on the CPU launches on: its tensors', else the
// current context's. Throws for tensors on any other device. Inline: the cached launch calls it.
inline int cuda_device_of(const ArgumentPackBase& pack, const char* function_name) {
  TORCH_CHECK(!pack.has_device() || pack.device().is_cuda(), "tjit: kernel ", function_name, " got tensors on ",
              pack.device(), "; tjit launches on CUDA devices and CPU (interpreter)");
  return pack.has_device() ? pack.device().index() : current_cuda_device();
}

}  // namespace tjit::detail
