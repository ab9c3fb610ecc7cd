// A cache miss: the first thread to miss a key fills its entry under the entry's mutex (others
// wait there): the binary from the lookup chain, loaded into the device's primary context and
// configured for its first launch, its occupancy, one log line when it was compiled. A launch
// from another context of the device (a green context, a program's own) loads the kept binary
// there once: a kernel runs in the caller's context, on its SMs and in its stream order.

#include "function/function_impl.h"

#include "binaries/manifest_recorder.h"
#include <tjit/relaxed_capture.h>
#include "launch/cuda_device.h"
#include "launch/cuda_driver.h"
#include "python/python_gil.h"
#include "settings/settings.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>

namespace tjit {
namespace {

using detail::CachedKernel;

// The kernel's function in a module loaded from `image` into the context current on this thread.
// Throws c10::Error when the driver rejects the binary.
CUfunction load_function(const CompiledKernel& compiled, const std::string& image, const std::string& what) {
  const auto& cu = detail::cuda_driver();
  CUmodule module = nullptr;
  detail::check_cuda(cu.cuModuleLoadData(&module, image.data()), "cuModuleLoadData", what);
  CUfunction function = nullptr;
  detail::check_cuda(cu.cuModuleGetFunction(&function, module, compiled.name.c_str()), "cuModuleGetFunction",
                     what);
  return function;
}

// Makes the device's primary context current for a scope, as Triton's load_binary loads there.
class PrimaryContext {
 public:
  PrimaryContext(int device, const std::string& what) {
    const auto& cu = detail::cuda_driver();
    CUdevice dev = 0;
    detail::check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", what);
    detail::check_cuda(cu.cuDevicePrimaryCtxRetain(&context_, dev), "cuDevicePrimaryCtxRetain", what);
    detail::check_cuda(cu.cuCtxPushCurrent(context_), "cuCtxPushCurrent", what);
  }
  ~PrimaryContext() {
    CUcontext ignored = nullptr;
    detail::cuda_driver().cuCtxPopCurrent(&ignored);
  }
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  CUcontext get() const { return context_; }

 private:
  CUcontext context_ = nullptr;
};

// Loads the binary into the device's primary context (every entry has a function there: the
// occupancy is asked of it).
void load_binary(CachedKernel& k, const CompiledKernel& compiled, int device) {
  PrimaryContext primary(device, k.description);
  k.function = load_function(compiled, compiled.binary, k.description);
  k.context = primary.get();
}

// What a loaded function needs before its first launch: the opt-in for more than 48 KiB of
// dynamic shared memory, and for clusters of 16.
void configure_function(CUfunction function, const CompiledKernel& compiled, int device, const std::string& what) {
  const auto& cu = detail::cuda_driver();
  CUdevice dev = 0;
  detail::check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", what);
  int shared_optin = 0;
  detail::check_cuda(
      cu.cuDeviceGetAttribute(&shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
      "cuDeviceGetAttribute", what);
  TORCH_CHECK(compiled.shared_memory <= shared_optin, "tjit: ", what, " needs ", compiled.shared_memory,
              " bytes of shared memory, but device ", device, " allows ", shared_optin,
              " per block; use smaller blocks or fewer stages");
  if (compiled.shared_memory > 49152 && shared_optin > 49152) {
    detail::check_cuda(cu.cuFuncSetCacheConfig(function, CU_FUNC_CACHE_PREFER_SHARED),
                       "cuFuncSetCacheConfig", what);
    int shared_static = 0;
    detail::check_cuda(cu.cuFuncGetAttribute(&shared_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function),
                       "cuFuncGetAttribute", what);
    detail::check_cuda(cu.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             shared_optin - shared_static),
                       "cuFuncSetAttribute", what);
  }
  if (compiled.num_ctas == 16) {
    detail::check_cuda(cu.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                       "cuFuncSetAttribute", what);
  }
}

// The id launches find a context's function by: the driver's (unique for the process's
// lifetime), else the handle.
unsigned long long context_id(CUcontext context) {
  const auto& cu = detail::cuda_driver();
  unsigned long long id = 0;
  if (cu.cuCtxGetId != nullptr && cu.cuCtxGetId(context, &id) == CUDA_SUCCESS) {
    return id;
  }
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(context));
}

CUfunction find_in_context(const CachedKernel& k, unsigned long long id, bool& found) {
  std::shared_lock lock(k.other_contexts_mutex);
  for (const auto& entry : k.other_contexts) {
    if (entry.context_id == id) {
      found = true;
      return entry.function;
    }
  }
  found = false;
  return nullptr;
}

}  // namespace

CachedKernel& TritonJitFunction::Impl::compile_and_load(uint64_t hash, const detail::ArgumentPackBase& pack,
                                                       int device, const LaunchOptions& options) {
  CachedKernel& k = kernels.find_or_insert(hash, pack.key(), pack.key_size());
  detail::GilRelease released;  // a thread compiling this key may need the GIL this one holds
  std::lock_guard lock(k.compile_mutex);  // later threads missing on this key wait here
  if (k.ready.load(std::memory_order_acquire)) {
    return k;
  }
  const Specialization spec = fn.specialization_of(pack);
  const CompileTarget target = detail::target_of_device(device);
  k.description = describe(spec, target) + " on device " + std::to_string(device);
  const auto start = std::chrono::steady_clock::now();
  std::string key;
  Origin origin = Origin::Compiled;
  RelaxedCaptureMode relaxed;  // another thread may be capturing a graph
  CompiledKernel compiled = obtain(spec, target, options, k.description, /*use_store=*/true, key, origin);
  try {
    load_binary(k, compiled, device);
  } catch (const c10::Error& e) {
    if (origin != Origin::Store) {
      throw;
    }
    // Intact by its checksum, yet the driver refuses it: compile afresh, which replaces it.
    detail::report_unusable_stored_kernel(signature, key, e.what_without_backtrace());
    compiled = obtain(spec, target, options, k.description, /*use_store=*/false, key, origin);
    load_binary(k, compiled, device);
  }
  detail::note_launched_specialization(signature, spec, options);
  configure_function(k.function, compiled, device, k.description);
  k.resident_per_sm = detail::resident_programs(k, compiled);
  k.meta = std::move(compiled);
  if (origin == Origin::Compiled && detail::settings::log_compiles()) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[tjit] compiled %s (num_warps=%d, num_stages=%d) in %.0f ms\n", k.description.c_str(),
                 options.num_warps, options.num_stages, ms);
  }
  k.ready.store(true, std::memory_order_release);
  return k;
}

CUfunction TritonJitFunction::Impl::function_in_context(CachedKernel& k, CUcontext current, int device) {
  const unsigned long long id = context_id(current);
  bool found = false;
  CUfunction function = find_in_context(k, id, found);
  if (found) {
    return function;
  }
  const auto& cu = detail::cuda_driver();
  CUdevice dev = 0;
  detail::check_cuda(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice", k.description);
  std::lock_guard lock(k.compile_mutex);
  function = find_in_context(k, id, found);
  if (found) {
    return function;
  }
  if (static_cast<int>(dev) == device) {
    RelaxedCaptureMode relaxed;
    function = load_function(k.meta, k.meta.binary, k.description);
    configure_function(function, k.meta, device, k.description);
  }
  std::unique_lock write(k.other_contexts_mutex);
  k.other_contexts.push_back(detail::ContextFunction{id, function});
  return function;
}

}  // namespace tjit
