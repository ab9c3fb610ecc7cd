// tjit_bench_autotune: what @triton.autotune costs through tjit, printed as one line of JSON
// (benchmarks/autotune.py runs it next to Python Triton's autotuner on the same kernels).
//
//   tuning_ms        per new tuning key (n), the wall time of the first run(): timing all eight
//                    configs of add_tuned_kernel (benchmarks/kernels/autotune_bench_kernels.py).
//                    Their binaries are compiled by a first key beforehand, as keys whose n keeps
//                    the same specialisation share them, so this is the tuning cost alone.
//   host_us          host time per call after tuning, median over rounds of (time of `calls`
//                    back-to-back calls) / calls, round-robin, the stream synchronized before each
//                    round only:
//                      autotuned_run      add_tuned_kernel.run(stream, grid(META), x, y, out, n)
//                      plain_run          add_plain_kernel.run(stream, grid, x, y, out, n, BLOCK)
//                      plain_operator     add_plain_kernel(stream, grid, options, x, y, out, n, BLOCK)
//
//   tjit_bench_autotune [--kernel-file PATH] [--calls N] [--rounds R]
// Without CUDA it prints {"skipped": true, ...} and exits 0.

#include <tjit/current_stream.h>
#include <tjit/kernel_store.h>
#include <tjit/triton_jit_function.h>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/randn.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string kernel_file = "benchmarks/kernels/autotune_bench_kernels.py";
  int calls = 2000;
  int rounds = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--kernel-file") kernel_file = argv[i + 1];
    if (flag == "--calls") calls = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  if (!at::hasCUDA()) {
    std::printf("{\"skipped\": true, \"reason\": \"no CUDA device\"}\n");
    return 0;
  }
  try {
    // Tuning choices must be made here, not read from an earlier run's store.
    tjit::set_kernel_store_directory(std::nullopt);
    auto& tuned = tjit::TritonJitFunction::get_instance(kernel_file, "add_tuned_kernel");
    auto& plain = tjit::TritonJitFunction::get_instance(kernel_file, "add_plain_kernel");
    const auto opts = at::TensorOptions().device(at::kCUDA);
    const c10::Device device(at::kCUDA, 0);
    const tjit::Stream stream = tjit::current_stream(device);
    auto sync = [&] { c10::impl::VirtualGuardImpl(device.type()).getStream(device).synchronize(); };

    // Tuning cost per key: the first key compiles the eight binaries, the others only time them.
    std::vector<int64_t> keys{1 << 20, 1 << 12, 1 << 16, 1 << 24};
    std::map<int64_t, double> tuning_ms;
    std::map<int64_t, std::string> chosen;
    for (int64_t n : keys) {
      const at::Tensor x = at::randn({n}, opts), y = at::randn({n}, opts);
      at::Tensor out = at::empty_like(x);
      sync();
      const auto start = Clock::now();
      tuned.run(stream, [n](const tjit::KernelMeta& m) { return tjit::Grid((n + m["BLOCK"] - 1) / m["BLOCK"]); }, x,
                y, out, n);
      sync();
      tuning_ms[n] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      chosen[n] = tuned.tune(stream, tjit::Grid(1), x, y, out, n).describe();
      if (!at::allclose(out, x + y)) {
        std::fprintf(stderr, "wrong result for n=%lld\n", static_cast<long long>(n));
        return 1;
      }
    }

    // Host time per call, on a small tensor (the launch, not the kernel, is what is measured).
    const int64_t n = 4096;
    const at::Tensor x = at::randn({n}, opts), y = at::randn({n}, opts);
    at::Tensor out = at::empty_like(x);
    const int64_t block = 1024;
    const tjit::Grid grid((n + block - 1) / block);
    auto tuned_grid = [n](const tjit::KernelMeta& m) { return tjit::Grid((n + m["BLOCK"] - 1) / m["BLOCK"]); };
    std::map<std::string, std::function<void()>> cases{
        {"autotuned_run", [&] { tuned.run(stream, tuned_grid, x, y, out, n); }},
        {"plain_run", [&] { plain.run(stream, grid, x, y, out, n, block); }},
        {"plain_operator", [&] { plain(stream, grid, tjit::LaunchOptions{}, x, y, out, n, block); }},
    };
    std::map<std::string, std::vector<double>> samples;
    for (auto& [name, fn] : cases) {
      for (int i = 0; i < 200; ++i) fn();  // warm-up (and the autotuned key's tuning)
    }
    sync();
    for (int r = 0; r < rounds; ++r) {
      for (auto& [name, fn] : cases) {
        sync();
        const auto start = Clock::now();
        for (int i = 0; i < calls; ++i) fn();
        samples[name].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls);
      }
    }
    sync();
    std::string json = "{\"tuning_ms\": {";
    bool first = true;
    for (const auto& [key, ms] : tuning_ms) {
      json += (first ? "\"" : ", \"") + std::to_string(key) + "\": " + std::to_string(ms);
      first = false;
    }
    json += "}, \"chosen\": {";
    first = true;
    for (const auto& [key, text] : chosen) {
      json += (first ? "\"" : ", \"") + std::to_string(key) + "\": \"" + text + "\"";
      first = false;
    }
    json += "}, \"first_key\": " + std::to_string(keys.front()) + ", \"configs\": " +
            std::to_string(tuned.configs().size()) + ", \"host_us\": {";
    first = true;
    for (const auto& [name, v] : samples) {
      json += (first ? "\"" : ", \"") + name + "\": " + std::to_string(median(v));
      first = false;
    }
    json += "}, \"calls\": " + std::to_string(calls) + ", \"rounds\": " + std::to_string(rounds) + "}";
    std::printf("%s\n", json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tjit_bench_autotune: %s\n", e.what());
    return 1;
  }
  return 0;
}
