// The cached launch, TritonJitFunction::launch: the pack's key (device and options in its
// header words), the loaded binary from the cache (compiled or read on a miss), scratch memory,
// and cuLaunchKernel (cuLaunchKernelEx for clusters, cooperative grids and PDL). After the first
// call of a specialisation: no Python, no strings, no heap allocation, and no lock held across
// the launch.

#include "function/function_impl.h"

#include "launch/cuda_device.h"
#include "launch/cuda_driver.h"
#include "launch/descriptor_launch.h"

#include <tjit/prepare.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <string>

namespace tjit {

uint64_t detail::launch_options_word(const LaunchOptions& o) {
  TORCH_CHECK(o.num_warps > 0 && o.num_warps <= 64 && (o.num_warps & (o.num_warps - 1)) == 0,
              "tjit: num_warps must be a power of two in [1, 64], got ", o.num_warps);
  TORCH_CHECK(o.num_stages >= 0 && o.num_stages < 256, "tjit: num_stages out of range: ", o.num_stages);
  TORCH_CHECK(o.num_ctas >= 1 && o.num_ctas <= 16, "tjit: num_ctas must be in [1, 16], got ", o.num_ctas);
  TORCH_CHECK(o.maxnreg >= 0 && o.maxnreg <= 255, "tjit: maxnreg must be in [0, 255] (0: no limit), got ",
              o.maxnreg);
  return uint64_t(o.num_warps) | uint64_t(o.num_stages) << 8 | uint64_t(o.num_ctas) << 16 |
         uint64_t(o.enable_fp_fusion) << 24 | uint64_t(o.launch_cooperative_grid) << 25 |
         uint64_t(o.launch_pdl) << 26 | uint64_t(o.maxnreg) << 27;
}

namespace {

// Scratch memory a kernel asks for (grid * num_ctas * size bytes), from torch's allocator for
// the device, which keeps it stream-ordered on the device's current torch stream.
c10::DataPtr allocate_scratch(int64_t size, const Grid& grid, int num_ctas, int device) {
  if (size <= 0) {
    return {};
  }
  return detail::allocate_device_memory(device, static_cast<size_t>(size) * grid.size() * num_ctas,
                                        "the kernel's scratch memory");
}

}  // namespace

detail::CachedKernel& TritonJitFunction::Impl::loaded_kernel(detail::ArgumentPackBase& pack, int device,
                                                             const LaunchOptions& options) {
  uint64_t* key = pack.mutable_key();
  key[0] = static_cast<uint64_t>(device);
  key[1] = detail::launch_options_word(options);
  const size_t n = pack.key_size();
  detail::CachedKernel* k = kernels.last_launched.load(std::memory_order_acquire);
  if (k == nullptr || !k->has_key(key, n)) {
    const uint64_t hash = detail::KernelCache::hash(key, n);
    k = kernels.find(hash, key, n);
    if (k == nullptr || !k->ready.load(std::memory_order_acquire)) {
      k = &compile_and_load(hash, pack, device, options);
    }
    kernels.last_launched.store(k, std::memory_order_release);
  }
  return *k;
}

void TritonJitFunction::launch(Stream stream, Grid grid, const LaunchOptions& options,
                               detail::ArgumentPackBase& pack) const {
  pack.complete();
  if (pack.has_device() && pack.device().is_cpu()) {
    if (!preparing_only()) {  // the interpreter has nothing to prepare
      impl_->launch_interpreted(grid, options, pack);
    }
    return;
  }
  const int device = detail::cuda_device_of(pack, function_name_.c_str());
  if (grid.size() == 0) {
    return;  // nothing to run; Python Triton launches nothing either
  }
  detail::CachedKernel* k = &impl_->loaded_kernel(pack, device, options);
  if (preparing_only()) {
    return;
  }

  // Triton kernels take two scratch pointers after the arguments (global, profile). Those of
  // Triton 3.4 take only the first: cuLaunchKernel reads as many parameters as the kernel's image
  // declares, so the second is never read there and one layout serves every supported Triton.
  c10::DataPtr global_scratch =
      allocate_scratch(k->meta.global_scratch_size, grid, k->meta.num_ctas, device);
  c10::DataPtr profile_scratch =
      allocate_scratch(k->meta.profile_scratch_size, grid, k->meta.num_ctas, device);
  CUdeviceptr global_ptr = reinterpret_cast<CUdeviceptr>(global_scratch.get());
  CUdeviceptr profile_ptr = reinterpret_cast<CUdeviceptr>(profile_scratch.get());
  void** params = pack.launch_params();
  size_t num_params = pack.num_launch_args();
  detail::DescriptorLaunchParams expanded;  // untouched by calls without tensor descriptors
  if (pack.num_descriptors() > 0) {
    num_params = expanded.fill(pack, k->meta, k->description);
    params = expanded.params();
  }
  params[num_params] = &global_ptr;
  params[num_params + 1] = &profile_ptr;

  const auto& cu = detail::cuda_driver();
  // Launch in the thread's current context when it belongs to the device (a green context keeps
  // the kernel on its SMs and in its streams' order); with none current, or another device's,
  // in the device's primary context for the launch only.
  CUcontext current = nullptr;
  cu.cuCtxGetCurrent(&current);
  CUfunction function = k->function;
  bool switch_context = false;
  if (current != k->context) {
    CUfunction own = current != nullptr ? impl_->function_in_context(*k, current, device) : nullptr;
    if (own != nullptr) {
      function = own;
    } else {
      switch_context = true;
      detail::check_cuda(cu.cuCtxPushCurrent(k->context), "cuCtxPushCurrent", k->description);
    }
  }
  const auto& m = k->meta;
  const unsigned block = 32u * static_cast<unsigned>(m.num_warps);
  CUresult result;
  if (m.num_ctas == 1 && !m.launch_cooperative_grid && !m.launch_pdl) {
    result = cu.cuLaunchKernel(function, grid.x, grid.y, grid.z, block, 1, 1, m.shared_memory,
                               static_cast<CUstream>(stream), params, nullptr);
  } else {
    CUlaunchAttribute attrs[4] = {};
    unsigned num_attrs = 0;
    if (m.launch_pdl) {
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[num_attrs++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (m.launch_cooperative_grid) {
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[num_attrs++].value.cooperative = 1;
    }
    if (m.num_ctas != 1) {
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[num_attrs].value.clusterDim.x = static_cast<unsigned>(m.num_ctas);
      attrs[num_attrs].value.clusterDim.y = 1;
      attrs[num_attrs++].value.clusterDim.z = 1;
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
      attrs[num_attrs++].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
    }
    CUlaunchConfig config = {};
    config.gridDimX = grid.x * static_cast<unsigned>(m.num_ctas);
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = static_cast<unsigned>(m.shared_memory);
    config.hStream = static_cast<CUstream>(stream);
    config.attrs = attrs;
    config.numAttrs = num_attrs;
    result = cu.cuLaunchKernelEx(&config, function, params, nullptr);
  }
  if (switch_context) {
    CUcontext ignored = nullptr;
    cu.cuCtxPopCurrent(&ignored);
  }
  if (result != CUDA_SUCCESS) {
    detail::check_cuda(result, "cuLaunchKernel",
                       k->description + " with grid (" + std::to_string(grid.x) + ", " +
                           std::to_string(grid.y) + ", " + std::to_string(grid.z) + ")");
  }
}

}  // namespace tjit
