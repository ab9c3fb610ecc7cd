// tjit_bench_overhead: host (CPU) time per call of launching the add kernel four ways from C++,
// printed as one line of JSON (benchmarks/run_benchmarks.py runs it and keeps that line).
//
//   tjit_add                   tjit::add(x, y): dispatcher + checks + allocation + launch
//   at_add                     at::add(x, y)
//   bare_triton_jit_function   TritonJitFunction::operator() of add_kernel into a pre-allocated
//                              output, with the arguments ops/csrc/ops/add.cpp passes
//   raw_cuLaunchKernel         cuLaunchKernel of the same cubin (compiled by
//                              TritonJitFunction::compile, loaded with cuModuleLoadData into the
//                              primary context) with a prebuilt parameter array
//   tjit_add_impl              tjit::ops::add_triton(x, y, 1): tjit_add without the dispatcher
//   at_empty_like              at::empty_like(x), for scale
//   tjit_empty_output          tjit::kit::empty_output, the allocation every tjit wrapper makes
//   tjit_current_stream        tjit::current_stream, the stream lookup every wrapper makes
//   driver_cuCtxGetCurrent     the one driver call a TritonJitFunction launch makes besides the launch
//
// Each value is the median over rounds of (host time of `calls` back-to-back calls) / calls; the
// stream (torch's current one) is synchronized before each round, never inside one. The
// measurements run round-robin (round r of each, then round r + 1), after a warm-up.
//
// tjit::sum / softmax / layer_norm are measured against their ATen counterparts too ("all_ops" in
// the JSON), and tjit_add_impl (the add wrapper called directly, without the dispatcher) splits
// tjit_add's cost.
//
// Without CUDA it prints {"skipped": true, ...} and exits 0; with --compile-check it then still
// compiles add_kernel for TJIT_TARGET (default cuda:90), which needs no GPU.
//
//   own_4_args, own_14_args    with --own-kernel-file: TritonJitFunction::operator() of the
//                              own-kernel part's two kernels (benchmarks/own_kernels.py) with its
//                              arguments, the C++ figure tjit.jit's launch from Python is held to
//
//   tjit_bench_overhead [--kernel-file PATH/add.py] [--own-kernel-file PATH/launch_overhead_kernels.py]
//                       [--calls N] [--rounds R] [--n ELEMENTS] [--device cuda|cpu] [--compile-check]

#include <tjit/current_stream.h>
#include <tjit/operators.h>
#include <tjit/triton_jit_function.h>

#include "launch/cuda_driver.h"  // tjit::detail::cuda_driver(), from ops/csrc/runtime
#include "kernel_files.h"     // tjit::ops::kernel_path(), from ops/csrc/ops
#include <tjit/kit/outputs.h>

namespace tjit::ops {
// The add operator's CUDA kernel below the dispatcher (ops/csrc/ops/add/add.cpp; liboperators exports it).
at::Tensor add_triton(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
}  // namespace tjit::ops

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/randn.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int64_t kBlock = 1024;  // what ops/csrc/ops/add.cpp passes
constexpr int kNumWarps = 4;
constexpr int64_t kInt32Limit = int64_t{1} << 31;

// ------------------------------------------------------------------------------------- JSON

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4f", v);
  return buf;
}

// An object built field by field, in insertion order.
class JsonObject {
 public:
  JsonObject& raw(const std::string& key, const std::string& json) {
    fields_.emplace_back(key, json);
    return *this;
  }
  JsonObject& str(const std::string& key, const std::string& v) { return raw(key, quote(v)); }
  JsonObject& num(const std::string& key, double v) { return raw(key, number(v)); }
  JsonObject& integer(const std::string& key, int64_t v) { return raw(key, std::to_string(v)); }
  JsonObject& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  JsonObject& obj(const std::string& key, const JsonObject& o) { return raw(key, o.dump()); }
  bool empty() const { return fields_.empty(); }
  std::string dump() const {
    std::string out = "{";
    for (size_t i = 0; i < fields_.size(); ++i) {
      out += (i ? ", " : "") + quote(fields_[i].first) + ": " + fields_[i].second;
    }
    return out + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// ---------------------------------------------------------------------------------- timing

struct Measurement {
  std::string name;
  std::function<void()> call;
  std::vector<double> samples;
  double median_us() const {
    std::vector<double> s = samples;
    std::sort(s.begin(), s.end());
    return s.empty() ? NAN : s[s.size() / 2];
  }
};

void measure_round_robin(std::vector<Measurement>& ms, const std::function<void()>& sync, int calls, int rounds,
                         int warmup) {
  for (auto& m : ms) {
    for (int i = 0; i < warmup; ++i) {
      m.call();
    }
  }
  sync();
  for (int r = 0; r < rounds; ++r) {
    for (auto& m : ms) {
      sync();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) {
        m.call();
      }
      const auto stop = std::chrono::steady_clock::now();
      m.samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / calls);
    }
  }
  sync();
}

struct Options {
  std::string kernel_file;
  std::string own_kernel_file;  // benchmarks/kernels/launch_overhead_kernels.py: the own-kernel part's
  std::string device = "cuda";
  int calls = 1000;
  int rounds = 25;
  int warmup = 50;
  int64_t n = 1024;
  bool compile_check = false;
};

std::string param_names_signature(const tjit::TritonJitFunction& kernel, const tjit::Specialization& spec) {
  std::vector<std::string> names;
  for (const auto& p : kernel.params()) {
    names.push_back(p.name);
  }
  return spec.describe(names);
}

// The raw launch passes (x, y, out, n, alpha, alpha_lo) by hand: check that this is the
// signature the specialisation launches with. "" when it is; sets *n_is_i64.
std::string launch_signature_problem(const tjit::TritonJitFunction& kernel, const tjit::Specialization& spec,
                                     bool* n_is_i64) {
  const size_t k = std::min<size_t>(6, spec.types.size());
  const std::vector<std::string> launched(spec.types.begin(), spec.types.begin() + k);
  *n_is_i64 = k > 3 && launched[3] == "i64";
  const std::vector<std::string> want{"*fp32", "*fp32", "*fp32", *n_is_i64 ? "i64" : "i32", "fp32", "fp32"};
  for (size_t i = 6; i < spec.types.size(); ++i) {
    if (spec.types[i] != "constexpr") {
      return "unexpected signature " + param_names_signature(kernel, spec);
    }
  }
  return launched == want ? "" : "unexpected signature " + param_names_signature(kernel, spec);
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    out += (out.empty() ? "" : ", ") + s;
  }
  return out;
}

// Without a GPU: compile add_kernel for a named target, to show the C++ compile path works.
JsonObject compile_check(const Options& opt) {
  JsonObject out;
  try {
    auto& kernel = tjit::TritonJitFunction::get_instance(opt.kernel_file, "add_kernel");
    const auto cpu = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor x = at::empty({opt.n}, cpu);
    const at::Tensor y = at::empty({opt.n}, cpu);
    const at::Tensor o = at::empty({opt.n}, cpu);
    const bool index64 = opt.n + kBlock > kInt32Limit;
    const tjit::CompileTarget target = tjit::target_from_environment().value_or(tjit::CompileTarget{"cuda", 90, 32});
    const tjit::LaunchOptions launch{kNumWarps};
    const auto spec = kernel.specialize(x, y, o, opt.n, 1.0f, 0.0, false, kBlock, index64);
    const auto start = std::chrono::steady_clock::now();
    const tjit::CompiledKernel ck = kernel.compile(target, launch, x, y, o, opt.n, 1.0f, 0.0, false, kBlock, index64);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool n_is_i64 = false;
    const std::string problem = launch_signature_problem(kernel, spec, &n_is_i64);
    out.str("target", target.to_string())
        .str("kernel", ck.name)
        .integer("binary_bytes", static_cast<int64_t>(ck.binary.size()))
        .integer("num_warps", ck.num_warps)
        .integer("shared_memory", ck.shared_memory)
        .integer("global_scratch_size", ck.global_scratch_size)
        .str("signature", param_names_signature(kernel, spec))
        .str("launch_types", join(spec.types))
        .str("raw_launch_signature", problem.empty() ? "as expected" : problem)
        .num("seconds", seconds)
        .boolean("ok", !ck.binary.empty() && problem.empty());
  } catch (const std::exception& e) {
    out.boolean("ok", false).str("error", e.what());
  }
  return out;
}

void check_cu(CUresult r, const char* what) { tjit::detail::check_cuda(r, what, "tjit_bench_overhead"); }

JsonObject run_cuda(const Options& opt) {
  const c10::Device device(c10::DeviceType::CUDA, 0);
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  const int64_t n = opt.n;
  const at::Tensor x = at::randn({n}, options);
  const at::Tensor y = at::randn({n}, options);
  at::Tensor out = at::empty({n}, options);
  const at::Tensor expected = at::add(x, y);

  const c10::Stream stream = c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getStream(device);
  const tjit::Stream handle = tjit::current_stream(device);
  const auto sync = [&] { stream.synchronize(); };
  auto matches = [&](const at::Tensor& got) { return at::allclose(got, expected, 1e-6, 1e-6); };

  JsonObject checks;
  JsonObject errors;
  std::vector<Measurement> ms;

  // tjit::add and at::add.
  checks.boolean("tjit_add", matches(tjit::add(x, y)));
  ms.push_back({"tjit_add", [&] { (void)tjit::add(x, y); }, {}});
  checks.boolean("tjit_add_impl", matches(tjit::ops::add_triton(x, y, 1)));
  ms.push_back({"tjit_add_impl", [&] { (void)tjit::ops::add_triton(x, y, 1); }, {}});
  ms.push_back({"at_add", [&] { (void)at::add(x, y); }, {}});

  // The bare runtime: the launch tjit::add makes, without dispatcher, checks or allocation.
  auto& kernel = tjit::TritonJitFunction::get_instance(opt.kernel_file, "add_kernel");
  const tjit::Grid grid(static_cast<uint32_t>((n + kBlock - 1) / kBlock));
  const tjit::LaunchOptions launch{kNumWarps};
  const bool index64 = n + kBlock > kInt32Limit;
  auto bare = [&] { kernel(handle, grid, launch, x, y, out, n, 1.0f, 0.0, false, kBlock, index64); };
  out.zero_();
  bare();
  checks.boolean("bare_triton_jit_function", matches(out));
  ms.push_back({"bare_triton_jit_function", bare, {}});

  // The own-kernel part's kernels (benchmarks/own_kernels.py) with its arguments, launched bare from
  // C++: the figure tjit.jit's launch from Python is compared with.
  if (!opt.own_kernel_file.empty()) {
    constexpr int64_t kOwnN = 1000;  // own_kernels.py: N, BLOCK, SHIFT, GRID (1,)
    constexpr int64_t kOwnBlock = 1024;
    constexpr int64_t kOwnShift = 5;
    const tjit::Grid one(1);
    const tjit::LaunchOptions own_launch{};
    // The calls outlive this block (measured below): they hold what they use by value.
    const auto* copy_scale = &tjit::TritonJitFunction::get_instance(opt.own_kernel_file, "copy_scale_kernel");
    const auto* args14 = &tjit::TritonJitFunction::get_instance(opt.own_kernel_file, "args14_kernel");
    const at::Tensor x4 = at::randn({kOwnN}, options);
    const at::Tensor out4 = at::empty({kOwnN}, options);
    const at::Tensor a = at::randn({2 * kOwnN}, options);
    const at::Tensor b = at::randn({3 * kOwnN}, options);
    const at::Tensor c = at::randn({kOwnN}, options);
    const at::Tensor out14 = at::zeros({kOwnN + kOwnShift}, options);
    const float alpha = 0.5f, beta = -1.25f, gamma = 2.0f, eps = 1e-3f;
    auto own4 = [=] { (*copy_scale)(handle, one, own_launch, x4, out4, kOwnN, kOwnBlock); };
    auto own14 = [=] {
      (*args14)(handle, one, own_launch, a, b, c, out14, kOwnN, int64_t{2}, int64_t{3}, kOwnShift, alpha, beta, gamma,
                eps, kOwnBlock, true);
    };
    own4();
    own14();
    checks.boolean("own_4_args", at::allclose(out4, x4 * 2.0, 1e-6, 1e-6));
    const at::Tensor want14 = alpha * a.slice(0, 0, 2 * kOwnN, 2) + beta * b.slice(0, 0, 3 * kOwnN, 3) + gamma * c + eps;
    checks.boolean("own_14_args", at::allclose(out14.narrow(0, kOwnShift, kOwnN), want14, 1e-5, 1e-5) &&
                                      out14.narrow(0, 0, kOwnShift).eq(0).all().item<bool>());
    ms.push_back({"own_4_args", own4, {}});
    ms.push_back({"own_14_args", own14, {}});
  }

  // Raw driver launch of the same cubin.
  const auto& cu = tjit::detail::cuda_driver();
  CUdevice dev = 0;
  check_cu(cu.cuDeviceGet(&dev, device.index()), "cuDeviceGet");
  int major = 0;
  int minor = 0;
  check_cu(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  check_cu(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  const tjit::CompileTarget target{"cuda", major * 10 + minor, 32};
  const tjit::Specialization spec = kernel.specialize(x, y, out, n, 1.0f, 0.0, false, kBlock, index64);
  const tjit::CompiledKernel ck = kernel.compile(target, launch, x, y, out, n, 1.0f, 0.0, false, kBlock, index64);
  JsonObject kernel_info;
  kernel_info.str("name", ck.name)
      .str("target", target.to_string())
      .str("signature", param_names_signature(kernel, spec))
      .integer("num_warps", ck.num_warps)
      .integer("shared_memory", ck.shared_memory)
      .integer("grid", grid.x);

  // Launch parameters: the non-constexpr arguments in order, then the two scratch pointers.
  CUdeviceptr px = reinterpret_cast<CUdeviceptr>(x.data_ptr());
  CUdeviceptr py = reinterpret_cast<CUdeviceptr>(y.data_ptr());
  CUdeviceptr pout = reinterpret_cast<CUdeviceptr>(out.data_ptr());
  int32_t n32 = static_cast<int32_t>(n);
  int64_t n64 = n;
  float alpha = 1.0f;
  float alpha_lo = 0.0f;
  CUdeviceptr global_scratch = 0;
  CUdeviceptr profile_scratch = 0;
  bool n_is_i64 = false;
  std::string raw_problem = launch_signature_problem(kernel, spec, &n_is_i64);
  if (!raw_problem.empty()) {
    // reported below
  } else if (ck.global_scratch_size > 0 || ck.profile_scratch_size > 0) {
    raw_problem = "the cubin needs scratch memory";
  } else if (ck.num_ctas != 1 || ck.launch_cooperative_grid || ck.launch_pdl || ck.shared_memory > 49152) {
    raw_problem = "the cubin needs launch attributes a plain cuLaunchKernel does not give";
  }
  void* params[] = {&px, &py, &pout, n_is_i64 ? static_cast<void*>(&n64) : static_cast<void*>(&n32), &alpha,
                    &alpha_lo, &global_scratch, &profile_scratch};
  CUfunction function = nullptr;
  CUresult launch_result = CUDA_SUCCESS;
  if (raw_problem.empty()) {
    CUcontext primary = nullptr;
    check_cu(cu.cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
    CUcontext current = nullptr;
    check_cu(cu.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != primary) {
      // torch's runtime calls normally leave the primary context current; make sure of it.
      check_cu(cu.cuCtxPushCurrent(primary), "cuCtxPushCurrent");
      kernel_info.boolean("pushed_primary_context", true);
    }
    CUmodule module = nullptr;
    check_cu(cu.cuModuleLoadData(&module, ck.binary.data()), "cuModuleLoadData");
    check_cu(cu.cuModuleGetFunction(&function, module, ck.name.c_str()), "cuModuleGetFunction");
    const unsigned block = 32u * static_cast<unsigned>(ck.num_warps);
    const auto cu_stream = static_cast<CUstream>(handle);
    auto raw = [&, block, cu_stream] {
      const CUresult r = cu.cuLaunchKernel(function, grid.x, 1, 1, block, 1, 1, static_cast<unsigned>(ck.shared_memory),
                                           cu_stream, params, nullptr);
      if (r != CUDA_SUCCESS) {
        launch_result = r;
      }
    };
    out.zero_();
    raw();
    sync();
    check_cu(launch_result, "cuLaunchKernel");
    checks.boolean("raw_cuLaunchKernel", matches(out));
    ms.push_back({"raw_cuLaunchKernel", raw, {}});
  } else {
    errors.str("raw_cuLaunchKernel", raw_problem);
    errors.str("bare/raw", "raw launch not measured: " + raw_problem);
  }
  ms.push_back({"at_empty_like", [&] { (void)at::empty_like(x); }, {}});
  // Pieces of tjit_add_impl, to place its cost: the output allocation and the stream lookup
  // every wrapper makes, and the one driver call a TritonJitFunction launch adds to a raw one.
  ms.push_back({"tjit_empty_output", [&] { (void)tjit::kit::empty_output(x.sizes(), x.options()); }, {}});
  volatile uintptr_t stream_sink = 0;
  ms.push_back({"tjit_current_stream",
                [&] { stream_sink = reinterpret_cast<uintptr_t>(tjit::current_stream(x.device())); }, {}});
  ms.push_back({"driver_cuCtxGetCurrent", [&] {
                  CUcontext ctx = nullptr;
                  cu.cuCtxGetCurrent(&ctx);
                  stream_sink = reinterpret_cast<uintptr_t>(ctx);
                }, {}});

  // ---- the other operators ------------------------------------------------------------------
  const at::Tensor x2 = at::randn({32, 1024}, options);
  const at::Tensor w = at::randn({1024}, options);
  const at::Tensor b = at::randn({1024}, options);
  const std::vector<int64_t> normalized_shape{1024};
  JsonObject op_checks;
  op_checks.boolean("sum", at::allclose(tjit::sum(x), at::sum(x), 1e-4, 1e-4))
      .boolean("softmax", at::allclose(tjit::softmax(x2, -1), at::softmax(x2, -1), 1e-5, 1e-6))
      .boolean("layer_norm", at::allclose(tjit::layer_norm(x2, normalized_shape, w, b, 1e-5),
                                          at::layer_norm(x2, normalized_shape, w, b, 1e-5), 1e-4, 1e-4));
  const size_t first_op = ms.size();
  ms.push_back({"tjit_sum", [&] { (void)tjit::sum(x); }, {}});
  ms.push_back({"at_sum", [&] { (void)at::sum(x); }, {}});
  ms.push_back({"tjit_softmax", [&] { (void)tjit::softmax(x2, -1); }, {}});
  ms.push_back({"at_softmax", [&] { (void)at::softmax(x2, -1); }, {}});
  ms.push_back({"tjit_layer_norm", [&] { (void)tjit::layer_norm(x2, normalized_shape, w, b, 1e-5); }, {}});
  ms.push_back({"at_layer_norm", [&] { (void)at::layer_norm(x2, normalized_shape, w, b, 1e-5); }, {}});

  measure_round_robin(ms, sync, opt.calls, opt.rounds, opt.warmup);
  check_cu(launch_result, "cuLaunchKernel");

  std::map<std::string, double> us;
  JsonObject us_json;
  for (const auto& m : ms) {
    us[m.name] = m.median_us();
    if (&m - ms.data() >= static_cast<std::ptrdiff_t>(first_op)) {
      continue;  // reported under all_ops
    }
    us_json.num(m.name, us[m.name]);
  }
  JsonObject ratios;
  ratios.num("tjit_add/at_add", us["tjit_add"] / us["at_add"]);
  if (us.count("raw_cuLaunchKernel")) {
    ratios.num("bare/raw", us["bare_triton_jit_function"] / us["raw_cuLaunchKernel"]);
  }
  ratios.num("tjit_add/bare", us["tjit_add"] / us["bare_triton_jit_function"]);

  JsonObject result;
  result.boolean("skipped", false)
      .str("device", c10::Device(device).str())
      .integer("n", n)
      .str("dtype", "float32")
      .integer("calls", opt.calls)
      .integer("rounds", opt.rounds)
      .integer("warmup_calls", opt.warmup)
      .str("statistic", "median over rounds of host us per call")
      .obj("us_per_call", us_json)
      .obj("ratios", ratios)
      .obj("checks", checks)
      .obj("kernel", kernel_info);
  if (!errors.empty()) {
    result.obj("errors", errors);
  }
  JsonObject all_ops;
  for (const char* op : {"sum", "softmax", "layer_norm"}) {
    const double t = us[std::string("tjit_") + op];
    const double a = us[std::string("at_") + op];
    JsonObject entry;
    entry.num("tjit", t).num("aten", a).num("tjit/aten", t / a);
    all_ops.obj(op, entry);
  }
  all_ops.obj("checks", op_checks);
  result.obj("all_ops", all_ops);
  return result;
}

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--kernel-file PATH/add.py] [--own-kernel-file PATH/launch_overhead_kernels.py] [--calls N] [--rounds R] [--n ELEMENTS] "
               "[--device cuda|cpu] [--compile-check]\n",
               argv0);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--kernel-file" && has_value) {
      opt.kernel_file = argv[++i];
    } else if (a == "--own-kernel-file" && has_value) {
      opt.own_kernel_file = argv[++i];
    } else if (a == "--calls" && has_value) {
      opt.calls = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--rounds" && has_value) {
      opt.rounds = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--n" && has_value) {
      opt.n = std::stoll(argv[++i]);
    } else if (a == "--device" && has_value) {
      opt.device = argv[++i];
    } else if (a == "--compile-check") {
      opt.compile_check = true;
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  if (opt.n < 2) {
    std::fprintf(stderr, "--n must be at least 2 (1 would be specialised into a constexpr)\n");
    return 2;
  }
  try {
    if (opt.kernel_file.empty()) {
      opt.kernel_file = tjit::ops::kernel_path("add.py");
    }
    if (opt.device != "cuda" || !at::hasCUDA()) {
      JsonObject skip;
      skip.boolean("skipped", true)
          .str("reason", opt.device != "cuda" ? "--device " + opt.device + ": the C++ overhead benchmark needs CUDA"
                                              : "no CUDA device (this torch has no CUDA, or no GPU is visible)");
      if (opt.compile_check) {
        skip.obj("compile_check", compile_check(opt));
      }
      std::printf("%s\n", skip.dump().c_str());
      return 0;
    }
    opt.warmup = std::min(opt.warmup, std::max(1, opt.calls));
    std::printf("%s\n", run_cuda(opt).dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    JsonObject err;
    err.boolean("skipped", true).str("reason", std::string("error: ") + e.what());
    std::printf("%s\n", err.dump().c_str());
    return 1;
  }
}
