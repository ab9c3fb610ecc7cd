// tjit_demo: tjit's operators from C++ next to their ATen counterparts: checks that they agree
// and prints the host time per call of each. Uses CUDA when present, else the CPU interpreter.
//
//   tjit_demo [--device cuda|cpu] [--iters N]

#include <tjit/operators.h>

#include <ATen/Context.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/max.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) {
    c10::impl::VirtualGuardImpl(device.type()).getStream(device).synchronize();
  }
}

// For each of `fns`, the median over rounds of (host time of `calls` back-to-back calls) / calls,
// in microseconds; they take turns round by round, so a slow phase of the host weighs on all alike.
std::vector<double> host_us_per_call(const std::vector<std::function<void()>>& fns, const c10::Device& device,
                                     int calls, int rounds) {
  for (const auto& call : fns) {
    for (int i = 0; i < 5; ++i) {
      call();  // warm up: compile, module load, allocator caches
    }
  }
  std::vector<std::vector<double>> samples(fns.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t f = 0; f < fns.size(); ++f) {
      synchronize(device);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) {
        fns[f]();
      }
      const auto stop = std::chrono::steady_clock::now();
      samples[f].push_back(std::chrono::duration<double, std::micro>(stop - start).count() / calls);
    }
  }
  synchronize(device);
  std::vector<double> medians;
  for (std::vector<double>& s : samples) {
    std::sort(s.begin(), s.end());
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

struct Case {
  const char* name;
  std::function<at::Tensor()> tjit_call;
  std::function<at::Tensor()> aten_call;
};

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = at::hasCUDA() ? "cuda" : "cpu";
  int calls = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device_name = argv[++i];
    } else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      calls = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--device cuda|cpu] [--iters N]\n", argv[0]);
      return 2;
    }
  }
  const c10::Device device(device_name);
  const bool cuda = device.is_cuda();
  if (calls == 0) {
    calls = cuda ? 1000 : 5;  // the interpreter takes milliseconds per call
  }
  const int rounds = cuda ? 25 : 3;
  // Small on the CPU, where Triton's interpreter runs the kernels.
  const int64_t n = cuda ? 1024 : 1000;
  const int64_t cols = cuda ? 1024 : 256;
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  const at::Tensor x = at::randn({n}, options);
  const at::Tensor y = at::randn({n}, options);
  const at::Tensor rows = at::randn({32, cols}, options);
  const at::Tensor w = at::randn({cols}, options);
  const at::Tensor b = at::randn({cols}, options);
  const std::vector<Case> cases = {
      {"add", [&] { return tjit::add(x, y, 0.5); }, [&] { return at::add(x, y, 0.5); }},
      {"sum", [&] { return tjit::sum(x); }, [&] { return at::sum(x); }},
      {"softmax", [&] { return tjit::softmax(rows, 1); }, [&] { return at::softmax(rows, 1); }},
      {"layer_norm", [&] { return tjit::layer_norm(rows, {cols}, w, b); },
       [&] { return at::layer_norm(rows, {cols}, w, b); }},
  };
  std::printf("C++, %s: tjit::<op> against at::<op> (host time per call: median of %d rounds x %d calls)\n",
              device.str().c_str(), rounds, calls);
  std::printf("  %-10s %-12s %12s %12s %7s\n", "op", "max |diff|", "tjit us", "aten us", "ratio");
  bool ok = true;
  for (const Case& c : cases) {
    const double diff = at::max(at::abs(at::sub(c.tjit_call(), c.aten_call()))).item().toDouble();
    const bool agrees = diff <= 1e-4;
    ok = ok && agrees;
    const std::vector<double> us =
        host_us_per_call({[&] { (void)c.tjit_call(); }, [&] { (void)c.aten_call(); }}, device, calls, rounds);
    const double tjit_us = us[0];
    const double aten_us = us[1];
    std::printf("  %-10s %-12.2e %12.2f %12.2f %7.2f%s\n", c.name, diff, tjit_us, aten_us, tjit_us / aten_us,
                agrees ? "" : "  DIFFERS from ATen");
  }
  return ok ? 0 : 1;
}
