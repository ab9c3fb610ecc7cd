// The config an autotuned kernel runs for a new tuning key: a kernel bundle's choice, else the
// kernel store's decision record, else each config timed as triton.testing.do_bench times it
// (then stored, with every config's timing); logged once, noted in a manifest being recorded.

#include "function/function_impl.h"

#include "binaries/kernel_bundle_detail.h"
#include "binaries/manifest_recorder.h"
#include <tjit/relaxed_capture.h>
#include "launch/cuda_device.h"
#include "python/python_bridge.h"
#include "settings/settings.h"
#include "tuning/captured_args.h"

#include <tjit/current_stream.h>
#include <tjit/prepare.h>

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tjit {
namespace {

using detail::CapturedArg;
using detail::describe_argument;
using detail::has_dtype;
using detail::python_arguments;

}  // namespace

std::string TritonJitFunction::Impl::decision_key(const char* kind) const {
  std::string sources;
  for (const detail::SourceFile& f : signature.sources) {
    sources += f.path + "@" + f.fingerprint + " ";
  }
  return std::string("tjit ") + kind + " v1\nfile " + fn.kernel_file_ + "\nfunction " + fn.function_name_ +
         "\nsources " + sources + "\ntriton " + signature.triton_version + "\n";
}

int TritonJitFunction::Impl::tune_key(Stream stream, const detail::GridSource& grid, const CapturedArg* args,
                                      int device, bool may_time, const std::string* for_target, bool* deferred) {
  const detail::TuningSpec& spec = tuning;
  const auto& configs = spec.configs;
  const size_t num_args = spec.caller_params.size();
  std::string key_text;
  bool tensor_in_key = false;  // a choice per tensor object: nothing to share through a store
  for (int position : spec.key_args) {
    key_text += fn.params_[spec.caller_params[position]].name + "=" + describe_argument(args[position]);
    if (args[position].kind == CapturedArg::Kind::Tensor) {
      tensor_in_key = true;
      key_text += " tensor@" + std::to_string(detail::tensor_identity(args[position]));
    }
    key_text += ", ";
  }
  key_text += "dtypes:";
  for (size_t i = 0; i < num_args; ++i) {
    if (has_dtype(args[i])) {
      key_text += ' ';
      key_text += describe_argument(args[i]);
    }
  }
  const std::string target = for_target != nullptr ? *for_target
                             : device >= 0         ? detail::target_of_device(device).to_string()
                                                   : std::string("interpreter");
  const std::string record_key = decision_key("autotune choice") + "target " + target + "\nconfigs " +
                                 spec.configs_text + "\nkey " + key_text + "\n";
  const auto chosen = [&](int config) {
    detail::note_decision(signature, "autotune",
                          nlohmann::ordered_json{{"target", target}, {"key", key_text},
                                                 {"config", configs[config].describe()}}.dump());
    return config;
  };
  if (bundled_tuning_enabled() && !tensor_in_key) {
    if (auto bundled = detail::find_bundled_decision(fn.kernel_file_, fn.function_name_, "autotune",
                                                     "target " + target + "\nkey " + key_text)) {
      const auto value = nlohmann::json::parse(*bundled, nullptr, /*allow_exceptions=*/false);
      for (size_t c = 0; value.is_string() && c < configs.size(); ++c) {
        if (configs[c].describe() == value.get<std::string>()) {
          num_tunings_loaded.fetch_add(1);
          return chosen(static_cast<int>(c));
        }
      }
    }
  }
  if (auto record = tensor_in_key ? std::nullopt : detail::load_decision_record(signature, record_key)) {
    const auto value = nlohmann::json::parse(record->value, nullptr, /*allow_exceptions=*/false);
    const int config = value.is_object() ? value.value("config", -1) : -1;
    if (config >= 0 && static_cast<size_t>(config) < configs.size() &&
        value.value("config_text", std::string()) == configs[config].describe()) {
      num_tunings_loaded.fetch_add(1);
      return chosen(config);
    }
  }
  if (!may_time) {
    return -1;
  }
  const bool capturing = device >= 0 && stream_is_capturing(stream, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
  TORCH_CHECK(!capturing || deferred != nullptr, "tjit: kernel ", fn.function_name_,
              " needs autotuning for a new key (", key_text, "), but its stream is being captured into a CUDA graph, ",
              "where tuning cannot time anything. Call tune() with the same arguments before the capture (or give the "
              "kernel store a choice made earlier)");
  std::vector<int> candidates;
  const bool tuner_pre = static_cast<bool>(tuner_pre_hook);
  const bool tuner_post = static_cast<bool>(tuner_post_hook);
  if (!capturing && (!spec.tuner_pre_hook.empty() || !spec.tuner_post_hook.empty()) && !tuner_pre && !tuner_post) {
    std::string hooks = spec.tuner_pre_hook.empty() ? "" : "pre_hook " + spec.tuner_pre_hook;
    if (!spec.tuner_post_hook.empty()) {
      hooks += (hooks.empty() ? "" : " and ") + std::string("post_hook ") + spec.tuner_post_hook;
    }
    TORCH_CHECK(false, "tjit: kernel ", fn.function_name_, " needs autotuning for a new key (", key_text, "), and its "
                "@triton.autotune has the ", hooks, ", Python that Python Triton runs around each timed run and tjit "
                "does not run from C++. Supply it in C++ (TritonJitFunction::set_autotune_hooks), give the kernel "
                "store or a bundle a choice for this key, or call the kernel with every argument (operator())");
  }
  if (spec.prune) {
    TORCH_CHECK(jit_enabled(), "tjit: kernel ", fn.function_name_, " needs autotuning for a new key (", key_text,
                "), and its prune_configs_by runs in Python, but JIT is off (TJIT_JIT=0)");
    try {
      candidates = detail::python_bridge().prune_configs(ensure_python(), python_arguments(args, num_args));
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "tjit: kernel ", fn.function_name_, ": ", e.what_without_backtrace());
    }
    TORCH_CHECK(!candidates.empty(), "tjit: kernel ", fn.function_name_, ": prune_configs_by kept no config for key (",
                key_text, "); it must keep at least one");
  } else {
    for (size_t c = 0; c < configs.size(); ++c) {
      candidates.push_back(static_cast<int>(c));
    }
  }
  if (capturing) {
    // Any config gives the kernel's results; the timing waits for an uncaptured call.
    *deferred = true;
    if (detail::settings::log_compiles()) {
      std::fprintf(stderr, "[tjit] autotuning %s for key (%s) deferred: its stream is being captured into a CUDA "
                   "graph; the graph launches config %s\n", fn.function_name_.c_str(), key_text.c_str(),
                   configs[candidates.front()].describe().c_str());
    }
    return candidates.front();
  }
  const auto start = std::chrono::steady_clock::now();
  std::optional<detail::DeviceContextScope> context;
  std::optional<RelaxedCaptureMode> relaxed;  // another thread may be capturing a graph
  PrepareOnlyScope timing_launches(false);  // tjit::prepare() times configs too
  if (device >= 0) {
    context.emplace(device);
    relaxed.emplace();
  }
  detail::ArgumentResetter resetter(spec, args, stream, fn.function_name_.c_str());
  std::vector<double> timings(configs.size(), std::numeric_limits<double>::infinity());
  std::string failures;
  size_t runs = 0;
  for (int c : candidates) {
    std::array<ConstexprValue, detail::kMaxRunParams> values;
    std::array<bool, detail::kMaxRunParams> has_value;
    detail::ArgumentPack<detail::kMaxRunSlots> pack(fn.params_, fn.function_name_.c_str());
    const LaunchOptions& options = configs[c].options;
    // A failing heuristic, pre_hook or grid is the caller's error, not the config's: it propagates.
    detail::DescriptorCopies copies;
    assemble(args, c, pack, values.data(), has_value.data(), HookContext{stream, true, &copies});
    const KernelMeta meta(fn.params_, values.data(), has_value.data(), options, fn.function_name_.c_str());
    const Grid g = grid(meta);
    // A C++ pre_hook runs before every run, as Python Triton's do; assemble() called it for the
    // first. (A recorded hook's whole effect is on the descriptors, which the pack holds.)
    bool hook_called = true;
    detail::DescriptorOverrides scratch;
    const bool cpp_hook = has_cpp_pre_hook.load(std::memory_order_acquire);
    // @triton.autotune's own hooks, supplied in C++: descriptor fields they set are not applied.
    detail::DescriptorOverrides ignored;
    ConfigHookArgs::Internals internals{fn.params_, spec.caller_params, args, ignored, fn.function_name_.c_str()};
    ConfigHookArgs tuner_args(internals, c, configs[c], meta, /*timing=*/true, stream);
    try {
      auto prepare = [&] {
        if (cpp_hook && !hook_called) {
          call_cpp_pre_hook(args, c, meta, /*timing=*/true, stream, scratch);
        }
        hook_called = false;
        if (tuner_pre) {
          tuner_pre_hook(tuner_args);  // in place of the resets, as in Python
        } else {
          resetter.reset();
        }
      };
      auto run_once = [&] {
        try {
          fn.launch(stream, g, options, pack);
        } catch (...) {
          if (tuner_post) {
            tuner_post_hook(tuner_args, /*failed=*/true);
          }
          throw;
        }
        if (tuner_post) {
          tuner_post_hook(tuner_args, /*failed=*/false);
        }
      };
      timings[c] = candidates.size() == 1 ? 0.0
                   : device >= 0
                       ? detail::time_on_gpu(stream, device, prepare, run_once, spec.warmup_ms, spec.rep_ms, runs)
                       : detail::time_on_cpu(prepare, run_once, runs);
    } catch (const c10::Error& e) {
      const std::string reason = e.what_without_backtrace();
      failures += "\n  " + configs[c].describe() + ": " + reason;
      std::fprintf(stderr, "[tjit] autotuning %s: skipping config %s: %s\n", fn.function_name_.c_str(),
                   configs[c].describe().c_str(), reason.c_str());
    }
  }
  num_tuning_runs.fetch_add(runs);
  const int best = static_cast<int>(std::min_element(timings.begin(), timings.end()) - timings.begin());
  TORCH_CHECK(std::isfinite(timings[best]), "tjit: kernel ", fn.function_name_, ": every config failed for key (",
              key_text, "):", failures);
  // The caller's own run starts from the arguments it passed.
  if (tuner_pre) {
    // The config's values and the caller's scalars (no heuristics: nothing is launched).
    std::array<ConstexprValue, detail::kMaxRunParams> values;
    std::array<bool, detail::kMaxRunParams> has_value{};
    for (const auto& [index, value] : spec.config_values[best]) {
      values[index] = value;
      has_value[index] = true;
    }
    for (size_t i = 0; i < num_args; ++i) {
      if (const auto scalar = detail::scalar_value(args[i])) {
        values[spec.caller_params[i]] = *scalar;
        has_value[spec.caller_params[i]] = true;
      }
    }
    detail::DescriptorOverrides ignored;
    ConfigHookArgs::Internals internals{fn.params_, spec.caller_params, args, ignored, fn.function_name_.c_str()};
    const KernelMeta meta(fn.params_, values.data(), has_value.data(), configs[best].options,
                          fn.function_name_.c_str());
    ConfigHookArgs reset_args(internals, best, configs[best], meta, /*timing=*/false, stream);
    tuner_pre_hook(reset_args);  // Python's pre_hook(..., reset_only=True)
  } else {
    resetter.reset();
  }
  num_tunings.fetch_add(1);
  nlohmann::json timings_json = nlohmann::json::array();
  for (double t : timings) {
    timings_json.push_back(std::isfinite(t) ? nlohmann::json(t) : nlohmann::json());  // null: failed or pruned
  }
  if (!tensor_in_key) {
    detail::store_decision_record(
      signature,
      {record_key,
       nlohmann::json{{"config", best}, {"config_text", configs[best].describe()}, {"timings_ms", timings_json}}.dump()});
  }
  if (detail::settings::log_compiles()) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[tjit] autotuned %s for key (%s) on %s: %zu of %zu configs timed in %.0f ms (%zu runs); "
                 "best %s at %.4f ms\n", fn.function_name_.c_str(), key_text.c_str(), target.c_str(), candidates.size(),
                 configs.size(), ms, runs, configs[best].describe().c_str(), timings[best]);
  }
  return chosen(best);
}

}  // namespace tjit
