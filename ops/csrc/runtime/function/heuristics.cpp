// What a kernel's @triton.heuristics set for a call: per distinct argument values (tensors by
// dtype) and config, from a kernel bundle, else a decision record in the kernel store, else
// Python (then stored); remembered in memory and noted in a manifest being recorded.

#include "function/function_impl.h"

#include "binaries/constexpr_json.h"
#include "binaries/kernel_bundle_detail.h"
#include "binaries/manifest_recorder.h"
#include "python/python_bridge.h"
#include "python/python_gil.h"
#include "tuning/captured_args.h"

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <array>
#include <mutex>
#include <optional>
#include <string>

namespace tjit {
namespace {

using detail::append_argument_words;
using detail::CapturedArg;
using detail::describe_argument;
using detail::python_arguments;

}  // namespace

const std::vector<std::pair<int, ConstexprValue>>& TritonJitFunction::Impl::heuristic_values(
    const CapturedArg* args, int config) {
  const detail::TuningSpec& spec = tuning;
  const size_t num_args = spec.caller_params.size();
  std::array<uint64_t, 2 * detail::kMaxRunSlots + 1> words;
  size_t n = 0;
  for (size_t i = 0; i < num_args; ++i) {
    append_argument_words(args[i], words.data(), n, words.size() - 1);
  }
  const int seen_config = spec.heuristics_see_config ? config : -1;
  words[n++] = static_cast<uint64_t>(seen_config + 1);
  auto& entry = heuristics.find_or_insert(words.data(), n);
  if (!entry.ready.load(std::memory_order_acquire)) {
    detail::GilRelease released;
    std::lock_guard lock(entry.mutex);
    if (!entry.ready.load(std::memory_order_acquire)) {
      std::string arguments;  // the kernel store's key
      std::string named;      // a bundle's key and the manifest's form: "name=value, ..."
      nlohmann::ordered_json named_json = nlohmann::ordered_json::object();
      for (size_t i = 0; i < num_args; ++i) {
        const std::string text = describe_argument(args[i]);
        const std::string& name = fn.params_[spec.caller_params[i]].name;
        arguments += text + " ";
        named += (i == 0 ? "" : ", ") + name + "=" + text;
        named_json[name] = text;
      }
      const std::string record_key = decision_key("heuristic values") + "config " + std::to_string(seen_config) +
                                     "\narguments " + arguments + "\n";
      const std::string bundle_key = "config " + std::to_string(seen_config) + "\narguments " + named;
      std::optional<std::vector<std::pair<int, ConstexprValue>>> found;
      if (auto bundled = detail::find_bundled_decision(fn.kernel_file_, fn.function_name_, "heuristics", bundle_key)) {
        found = heuristic_values_from_names(*bundled);
      }
      if (!found) {
        found = stored_heuristic_values(record_key);
      }
      if (found) {
        entry.value = std::move(*found);
      } else {
        TORCH_CHECK(jit_enabled(), "tjit: kernel ", fn.function_name_, " from ", fn.kernel_file_,
                    " has @triton.heuristics, which run in Python; no kernel bundle or kernel store has their values "
                    "for these arguments (", named, "; config ", seen_config, "), and JIT is off (TJIT_JIT=0). Record "
                    "a run that makes this call (TJIT_RECORD=<manifest>, JIT on) and rebuild the bundle (python -m "
                    "tjit aot build), or add to its manifest {\"file\": \"", fn.kernel_file_, "\", \"function\": \"",
                    fn.function_name_, "\", \"heuristics\": {\"config\": ", seen_config, ", \"arguments\": ",
                    named_json.dump(), ", \"values\": {...what the heuristics return...}}}");
        try {
          entry.value = detail::python_bridge().heuristic_values(ensure_python(),
                                                                 python_arguments(args, num_args), seen_config);
        } catch (const c10::Error& e) {
          TORCH_CHECK(false, "tjit: kernel ", fn.function_name_, ": ", e.what_without_backtrace());
        }
        nlohmann::json values = nlohmann::json::array();
        for (const auto& [index, value] : entry.value) {
          values.push_back({index, detail::constexpr_value_json<nlohmann::json>(value)});
        }
        detail::store_decision_record(signature, {record_key, values.dump()});
      }
      nlohmann::ordered_json by_name = nlohmann::ordered_json::object();
      for (const auto& [index, value] : entry.value) {
        by_name[fn.params_[index].name] = detail::constexpr_value_json<nlohmann::ordered_json>(value);
      }
      detail::note_decision(signature, "heuristics",
                            nlohmann::ordered_json{{"config", seen_config}, {"arguments", named_json},
                                                   {"values", by_name}}.dump());
      entry.ready.store(true, std::memory_order_release);
    }
  }
  return entry.value;
}

std::optional<std::vector<std::pair<int, ConstexprValue>>> TritonJitFunction::Impl::heuristic_values_from_names(
    const std::string& value_json) const {
  const auto values = nlohmann::json::parse(value_json, nullptr, /*allow_exceptions=*/false);
  if (!values.is_object()) {
    return std::nullopt;
  }
  std::vector<std::pair<int, ConstexprValue>> out;
  for (int index : tuning.heuristic_params) {
    const auto it = values.find(fn.params_[index].name);
    const auto value = it != values.end() ? detail::constexpr_value_from_json(*it) : std::nullopt;
    if (!value) {
      return std::nullopt;  // not for this kernel's heuristics (the bundle's builder checks this)
    }
    out.emplace_back(index, *value);
  }
  return out;
}

std::optional<std::vector<std::pair<int, ConstexprValue>>> TritonJitFunction::Impl::stored_heuristic_values(
    const std::string& key) const {
  const auto record = detail::load_decision_record(signature, key);
  if (!record) {
    return std::nullopt;
  }
  const auto values = nlohmann::json::parse(record->value, nullptr, /*allow_exceptions=*/false);
  std::vector<std::pair<int, ConstexprValue>> out;
  for (const auto& item : values.is_array() ? values : nlohmann::json::array()) {
    const int index = item.is_array() && item.size() == 2 && item[0].is_number_integer() ? item[0].get<int>() : -1;
    const auto value = index >= 0 ? detail::constexpr_value_from_json(item[1]) : std::nullopt;
    if (!value || static_cast<size_t>(index) >= fn.params_.size()) {
      return std::nullopt;  // not what this runtime writes: ask Python again (and rewrite it)
    }
    out.emplace_back(index, *value);
  }
  if (out.size() != tuning.heuristic_params.size()) {
    return std::nullopt;
  }
  return out;
}

}  // namespace tjit
