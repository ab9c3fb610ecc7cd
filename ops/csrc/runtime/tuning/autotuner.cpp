#include "tuning/autotuner.h"

#include "binaries/constexpr_json.h"
#include "launch/cuda_driver.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <limits>

namespace tjit {

std::string KernelConfig::describe() const {
  std::string out;
  for (const auto& [name, value] : values) {
    out += name + ": " + constexpr_text(value) + ", ";
  }
  out += "num_warps: " + std::to_string(options.num_warps) + ", num_ctas: " + std::to_string(options.num_ctas) +
         ", num_stages: " + std::to_string(options.num_stages) +
         ", maxnreg: " + (options.maxnreg != 0 ? std::to_string(options.maxnreg) : std::string("None"));
  return out;
}

const ConstexprValue& KernelMeta::find(std::string_view name) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == name) {
      TORCH_CHECK(has_value_[i], "tjit: kernel ", kernel_name_, ": the grid asked META[\"", name,
                  "\"], which is a tensor or pointer argument, not a value");
      return values_[i];
    }
  }
  TORCH_CHECK(false, "tjit: kernel ", kernel_name_, ": the grid asked META[\"", name, "\"], but the kernel has no ",
              "parameter of that name");
}

int64_t KernelMeta::operator[](std::string_view name) const {
  const ConstexprValue& v = find(name);
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return *i;
  }
  if (const auto* b = std::get_if<bool>(&v)) {
    return *b ? 1 : 0;
  }
  TORCH_CHECK(false, "tjit: kernel ", kernel_name_, ": META[\"", name, "\"] is ",
              std::holds_alternative<double>(v) ? "a float (use value_as_double)" : constexpr_text(v),
              ", not an integer (META.value(name) gives any value)");
}

double KernelMeta::value_as_double(std::string_view name) const {
  const ConstexprValue& v = find(name);
  if (const auto* d = std::get_if<double>(&v)) {
    return *d;
  }
  return static_cast<double>((*this)[name]);
}

namespace detail {
namespace {

// Ordered: a config's meta-parameters keep the order its source gives them, as Triton prints them.
using json = nlohmann::ordered_json;

int position_of(const std::vector<int>& caller_params, const std::vector<KernelParam>& params,
                const std::string& name, const std::string& kernel, const char* what) {
  for (size_t i = 0; i < caller_params.size(); ++i) {
    if (params[caller_params[i]].name == name) {
      return static_cast<int>(i);
    }
  }
  for (const KernelParam& p : params) {
    TORCH_CHECK(p.name != name, "tjit: kernel ", kernel, ": @triton.autotune's ", what, " names '", name,
                "', which a config or heuristic sets; tjit supports ", what, " arguments that the caller passes");
  }
  TORCH_CHECK(false, "tjit: kernel ", kernel, ": @triton.autotune's ", what, " names '", name,
              "', which is not one of its parameters");
}

int parameter_index(const std::vector<KernelParam>& params, const std::string& name, const std::string& kernel,
                    const char* what) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) {
      return static_cast<int>(i);
    }
  }
  TORCH_CHECK(false, "tjit: kernel ", kernel, ": ", what, " sets '", name, "', which is not one of its parameters");
}

ConstexprValue meta_parameter(const json& j, const std::string& name, const std::string& kernel) {
  const auto value = constexpr_value_from_json(j);
  TORCH_CHECK(value, "tjit: kernel ", kernel, ": a config sets '", name, "' to ", j.dump(),
              "; meta-parameters are None, bool, int or float");
  return *value;
}

}  // namespace

TuningSpec parse_tuning_spec(const std::string& tuning, const std::vector<KernelParam>& params,
                             const std::string& kernel) {
  TuningSpec spec;
  TORCH_CHECK(params.size() <= kMaxRunParams, "tjit: kernel ", kernel, " has ", params.size(),
              " parameters; run() takes kernels of up to ", kMaxRunParams);
  json j;
  if (!tuning.empty()) {
    try {
      j = json::parse(tuning);
    } catch (const json::exception& e) {
      TORCH_CHECK(false, "tjit: kernel ", kernel, ": its autotune description is not valid JSON: ", e.what());
    }
  }
  if (tuning.empty() || j.contains("unsupported")) {
    if (!tuning.empty()) {
      spec.unsupported = j.at("unsupported").get<std::string>();
    }
    spec.configs.emplace_back();
    spec.config_values.emplace_back();
    spec.config_pre_hooks.emplace_back();
    for (size_t i = 0; i < params.size(); ++i) {
      spec.caller_params.push_back(static_cast<int>(i));
    }
    return spec;
  }
  try {
    spec.autotuned = j.at("autotuned").get<bool>();
    std::vector<bool> set_by_configs(params.size(), false);
    std::vector<bool> set_by_heuristics(params.size(), false);
    for (const json& h : j.at("heuristics")) {
      const int index = parameter_index(params, h.get<std::string>(), kernel, "@triton.heuristics");
      spec.heuristic_params.push_back(index);
      set_by_heuristics[index] = true;
    }
    for (const json& c : j.at("configs")) {
      KernelConfig config;
      std::vector<std::pair<int, ConstexprValue>> values;
      for (const auto& [name, value] : c.at("kwargs").items()) {
        const int index = parameter_index(params, name, kernel, "a config");
        TORCH_CHECK(params[index].is_constexpr, "tjit: kernel ", kernel, ": a config sets '", name,
                    "', which is not a tl.constexpr parameter");
        const ConstexprValue v = meta_parameter(value, name, kernel);
        config.values.emplace_back(name, v);
        values.emplace_back(index, v);
        set_by_configs[index] = true;
      }
      config.options.num_warps = c.at("num_warps").get<int>();
      config.options.num_stages = c.at("num_stages").get<int>();
      config.options.num_ctas = c.at("num_ctas").get<int>();
      config.options.maxnreg = c.at("maxnreg").get<int>();
      spec.config_pre_hooks.push_back(c.value("pre_hook", std::string()));
      spec.any_pre_hook = spec.any_pre_hook || !spec.config_pre_hooks.back().empty();
      spec.configs.push_back(std::move(config));
      spec.config_values.push_back(std::move(values));
    }
    if (spec.configs.empty()) {  // @triton.autotune(configs=[]) or heuristics only: Triton's defaults
      spec.configs.emplace_back();
      spec.config_values.emplace_back();
      spec.config_pre_hooks.emplace_back();
    }
    // A meta-parameter some config sets must come from every config (or a heuristic): the caller
    // cannot pass it for some configs only.
    for (size_t c = 0; c < spec.config_values.size(); ++c) {
      std::vector<bool> set_here(params.size(), false);
      for (const auto& value : spec.config_values[c]) {
        set_here[value.first] = true;
      }
      for (size_t i = 0; i < params.size(); ++i) {
        TORCH_CHECK(!set_by_configs[i] || set_here[i] || set_by_heuristics[i], "tjit: kernel ", kernel, ": config ",
                    spec.configs[c].describe(), " does not set '", params[i].name,
                    "', which other configs set; every config must set the same meta-parameters");
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (!set_by_configs[i] && !set_by_heuristics[i]) {
        spec.caller_params.push_back(static_cast<int>(i));
      }
    }
    // As Python Triton's autotuner: a key name the caller does not pass (not a parameter, or one a
    // config or heuristic sets) is not part of the key.
    for (const json& k : j.at("key")) {
      const std::string name = k.get<std::string>();
      const auto caller = std::find_if(spec.caller_params.begin(), spec.caller_params.end(),
                                       [&](int i) { return params[i].name == name; });
      if (caller != spec.caller_params.end()) {
        spec.key_args.push_back(static_cast<int>(caller - spec.caller_params.begin()));
      } else {
        std::fprintf(stderr, "[tjit] kernel %s: @triton.autotune's key names '%s', which the caller does not pass "
                     "(not a parameter, or set by a config or heuristic); it is left out of the key, as Python "
                     "Triton does\n", kernel.c_str(), name.c_str());
      }
    }
    for (const json& k : j.at("reset_to_zero")) {
      spec.reset_to_zero.push_back(
          position_of(spec.caller_params, params, k.get<std::string>(), kernel, "reset_to_zero"));
    }
    for (const json& k : j.at("restore_value")) {
      spec.restore_value.push_back(
          position_of(spec.caller_params, params, k.get<std::string>(), kernel, "restore_value"));
    }
    spec.tuner_pre_hook = j.value("tuner_pre_hook", std::string());
    spec.tuner_post_hook = j.value("tuner_post_hook", std::string());
    spec.heuristics_see_config = j.at("heuristics_see_config").get<bool>();
    spec.prune = j.at("prune").get<bool>();
    spec.warmup_ms = j.at("warmup_ms").get<double>();
    spec.rep_ms = j.at("rep_ms").get<double>();
    spec.configs_text = j.at("configs").dump();
  } catch (const json::exception& e) {
    TORCH_CHECK(false, "tjit: kernel ", kernel, ": its autotune description misses or mistypes a field: ", e.what());
  }
  return spec;
}

namespace {

// The bytes a tensor's elements occupy, from its lowest to its highest element.
std::pair<char*, size_t> span_of(const at::Tensor& t) {
  if (t.numel() == 0) {
    return {nullptr, 0};
  }
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    TORCH_CHECK(t.stride(d) >= 0, "tjit: autotuning cannot save a tensor with negative strides");
    last += (t.size(d) - 1) * t.stride(d);
  }
  return {static_cast<char*>(t.data_ptr()), static_cast<size_t>(last + 1) * t.element_size()};
}

}  // namespace

c10::DataPtr allocate_device_memory(int device, size_t bytes, const char* purpose) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::CUDA);
  TORCH_CHECK(allocator != nullptr, "tjit: ", purpose, " needs device memory and torch has no CUDA allocator");
  return allocator->allocate(bytes);
}

ArgumentResetter::ArgumentResetter(const TuningSpec& spec, const CapturedArg* args, void* stream, const char* kernel)
    : stream_(stream) {
  auto tensor_of = [&](int position, const char* what) -> const at::Tensor& {
    const CapturedArg& a = args[position];
    TORCH_CHECK(a.kind == CapturedArg::Kind::Tensor, "tjit: kernel ", kernel, ": @triton.autotune's ", what,
                " names argument ", position, ", which must be a tensor");
    return *a.tensor;
  };
  for (int position : spec.reset_to_zero) {
    const at::Tensor& t = tensor_of(position, "reset_to_zero");
    TORCH_CHECK(t.is_non_overlapping_and_dense(), "tjit: kernel ", kernel, ": reset_to_zero argument ", position,
                " must be a dense tensor (every element of its memory in the view), so zeroing its memory zeroes "
                "exactly the view");
    auto [data, bytes] = span_of(t);
    zero_.push_back({data, bytes, t.is_cuda(), nullptr});
  }
  for (int position : spec.restore_value) {
    const at::Tensor& t = tensor_of(position, "restore_value");
    auto [data, bytes] = span_of(t);
    Span span{data, bytes, t.is_cuda(), nullptr};
    if (bytes > 0) {
      if (span.cuda) {
        auto copy = std::make_shared<c10::DataPtr>(allocate_device_memory(t.device().index(), bytes, "autotuning (restore_value)"));
        const auto& cu = cuda_driver();
        check_cuda(cu.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(copy->get()), reinterpret_cast<CUdeviceptr>(data),
                                        bytes, static_cast<CUstream>(stream)),
                   "cuMemcpyDtoDAsync", "saving a restore_value argument for autotuning");
        span.saved = std::shared_ptr<void>(copy, copy->get());
      } else {
        auto copy = std::make_shared<std::vector<char>>(data, data + bytes);
        span.saved = std::shared_ptr<void>(copy, copy->data());
      }
    }
    restore_.push_back(std::move(span));
  }
}

ArgumentResetter::~ArgumentResetter() {
  // The copies are freed through torch's allocator, which orders the free after the stream's work
  // only for its own streams: wait for ours.
  if (std::any_of(restore_.begin(), restore_.end(), [](const Span& s) { return s.cuda && s.bytes > 0; })) {
    cuda_driver().cuStreamSynchronize(static_cast<CUstream>(stream_));
  }
}

void ArgumentResetter::reset() const {
  const auto stream = static_cast<CUstream>(stream_);
  for (const Span& s : zero_) {
    if (s.bytes == 0) continue;
    if (s.cuda) {
      check_cuda(cuda_driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(s.data), 0, s.bytes, stream),
                 "cuMemsetD8Async", "zeroing a reset_to_zero argument");
    } else {
      std::memset(s.data, 0, s.bytes);
    }
  }
  for (const Span& s : restore_) {
    if (s.bytes == 0) continue;
    if (s.cuda) {
      check_cuda(cuda_driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(s.data),
                                                 reinterpret_cast<CUdeviceptr>(s.saved.get()), s.bytes, stream),
                 "cuMemcpyDtoDAsync", "restoring a restore_value argument");
    } else {
      std::memcpy(s.data, s.saved.get(), s.bytes);
    }
  }
}

namespace {

struct Event {
  CUevent event = nullptr;
  Event() { check_cuda(cuda_driver().cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate", "autotuning"); }
  ~Event() {
    if (event != nullptr) cuda_driver().cuEventDestroy(event);
  }
  Event(Event&& o) noexcept : event(o.event) { o.event = nullptr; }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event& operator=(Event&&) = delete;
};

float elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  check_cuda(cuda_driver().cuEventElapsedTime(&ms, start.event, end.event), "cuEventElapsedTime", "autotuning");
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double time_on_gpu(void* stream_handle, int device, const std::function<void()>& prepare,
                   const std::function<void()>& run, double warmup_ms, double rep_ms, size_t& runs) {
  const auto& cu = cuda_driver();
  const auto stream = static_cast<CUstream>(stream_handle);
  constexpr size_t kCacheBytes = 256u << 20;  // what Triton's benchmarker clears the L2 cache with
  c10::DataPtr cache = allocate_device_memory(device, kCacheBytes, "autotuning (clearing the L2 cache)");
  auto clear_cache = [&] {
    check_cuda(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(cache.get()), 0, kCacheBytes / 4, stream),
               "cuMemsetD32Async", "clearing the L2 cache for autotuning");
  };
  auto sync = [&] { check_cuda(cu.cuStreamSynchronize(stream), "cuStreamSynchronize", "autotuning"); };
  prepare();
  run();
  ++runs;
  sync();
  // The estimate includes the cache clearing (and the resets), as do_bench's does: it decides how
  // many runs fit the budget, so a tiny kernel gets ~1000 timed runs, not 20000. Every run starts
  // from reset arguments: a kernel may need them (a zeroed counter) to run at all.
  Event start;
  Event end;
  check_cuda(cu.cuEventRecord(start.event, stream), "cuEventRecord", "autotuning");
  for (int i = 0; i < 5; ++i) {
    prepare();
    clear_cache();
    run();
    ++runs;
  }
  check_cuda(cu.cuEventRecord(end.event, stream), "cuEventRecord", "autotuning");
  sync();
  const double estimate = std::max(elapsed_ms(start, end) / 5.0, 1e-3);
  const int warmups = std::max(1, static_cast<int>(warmup_ms / estimate));
  const int reps = std::max(1, std::min(static_cast<int>(rep_ms / estimate), 10000));
  for (int i = 0; i < warmups; ++i) {
    prepare();
    run();
    ++runs;
  }
  std::vector<Event> starts(reps);
  std::vector<Event> ends(reps);
  for (int i = 0; i < reps; ++i) {
    prepare();
    clear_cache();
    check_cuda(cu.cuEventRecord(starts[i].event, stream), "cuEventRecord", "autotuning");
    run();
    check_cuda(cu.cuEventRecord(ends[i].event, stream), "cuEventRecord", "autotuning");
    ++runs;
  }
  sync();
  std::vector<double> times(reps);
  for (int i = 0; i < reps; ++i) {
    times[i] = elapsed_ms(starts[i], ends[i]);
  }
  return median(std::move(times));
}

double time_on_cpu(const std::function<void()>& prepare, const std::function<void()>& run, size_t& runs) {
  prepare();
  run();
  ++runs;
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) {
    prepare();
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    ++runs;
  }
  return median(std::move(times));
}

DeviceContextScope::DeviceContextScope(int device) {
  const auto& cu = cuda_driver();
  CUcontext current = nullptr;
  check_cuda(cu.cuCtxGetCurrent(&current), "cuCtxGetCurrent", "autotuning");
  if (current != nullptr) {
    CUdevice current_device = 0;
    check_cuda(cu.cuCtxGetDevice(&current_device), "cuCtxGetDevice", "autotuning");
    if (static_cast<int>(current_device) == device) {
      return;
    }
  }
  CUdevice dev = 0;
  check_cuda(cu.cuDeviceGet(&dev, device), "cuDeviceGet", "autotuning");
  CUcontext ctx = nullptr;
  check_cuda(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", "autotuning");
  check_cuda(cu.cuCtxPushCurrent(ctx), "cuCtxPushCurrent", "autotuning");
  pushed_ = true;
}

DeviceContextScope::~DeviceContextScope() {
  if (pushed_) {
    CUcontext ignored = nullptr;
    cuda_driver().cuCtxPopCurrent(&ignored);
  }
}

}  // namespace detail
}  // namespace tjit
