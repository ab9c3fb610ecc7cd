// TritonJitFunction::run(), tune(), chosen_config() and compile_run(): what @triton.autotune and
// @triton.heuristics decide for a call (from a bundle, the kernel store, Python or timing; recorded
// into a manifest under TJIT_RECORD), then the launch or compile with those values.

#include "triton_jit_function_impl.h"

#include "tuning/captured_args.h"

#include "binaries/constexpr_json.h"
#include "binaries/kernel_bundle_detail.h"
#include "binaries/manifest_recorder.h"

#include <tjit/current_stream.h>

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace tjit {

namespace {

using detail::add_captured;
using detail::append_argument_words;
using detail::CapturedArg;
using detail::describe_argument;
using detail::dtype_word;
using detail::has_dtype;
using detail::python_arguments;
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
      TORCH_CHECK(!has_dtype(args[position]), "tjit: kernel ", function_name_, ": autotune key argument '",
                  params_[spec.caller_params[position]].name, "' is a tensor; tjit tunes on scalar keys");
      append_argument_words(args[position], words.data(), n, words.size() - detail::kMaxRunParams);
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
    detail::ArgumentPack<detail::kMaxRunSlots> pack(params_, function_name_.c_str());
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
      detail::add_value(pack, values[i]);
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
  std::array<uint64_t, 2 * detail::kMaxRunSlots + 1> words;
  size_t n = 0;
  for (size_t i = 0; i < num_args; ++i) {
    append_argument_words(args[i], words.data(), n, words.size() - 1);
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
    if (has_dtype(args[i])) {
      key_text += " " + describe_argument(args[i]);
    }
  }
  const std::string target = for_target != nullptr ? *for_target
                             : device >= 0         ? detail::target_of_device(device).to_string()
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
    detail::ArgumentPack<detail::kMaxRunSlots> pack(params_, function_name_.c_str());
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
  DefaultedArgs defaulted;
  args = with_defaults(args, num_args, spec.caller_params, params_, defaulted);
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
  detail::ArgumentPack<detail::kMaxRunSlots> pack(params_, function_name_.c_str());
  assemble(args, config, pack, values.data(), has_value.data());
  return compile_packed(target, spec.configs[config].options, pack);
}

}  // namespace tjit
