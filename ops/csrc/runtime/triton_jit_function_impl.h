#pragma once
// TritonJitFunction's insides, shared by the files that implement it: triton_jit_function.cpp
// (the per-device cache, loading and launching), lookup_chain.cpp (where a binary comes from)
// and tuning/tuned_run.cpp (run(), tune(), compile_run(): configs, heuristics, choices).

#include "binaries/kernel_entry.h"
#include "launch/cuda_driver.h"
#include "python/python_bridge.h"
#include "python/python_gil.h"
#include "binaries/kernel_store_detail.h"
#include "binaries/source_fingerprint.h"
#include "tuning/autotuner.h"

#include <tjit/triton_jit_function.h>

#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tjit {
namespace detail {

// The device current on this thread (its context's; 0 when there is no context yet).
int current_cuda_device();
// The compile target of a CUDA device.
CompileTarget target_of_device(int device);
// Launch options as one word of a specialisation key; throws c10::Error for options out of range.
uint64_t launch_options_word(const LaunchOptions& options);

}  // namespace detail

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
  int resident_per_sm = 0;  // programs an SM holds at once (the driver's occupancy), set at load

  bool has_key(const uint64_t* words, size_t n) const {
    return key.size() == n && std::memcmp(key.data(), words, n * sizeof(uint64_t)) == 0;
  }
};

struct TritonJitFunction::Impl {
  mutable std::shared_mutex mutex;
  // hash -> the kernels whose key has that hash (almost always one)
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<detail::CachedKernel>>> kernels;
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
  std::atomic<detail::CachedKernel*> last_launched{nullptr};

  detail::CachedKernel* find(uint64_t hash, const uint64_t* key, size_t n) const {
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

  detail::CachedKernel& find_or_insert(uint64_t hash, const uint64_t* key, size_t n) {
    std::unique_lock lock(mutex);
    auto& bucket = kernels[hash];
    for (const auto& k : bucket) {
      if (k->has_key(key, n)) {
        return *k;
      }
    }
    auto k = std::make_unique<detail::CachedKernel>();
    k->key.assign(key, key + n);
    bucket.push_back(std::move(k));
    return *bucket.back();
  }
};

}  // namespace tjit
