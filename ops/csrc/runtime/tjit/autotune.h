#pragma once
// Kernels under @triton.autotune and @triton.heuristics, called from C++ through
// TritonJitFunction::run and ::tune (tjit/triton_jit_function.h):
//
//   @triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4),
//                             triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
//   @triton.jit
//   def scale_kernel(x, out, n, BLOCK: tl.constexpr): ...
//
//   auto& scale = tjit::TritonJitFunction::get_instance("kernels.py", "scale_kernel");
//   scale.run(stream, [&](const tjit::KernelMeta& meta) { return tjit::Grid((n + meta["BLOCK"] - 1) / meta["BLOCK"]); },
//             x, out, n);  // BLOCK and num_warps come from the config tuned for this n
//
// The caller passes the parameters that no config and no heuristic sets, in order; the grid is a
// tjit::Grid or a callable from the chosen meta-parameters to one (Python's grid=lambda META: ...).

#include <tjit/compiled_kernel.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace tjit {

class TensorDescriptor;
enum class Padding : uint8_t;

// One config of an autotuned kernel (triton.Config): the meta-parameters it sets, by parameter
// name, and its launch options (num_warps, num_stages, num_ctas, maxnreg).
struct KernelConfig {
  std::vector<std::pair<std::string, ConstexprValue>> values;
  LaunchOptions options;
  // As Triton prints a config: "BLOCK: 1024, num_warps: 8, num_ctas: 1, num_stages: 3, maxnreg: None".
  std::string describe() const;
};

// What a grid callable sees: the call's parameters by name, as Python's META dict has them: the
// values the chosen config and the heuristics set, and the caller's scalar arguments.
class KernelMeta {
 public:
  // The integer (or bool) value of parameter `name`. Throws c10::Error naming the kernel and the
  // parameter when it is not a parameter with such a value (a tensor, a float, a typo).
  int64_t operator[](std::string_view name) const;
  // Its value as a double (integers and floats).
  double value_as_double(std::string_view name) const;
  // Its value whatever its kind (None, bool, integer, float, string, tjit::Dtype), as META[name].
  const ConstexprValue& value(std::string_view name) const { return find(name); }
  // The chosen config's launch options.
  const LaunchOptions& options() const { return *options_; }
  // Parameter i's value (i in params' order), and whether it has one (a tensor has none).
  bool has_value_at(size_t i) const { return has_value_[i]; }
  const ConstexprValue& value_at(size_t i) const { return values_[i]; }

  // Built by the runtime for each launch: one slot per kernel parameter; `has_value[i]` false for
  // a parameter with no scalar value (a tensor, a pointer).
  KernelMeta(const std::vector<KernelParam>& params, const ConstexprValue* values, const bool* has_value,
             const LaunchOptions& options, const char* kernel_name) noexcept
      : params_(params), values_(values), has_value_(has_value), options_(&options), kernel_name_(kernel_name) {}

 private:
  const ConstexprValue& find(std::string_view name) const;

  const std::vector<KernelParam>& params_;
  const ConstexprValue* values_;
  const bool* has_value_;
  const LaunchOptions* options_;
  const char* kernel_name_;
};

// What a hook supplied from C++ (TritonJitFunction::set_config_pre_hook, set_autotune_hooks) gets:
// the config, the call's values as the grid sees them, the caller's tensors and host tensor
// descriptors by parameter name, and the descriptor fields a Python config pre_hook would set
// (desc.block_shape = [...]; applied for config pre_hooks only). Valid during the hook's call only.
class ConfigHookArgs {
 public:
  int config_index() const { return config_index_; }
  const KernelConfig& config() const { return *config_; }
  const KernelMeta& meta() const { return *meta_; }
  // Whether this call precedes a timed run of tuning; false before the call's own launch (or
  // compile_run()), and for set_autotune_hooks' pre hook, its reset after the last timed run.
  bool timing() const { return timing_; }
  Stream stream() const { return stream_; }
  // The caller's tensor / host descriptor argument `name`, as the caller passed it (what the hook
  // sets goes to the launched copy). Throw c10::Error naming the kernel and the parameter when the
  // call has no such argument of that kind.
  const at::Tensor& tensor(std::string_view name) const;
  const TensorDescriptor& descriptor(std::string_view name) const;
  // Launch descriptor `name` with this block shape / padding (checked as the descriptor's
  // constructor checks them). The block shape is part of the specialisation, as in Python.
  void set_block_shape(std::string_view name, c10::IntArrayRef block_shape);
  void set_padding(std::string_view name, Padding padding);

  // Made by the runtime only.
  struct Internals;
  ConfigHookArgs(Internals& internals, int config_index, const KernelConfig& config, const KernelMeta& meta,
                 bool timing, Stream stream) noexcept
      : internals_(&internals), config_index_(config_index), config_(&config), meta_(&meta), timing_(timing),
        stream_(stream) {}

 private:
  Internals* internals_;
  int config_index_;
  const KernelConfig* config_;
  const KernelMeta* meta_;
  bool timing_;
  Stream stream_;
};

// A config pre_hook in C++: called before each timed run and each launch with any config, in place
// of the configs' Python pre_hooks.
using ConfigPreHook = std::function<void(ConfigHookArgs&)>;
// @triton.autotune(pre_hook=..., post_hook=...) in C++ (TritonJitFunction::set_autotune_hooks):
// called around each timed run of tuning; `failed` says whether the run threw.
using AutotunePreHook = std::function<void(ConfigHookArgs&)>;
using AutotunePostHook = std::function<void(ConfigHookArgs&, bool failed)>;

}  // namespace tjit
