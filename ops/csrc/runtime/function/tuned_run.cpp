// TritonJitFunction::run(), tune(), chosen_config() and compile_run(): the caller's arguments
// completed with their defaults, the tuning key, the config chosen for it (autotune_choice.cpp),
// the config's and the heuristics' values placed among the arguments (heuristics.cpp), then the
// plain launch or compile with them. Nothing is allocated once the key is known.

#include "function/function_impl.h"

#include "launch/cuda_device.h"
#include "python/python_gil.h"
#include "tuning/captured_args.h"

#include <tjit/tensor_descriptor.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <string>

namespace tjit {
namespace {

using detail::add_captured;
using detail::append_argument_words;
using detail::CapturedArg;
using detail::describe_argument;
using detail::dtype_word;
using detail::has_dtype;
using detail::scalar_value;

using DefaultedArgs = std::optional<std::array<CapturedArg, detail::kMaxRunParams>>;

// The caller's arguments, followed by the defaults of the trailing caller parameters they leave out
// (placed in `storage`), when every one left out has a default; else the arguments as given.
const CapturedArg* with_defaults(const CapturedArg* args, size_t& num_args, const std::vector<int>& caller_params,
                                 const std::vector<KernelParam>& params, DefaultedArgs& storage) {
  if (num_args >= caller_params.size()) {
    return args;
  }
  for (size_t i = num_args; i < caller_params.size(); ++i) {
    if (!params[caller_params[i]].default_value) {
      return args;  // the count check says what is missing
    }
  }
  storage.emplace();
  std::copy(args, args + num_args, storage->begin());
  for (size_t i = num_args; i < caller_params.size(); ++i) {
    detail::add_value((*storage)[i], *params[caller_params[i]].default_value);
  }
  num_args = caller_params.size();
  return storage->data();
}

}  // namespace

int TritonJitFunction::run_captured(Stream stream, const detail::GridSource& grid, const CapturedArg* args,
                                    size_t num_args, RunMode mode) const {
  const detail::TuningSpec& spec = impl_->tuning;
  TORCH_CHECK(spec.unsupported.empty(), "tjit: kernel ", function_name_, " cannot be called through run(): ",
              spec.unsupported, ". Call it with every argument (operator()) instead");
  DefaultedArgs defaulted;
  args = with_defaults(args, num_args, spec.caller_params, params_, defaulted);
  if (num_args != spec.caller_params.size()) {
    std::string names;
    for (const std::string& name : caller_parameters()) {
      names += (names.empty() ? "" : ", ") + name;
    }
    TORCH_CHECK(false, "tjit: kernel ", function_name_, " takes ", spec.caller_params.size(), " arguments in run() (",
                names, "; its configs and heuristics set the others), got ", num_args);
  }
  // The device of the tensor arguments (-1: CPU), for the tuning key and the tuning itself.
  int device = detail::device_of_arguments(args, num_args);
  if (device == detail::kNoDevice || device == detail::kCurrentDevice) {
    device = detail::current_cuda_device();
  }
  int config = 0;
  if (spec.autotuned && spec.configs.size() > 1) {
    // The tuning key: as Python Triton's, the values of the `key` arguments and the dtypes of the
    // tensor arguments; and the device.
    std::array<uint64_t, 1 + 2 * detail::kMaxRunSlots + detail::kMaxRunParams> words;
    size_t n = 0;
    words[n++] = static_cast<uint64_t>(device + 1);
    for (int position : spec.key_args) {
      if (args[position].kind == CapturedArg::Kind::Tensor) {
        // Python Triton keys on the tensor object itself: a choice per tensor, made again for
        // another tensor of the same shape. Its identity here: the TensorImpl.
        words[n++] = static_cast<uint64_t>(CapturedArg::Kind::Tensor);
        words[n++] = detail::tensor_identity(args[position]);
      } else {
        append_argument_words(args[position], words.data(), n, words.size() - detail::kMaxRunParams);
      }
    }
    for (size_t i = 0; i < num_args; ++i) {
      if (has_dtype(args[i])) {
        words[n++] = dtype_word(args[i]);
      }
    }
    auto& choice = impl_->choices.find_or_insert(words.data(), n);
    if (!choice.ready.load(std::memory_order_acquire)) {
      detail::GilRelease released;  // the thread tuning this key may need the GIL
      std::lock_guard lock(choice.mutex);
      if (!choice.ready.load(std::memory_order_acquire)) {
        bool deferred = false;
        const int chosen = impl_->tune_key(stream, grid, args, device, /*may_time=*/mode != RunMode::Lookup,
                                           nullptr, mode == RunMode::Launch ? &deferred : nullptr);
        if (chosen < 0) {
          return -1;  // Lookup, and nothing chosen or stored yet
        }
        if (deferred) {
          config = chosen;  // this launch only: the key stays untuned
        } else {
          choice.value = chosen;
          choice.ready.store(true, std::memory_order_release);
        }
      }
    }
    if (choice.ready.load(std::memory_order_acquire)) {
      config = choice.value;
    }
  }
  if (mode == RunMode::Launch) {
    std::array<ConstexprValue, detail::kMaxRunParams> values;
    std::array<bool, detail::kMaxRunParams> has_value;
    detail::ArgumentPack<detail::kMaxRunSlots> pack(params_, function_name_.c_str());
    detail::DescriptorCopies copies;
    impl_->assemble(args, config, pack, values.data(), has_value.data(), Impl::HookContext{stream, false, &copies});
    const LaunchOptions& options = spec.configs[config].options;
    const Grid g = grid(KernelMeta(params_, values.data(), has_value.data(), options, function_name_.c_str()));
    launch(stream, g, options, pack);
  }
  return config;
}

void TritonJitFunction::Impl::assemble(const CapturedArg* args, int config, detail::ArgumentPackBase& pack,
                                       ConstexprValue* values, bool* has_value, const HookContext& hooks) {
  const detail::TuningSpec& spec = tuning;
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
  for (size_t i = 0; i < fn.params_.size(); ++i) {
    has_value[i] = set[i];
    if (!set[i]) {
      const auto scalar = scalar_value(args[next++]);
      has_value[i] = scalar.has_value();
      if (scalar) {
        values[i] = *scalar;
      }
    }
  }
  // The config's pre_hook, before the arguments are packed: the descriptors' block shapes it sets
  // are part of the specialisation.
  detail::DescriptorOverrides scratch;
  const detail::DescriptorOverrides* overrides = nullptr;
  if (spec.any_pre_hook || has_cpp_pre_hook.load(std::memory_order_acquire)) {
    const KernelMeta meta(fn.params_, values, has_value, spec.configs[config].options, fn.function_name_.c_str());
    overrides = config_hook_overrides(args, config, meta, hooks, scratch);
  }
  next = 0;
  size_t copied = 0;
  for (size_t i = 0; i < fn.params_.size(); ++i) {
    if (set[i]) {
      detail::add_value(pack, values[i]);
      continue;
    }
    const int position = static_cast<int>(next);
    const CapturedArg& a = args[next++];
    const detail::DescriptorOverride* o = overrides != nullptr && a.kind == CapturedArg::Kind::TensorDescriptor
                                              ? overrides->find(position)
                                              : nullptr;
    if (o == nullptr) {
      add_captured(pack, a);
      continue;
    }
    const TensorDescriptor& d = *a.descriptor;
    TORCH_CHECK(hooks.copies != nullptr && copied < hooks.copies->size(), "tjit: kernel ", fn.function_name_,
                ": too many descriptors changed by a config pre_hook");
    auto& copy = (*hooks.copies)[copied++];
    copy.emplace(d.with_block_shape(o->has_block_shape ? c10::IntArrayRef(o->block_shape.data(), o->rank)
                                                       : d.block_shape(),
                                    o->has_padding ? o->padding : d.padding()));
    pack.add_tensor_descriptor(*copy);
  }
}

CompiledKernel TritonJitFunction::compile_run_captured(const CompileTarget& target, const CapturedArg* args,
                                                      size_t num_args) const {
  const detail::TuningSpec& spec = impl_->tuning;
  TORCH_CHECK(spec.unsupported.empty(), "tjit: kernel ", function_name_, " cannot be called through compile_run(): ",
              spec.unsupported);
  DefaultedArgs defaulted;
  args = with_defaults(args, num_args, spec.caller_params, params_, defaulted);
  TORCH_CHECK(num_args == spec.caller_params.size(), "tjit: kernel ", function_name_, " takes ",
              spec.caller_params.size(), " arguments in compile_run() (as in run()), got ", num_args);
  int config = 0;
  if (spec.autotuned && spec.configs.size() > 1) {
    const std::string target_text = target.to_string();
    config = impl_->tune_key(nullptr, detail::GridSource(Grid(1)), args, -1, /*may_time=*/false, &target_text);
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
  detail::ArgumentPack<detail::kMaxRunSlots> pack(params_, function_name_.c_str());
  detail::DescriptorCopies copies;
  impl_->assemble(args, config, pack, values.data(), has_value.data(), Impl::HookContext{nullptr, false, &copies});
  return compile_packed(target, spec.configs[config].options, pack);
}

}  // namespace tjit
