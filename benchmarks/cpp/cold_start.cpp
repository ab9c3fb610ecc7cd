// tjit_bench_cold_start: a fresh C++ process's first call of each tjit operator (benchmarks/
// cold_start.py runs it in new processes with an empty, a warm or no kernel store, and, when
// liboperators was built with TJIT_EMBED_KERNELS, from its embedded bundle with TJIT_JIT=0).
//
// Creates the CUDA context and every input first, then times each operator's first call
// (launch to completion, one synchronize) and checks its result against ATen. Prints one JSON
// line: the context creation time, each first call in ms, whether libpython and libtriton are
// mapped into the process at the end, the kernel store's counters and the kernel bundles. Without CUDA it prints
// {"skipped": true, ...} and exits 0.

#include <tjit/kernel_bundle.h>
#include <tjit/kernel_store.h>
#include <tjit/operators.h>

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void synchronize(const c10::Device& device) {
  c10::impl::VirtualGuardImpl(device.type()).getStream(device).synchronize();
}

bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(name) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

int main() {
  nlohmann::json out;
  if (!at::hasCUDA()) {
    out = {{"skipped", true}, {"reason", "no CUDA device (cold start is measured on CUDA)"}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  const c10::Device device(c10::kCUDA, 0);
  const auto process_start = Clock::now();
  const auto opts = at::TensorOptions().device(device).dtype(at::kFloat);
  // The CUDA context, and the inputs (aten's own kernels load here, not in the timed calls).
  at::Tensor x = at::randn({64, 1024}, opts);
  synchronize(device);
  out["context_ms"] = ms_since(process_start);
  const at::Tensor y = at::randn({64, 1024}, opts);
  const at::Tensor w = at::randn({1024}, opts);
  const at::Tensor b = at::randn({1024}, opts);
  const at::Tensor grad = at::randn({64, 1024}, opts);
  const at::Tensor reference_softmax = at::softmax(x, 1);
  const auto reference_ln = at::native_layer_norm(x, {1024}, w, b, 1e-5);
  const auto reference_ln_backward = at::native_layer_norm_backward(
      grad, x, {1024}, std::get<1>(reference_ln), std::get<2>(reference_ln), w, b, {true, true, true});
  synchronize(device);

  // Each operator's first call, in the order a training step would make them. Only the call is
  // timed; its results are compared with aten's after the clock stops.
  using Tensors = std::vector<at::Tensor>;
  struct Op {
    const char* name;
    std::function<Tensors()> call;
    Tensors reference;
  };
  const at::Tensor& mean = std::get<1>(reference_ln);
  const at::Tensor& rstd = std::get<2>(reference_ln);
  const std::vector<Op> ops = {
      {"add", [&] { return Tensors{tjit::add(x, y, 2)}; }, {at::add(x, y, 2)}},
      {"sum", [&] { return Tensors{tjit::sum(x, std::vector<int64_t>{1})}; }, {at::sum(x, {1})}},
      {"softmax", [&] { return Tensors{tjit::softmax(x, 1)}; }, {reference_softmax}},
      {"softmax_backward", [&] { return Tensors{tjit::softmax_backward(grad, reference_softmax, 1, at::kFloat)}; },
       {at::_softmax_backward_data(grad, reference_softmax, 1, at::kFloat)}},
      {"layer_norm", [&] { return Tensors{tjit::layer_norm(x, {1024}, w, b)}; }, {std::get<0>(reference_ln)}},
      {"layer_norm_forward",
       [&] {
         auto [out, m, r] = tjit::layer_norm_forward(x, {1024}, w, b);
         return Tensors{out, m.reshape(mean.sizes()), r.reshape(rstd.sizes())};
       },
       {std::get<0>(reference_ln), mean, rstd}},
      {"layer_norm_backward",
       [&] {
         auto [dx, dw, db] = tjit::layer_norm_backward(grad, x, {1024}, mean, rstd, w, b, {true, true, true});
         return Tensors{dx, dw, db};
       },
       {std::get<0>(reference_ln_backward), std::get<1>(reference_ln_backward), std::get<2>(reference_ln_backward)}},
  };
  synchronize(device);
  nlohmann::json first_call_ms = nlohmann::json::object();
  nlohmann::json correct = nlohmann::json::object();
  for (const Op& op : ops) {
    const auto start = Clock::now();
    const Tensors result = op.call();
    synchronize(device);
    first_call_ms[op.name] = ms_since(start);
    bool same = result.size() == op.reference.size();
    for (size_t i = 0; same && i < result.size(); ++i) {
      same = result[i].sizes() == op.reference[i].sizes() && at::allclose(result[i], op.reference[i], 1e-3, 1e-3);
    }
    correct[op.name] = same;
  }
  out["first_call_ms"] = first_call_ms;
  out["correct"] = correct;
  out["libpython_mapped"] = mapped("libpython");
  out["libtriton_mapped"] = mapped("/libtriton.so");  // Triton's, not tjit's libtriton_jit.so
  nlohmann::json bundles = nlohmann::json::array();
  for (const tjit::KernelBundleInfo& b : tjit::loaded_bundles()) {
    bundles.push_back({{"name", b.name}, {"embedded", b.embedded}, {"targets", b.targets}, {"entries", b.num_entries}});
  }
  out["bundles"] = bundles;
  const auto c = tjit::kernel_store_counters();
  out["store"] = {{"directory", tjit::kernel_store_directory().value_or("(off)")},
                  {"signature_hits", c.signature_hits},
                  {"hits", c.hits},
                  {"misses", c.misses},
                  {"stale", c.stale},
                  {"corrupt", c.corrupt},
                  {"writes", c.writes},
                  {"write_failures", c.write_failures}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
