// TritonJitFunction: the registry of instances, the per-device cache of loaded binaries, loading
// them into CUDA contexts and launching (CUDA driver), and CPU runs through Triton's interpreter.
// Where a binary comes from: lookup_chain.cpp; run(), tune(), compile_run(): tuning/tuned_run.cpp.

#include <tjit/current_stream.h>
#include <tjit/dtype.h>
#include <tjit/kernel_store.h>
#include <tjit/triton_jit_function.h>

#include "triton_jit_function_impl.h"
#include "tuning/autotuner.h"
#include "binaries/constexpr_json.h"
#include "launch/cuda_driver.h"
#include "launch/descriptor_launch.h"
#include "binaries/kernel_bundle_detail.h"
#include "binaries/kernel_store_detail.h"
#include "binaries/manifest_recorder.h"
#include "python/python_bridge.h"
#include "python/python_gil.h"
#include "binaries/source_fingerprint.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace tjit {
namespace {

using detail::ArgKind;
using detail::IntType;
using detail::kKeyHeaderWords;
using detail::kKeyWordsPerArg;

}  // namespace


namespace {
using detail::CachedKernel;

uint64_t hash_words(const uint64_t* words, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = words[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    h ^= x ^ (x >> 29);
  }
  return h;
}

}  // namespace

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

int detail::current_cuda_device() {
  const auto& cu = detail::cuda_driver();
  CUcontext ctx = nullptr;
  detail::check_cuda(cu.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent", "finding the current device");
  if (ctx == nullptr) {
    return 0;  // no context yet: the runtime API would pick device 0 too
  }
  CUdevice dev = 0;
  detail::check_cuda(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice", "finding the current device");
  return static_cast<int>(dev);
}

CompileTarget detail::target_of_device(int device) {
  const auto& cu = detail::cuda_driver();
  CUdevice dev = 0;
  const std::string what = "device " + std::to_string(device);
  detail::check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", what);
  int major = 0;
  int minor = 0;
  detail::check_cuda(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     "cuDeviceGetAttribute", what);
  detail::check_cuda(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     "cuDeviceGetAttribute", what);
  CompileTarget target;
  target.arch = major * 10 + minor;
  return target;
}

namespace {

// Loads the binary into the device's primary context, as Triton's load_binary does. Throws
// c10::Error when the driver rejects the binary.
void load_binary(CachedKernel& k, const CompiledKernel& compiled, int device) {
  const auto& cu = detail::cuda_driver();
  const std::string& what = k.description;
  CUdevice dev = 0;
  detail::check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", what);
  CUcontext ctx = nullptr;
  detail::check_cuda(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", what);
  detail::check_cuda(cu.cuCtxPushCurrent(ctx), "cuCtxPushCurrent", what);
  struct PopContext {
    const detail::CudaDriver& cu;
    ~PopContext() {
      CUcontext ignored = nullptr;
      cu.cuCtxPopCurrent(&ignored);
    }
  } pop{cu};
  CUmodule module = nullptr;
  detail::check_cuda(cu.cuModuleLoadData(&module, compiled.binary.data()), "cuModuleLoadData", what);
  CUfunction function = nullptr;
  detail::check_cuda(cu.cuModuleGetFunction(&function, module, compiled.name.c_str()),
                     "cuModuleGetFunction", what);
  k.context = ctx;
  k.function = function;
}

// What a loaded function needs before its first launch: the opt-in for more than 48 KiB of
// dynamic shared memory, and for clusters of 16.
void configure_function(const CachedKernel& k, const CompiledKernel& compiled, int device) {
  const auto& cu = detail::cuda_driver();
  const std::string& what = k.description;
  CUdevice dev = 0;
  detail::check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", what);
  int shared_optin = 0;
  detail::check_cuda(
      cu.cuDeviceGetAttribute(&shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
      "cuDeviceGetAttribute", what);
  TORCH_CHECK(compiled.shared_memory <= shared_optin, "tjit: ", what, " needs ", compiled.shared_memory,
              " bytes of shared memory, but device ", device, " allows ", shared_optin,
              " per block; use smaller blocks or fewer stages");
  CUfunction function = k.function;
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

// Programs of k's function that one SM holds at once with its warps and dynamic shared memory
// (registers and the function's static shared memory the driver knows). Per program, not per
// cluster.
int resident_programs(const CachedKernel& k, const CompiledKernel& compiled) {
  const auto& cu = detail::cuda_driver();
  detail::check_cuda(cu.cuCtxPushCurrent(k.context), "cuCtxPushCurrent", k.description);
  int programs = 0;
  const CUresult result = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &programs, k.function, 32 * compiled.num_warps, static_cast<size_t>(compiled.shared_memory));
  CUcontext ignored = nullptr;
  cu.cuCtxPopCurrent(&ignored);
  detail::check_cuda(result, "cuOccupancyMaxActiveBlocksPerMultiprocessor", k.description);
  return programs;
}

// The CUDA device a completed pack that is not on the CPU launches on: its tensors', else the
// current context's. Throws for tensors on any other device.
int cuda_device_of(const detail::ArgumentPackBase& pack, const std::string& function_name) {
  TORCH_CHECK(!pack.has_device() || pack.device().is_cuda(), "tjit: kernel ", function_name, " got tensors on ",
              pack.device(), "; tjit launches on CUDA devices and CPU (interpreter)");
  return pack.has_device() ? pack.device().index() : detail::current_cuda_device();
}

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


TritonJitFunction& TritonJitFunction::get_instance(std::string_view kernel_file,
                                                   std::string_view function_name) {
  static std::mutex registry_mutex;
  static std::unordered_map<std::string, std::unique_ptr<TritonJitFunction>> registry;
  std::error_code ec;
  std::string path = std::filesystem::weakly_canonical(std::filesystem::path(kernel_file), ec).string();
  if (ec) {
    path = std::string(kernel_file);
  }
  std::string key = path + '\0' + std::string(function_name);
  detail::GilRelease released;  // another thread may hold the registry while it needs the GIL
  std::lock_guard lock(registry_mutex);
  auto it = registry.find(key);
  if (it != registry.end()) {
    return *it->second;
  }
  // Not make_unique: the constructor is private.
  std::unique_ptr<TritonJitFunction> fn(new TritonJitFunction(path, std::string(function_name)));
  return *registry.emplace(std::move(key), std::move(fn)).first->second;
}

TritonJitFunction::TritonJitFunction(std::string kernel_file, std::string function_name)
    : kernel_file_(std::move(kernel_file)),
      function_name_(std::move(function_name)),
      impl_(std::make_unique<Impl>()) {
  if (auto bundled = detail::find_bundled_signature(kernel_file_, function_name_)) {
    impl_->signature = std::move(*bundled);
  } else if (auto stored = detail::load_stored_signature(kernel_file_, function_name_)) {
    impl_->signature = std::move(*stored);
  } else {
    impl_->signature.file = kernel_file_;
    impl_->signature.function = function_name_;
    const std::string without_python =
        "; the kernel store has no record of it either, so its parameters can only be read by Python. Build a "
        "kernel bundle that contains it (python -m tjit aot build) and embed or load it";
    TORCH_CHECK(jit_enabled(), "tjit: kernel ", function_name_, " from ", kernel_file_, ": ",
                detail::describe_bundle_coverage(kernel_file_, function_name_, {}, {}, {}),
                ", and JIT is off (TJIT_JIT=0)", without_python);
    try {
      impl_->load_python(/*known=*/false);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "tjit: kernel ", function_name_, " from ", kernel_file_, ": ",
                  detail::describe_bundle_coverage(kernel_file_, function_name_, {}, {}, {}), without_python,
                  ". Loading it through Python failed: ", e.what_without_backtrace());
    }
  }
  params_ = impl_->signature.params;
  impl_->tuning = detail::parse_tuning_spec(impl_->signature.tuning, params_, function_name_);
}

TritonJitFunction::~TritonJitFunction() = default;

size_t TritonJitFunction::num_compiled() const { return impl_->num_compiled.load(); }
size_t TritonJitFunction::num_loaded_from_store() const { return impl_->num_loaded_from_store.load(); }
size_t TritonJitFunction::num_loaded_from_bundles() const { return impl_->num_loaded_from_bundles.load(); }
bool TritonJitFunction::autotuned() const { return impl_->tuning.autotuned; }
const std::vector<KernelConfig>& TritonJitFunction::configs() const { return impl_->tuning.configs; }
size_t TritonJitFunction::num_tunings() const { return impl_->num_tunings.load(); }
size_t TritonJitFunction::num_tuning_runs() const { return impl_->num_tuning_runs.load(); }
size_t TritonJitFunction::num_tunings_loaded() const { return impl_->num_tunings_loaded.load(); }

std::vector<std::string> TritonJitFunction::caller_parameters() const {
  std::vector<std::string> names;
  for (int i : impl_->tuning.caller_params) {
    names.push_back(params_[i].name);
  }
  return names;
}

namespace {
// -1 until read from TJIT_JIT / TJIT_BUNDLED_TUNING; then 0 or 1.
std::atomic<int> jit_state{-1};
std::atomic<int> bundled_tuning_state{-1};

// On unless the variable is 0, off, false or no.
bool setting_from_environment(std::atomic<int>& state, const char* variable) {
  int current = state.load(std::memory_order_acquire);
  if (current < 0) {
    const char* v = std::getenv(variable);
    const std::string value = v == nullptr ? "" : v;
    current = (value == "0" || value == "off" || value == "OFF" || value == "false" || value == "no") ? 0 : 1;
    int expected = -1;
    state.compare_exchange_strong(expected, current);
    current = state.load(std::memory_order_acquire);
  }
  return current == 1;
}
}  // namespace

bool jit_enabled() { return setting_from_environment(jit_state, "TJIT_JIT"); }

void set_jit_enabled(bool enabled) { jit_state.store(enabled ? 1 : 0, std::memory_order_release); }

bool bundled_tuning_enabled() { return setting_from_environment(bundled_tuning_state, "TJIT_BUNDLED_TUNING"); }

void set_bundled_tuning_enabled(bool enabled) {
  bundled_tuning_state.store(enabled ? 1 : 0, std::memory_order_release);
}

namespace {

// Reads a pack's slots back into a Specialization: one argument (a tuple with its elements) per
// read(), depth first, as the pack wrote them.
class SlotReader {
 public:
  SlotReader(const detail::ArgumentPackBase& pack, const std::string& kernel, Specialization& spec)
      : key_(pack.key()), kernel_(kernel), spec_(spec) {}

  // The type of the argument at the next slot; `path` is (parameter index, element index, ...).
  std::string read(const KernelParam& p, std::vector<int>& path) {
    const uint64_t w0 = key_[kKeyHeaderWords + kKeyWordsPerArg * slot_];
    const uint64_t w1 = key_[kKeyHeaderWords + kKeyWordsPerArg * slot_ + 1];
    ++slot_;
    const auto kind = static_cast<ArgKind>(w0 & 0xff);
    const uint64_t sub = (w0 >> 8) & 0xff;
    std::string type;
    std::optional<ConstexprValue> constant;
    switch (kind) {
      case ArgKind::Tuple:
        type = "[";
        for (uint64_t e = 0; e < sub; ++e) {
          path.push_back(static_cast<int>(e));
          type += (e == 0 ? "" : ",") + read(p, path);
          path.pop_back();
        }
        return type + "]";
      case ArgKind::Pointer: {
        const char* dtype = triton_element_type(static_cast<c10::ScalarType>(sub));
        TORCH_CHECK(dtype != nullptr, "tjit: kernel ", kernel_, ": argument '", p.name, "' has dtype ",
                    static_cast<c10::ScalarType>(sub), ", which Triton kernels cannot take");
        type = std::string(p.is_const ? "*k" : "*") + dtype;
        break;
      }
      case ArgKind::Int:
        type = sub == static_cast<uint64_t>(IntType::I32)   ? "i32"
               : sub == static_cast<uint64_t>(IntType::I64) ? "i64"
                                                            : "u64";
        break;
      case ArgKind::TensorDescriptor: {
        // Triton's text: tensordesc<fp16[32, 16]> (element type, block shape).
        const char* dtype = triton_element_type(static_cast<c10::ScalarType>(sub));
        TORCH_CHECK(dtype != nullptr, "tjit: kernel ", kernel_, ": argument '", p.name, "' is a descriptor of a ",
                    static_cast<c10::ScalarType>(sub), " tensor, which Triton kernels cannot take");
        type = std::string("tensordesc<") + dtype + "[";
        const int rank = static_cast<int>((w0 >> 24) & 0xff);
        for (int i = 0; i < rank; ++i) {
          type += (i == 0 ? "" : ", ") + std::to_string(int64_t{1} << ((w1 >> (5 * i)) & 31));
        }
        return type + "]>";
      }
      case ArgKind::Bool: type = "u1"; break;
      case ArgKind::Float: type = "fp32"; break;
      case ArgKind::None: constant = std::monostate{}; break;
      case ArgKind::SpecializedOne: constant = int64_t{1}; break;
      case ArgKind::ConstexprInt: constant = static_cast<int64_t>(w1); break;
      case ArgKind::ConstexprFloat: {
        double d = 0;
        std::memcpy(&d, &w1, sizeof(d));
        constant = d;
        break;
      }
      case ArgKind::ConstexprBool: constant = w1 != 0; break;
      case ArgKind::ConstexprString: constant = detail::interned_constexpr_string(w1); break;
      case ArgKind::ConstexprDtype: constant = Dtype::from_index(static_cast<uint8_t>(w1)); break;
    }
    const bool top = path.size() == 1;
    if (constant) {
      if (top) {
        spec_.constexprs.emplace_back(path[0], std::move(*constant));
      } else {
        spec_.tuple_constexprs.emplace_back(path, std::move(*constant));
      }
      return "constexpr";
    }
    if ((w0 >> 16) & 1) {
      if (top) {
        spec_.divisible_by_16.push_back(path[0]);
      } else {
        spec_.tuple_divisible_by_16.push_back(path);
      }
    }
    // An annotation fixes the type of a runtime argument, as in Python.
    return top && !p.annotation_type.empty() ? p.annotation_type : type;
  }

 private:
  const uint64_t* key_;
  const std::string& kernel_;
  Specialization& spec_;
  size_t slot_ = 0;
};

}  // namespace

Specialization TritonJitFunction::specialization_of(const detail::ArgumentPackBase& pack) const {
  Specialization spec;
  SlotReader reader(pack, function_name_, spec);
  std::vector<int> path;
  for (size_t i = 0; i < pack.num_args(); ++i) {
    path.assign(1, static_cast<int>(i));
    spec.types.push_back(reader.read(params_[i], path));
  }
  return spec;
}

CachedKernel& TritonJitFunction::loaded_kernel(detail::ArgumentPackBase& pack, int device,
                                               const LaunchOptions& options) const {
  uint64_t* key = pack.mutable_key();
  key[0] = static_cast<uint64_t>(device);
  key[1] = detail::launch_options_word(options);
  const size_t n = pack.key_size();
  CachedKernel* k = impl_->last_launched.load(std::memory_order_acquire);
  if (k == nullptr || !k->has_key(key, n)) {
    const uint64_t hash = hash_words(key, n);
    k = impl_->find(hash, key, n);
    if (k == nullptr || !k->ready.load(std::memory_order_acquire)) {
      k = &compile_and_load(hash, pack, device, options);
    }
    impl_->last_launched.store(k, std::memory_order_release);
  }
  return *k;
}

int TritonJitFunction::resident_programs_per_sm_packed(const LaunchOptions& options,
                                                       detail::ArgumentPackBase& pack) const {
  pack.complete();
  if (pack.has_device() && pack.device().is_cpu()) {
    return 1;
  }
  return loaded_kernel(pack, cuda_device_of(pack, function_name_), options).resident_per_sm;
}

void TritonJitFunction::launch(Stream stream, Grid grid, const LaunchOptions& options,
                               detail::ArgumentPackBase& pack) const {
  pack.complete();
  if (pack.has_device() && pack.device().is_cpu()) {
    launch_interpreted(grid, options, pack);
    return;
  }
  const int device = cuda_device_of(pack, function_name_);
  if (grid.size() == 0) {
    return;  // nothing to run; Python Triton launches nothing either
  }
  const CachedKernel* k = &loaded_kernel(pack, device, options);

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
  // The function belongs to its device's primary context; make that context current for the
  // launch only if it is not already (another device's context may be current).
  CUcontext current = nullptr;
  cu.cuCtxGetCurrent(&current);
  const bool switch_context = current != k->context;
  if (switch_context) {
    detail::check_cuda(cu.cuCtxPushCurrent(k->context), "cuCtxPushCurrent", k->description);
  }
  const auto& m = k->meta;
  const unsigned block = 32u * static_cast<unsigned>(m.num_warps);
  CUresult result;
  if (m.num_ctas == 1 && !m.launch_cooperative_grid && !m.launch_pdl) {
    result = cu.cuLaunchKernel(k->function, grid.x, grid.y, grid.z, block, 1, 1, m.shared_memory,
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
    result = cu.cuLaunchKernelEx(&config, k->function, params, nullptr);
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

CachedKernel& TritonJitFunction::compile_and_load(uint64_t hash, const detail::ArgumentPackBase& pack,
                                                 int device, const LaunchOptions& options) const {
  CachedKernel& k = impl_->find_or_insert(hash, pack.key(), pack.key_size());
  detail::GilRelease released;  // a thread compiling this key may need the GIL this one holds
  std::lock_guard lock(k.compile_mutex);  // later threads missing on this key wait here
  if (k.ready.load(std::memory_order_acquire)) {
    return k;
  }
  const Specialization spec = specialization_of(pack);
  const CompileTarget target = detail::target_of_device(device);
  k.description = describe(spec, target) + " on device " + std::to_string(device);
  const auto start = std::chrono::steady_clock::now();
  std::string key;
  Origin origin = Origin::Compiled;
  CompiledKernel compiled = obtain(spec, target, options, k.description, /*use_store=*/true, key, origin);
  try {
    load_binary(k, compiled, device);
  } catch (const c10::Error& e) {
    if (origin != Origin::Store) {
      throw;
    }
    // Intact by its checksum, yet the driver refuses it: compile afresh, which replaces it.
    detail::report_unusable_stored_kernel(impl_->signature, key, e.what_without_backtrace());
    compiled = obtain(spec, target, options, k.description, /*use_store=*/false, key, origin);
    load_binary(k, compiled, device);
  }
  detail::note_launched_specialization(impl_->signature, spec, options);
  configure_function(k, compiled, device);
  k.resident_per_sm = resident_programs(k, compiled);
  compiled.binary = std::string();  // loaded; no need to keep the bytes
  k.meta = std::move(compiled);
  if (origin == Origin::Compiled && detail::compile_logging_enabled()) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[tjit] compiled %s (num_warps=%d, num_stages=%d) in %.0f ms\n", k.description.c_str(),
                 options.num_warps, options.num_stages, ms);
  }
  k.ready.store(true, std::memory_order_release);
  return k;
}

void TritonJitFunction::launch_interpreted(Grid grid, const LaunchOptions& options,
                                           const detail::ArgumentPackBase& pack) const {
  if (grid.size() == 0) {
    return;
  }
  std::vector<detail::InterpretedArg> args;
  args.reserve(pack.num_slots());
  const uint64_t* key = pack.key();
  size_t param = 0;
  std::vector<uint64_t> remaining;  // elements still to come in each open tuple
  // After an element (a leaf, or a tuple just completed): count it in its tuple, or as a parameter.
  auto element_done = [&] {
    while (!remaining.empty()) {
      if (--remaining.back() > 0) {
        return;
      }
      remaining.pop_back();  // that tuple is complete: an element of its parent
    }
    ++param;
  };
  for (size_t i = 0; i < pack.num_slots(); ++i) {
    const uint64_t w0 = key[kKeyHeaderWords + kKeyWordsPerArg * i];
    const uint64_t w1 = key[kKeyHeaderWords + kKeyWordsPerArg * i + 1];
    const uint64_t sub = (w0 >> 8) & 0xff;
    const KernelParam& p = params_[param];
    const uint64_t* slot = pack.value(i);
    const auto kind = static_cast<ArgKind>(w0 & 0xff);
    if (kind == ArgKind::Tuple) {
      args.emplace_back(detail::InterpretedTuple{static_cast<size_t>(sub)});
      remaining.push_back(sub + 1);  // +1: element_done counts the tuple itself once it is empty
      element_done();
      continue;
    }
    switch (kind) {
      case ArgKind::Tuple: break;
      case ArgKind::TensorDescriptor: args.emplace_back(pack.descriptor_at(i)); break;
      case ArgKind::Pointer:
        TORCH_CHECK(pack.tensor(i) != nullptr, "tjit: kernel ", function_name_, ": argument '", p.name,
                    "' is a raw DevicePointer, which Triton's interpreter (CPU tensors) cannot take");
        args.emplace_back(pack.tensor(i));
        break;
      case ArgKind::Int: {
        int64_t v = 0;
        std::memcpy(&v, slot, sizeof(v));
        if (sub == static_cast<uint64_t>(IntType::I32)) {
          int32_t narrow = 0;
          std::memcpy(&narrow, slot, sizeof(narrow));
          v = narrow;
        }
        if (sub == static_cast<uint64_t>(IntType::U64)) {
          args.emplace_back(static_cast<uint64_t>(v));
        } else {
          args.emplace_back(v);
        }
        break;
      }
      case ArgKind::Bool: args.emplace_back((*slot & 0xff) != 0); break;
      case ArgKind::Float:
        if (p.annotation_type == "fp64") {
          double d = 0;
          std::memcpy(&d, slot, sizeof(d));
          args.emplace_back(d);
        } else {
          float f = 0;
          std::memcpy(&f, slot, sizeof(f));
          args.emplace_back(static_cast<double>(f));
        }
        break;
      case ArgKind::None: args.emplace_back(std::monostate{}); break;
      case ArgKind::SpecializedOne: args.emplace_back(int64_t{1}); break;
      case ArgKind::ConstexprInt: args.emplace_back(static_cast<int64_t>(w1)); break;
      case ArgKind::ConstexprFloat: {
        double d = 0;
        std::memcpy(&d, &w1, sizeof(d));
        args.emplace_back(d);
        break;
      }
      case ArgKind::ConstexprBool: args.emplace_back(w1 != 0); break;
      case ArgKind::ConstexprString: args.emplace_back(detail::interned_constexpr_string(w1)); break;
      case ArgKind::ConstexprDtype: args.emplace_back(Dtype::from_index(static_cast<uint8_t>(w1))); break;
    }
    element_done();
  }
  TORCH_CHECK(jit_enabled(), "tjit: kernel ", function_name_, " from ", kernel_file_,
              " got CPU tensors, which run through Triton's interpreter; that needs Python and Triton, and JIT is "
              "off (TJIT_JIT=0)");
  detail::note_launched_specialization(impl_->signature, specialization_of(pack), options);
  try {
    detail::python_bridge().run_interpreted(impl_->ensure_python(), grid, options, args);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "tjit: kernel ", function_name_, " from ", kernel_file_, " on CPU: ",
                e.what_without_backtrace());
  }
}

}  // namespace tjit
