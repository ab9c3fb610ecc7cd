#include <tjit/current_stream.h>
#include <tjit/kernel_store.h>
#include <tjit/triton_jit_function.h>

#include "tuning/autotuner.h"
#include "binaries/constexpr_json.h"
#include "launch/cuda_driver.h"
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

// One compiled and loaded binary: immutable once `ready` is set, never removed, so the hot
// path may use it after dropping the cache lock.
struct detail::CachedKernel {
  std::vector<uint64_t> key;
  std::mutex compile_mutex;  // serialises the compile of this key only
  std::atomic<bool> ready{false};
  CUcontext context = nullptr;
  CUfunction function = nullptr;
  CompiledKernel meta;  // binary dropped after loading
  std::string description;  // for error messages

  bool has_key(const uint64_t* words, size_t n) const {
    return key.size() == n && std::memcmp(key.data(), words, n * sizeof(uint64_t)) == 0;
  }
};

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

uint64_t options_word(const LaunchOptions& o) {
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

const char* triton_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "fp32";
    case c10::ScalarType::Half: return "fp16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Double: return "fp64";
    case c10::ScalarType::Char: return "i8";
    case c10::ScalarType::Short: return "i16";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::UInt16: return "u16";
    case c10::ScalarType::UInt32: return "u32";
    case c10::ScalarType::UInt64: return "u64";
    case c10::ScalarType::Bool: return "u1";
    case c10::ScalarType::Float8_e5m2: return "fp8e5";
    case c10::ScalarType::Float8_e4m3fn: return "fp8e4nv";
    case c10::ScalarType::Float8_e5m2fnuz: return "fp8e5b16";
    case c10::ScalarType::Float8_e4m3fnuz: return "fp8e4b8";
    default: return nullptr;
  }
}

int current_cuda_device() {
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

CompileTarget target_of_device(int device) {
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

struct TritonJitFunction::Impl {
  mutable std::shared_mutex mutex;
  // hash -> the kernels whose key has that hash (almost always one)
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<CachedKernel>>> kernels;
  std::atomic<size_t> num_compiled{0};
  std::atomic<size_t> num_loaded_from_store{0};
  std::atomic<size_t> num_loaded_from_bundles{0};

  // @triton.autotune / @triton.heuristics, from the signature; the choice per tuning key and the
  // heuristics' values per argument values.
  detail::TuningSpec tuning;
  detail::WordKeyedTable<int> choices;
  detail::WordKeyedTable<std::vector<std::pair<int, ConstexprValue>>> heuristics;
  std::atomic<size_t> num_tunings{0};
  std::atomic<size_t> num_tuning_runs{0};
  std::atomic<size_t> num_tunings_loaded{0};

  // The signature the process uses (from the store or from Python); fixed at construction.
  detail::KernelSignature signature;
  // The Python side, loaded on the first compile or interpreted run (never, with a warm store).
  std::mutex python_mutex;
  std::atomic<bool> python_loaded{false};
  int64_t python_handle = -1;
  // The signature with the sources Python executed: what entries compiled here record.
  detail::KernelSignature compiled_signature;

  // Imports the kernel in the embedded interpreter. Call with python_mutex held (or from the
  // constructor); `known` says whether `signature` came from the store and must be confirmed.
  void load_python(bool known) {
    detail::KernelDefinition def = detail::python_bridge().load_kernel(signature.file, signature.function);
    detail::KernelSignature loaded{signature.file, signature.function, std::move(def.params), {},
                                   std::move(def.triton_version), std::move(def.tuning)};
    for (auto& [path, fingerprint] : def.sources) {
      TORCH_CHECK(detail::note_source_fingerprint(path, fingerprint), "tjit: ", path,
                  " changed while this process was using kernel ", signature.function,
                  " (it read the earlier version first); restart the process to use the new source");
      loaded.sources.push_back({path, fingerprint});
    }
    if (known) {
      TORCH_CHECK(loaded.params == signature.params && loaded.tuning == signature.tuning, "tjit: the parameters of ",
                  signature.function, " in ", signature.file,
                  " (or its autotune configs) changed while this process was using it; restart the process");
    } else {
      signature = loaded;
      detail::store_signature(loaded);
    }
    compiled_signature = std::move(loaded);
    python_handle = def.handle;
    python_loaded.store(true, std::memory_order_release);
  }

  int64_t ensure_python() {
    if (!python_loaded.load(std::memory_order_acquire)) {
      detail::GilRelease released;  // the thread loading it may need the GIL this one holds
      std::lock_guard lock(python_mutex);
      if (!python_loaded.load(std::memory_order_acquire)) {
        load_python(/*known=*/true);
      }
    }
    return python_handle;
  }

  // The kernel launched last (always a ready one). Most call sites launch one specialisation
  // over and over, so comparing the key with it skips the hash, the lock and the map.
  std::atomic<CachedKernel*> last_launched{nullptr};

  CachedKernel* find(uint64_t hash, const uint64_t* key, size_t n) const {
    std::shared_lock lock(mutex);
    auto it = kernels.find(hash);
    if (it == kernels.end()) {
      return nullptr;
    }
    for (const auto& k : it->second) {
      if (k->has_key(key, n)) {
        return k.get();
      }
    }
    return nullptr;
  }

  CachedKernel& find_or_insert(uint64_t hash, const uint64_t* key, size_t n) {
    std::unique_lock lock(mutex);
    auto& bucket = kernels[hash];
    for (const auto& k : bucket) {
      if (k->has_key(key, n)) {
        return *k;
      }
    }
    auto k = std::make_unique<CachedKernel>();
    k->key.assign(key, key + n);
    bucket.push_back(std::move(k));
    return *bucket.back();
  }
};

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

Specialization TritonJitFunction::specialization_of(const detail::ArgumentPackBase& pack) const {
  Specialization spec;
  const uint64_t* key = pack.key();
  for (size_t i = 0; i < pack.num_args(); ++i) {
    const KernelParam& p = params_[i];
    const uint64_t w0 = key[kKeyHeaderWords + kKeyWordsPerArg * i];
    const uint64_t w1 = key[kKeyHeaderWords + kKeyWordsPerArg * i + 1];
    const auto kind = static_cast<ArgKind>(w0 & 0xff);
    const uint64_t sub = (w0 >> 8) & 0xff;
    const int index = static_cast<int>(i);
    std::string type;
    switch (kind) {
      case ArgKind::Pointer: {
        const char* dtype = triton_dtype(static_cast<c10::ScalarType>(sub));
        TORCH_CHECK(dtype != nullptr, "tjit: kernel ", function_name_, ": argument '", p.name, "' has dtype ",
                    static_cast<c10::ScalarType>(sub), ", which Triton kernels cannot take");
        type = std::string(p.is_const ? "*k" : "*") + dtype;
        break;
      }
      case ArgKind::Int:
        type = sub == static_cast<uint64_t>(IntType::I32)   ? "i32"
               : sub == static_cast<uint64_t>(IntType::I64) ? "i64"
                                                            : "u64";
        break;
      case ArgKind::Bool: type = "u1"; break;
      case ArgKind::Float: type = "fp32"; break;
      case ArgKind::None:
        type = "constexpr";
        spec.constexprs.emplace_back(index, std::monostate{});
        break;
      case ArgKind::SpecializedOne:
        type = "constexpr";
        spec.constexprs.emplace_back(index, int64_t{1});
        break;
      case ArgKind::ConstexprInt:
        type = "constexpr";
        spec.constexprs.emplace_back(index, static_cast<int64_t>(w1));
        break;
      case ArgKind::ConstexprFloat: {
        double d = 0;
        std::memcpy(&d, &w1, sizeof(d));
        type = "constexpr";
        spec.constexprs.emplace_back(index, d);
        break;
      }
      case ArgKind::ConstexprBool:
        type = "constexpr";
        spec.constexprs.emplace_back(index, w1 != 0);
        break;
    }
    // An annotation fixes the type of a runtime argument, as in Python.
    if (type != "constexpr" && !p.annotation_type.empty()) {
      type = p.annotation_type;
    }
    if ((w0 >> 16) & 1) {
      spec.divisible_by_16.push_back(index);
    }
    spec.types.push_back(std::move(type));
  }
  return spec;
}

CompiledKernel TritonJitFunction::compile_packed(const CompileTarget& target, const LaunchOptions& options,
                                                 detail::ArgumentPackBase& pack) const {
  pack.check_complete();
  options_word(options);  // validates
  const Specialization spec = specialization_of(pack);
  std::string key;
  Origin origin = Origin::Compiled;
  return obtain(spec, target, options, describe(spec, target), /*use_store=*/true, key, origin);
}

CompiledKernel TritonJitFunction::obtain(const Specialization& spec, const CompileTarget& target,
                                         const LaunchOptions& options, const std::string& description,
                                         bool use_store, std::string& key, Origin& origin) const {
  key = detail::kernel_store_key(impl_->signature, spec, options, target);
  if (use_store) {
    if (auto bundled = detail::find_bundled_kernel(kernel_file_, function_name_, spec, options, target)) {
      impl_->num_loaded_from_bundles.fetch_add(1);
      origin = Origin::Bundle;
      return std::move(*bundled);
    }
    if (auto entry = detail::load_stored_kernel(impl_->signature, key)) {
      impl_->num_loaded_from_store.fetch_add(1);
      origin = Origin::Store;
      return std::move(entry->compiled);
    }
  }
  origin = Origin::Compiled;
  if (!jit_enabled()) {
    fail_without_compile(spec, target, options, description, "JIT compiles are off (TJIT_JIT=0)");
  }
  int64_t handle = -1;
  try {
    handle = impl_->ensure_python();
  } catch (const c10::Error& e) {
    fail_without_compile(spec, target, options, description,
                         std::string("compiling it needs Python and Triton, which failed: ") + e.what_without_backtrace());
  }
  CompiledKernel compiled;
  try {
    compiled = detail::python_bridge().compile(handle, spec, target, options);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "tjit: compiling ", description, " failed: ", e.what_without_backtrace());
  }
  impl_->num_compiled.fetch_add(1);
  detail::store_kernel(detail::KernelEntry{key, impl_->compiled_signature, spec, options, compiled});
  return compiled;
}

void TritonJitFunction::fail_without_compile(const Specialization& spec, const CompileTarget& target,
                                             const LaunchOptions& options, const std::string& description,
                                             const std::string& why) const {
  const auto store = kernel_store_directory();
  TORCH_CHECK(false, "tjit: no compiled kernel for ", description, " with num_warps=", options.num_warps,
              ", num_stages=", options.num_stages, ": ",
              detail::describe_bundle_coverage(kernel_file_, function_name_, spec, options, target), "; ",
              store ? "the kernel store (" + *store + ") has none" : std::string("the kernel store is off"), "; and ",
              why, ". To ship it, add this entry to the manifest the bundle is built from (or record one with "
              "TJIT_RECORD=<file> where Python and Triton are installed) and rebuild the bundle with "
              "python -m tjit aot build --target ", target.backend, ":", target.arch, ":\n  ",
              detail::manifest_entry_json(kernel_file_, function_name_, params_, spec, options));
}

std::string TritonJitFunction::describe(const Specialization& spec, const CompileTarget& target) const {
  return function_name_ + "(" + spec.describe(parameter_names(params_)) + ") from " + kernel_file_ + " for " + target.to_string();
}

void TritonJitFunction::launch(Stream stream, Grid grid, const LaunchOptions& options,
                               detail::ArgumentPackBase& pack) const {
  pack.check_complete();
  if (pack.has_device() && pack.device().is_cpu()) {
    launch_interpreted(grid, options, pack);
    return;
  }
  TORCH_CHECK(!pack.has_device() || pack.device().is_cuda(), "tjit: kernel ", function_name_,
              " got tensors on ", pack.device(), "; tjit launches on CUDA devices and CPU (interpreter)");
  if (grid.size() == 0) {
    return;  // nothing to run; Python Triton launches nothing either
  }
  const int device = pack.has_device() ? pack.device().index() : current_cuda_device();

  uint64_t* key = pack.mutable_key();
  key[0] = static_cast<uint64_t>(device);
  key[1] = options_word(options);
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
  params[pack.num_launch_args()] = &global_ptr;
  params[pack.num_launch_args() + 1] = &profile_ptr;

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
  const CompileTarget target = target_of_device(device);
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
  args.reserve(pack.num_args());
  const uint64_t* key = pack.key();
  for (size_t i = 0; i < pack.num_args(); ++i) {
    const uint64_t w0 = key[kKeyHeaderWords + kKeyWordsPerArg * i];
    const uint64_t w1 = key[kKeyHeaderWords + kKeyWordsPerArg * i + 1];
    const uint64_t sub = (w0 >> 8) & 0xff;
    const KernelParam& p = params_[i];
    const uint64_t* slot = pack.value(i);
    switch (static_cast<ArgKind>(w0 & 0xff)) {
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
    }
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

namespace {

using detail::CapturedArg;

void add_captured(detail::ArgumentPackBase& pack, const CapturedArg& a) {
  switch (a.kind) {
    case CapturedArg::Kind::Tensor: pack.add_tensor(*a.tensor); break;
    case CapturedArg::Kind::Pointer: pack.add_pointer(a.pointer); break;
    case CapturedArg::Kind::Signed: pack.add_signed(a.signed_value); break;
    case CapturedArg::Kind::Unsigned: pack.add_unsigned(a.unsigned_value); break;
    case CapturedArg::Kind::Float: pack.add_float(a.float_value); break;
    case CapturedArg::Kind::Bool: pack.add_bool(a.bool_value); break;
    case CapturedArg::Kind::None: pack.add_none(); break;
  }
}

void add_constexpr(detail::ArgumentPackBase& pack, const ConstexprValue& value) {
  std::visit(
      [&pack](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          pack.add_none();
        } else if constexpr (std::is_same_v<T, bool>) {
          pack.add_bool(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          pack.add_signed(v);
        } else {
          pack.add_float(v);
        }
      },
      value);
}

// Two key words of an argument: its kind, and its value (a scalar) or its dtype (a tensor).
std::pair<uint64_t, uint64_t> argument_words(const CapturedArg& a) {
  uint64_t value = 0;
  switch (a.kind) {
    case CapturedArg::Kind::Tensor: value = static_cast<uint64_t>(a.tensor->scalar_type()); break;
    case CapturedArg::Kind::Pointer: value = static_cast<uint64_t>(a.pointer.dtype); break;
    case CapturedArg::Kind::Signed: value = static_cast<uint64_t>(a.signed_value); break;
    case CapturedArg::Kind::Unsigned: value = a.unsigned_value; break;
    case CapturedArg::Kind::Float: std::memcpy(&value, &a.float_value, sizeof(value)); break;
    case CapturedArg::Kind::Bool: value = a.bool_value ? 1 : 0; break;
    case CapturedArg::Kind::None: break;
  }
  return {static_cast<uint64_t>(a.kind), value};
}

bool is_memory(const CapturedArg& a) {
  return a.kind == CapturedArg::Kind::Tensor || a.kind == CapturedArg::Kind::Pointer;
}

// A caller's scalar as the grid and the heuristics see it.
std::optional<ConstexprValue> scalar_value(const CapturedArg& a) {
  switch (a.kind) {
    case CapturedArg::Kind::Signed: return ConstexprValue(a.signed_value);
    case CapturedArg::Kind::Unsigned: return ConstexprValue(static_cast<int64_t>(a.unsigned_value));
    case CapturedArg::Kind::Float: return ConstexprValue(a.float_value);
    case CapturedArg::Kind::Bool: return ConstexprValue(a.bool_value);
    case CapturedArg::Kind::None: return ConstexprValue(std::monostate{});
    default: return std::nullopt;
  }
}

std::vector<detail::InterpretedArg> python_arguments(const CapturedArg* args, size_t n) {
  std::vector<detail::InterpretedArg> out;
  for (size_t i = 0; i < n; ++i) {
    const CapturedArg& a = args[i];
    switch (a.kind) {
      case CapturedArg::Kind::Tensor: out.emplace_back(a.tensor); break;
      case CapturedArg::Kind::Signed: out.emplace_back(a.signed_value); break;
      case CapturedArg::Kind::Unsigned: out.emplace_back(a.unsigned_value); break;
      case CapturedArg::Kind::Float: out.emplace_back(a.float_value); break;
      case CapturedArg::Kind::Bool: out.emplace_back(a.bool_value); break;
      default: out.emplace_back(std::monostate{}); break;  // a DevicePointer has no Python form
    }
  }
  return out;
}

std::string describe_argument(const CapturedArg& a) {
  switch (a.kind) {
    case CapturedArg::Kind::Tensor: return c10::toString(a.tensor->scalar_type());
    case CapturedArg::Kind::Pointer: return c10::toString(a.pointer.dtype);
    case CapturedArg::Kind::Signed: return constexpr_text(a.signed_value);
    case CapturedArg::Kind::Unsigned: return std::to_string(a.unsigned_value);
    case CapturedArg::Kind::Float: return constexpr_text(a.float_value);
    case CapturedArg::Kind::Bool: return constexpr_text(a.bool_value);
    case CapturedArg::Kind::None: return constexpr_text(std::monostate{});
  }
  return "";
}

}  // namespace

int TritonJitFunction::run_captured(Stream stream, const detail::GridSource& grid, const CapturedArg* args,
                                    size_t num_args, RunMode mode) const {
  const detail::TuningSpec& spec = impl_->tuning;
  TORCH_CHECK(spec.unsupported.empty(), "tjit: kernel ", function_name_, " cannot be called through run(): ",
              spec.unsupported, ". Call it with every argument (operator()) instead");
  if (num_args != spec.caller_params.size()) {
    std::string names;
    for (const std::string& name : caller_parameters()) {
      names += (names.empty() ? "" : ", ") + name;
    }
    TORCH_CHECK(false, "tjit: kernel ", function_name_, " takes ", spec.caller_params.size(), " arguments in run() (",
                names, "; its configs and heuristics set the others), got ", num_args);
  }
  // The device of the tensor arguments (-1: CPU), for the tuning key and the tuning itself.
  int device = -2;
  for (size_t i = 0; i < num_args && device == -2; ++i) {
    if (args[i].kind == CapturedArg::Kind::Tensor) {
      device = args[i].tensor->is_cuda() ? args[i].tensor->device().index() : -1;
    } else if (args[i].kind == CapturedArg::Kind::Pointer) {
      device = current_cuda_device();
    }
  }
  if (device == -2) {
    device = current_cuda_device();
  }
  int config = 0;
  if (spec.autotuned && spec.configs.size() > 1) {
    // The tuning key: as Python Triton's, the values of the `key` arguments and the dtypes of the
    // tensor arguments; and the device.
    std::array<uint64_t, 1 + 2 * detail::kMaxRunParams + detail::kMaxRunParams> words;
    size_t n = 0;
    words[n++] = static_cast<uint64_t>(device + 1);
    for (int position : spec.key_args) {
      TORCH_CHECK(!is_memory(args[position]), "tjit: kernel ", function_name_, ": autotune key argument '",
                  params_[spec.caller_params[position]].name, "' is a tensor; tjit tunes on scalar keys");
      const auto [kind, value] = argument_words(args[position]);
      words[n++] = kind;
      words[n++] = value;
    }
    for (size_t i = 0; i < num_args; ++i) {
      if (is_memory(args[i])) {
        words[n++] = argument_words(args[i]).second;
      }
    }
    auto& choice = impl_->choices.find_or_insert(words.data(), n);
    if (!choice.ready.load(std::memory_order_acquire)) {
      detail::GilRelease released;  // the thread tuning this key may need the GIL
      std::lock_guard lock(choice.mutex);
      if (!choice.ready.load(std::memory_order_acquire)) {
        const int chosen = tune_key(stream, grid, args, device, /*may_time=*/mode != RunMode::Lookup);
        if (chosen < 0) {
          return -1;  // Lookup, and nothing chosen or stored yet
        }
        choice.value = chosen;
        choice.ready.store(true, std::memory_order_release);
      }
    }
    config = choice.value;
  }
  if (mode == RunMode::Launch) {
    std::array<ConstexprValue, detail::kMaxRunParams> values;
    std::array<bool, detail::kMaxRunParams> has_value;
    detail::ArgumentPack<detail::kMaxRunParams> pack(params_, function_name_.c_str());
    assemble(args, config, pack, values.data(), has_value.data());
    const LaunchOptions& options = spec.configs[config].options;
    const Grid g = grid(KernelMeta(params_, values.data(), has_value.data(), options, function_name_.c_str()));
    launch(stream, g, options, pack);
  }
  return config;
}

void TritonJitFunction::assemble(const CapturedArg* args, int config, detail::ArgumentPackBase& pack,
                                 ConstexprValue* values, bool* has_value) const {
  const detail::TuningSpec& spec = impl_->tuning;
  std::array<bool, detail::kMaxRunParams> set{};
  for (const auto& [index, value] : spec.config_values[config]) {
    values[index] = value;
    set[index] = true;
  }
  if (!spec.heuristic_params.empty()) {
    for (const auto& [index, value] : heuristic_values(args, config)) {
      values[index] = value;
      set[index] = true;
    }
  }
  size_t next = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (set[i]) {
      add_constexpr(pack, values[i]);
      has_value[i] = true;
      continue;
    }
    const CapturedArg& a = args[next++];
    add_captured(pack, a);
    const auto scalar = scalar_value(a);
    has_value[i] = scalar.has_value();
    if (scalar) {
      values[i] = *scalar;
    }
  }
}

const std::vector<std::pair<int, ConstexprValue>>& TritonJitFunction::heuristic_values(const CapturedArg* args,
                                                                                       int config) const {
  const detail::TuningSpec& spec = impl_->tuning;
  const size_t num_args = spec.caller_params.size();
  std::array<uint64_t, 2 * detail::kMaxRunParams + 1> words;
  size_t n = 0;
  for (size_t i = 0; i < num_args; ++i) {
    const auto [kind, value] = argument_words(args[i]);
    words[n++] = kind;
    words[n++] = value;
  }
  const int seen_config = spec.heuristics_see_config ? config : -1;
  words[n++] = static_cast<uint64_t>(seen_config + 1);
  auto& entry = impl_->heuristics.find_or_insert(words.data(), n);
  if (!entry.ready.load(std::memory_order_acquire)) {
    detail::GilRelease released;
    std::lock_guard lock(entry.mutex);
    if (!entry.ready.load(std::memory_order_acquire)) {
      std::string arguments;  // the kernel store's key
      std::string named;      // a bundle's key and the manifest's form: "name=value, ..."
      nlohmann::ordered_json named_json = nlohmann::ordered_json::object();
      for (size_t i = 0; i < num_args; ++i) {
        const std::string text = describe_argument(args[i]);
        const std::string& name = params_[spec.caller_params[i]].name;
        arguments += text + " ";
        named += (i == 0 ? "" : ", ") + name + "=" + text;
        named_json[name] = text;
      }
      const std::string record_key = decision_key("heuristic values") + "config " + std::to_string(seen_config) +
                                     "\narguments " + arguments + "\n";
      const std::string bundle_key = "config " + std::to_string(seen_config) + "\narguments " + named;
      std::optional<std::vector<std::pair<int, ConstexprValue>>> found;
      if (auto bundled = detail::find_bundled_decision(kernel_file_, function_name_, "heuristics", bundle_key)) {
        found = heuristic_values_from_names(*bundled);
      }
      if (!found) {
        found = stored_heuristic_values(record_key);
      }
      if (found) {
        entry.value = std::move(*found);
      } else {
        TORCH_CHECK(jit_enabled(), "tjit: kernel ", function_name_, " from ", kernel_file_,
                    " has @triton.heuristics, which run in Python; no kernel bundle or kernel store has their values "
                    "for these arguments (", named, "; config ", seen_config, "), and JIT is off (TJIT_JIT=0). Record "
                    "a run that makes this call (TJIT_RECORD=<manifest>, JIT on) and rebuild the bundle (python -m "
                    "tjit aot build), or add to its manifest {\"file\": \"", kernel_file_, "\", \"function\": \"",
                    function_name_, "\", \"heuristics\": {\"config\": ", seen_config, ", \"arguments\": ",
                    named_json.dump(), ", \"values\": {...what the heuristics return...}}}");
        try {
          entry.value = detail::python_bridge().heuristic_values(impl_->ensure_python(),
                                                                 python_arguments(args, num_args), seen_config);
        } catch (const c10::Error& e) {
          TORCH_CHECK(false, "tjit: kernel ", function_name_, ": ", e.what_without_backtrace());
        }
        nlohmann::json values = nlohmann::json::array();
        for (const auto& [index, value] : entry.value) {
          values.push_back({index, detail::constexpr_value_json<nlohmann::json>(value)});
        }
        detail::store_decision_record(impl_->signature, {record_key, values.dump()});
      }
      nlohmann::ordered_json by_name = nlohmann::ordered_json::object();
      for (const auto& [index, value] : entry.value) {
        by_name[params_[index].name] = detail::constexpr_value_json<nlohmann::ordered_json>(value);
      }
      detail::note_decision(impl_->signature, "heuristics",
                            nlohmann::ordered_json{{"config", seen_config}, {"arguments", named_json},
                                                   {"values", by_name}}.dump());
      entry.ready.store(true, std::memory_order_release);
    }
  }
  return entry.value;
}

std::string TritonJitFunction::decision_key(const char* kind) const {
  std::string sources;
  for (const detail::SourceFile& f : impl_->signature.sources) {
    sources += f.path + "@" + f.fingerprint + " ";
  }
  return std::string("tjit ") + kind + " v1\nfile " + kernel_file_ + "\nfunction " + function_name_ + "\nsources " +
         sources + "\ntriton " + impl_->signature.triton_version + "\n";
}

std::optional<std::vector<std::pair<int, ConstexprValue>>> TritonJitFunction::heuristic_values_from_names(
    const std::string& value_json) const {
  const auto values = nlohmann::json::parse(value_json, nullptr, /*allow_exceptions=*/false);
  if (!values.is_object()) {
    return std::nullopt;
  }
  std::vector<std::pair<int, ConstexprValue>> out;
  for (int index : impl_->tuning.heuristic_params) {
    const auto it = values.find(params_[index].name);
    const auto value = it != values.end() ? detail::constexpr_value_from_json(*it) : std::nullopt;
    if (!value) {
      return std::nullopt;  // not for this kernel's heuristics (the bundle's builder checks this)
    }
    out.emplace_back(index, *value);
  }
  return out;
}

std::optional<std::vector<std::pair<int, ConstexprValue>>> TritonJitFunction::stored_heuristic_values(
    const std::string& key) const {
  const auto record = detail::load_decision_record(impl_->signature, key);
  if (!record) {
    return std::nullopt;
  }
  const auto values = nlohmann::json::parse(record->value, nullptr, /*allow_exceptions=*/false);
  std::vector<std::pair<int, ConstexprValue>> out;
  for (const auto& item : values.is_array() ? values : nlohmann::json::array()) {
    const int index = item.is_array() && item.size() == 2 && item[0].is_number_integer() ? item[0].get<int>() : -1;
    const auto value = index >= 0 ? detail::constexpr_value_from_json(item[1]) : std::nullopt;
    if (!value || static_cast<size_t>(index) >= params_.size()) {
      return std::nullopt;  // not what this runtime writes: ask Python again (and rewrite it)
    }
    out.emplace_back(index, *value);
  }
  if (out.size() != impl_->tuning.heuristic_params.size()) {
    return std::nullopt;
  }
  return out;
}

int TritonJitFunction::tune_key(Stream stream, const detail::GridSource& grid, const CapturedArg* args,
                                int device, bool may_time, const std::string* for_target) const {
  const detail::TuningSpec& spec = impl_->tuning;
  const auto& configs = spec.configs;
  const size_t num_args = spec.caller_params.size();
  std::string key_text;
  for (int position : spec.key_args) {
    key_text += params_[spec.caller_params[position]].name + "=" + describe_argument(args[position]) + ", ";
  }
  key_text += "dtypes:";
  for (size_t i = 0; i < num_args; ++i) {
    if (is_memory(args[i])) {
      key_text += " " + describe_argument(args[i]);
    }
  }
  const std::string target = for_target != nullptr ? *for_target
                             : device >= 0         ? target_of_device(device).to_string()
                                                   : std::string("interpreter");
  const std::string record_key = decision_key("autotune choice") + "target " + target + "\nconfigs " +
                                 spec.configs_text + "\nkey " + key_text + "\n";
  const auto chosen = [&](int config) {
    detail::note_decision(impl_->signature, "autotune",
                          nlohmann::ordered_json{{"target", target}, {"key", key_text},
                                                 {"config", configs[config].describe()}}.dump());
    return config;
  };
  if (bundled_tuning_enabled()) {
    if (auto bundled = detail::find_bundled_decision(kernel_file_, function_name_, "autotune",
                                                     "target " + target + "\nkey " + key_text)) {
      const auto value = nlohmann::json::parse(*bundled, nullptr, /*allow_exceptions=*/false);
      for (size_t c = 0; value.is_string() && c < configs.size(); ++c) {
        if (configs[c].describe() == value.get<std::string>()) {
          impl_->num_tunings_loaded.fetch_add(1);
          return chosen(static_cast<int>(c));
        }
      }
    }
  }
  if (auto record = detail::load_decision_record(impl_->signature, record_key)) {
    const auto value = nlohmann::json::parse(record->value, nullptr, /*allow_exceptions=*/false);
    const int config = value.is_object() ? value.value("config", -1) : -1;
    if (config >= 0 && static_cast<size_t>(config) < configs.size() &&
        value.value("config_text", std::string()) == configs[config].describe()) {
      impl_->num_tunings_loaded.fetch_add(1);
      return chosen(config);
    }
  }
  if (!may_time) {
    return -1;
  }
  if (device >= 0) {
    TORCH_CHECK(!stream_is_capturing(stream), "tjit: kernel ", function_name_,
                " needs autotuning for a new key (", key_text, "), but its stream is being captured into a CUDA graph, ",
                "where tuning cannot time anything. Run it once with these shapes before the capture, or call tune() "
                "with the same arguments first (or give the kernel store a choice made earlier)");
  }
  std::vector<int> candidates;
  if (spec.prune) {
    TORCH_CHECK(jit_enabled(), "tjit: kernel ", function_name_, " needs autotuning for a new key (", key_text,
                "), and its prune_configs_by runs in Python, but JIT is off (TJIT_JIT=0)");
    try {
      candidates = detail::python_bridge().prune_configs(impl_->ensure_python(), python_arguments(args, num_args));
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "tjit: kernel ", function_name_, ": ", e.what_without_backtrace());
    }
    TORCH_CHECK(!candidates.empty(), "tjit: kernel ", function_name_, ": prune_configs_by kept no config for key (",
                key_text, "); it must keep at least one");
  } else {
    for (size_t c = 0; c < configs.size(); ++c) {
      candidates.push_back(static_cast<int>(c));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::optional<detail::PrimaryContextScope> context;
  if (device >= 0) {
    context.emplace(device);
  }
  detail::ArgumentResetter resetter(spec, args, stream, function_name_.c_str());
  std::vector<double> timings(configs.size(), std::numeric_limits<double>::infinity());
  std::string failures;
  size_t runs = 0;
  for (int c : candidates) {
    std::array<ConstexprValue, detail::kMaxRunParams> values;
    std::array<bool, detail::kMaxRunParams> has_value;
    detail::ArgumentPack<detail::kMaxRunParams> pack(params_, function_name_.c_str());
    const LaunchOptions& options = configs[c].options;
    // A failing heuristic or grid is the caller's error, not the config's: it propagates.
    assemble(args, c, pack, values.data(), has_value.data());
    const Grid g = grid(KernelMeta(params_, values.data(), has_value.data(), options, function_name_.c_str()));
    try {
      auto prepare = [&] { resetter.reset(); };
      auto run_once = [&] { launch(stream, g, options, pack); };
      timings[c] = candidates.size() == 1 ? 0.0
                   : device >= 0
                       ? detail::time_on_gpu(stream, device, prepare, run_once, spec.warmup_ms, spec.rep_ms, runs)
                       : detail::time_on_cpu(prepare, run_once, runs);
    } catch (const c10::Error& e) {
      const std::string reason = e.what_without_backtrace();
      failures += "\n  " + configs[c].describe() + ": " + reason;
      std::fprintf(stderr, "[tjit] autotuning %s: skipping config %s: %s\n", function_name_.c_str(),
                   configs[c].describe().c_str(), reason.c_str());
    }
  }
  impl_->num_tuning_runs.fetch_add(runs);
  const int best = static_cast<int>(std::min_element(timings.begin(), timings.end()) - timings.begin());
  TORCH_CHECK(std::isfinite(timings[best]), "tjit: kernel ", function_name_, ": every config failed for key (",
              key_text, "):", failures);
  resetter.reset();  // the caller's own run starts from the arguments it passed
  impl_->num_tunings.fetch_add(1);
  nlohmann::json timings_json = nlohmann::json::array();
  for (double t : timings) {
    timings_json.push_back(std::isfinite(t) ? nlohmann::json(t) : nlohmann::json());  // null: failed or pruned
  }
  detail::store_decision_record(
      impl_->signature,
      {record_key,
       nlohmann::json{{"config", best}, {"config_text", configs[best].describe()}, {"timings_ms", timings_json}}.dump()});
  if (detail::compile_logging_enabled()) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[tjit] autotuned %s for key (%s) on %s: %zu of %zu configs timed in %.0f ms (%zu runs); "
                 "best %s at %.4f ms\n", function_name_.c_str(), key_text.c_str(), target.c_str(), candidates.size(),
                 configs.size(), ms, runs, configs[best].describe().c_str(), timings[best]);
  }
  return chosen(best);
}

CompiledKernel TritonJitFunction::compile_run_captured(const CompileTarget& target, const CapturedArg* args,
                                                      size_t num_args) const {
  const detail::TuningSpec& spec = impl_->tuning;
  TORCH_CHECK(spec.unsupported.empty(), "tjit: kernel ", function_name_, " cannot be called through compile_run(): ",
              spec.unsupported);
  TORCH_CHECK(num_args == spec.caller_params.size(), "tjit: kernel ", function_name_, " takes ",
              spec.caller_params.size(), " arguments in compile_run() (as in run()), got ", num_args);
  int config = 0;
  if (spec.autotuned && spec.configs.size() > 1) {
    const std::string target_text = target.to_string();
    config = tune_key(nullptr, detail::GridSource(Grid(1)), args, -1, /*may_time=*/false, &target_text);
    if (config < 0) {
      std::string key_text;
      for (int position : spec.key_args) {
        key_text += params_[spec.caller_params[position]].name + "=" + describe_argument(args[position]) + ", ";
      }
      TORCH_CHECK(false, "tjit: kernel ", function_name_, " is autotuned, and no kernel bundle or kernel store has a "
                  "choice for its key (", key_text, "...) on ", target_text, "; compile_run() cannot time configs. "
                  "Run it on such a GPU first (under TJIT_RECORD to ship the choice in a bundle)");
    }
  }
  std::array<ConstexprValue, detail::kMaxRunParams> values;
  std::array<bool, detail::kMaxRunParams> has_value;
  detail::ArgumentPack<detail::kMaxRunParams> pack(params_, function_name_.c_str());
  assemble(args, config, pack, values.data(), has_value.data());
  return compile_packed(target, spec.configs[config].options, pack);
}

}  // namespace tjit
