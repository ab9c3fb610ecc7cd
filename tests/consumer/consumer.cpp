// A user's program: its own Triton kernel through tjit::TritonJitFunction, and tjit's operators,
// each checked against ATen. Runs on CUDA when there is a GPU, else on the CPU through Triton's
// interpreter. Prints "consumer passed" and exits 0, or names what differed and exits 1.

#include <tjit/current_stream.h>
#include <tjit/operators.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cstdio>
#include <exception>
#include <limits>
#include <string>

namespace {

int failures = 0;

void expect_close(const char* what, const at::Tensor& actual, const at::Tensor& expected) {
  const bool ok = actual.sizes() == expected.sizes() && actual.dtype() == expected.dtype() &&
                  at::allclose(actual.cpu(), expected.cpu(), 1e-5, 1e-5);
  std::printf("%-24s %s\n", what, ok ? "ok" : "DIFFERS from ATen");
  failures += ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    const at::Device device = at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    std::printf("device: %s\n", device.str().c_str());
    const auto options = at::TensorOptions().device(device).dtype(at::kFloat);

    // The program's own kernel, with a grid and launch options of its choosing.
    const int64_t n = 1000;
    const at::Tensor x = at::randn({n}, options);
    at::Tensor out = at::full({n}, std::numeric_limits<float>::quiet_NaN(), options);
    auto& axpb = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "axpb_kernel");
    constexpr int64_t kBlock = 256;
    // The current stream of the device, without CUDA headers (nullptr on the CPU).
    const tjit::Stream stream = tjit::current_stream(device);
    axpb(stream, tjit::Grid(static_cast<uint32_t>((n + kBlock - 1) / kBlock)), tjit::LaunchOptions{}, x, out, n,
         2.5, -1.0, kBlock);
    expect_close("own kernel (axpb)", out, x * 2.5 - 1.0);

    // tjit's operators, forward and backward.
    const at::Tensor a = at::randn({37, 129}, options);
    const at::Tensor b = at::randn({37, 129}, options);
    expect_close("tjit::add", tjit::add(a, b, 3), at::add(a, b, 3));
    expect_close("tjit::sum", tjit::sum(a, at::IntArrayRef{1}), at::sum(a, 1));
    expect_close("tjit::softmax", tjit::softmax(a, 1), at::softmax(a, 1));
    const at::Tensor w = at::randn({129}, options);
    const at::Tensor bias = at::randn({129}, options);
    expect_close("tjit::layer_norm", tjit::layer_norm(a, {129}, w, bias, 1e-5),
                 at::layer_norm(a, {129}, w, bias, 1e-5));

    const at::Tensor leaf = a.clone().requires_grad_(true);
    const at::Tensor ref_leaf = a.clone().requires_grad_(true);
    (tjit::softmax(tjit::layer_norm(leaf, {129}, w, bias), 1) * b).sum().backward();
    (at::softmax(at::layer_norm(ref_leaf, {129}, w, bias), 1) * b).sum().backward();
    expect_close("layer_norm+softmax grad", leaf.grad(), ref_leaf.grad());
  } catch (const std::exception& e) {
    std::printf("consumer failed: %s\n", e.what());
    return 1;
  }
  if (failures != 0) {
    std::printf("consumer FAILED (%d checks)\n", failures);
    return 1;
  }
  std::printf("consumer passed\n");
  return 0;
}
