#pragma once
// A TritonJitFunction's cache of loaded binaries, keyed by a pack's key words (device and launch
// options, then the arguments' specialisation). Entries are immutable once ready and never
// removed, so a launch uses one after dropping the lock.

#include "launch/cuda_driver.h"

#include <tjit/compiled_kernel.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tjit::detail {

// The binary loaded into a context other than its device's primary one (a green context, a
// program's own); function is nullptr for a context of another device.
struct ContextFunction {
  unsigned long long context_id = 0;
  CUfunction function = nullptr;
};

// One compiled and loaded binary.
struct CachedKernel {
  std::vector<uint64_t> key;
  std::mutex compile_mutex;  // serialises the compile of this key, and loads into other contexts
  std::atomic<bool> ready{false};
  CUcontext context = nullptr;  // the device's primary context
  CUfunction function = nullptr;  // loaded there
  CompiledKernel meta;  // its binary kept, for loading into other contexts
  // Loads into the other contexts launches came from, appended under compile_mutex.
  mutable std::shared_mutex other_contexts_mutex;
  std::vector<ContextFunction> other_contexts;
  std::string description;  // for error messages
  int resident_per_sm = 0;  // programs an SM holds at once (the driver's occupancy), set at load

  bool has_key(const uint64_t* words, size_t n) const {
    return key.size() == n && std::memcmp(key.data(), words, n * sizeof(uint64_t)) == 0;
  }
};

class KernelCache {
 public:
  static uint64_t hash(const uint64_t* words, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; ++i) {
      uint64_t x = words[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      h ^= x ^ (x >> 29);
    }
    return h;
  }

  CachedKernel* find(uint64_t hash, const uint64_t* key, size_t n) const {
    std::shared_lock lock(mutex_);
    auto it = kernels_.find(hash);
    if (it == kernels_.end()) {
      return nullptr;
    }
    for (const auto& k : it->second) {
      if (k->has_key(key, n)) {
        return k.get();
      }
    }
    return nullptr;
  }

  // The entry for the key, inserted (not ready) by the first thread that misses it.
  CachedKernel& find_or_insert(uint64_t hash, const uint64_t* key, size_t n) {
    std::unique_lock lock(mutex_);
    auto& bucket = kernels_[hash];
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

  // The kernel launched last (always a ready one). Most call sites launch one specialisation
  // over and over, so comparing the key with it skips the hash, the lock and the map.
  std::atomic<CachedKernel*> last_launched{nullptr};

 private:
  mutable std::shared_mutex mutex_;
  // hash -> the kernels whose key has that hash (almost always one)
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<CachedKernel>>> kernels_;
};

}  // namespace tjit::detail
