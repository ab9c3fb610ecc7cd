// Config pre_hooks (triton.Config(..., pre_hook=f)) from C++. A Python hook whose whole effect is
// setting host descriptors' block_shape / padding is run once per (config, the caller's constexpr
// values, which arguments are descriptors) in Python on a mirror of the arguments
// (triton_adapter.descriptor_hook), and what it set is a decision like the heuristics' values:
// remembered in memory, stored in the kernel store, noted in a manifest being recorded, shipped in
// bundles, and applied in C++ to each run's descriptors. A C++ hook (set_config_pre_hook) replaces
// the Python ones and is called before every run.

#include "function/function_impl.h"

#include "binaries/constexpr_json.h"
#include "binaries/kernel_bundle_detail.h"
#include "binaries/manifest_recorder.h"
#include "python/python_bridge.h"
#include "python/python_gil.h"
#include "tuning/captured_args.h"

#include <tjit/tensor_descriptor.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <array>
#include <mutex>
#include <string>

namespace tjit {
namespace {

using detail::CapturedArg;

int caller_position(const ConfigHookArgs::Internals& in, std::string_view name) {
  for (size_t i = 0; i < in.caller_params.size(); ++i) {
    if (in.params[in.caller_params[i]].name == name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

const CapturedArg& caller_argument(const ConfigHookArgs::Internals& in, std::string_view name, CapturedArg::Kind kind,
                                   const char* what) {
  const int position = caller_position(in, name);
  TORCH_CHECK(position >= 0 && in.args[position].kind == kind, "tjit: kernel ", in.kernel, ": a C++ config pre_hook ",
              "asked for ", what, " '", name, "', but ",
              position < 0 ? "the caller passes no argument of that name" : "that argument is not one");
  return in.args[position];
}

detail::DescriptorOverride& override_of(ConfigHookArgs::Internals& in, std::string_view name) {
  const int position = caller_position(in, name);
  TORCH_CHECK(position >= 0 && in.args[position].kind == CapturedArg::Kind::TensorDescriptor, "tjit: kernel ",
              in.kernel, ": a C++ config pre_hook set a field of '", name, "', which is not a host tensor descriptor "
              "argument of the call");
  detail::DescriptorOverride* o = in.overrides.find_or_add(position);
  TORCH_CHECK(o != nullptr, "tjit: kernel ", in.kernel, ": a config pre_hook changed more than ",
              detail::kMaxTensorDescriptors, " descriptors");
  return *o;
}

}  // namespace

const at::Tensor& ConfigHookArgs::tensor(std::string_view name) const {
  return *caller_argument(*internals_, name, CapturedArg::Kind::Tensor, "the tensor").tensor;
}

const TensorDescriptor& ConfigHookArgs::descriptor(std::string_view name) const {
  return *caller_argument(*internals_, name, CapturedArg::Kind::TensorDescriptor, "the tensor descriptor").descriptor;
}

void ConfigHookArgs::set_block_shape(std::string_view name, c10::IntArrayRef block_shape) {
  detail::DescriptorOverride& o = override_of(*internals_, name);
  const TensorDescriptor& d = descriptor(name);
  d.with_block_shape(block_shape, d.padding());  // checks it now, where the hook can be named
  o.has_block_shape = true;
  o.rank = static_cast<int>(block_shape.size());
  std::copy(block_shape.begin(), block_shape.end(), o.block_shape.begin());
}

void ConfigHookArgs::set_padding(std::string_view name, Padding padding) {
  detail::DescriptorOverride& o = override_of(*internals_, name);
  descriptor(name).with_block_shape(descriptor(name).block_shape(), padding);
  o.has_padding = true;
  o.padding = padding;
}

void TritonJitFunction::set_config_pre_hook(ConfigPreHook hook) {
  impl_->cpp_pre_hook = std::move(hook);
  impl_->has_cpp_pre_hook.store(static_cast<bool>(impl_->cpp_pre_hook), std::memory_order_release);
}

void TritonJitFunction::set_autotune_hooks(AutotunePreHook pre_hook, AutotunePostHook post_hook) {
  impl_->tuner_pre_hook = std::move(pre_hook);
  impl_->tuner_post_hook = std::move(post_hook);
}

void TritonJitFunction::Impl::call_cpp_pre_hook(const CapturedArg* args, int config, const KernelMeta& meta,
                                                bool timing, Stream stream, detail::DescriptorOverrides& scratch) {
  scratch.count = 0;
  ConfigHookArgs::Internals internals{fn.params_, tuning.caller_params, args, scratch, fn.function_name_.c_str()};
  ConfigHookArgs hook_args(internals, config, tuning.configs[config], meta, timing, stream);
  cpp_pre_hook(hook_args);
}

const detail::DescriptorOverrides* TritonJitFunction::Impl::config_hook_overrides(
    const CapturedArg* args, int config, const KernelMeta& meta, const HookContext& hooks,
    detail::DescriptorOverrides& scratch) {
  if (has_cpp_pre_hook.load(std::memory_order_acquire)) {
    call_cpp_pre_hook(args, config, meta, hooks.timing, hooks.stream, scratch);
    return scratch.count > 0 ? &scratch : nullptr;
  }
  if (tuning.config_pre_hooks[config].empty()) {
    return nullptr;
  }
  const detail::DescriptorOverrides& recorded = recorded_descriptor_hook(args, config);
  return recorded.count > 0 ? &recorded : nullptr;
}

const detail::DescriptorOverrides& TritonJitFunction::Impl::recorded_descriptor_hook(const CapturedArg* args,
                                                                                     int config) {
  const detail::TuningSpec& spec = tuning;
  const size_t num_args = spec.caller_params.size();
  // The decision's key: the config, the caller's constexpr values, which arguments are descriptors.
  std::array<uint64_t, 2 * detail::kMaxRunSlots + 1> words;
  size_t n = 0;
  words[n++] = static_cast<uint64_t>(config);
  for (size_t i = 0; i < num_args; ++i) {
    if (fn.params_[spec.caller_params[i]].is_constexpr) {
      detail::append_argument_words(args[i], words.data(), n, words.size() - 1);
    } else {
      words[n++] = args[i].kind == CapturedArg::Kind::TensorDescriptor ? 1 : 0;
    }
  }
  auto& entry = descriptor_hooks.find_or_insert(words.data(), n);
  if (entry.ready.load(std::memory_order_acquire)) {
    return entry.value;
  }
  detail::GilRelease released;
  std::lock_guard lock(entry.mutex);
  if (entry.ready.load(std::memory_order_acquire)) {
    return entry.value;
  }
  const std::string& hook = spec.config_pre_hooks[config];
  std::string constexprs;  // "NAME=value, ..." as the runtime describes arguments
  std::string descriptors;
  nlohmann::ordered_json constexprs_json = nlohmann::ordered_json::object();
  nlohmann::ordered_json constexpr_values = nlohmann::ordered_json::object();
  nlohmann::json descriptors_json = nlohmann::json::array();
  nlohmann::json others = nlohmann::json::array();
  for (size_t i = 0; i < num_args; ++i) {
    const KernelParam& p = fn.params_[spec.caller_params[i]];
    if (p.is_constexpr) {
      const std::string text = detail::describe_argument(args[i]);
      constexprs += (constexprs.empty() ? "" : ", ") + p.name + "=" + text;
      constexprs_json[p.name] = text;
      const auto value = detail::scalar_value(args[i]);
      constexpr_values[p.name] =
          value ? detail::constexpr_value_json<nlohmann::ordered_json>(*value) : nlohmann::ordered_json();
    } else if (args[i].kind == CapturedArg::Kind::TensorDescriptor) {
      descriptors += (descriptors.empty() ? "" : " ") + p.name;
      descriptors_json.push_back(p.name);
    } else {
      others.push_back(p.name);
    }
  }
  if (!spec.heuristics_see_config) {  // heuristics outside the autotuner: their values reach the hook
    for (int index : spec.heuristic_params) {
      others.push_back(fn.params_[index].name);
    }
  }
  const std::string bundle_key =
      "config " + std::to_string(config) + "\nconstexprs " + constexprs + "\ndescriptors " + descriptors;
  const std::string record_key = decision_key("descriptor hook") + bundle_key + "\n";
  std::optional<detail::DescriptorOverrides> found;
  std::string value_json;
  if (auto bundled = detail::find_bundled_decision(fn.kernel_file_, fn.function_name_, "descriptor_hook", bundle_key)) {
    found = descriptor_overrides_from_json(*bundled, args, config);
    value_json = *bundled;
  }
  if (!found) {
    if (const auto record = detail::load_decision_record(signature, record_key)) {
      found = descriptor_overrides_from_json(record->value, args, config);
      value_json = record->value;
    }
  }
  if (!found) {
    const std::string remedies =
        std::string("Either record the hook's effect with Python present (JIT on: run this call once; under "
                    "TJIT_RECORD=<manifest>, then python -m tjit aot build, it ships in a bundle), or supply the hook "
                    "in C++: TritonJitFunction::set_config_pre_hook (tjit/triton_jit_function.h)");
    TORCH_CHECK(jit_enabled(), "tjit: kernel ", fn.function_name_, " from ", fn.kernel_file_, ": config ", config, " (",
                spec.configs[config].describe(), ") has the pre_hook ", hook, ", whose effect on the descriptors "
                "no kernel bundle or kernel store has for this call (config ", config, ", constexprs ", constexprs,
                "; descriptors ", descriptors, "), and JIT is off (TJIT_JIT=0), so the hook cannot run in Python. ",
                remedies, ". The manifest entry: {\"file\": \"", fn.kernel_file_, "\", \"function\": \"",
                fn.function_name_, "\", \"descriptor_hook\": {\"config\": ", config, ", \"constexprs\": ",
                constexprs_json.dump(), ", \"descriptors\": ", descriptors_json.dump(),
                ", \"values\": {...what the hook sets...}}}");
    nlohmann::json arguments{{"constexprs", constexpr_values}, {"descriptors", descriptors_json}, {"others", others}};
    std::string result;
    try {
      result = detail::python_bridge().descriptor_hook(ensure_python(), config, arguments.dump());
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "tjit: kernel ", fn.function_name_, ": config ", config, "'s pre_hook ", hook,
                  " could not be run in Python to record its effect on the descriptors: ", e.what_without_backtrace(),
                  "\n", remedies);
    }
    const auto parsed = nlohmann::json::parse(result);
    TORCH_CHECK(!parsed.contains("unsupported"), "tjit: kernel ", fn.function_name_, " cannot be called through run(): "
                "config ", config, " (", spec.configs[config].describe(), ") has a pre_hook that tjit cannot record: ",
                parsed.value("unsupported", std::string()), ". tjit records a config pre_hook whose whole effect is "
                "setting host tensor descriptors' block_shape / padding from the config and the caller's constexprs; "
                "for any other hook supply it in C++ (TritonJitFunction::set_config_pre_hook), or call the kernel "
                "with every argument (operator())");
    value_json = parsed.at("descriptors").dump();
    found = descriptor_overrides_from_json(value_json, args, config);
    TORCH_CHECK(found, "tjit: kernel ", fn.function_name_, ": config ", config, "'s pre_hook ", hook,
                " set descriptor fields that do not fit the call's descriptors: ", value_json);
    detail::store_decision_record(signature, {record_key, value_json});
  }
  entry.value = *found;
  detail::note_decision(signature, "descriptor_hook",
                        nlohmann::ordered_json{{"config", config}, {"constexprs", constexprs_json},
                                               {"descriptors", descriptors_json},
                                               {"values", nlohmann::ordered_json::parse(value_json)}}
                            .dump());
  entry.ready.store(true, std::memory_order_release);
  return entry.value;
}

std::optional<detail::DescriptorOverrides> TritonJitFunction::Impl::descriptor_overrides_from_json(
    const std::string& value_json, const CapturedArg* args, int config) const {
  const auto values = nlohmann::json::parse(value_json, nullptr, /*allow_exceptions=*/false);
  if (!values.is_object()) {
    return std::nullopt;
  }
  detail::DescriptorOverrides out;
  for (const auto& [name, fields] : values.items()) {
    int position = -1;
    for (size_t i = 0; i < tuning.caller_params.size(); ++i) {
      if (fn.params_[tuning.caller_params[i]].name == name) {
        position = static_cast<int>(i);
      }
    }
    if (position < 0 || args[position].kind != CapturedArg::Kind::TensorDescriptor || !fields.is_object()) {
      return std::nullopt;  // not a decision for this call (the builder checks manifests' entries)
    }
    const TensorDescriptor& d = *args[position].descriptor;
    detail::DescriptorOverride* o = out.find_or_add(position);
    if (o == nullptr) {
      return std::nullopt;
    }
    if (const auto it = fields.find("block_shape"); it != fields.end()) {
      if (!it->is_array() || static_cast<int>(it->size()) != d.rank()) {
        TORCH_CHECK(false, "tjit: kernel ", fn.function_name_, ": config ", config, "'s pre_hook ",
                    tuning.config_pre_hooks[config], " sets ", name, ".block_shape to ", it->dump(),
                    ", which does not fit a descriptor of rank ", d.rank());
      }
      o->has_block_shape = true;
      o->rank = d.rank();
      for (int i = 0; i < d.rank(); ++i) {
        if (!(*it)[i].is_number_integer()) {
          return std::nullopt;
        }
        o->block_shape[i] = (*it)[i].get<int64_t>();
      }
    }
    if (const auto it = fields.find("padding"); it != fields.end()) {
      if (!it->is_string() || (*it != "zero" && *it != "nan")) {
        return std::nullopt;
      }
      o->has_padding = true;
      o->padding = *it == "nan" ? Padding::Nan : Padding::Zero;
    }
  }
  return out;
}

}  // namespace tjit
