#pragma once
// The runtime's side of @triton.autotune and @triton.heuristics (tjit/autotune.h): what the
// decorators say, as parsed from the kernel's signature; the choices and heuristic values a
// function remembers per key; and the timing of one config the way Triton's do_bench times it.

#include <tjit/autotune.h>
#include <tjit/detail/run_arguments.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>
#include <tjit/tensor_descriptor.h>

#include <c10/core/Allocator.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tjit::detail {

// The most parameters a kernel called through run() may have (its arguments are assembled in
// fixed arrays on the stack).
inline constexpr size_t kMaxRunParams = 64;
// Key slots those arguments may fill: one each, and one more per tuple element.
inline constexpr size_t kMaxRunSlots = kMaxRunParams + 64;

// What @triton.autotune and @triton.heuristics add to a kernel, resolved against its parameters.
// A plain kernel has one config (Triton's defaults) and no tuning.
struct TuningSpec {
  bool autotuned = false;
  std::vector<KernelConfig> configs;                                   // at least one
  std::vector<std::vector<std::pair<int, ConstexprValue>>> config_values;  // per config, by parameter index
  std::vector<int> caller_params;     // parameter indices the caller passes, in order
  std::vector<int> key_args;          // `key`: positions among the caller's arguments
  std::vector<int> reset_to_zero;     // positions among the caller's arguments
  std::vector<int> restore_value;     // positions among the caller's arguments
  std::vector<int> heuristic_params;  // parameter indices @triton.heuristics set
  bool heuristics_see_config = false;  // heuristics inside the autotuner read the config's values
  bool prune = false;                  // prune_configs_by (needs Python at tuning time)
  double warmup_ms = 25;
  double rep_ms = 100;
  std::vector<std::string> config_pre_hooks;  // per config: its Python pre_hook's name, empty for none
  bool any_pre_hook = false;
  std::string tuner_pre_hook;   // @triton.autotune's own pre_hook / post_hook, by name; empty: none
  std::string tuner_post_hook;
  std::string configs_text;  // every config, for the store key
  std::string unsupported;   // why run() cannot honour the decorators (a Python hook, ...); empty: it can
};

// What config pre_hooks set on the host descriptors of one run, by the caller's argument position
// (a recorded decision, or what a C++ hook set).
struct DescriptorOverride {
  int position = -1;
  bool has_block_shape = false;
  int rank = 0;
  std::array<int64_t, TensorDescriptor::kMaxRank> block_shape{};
  bool has_padding = false;
  Padding padding = Padding::Zero;
};
struct DescriptorOverrides {
  std::array<DescriptorOverride, kMaxTensorDescriptors> items;
  size_t count = 0;
  // The override of the descriptor at `position`, nullptr if none.
  const DescriptorOverride* find(int position) const {
    for (size_t i = 0; i < count; ++i) {
      if (items[i].position == position) return &items[i];
    }
    return nullptr;
  }
  // The same, added (empty) when missing; nullptr when full.
  DescriptorOverride* find_or_add(int position) {
    if (const DescriptorOverride* found = find(position)) return const_cast<DescriptorOverride*>(found);
    if (count == items.size()) return nullptr;
    items[count] = DescriptorOverride{};
    items[count].position = position;
    return &items[count++];
  }
};
// Where the overridden copies of a run's descriptors live while its pack refers to them.
using DescriptorCopies = std::array<std::optional<TensorDescriptor>, kMaxTensorDescriptors>;

// Parses KernelSignature::tuning (empty: a plain kernel). Throws c10::Error naming the kernel when
// the decorators name parameters it does not have or use what tjit cannot run.
TuningSpec parse_tuning_spec(const std::string& tuning, const std::vector<KernelParam>& params,
                             const std::string& kernel);

// Values remembered under a key of words: tuning choices per tuning key, heuristic values per
// argument values. Entries are never removed, so a found one may be used after the lock is gone.
template <typename Value>
class WordKeyedTable {
 public:
  struct Entry {
    std::vector<uint64_t> key;
    std::mutex mutex;  // serialises filling this entry
    std::atomic<bool> ready{false};
    Value value{};
    bool has_key(const uint64_t* words, size_t n) const {
      return key.size() == n && std::memcmp(key.data(), words, n * sizeof(uint64_t)) == 0;
    }
  };

  static uint64_t hash(const uint64_t* words, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
      h = (h ^ words[i]) * 0x100000001b3ull;
      h ^= h >> 29;
    }
    return h;
  }

  // The entry for the key: the last one returned if it matches, else through the table.
  Entry& find_or_insert(const uint64_t* words, size_t n) {
    Entry* last = last_.load(std::memory_order_acquire);
    if (last != nullptr && last->has_key(words, n)) {
      return *last;
    }
    const uint64_t h = hash(words, n);
    Entry* found = nullptr;
    {
      std::shared_lock lock(mutex_);
      found = find_locked(h, words, n);
    }
    if (found == nullptr) {
      std::unique_lock lock(mutex_);
      found = find_locked(h, words, n);
      if (found == nullptr) {
        auto entry = std::make_unique<Entry>();
        entry->key.assign(words, words + n);
        found = entry.get();
        table_[h].push_back(std::move(entry));
      }
    }
    last_.store(found, std::memory_order_release);
    return *found;
  }

 private:
  Entry* find_locked(uint64_t h, const uint64_t* words, size_t n) const {
    auto it = table_.find(h);
    if (it != table_.end()) {
      for (const auto& e : it->second) {
        if (e->has_key(words, n)) {
          return e.get();
        }
      }
    }
    return nullptr;
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<Entry>>> table_;
  std::atomic<Entry*> last_{nullptr};
};

// `bytes` of CUDA memory on `device` from torch's allocator (stream-ordered on the device's current
// torch stream). `purpose` names what needs it in the error when torch has no CUDA allocator.
c10::DataPtr allocate_device_memory(int device, size_t bytes, const char* purpose);

// Puts reset_to_zero arguments back to zero and restore_value arguments back to their values at
// construction, between timed runs: on `stream` for CUDA tensors, at once for CPU ones.
class ArgumentResetter {
 public:
  ArgumentResetter(const TuningSpec& spec, const CapturedArg* args, void* stream, const char* kernel);
  ~ArgumentResetter();
  ArgumentResetter(const ArgumentResetter&) = delete;
  ArgumentResetter& operator=(const ArgumentResetter&) = delete;
  void reset() const;

 private:
  struct Span {
    char* data = nullptr;
    size_t bytes = 0;
    bool cuda = false;
    std::shared_ptr<void> saved;  // the copy (restore_value only)
  };
  std::vector<Span> zero_;
  std::vector<Span> restore_;
  void* stream_;
};

// The median time in ms of `run`, measured as triton.testing.do_bench measures it: an estimate
// from 5 runs (cache clearing included), then warmup_ms worth of warm-up runs and rep_ms worth of
// timed runs, each timed with CUDA events on `stream` after clearing the L2 cache with a 256 MB
// memset. `prepare` runs before every run: outside the timed runs, inside the first estimate (as
// do_bench times its hooks there). A context of the device must be current (DeviceContextScope).
// `runs` counts the launches.
double time_on_gpu(void* stream, int device, const std::function<void()>& prepare, const std::function<void()>& run,
                   double warmup_ms, double rep_ms, size_t& runs);

// The same on CPU (Triton's interpreter): the median wall time of 3 runs after one warm-up run.
double time_on_cpu(const std::function<void()>& prepare, const std::function<void()>& run, size_t& runs);

// Keeps the thread's current context when it belongs to the device (a green context: tuning
// times on its SMs), else makes the device's primary context current for its lifetime.
class DeviceContextScope {
 public:
  explicit DeviceContextScope(int device);
  ~DeviceContextScope();
  DeviceContextScope(const DeviceContextScope&) = delete;
  DeviceContextScope& operator=(const DeviceContextScope&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace tjit::detail
