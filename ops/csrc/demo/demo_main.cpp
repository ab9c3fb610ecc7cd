// tjit_demo: runs tjit operators from C++ next to their ATen counterparts, checks that they
// agree and prints the host time per call. Uses CUDA when present, else the CPU interpreter.
//
//   tjit_demo [--device cuda|cpu] [--iters N]

#include <tjit/operators.h>

#include <ATen/Context.h>
#include <ATen/ops/add.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/randn.h>
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

// Median over rounds of (host time of `calls` back-to-back calls) / calls, in microseconds.
double host_us_per_call(const std::function<void()>& call, const c10::Device& device, int calls, int rounds) {
  for (int i = 0; i < 20; ++i) {
    call();  // warm up: compile, module load, allocator caches
  }
  std::vector<double> samples;
  for (int r = 0; r < rounds; ++r) {
    synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      call();
    }
    const auto stop = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / calls);
  }
  synchronize(device);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

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
    calls = cuda ? 1000 : 20;  // the interpreter takes milliseconds per call
  }
  if (!cuda) {
    std::printf("tjit_demo (C++): no GPU in use, running on CPU through Triton's interpreter\n");
  }
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  const at::Tensor x = at::randn({1024}, options);
  const at::Tensor y = at::randn({1024}, options);

  const at::Tensor expected = at::add(x, y, 0.5);
  const at::Tensor got = tjit::add(x, y, 0.5);
  const bool ok = at::allclose(got, expected, 1e-6, 1e-6);
  std::printf("tjit::add(x, y, alpha=0.5) on %s, 1024 floats: %s\n", device.str().c_str(),
              ok ? "matches at::add" : "DIFFERS from at::add");

  const int rounds = cuda ? 25 : 3;
  const double tjit_us = host_us_per_call([&] { (void)tjit::add(x, y); }, device, calls, rounds);
  const double aten_us = host_us_per_call([&] { (void)at::add(x, y); }, device, calls, rounds);
  std::printf("host time per call (median of %d rounds x %d calls):\n", rounds, calls);
  std::printf("  tjit::add  %9.2f us\n  at::add    %9.2f us\n  ratio      %9.2f\n", tjit_us, aten_us,
              tjit_us / aten_us);
  return ok ? 0 : 1;
}
