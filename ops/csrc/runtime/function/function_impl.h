#pragma once
// TritonJitFunction's insides, shared by the files of this folder only: its signature and Python
// side, its cache of loaded binaries, its tuning state, and the steps the public members are
// made of, grouped below by the file that defines them.

#include "binaries/kernel_store_detail.h"
#include "function/kernel_cache.h"
#include "tuning/autotuner.h"

#include <tjit/triton_jit_function.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tjit {

// The insides of a C++ config pre_hook's arguments (config_hooks.cpp).
struct ConfigHookArgs::Internals {
  const std::vector<KernelParam>& params;
  const std::vector<int>& caller_params;
  const detail::CapturedArg* args;
  detail::DescriptorOverrides& overrides;
  const char* kernel;
};

namespace detail {
// Launch options as one word of a specialisation key; throws c10::Error for options out of range.
// (launch.cpp)
uint64_t launch_options_word(const LaunchOptions& options);
// Programs of k's function that one SM holds at once (the driver's occupancy). (occupancy.cpp)
int resident_programs(const CachedKernel& k, const CompiledKernel& compiled);
}  // namespace detail

struct TritonJitFunction::Impl {
  explicit Impl(const TritonJitFunction& owner) : fn(owner) {}

  const TritonJitFunction& fn;  // whose insides these are: its identity, params and launch

  detail::KernelCache kernels;
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
  // Config pre_hooks: what the Python ones set on descriptors, per config and the caller's
  // constexprs (config_hooks.cpp); the C++ hook that replaces them, when set.
  detail::WordKeyedTable<detail::DescriptorOverrides> descriptor_hooks;
  ConfigPreHook cpp_pre_hook;
  std::atomic<bool> has_cpp_pre_hook{false};
  AutotunePreHook tuner_pre_hook;  // @triton.autotune's pre_hook / post_hook, supplied in C++
  AutotunePostHook tuner_post_hook;

  // The signature the process uses (from a bundle, the store or Python); fixed at construction.
  detail::KernelSignature signature;
  // The Python side, loaded on the first compile or interpreted run (never, with a warm store).
  std::mutex python_mutex;
  std::atomic<bool> python_loaded{false};
  int64_t python_handle = -1;
  // The signature with the sources Python executed: what entries compiled here record.
  detail::KernelSignature compiled_signature;

  // --- python_side.cpp
  // Imports the kernel in the embedded interpreter. Call with python_mutex held (or from the
  // constructor); `known` says whether `signature` came from a bundle or the store and must be
  // confirmed.
  void load_python(bool known);
  // The kernel's handle on the Python side, importing it first if needed.
  int64_t ensure_python();

  // --- launch.cpp
  // The loaded binary for a completed pack on a CUDA device: the last one launched, else the
  // cache's, else compiled (or read from a bundle or the store) and loaded.
  detail::CachedKernel& loaded_kernel(detail::ArgumentPackBase& pack, int device, const LaunchOptions& options);

  // --- binary_loading.cpp
  // Fills the cache entry of a pack that missed: obtains the binary and loads it on `device`.
  detail::CachedKernel& compile_and_load(uint64_t hash, const detail::ArgumentPackBase& pack, int device,
                                         const LaunchOptions& options);

  // The function of a ready entry for the context current on this thread (not its primary one),
  // loading the binary there on the first launch from it; nullptr when that context belongs to
  // another device than `device`.
  CUfunction function_in_context(detail::CachedKernel& k, CUcontext current, int device);

  // --- interpreted_launch.cpp
  // Runs a completed pack of CPU tensors through Triton's interpreter.
  void launch_interpreted(Grid grid, const LaunchOptions& options, const detail::ArgumentPackBase& pack);

  // --- lookup_chain.cpp
  enum class Origin { Bundle, Store, Compiled };
  // The binary for a specialisation: from a bundle or the store (unless use_store is false),
  // else compiled and stored. `key` receives the store key; `origin` where the binary came from.
  CompiledKernel obtain(const Specialization& spec, const CompileTarget& target, const LaunchOptions& options,
                        const std::string& description, bool use_store, std::string& key, Origin& origin);
  // Throws the error for a binary that only a compile could give when none can run: what the
  // bundles and the store have, why there is no compile, and the manifest entry to add.
  [[noreturn]] void fail_without_compile(const Specialization& spec, const CompileTarget& target,
                                         const LaunchOptions& options, const std::string& description,
                                         const std::string& why) const;
  // For an error of a compile or an interpreted run: which non-constexpr parameters got None (an
  // undefined at::Tensor, std::nullopt), the usual cause when a kernel reads them; empty if none.
  std::string none_arguments(const Specialization& spec) const;
  // "name(params) from file for target", for logs and errors.
  std::string describe(const Specialization& spec, const CompileTarget& target) const;

  // --- tuned_run.cpp
  // How a run calls config pre_hooks: before a timed run (timing) or a launch, on `stream`; the
  // descriptors they change are copied into `copies`, which must outlive the pack's use.
  struct HookContext {
    Stream stream = nullptr;
    bool timing = false;
    detail::DescriptorCopies* copies = nullptr;
  };
  // Places the caller's arguments and config `config`'s (and the heuristics') values into `pack`
  // in parameter order, and the grid's view of them into `values`/`has_value`; runs the config's
  // pre_hook first (config_hooks.cpp) and launches the descriptors it changed as it set them.
  void assemble(const detail::CapturedArg* args, int config, detail::ArgumentPackBase& pack, ConstexprValue* values,
                bool* has_value, const HookContext& hooks);

  // --- config_hooks.cpp
  // What config `config`'s pre_hooks set on the call's descriptors: the C++ hook's (called now,
  // filling `scratch`), else the Python hook's recorded decision (memory, bundle, store, else the
  // hook run in Python on a mirror of the arguments, then stored); nullptr when nothing is set.
  const detail::DescriptorOverrides* config_hook_overrides(const detail::CapturedArg* args, int config,
                                                           const KernelMeta& meta, const HookContext& hooks,
                                                           detail::DescriptorOverrides& scratch);
  // Calls the C++ hook (for the timed runs after the first of a config: their packs are built).
  void call_cpp_pre_hook(const detail::CapturedArg* args, int config, const KernelMeta& meta, bool timing,
                         Stream stream, detail::DescriptorOverrides& scratch);
  const detail::DescriptorOverrides& recorded_descriptor_hook(const detail::CapturedArg* args, int config);
  std::optional<detail::DescriptorOverrides> descriptor_overrides_from_json(const std::string& value_json,
                                                                           const detail::CapturedArg* args,
                                                                           int config) const;

  // --- autotune_choice.cpp
  // Chooses the config for a new tuning key: from a bundle or the kernel store, else by timing
  // (unless `may_time` is false: then -1). device: -1 for CPU tensors (the interpreter).
  // `for_target`: choose for this target instead of the device's (compile_run; with may_time false).
  // `deferred` (for a launch): set when the stream is being captured into a CUDA graph, where
  // nothing can be timed: the first config the pruning keeps is returned for this launch only.
  int tune_key(Stream stream, const detail::GridSource& grid, const detail::CapturedArg* args, int device,
               bool may_time, const std::string* for_target = nullptr, bool* deferred = nullptr);
  // What the kernel store's decision records of this kernel start their key with: the kind of
  // decision, the kernel, its sources and the Triton version.
  std::string decision_key(const char* kind) const;

  // --- heuristics.cpp
  // The values @triton.heuristics set for these arguments under `config`: from a bundle, the
  // store, else Python (then stored); remembered per argument values.
  const std::vector<std::pair<int, ConstexprValue>>& heuristic_values(const detail::CapturedArg* args, int config);
  // Heuristic values from a bundle's {parameter: value}; nullopt unless it sets exactly the
  // parameters this kernel's heuristics set.
  std::optional<std::vector<std::pair<int, ConstexprValue>>> heuristic_values_from_names(
      const std::string& value_json) const;
  std::optional<std::vector<std::pair<int, ConstexprValue>>> stored_heuristic_values(const std::string& key) const;
};

}  // namespace tjit
