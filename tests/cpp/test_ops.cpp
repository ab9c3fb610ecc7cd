// sum, softmax, layer_norm and rms_norm from C++ against ATen, forward and backward (through tjit's
// Autograd kernels, as a C++ training program would), on every device present.

#include "test_helpers.h"

#include <tjit/operators.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/randn_like.h>
#include <ATen/ops/rms_norm.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

namespace {

class OpsTest : public ::testing::TestWithParam<c10::Device> {
 protected:
  at::Tensor random(at::IntArrayRef shape, at::ScalarType dtype = at::kFloat) const {
    return at::randn(shape, at::TensorOptions().device(GetParam()).dtype(dtype));
  }
};

void expect_close(const at::Tensor& got, const at::Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_TRUE(at::allclose(got, want, tol, tol)) << "max abs diff " << (got - want).abs().max().item<double>();
}

// Gradients of sum(out * g) with respect to `inputs`, through whatever autograd the ops record.
std::vector<at::Tensor> grads_of(const at::Tensor& out, const at::Tensor& g, const std::vector<at::Tensor>& inputs) {
  return torch::autograd::grad({(out * g).sum()}, inputs);
}

TEST_P(OpsTest, SumForward) {
  const at::Tensor x = random({5, 6, 7});
  expect_close(tjit::sum(x), at::sum(x), 1e-4);
  expect_close(tjit::sum(x, std::vector<int64_t>{1}), at::sum(x, std::vector<int64_t>{1}));
  expect_close(tjit::sum(x, std::vector<int64_t>{0, -1}, true), at::sum(x, std::vector<int64_t>{0, -1}, true));
  expect_close(tjit::sum(x.transpose(0, 2), std::vector<int64_t>{0}), at::sum(x.transpose(0, 2), std::vector<int64_t>{0}));
  expect_close(tjit::sum(x, std::vector<int64_t>{2}, false, at::kDouble), at::sum(x, std::vector<int64_t>{2}, false, at::kDouble));
}

TEST_P(OpsTest, SoftmaxForward) {
  for (int64_t cols : {int64_t{1}, int64_t{33}, int64_t{32769}}) {  // 32769: the looped path
    const at::Tensor x = random({3, cols});
    expect_close(tjit::softmax(x, -1), at::softmax(x, -1));
  }
  const at::Tensor x = random({7, 33});  // dim 0: one program per column (the interpreter is slow)
  expect_close(tjit::softmax(x, 0), at::softmax(x, 0));
}

TEST_P(OpsTest, LayerNormForward) {
  const at::Tensor x = random({4, 3, 50}) * 2 + 1;
  const at::Tensor w = random({3, 50});
  const at::Tensor b = random({3, 50});
  expect_close(tjit::layer_norm(x, {3, 50}, w, b, 1e-5), at::layer_norm(x, {3, 50}, w, b, 1e-5), 1e-4);
  expect_close(tjit::layer_norm(x, {50}), at::layer_norm(x, {50}), 1e-4);
}

TEST_P(OpsTest, RmsNormForward) {
  const at::Tensor x = random({4, 3, 50}) * 2 + 1;
  const at::Tensor r = random({4, 3, 50});
  const at::Tensor w = random({3, 50});
  expect_close(tjit::rms_norm(x, {3, 50}, w, 1e-5), at::rms_norm(x, {3, 50}, w, 1e-5), 1e-4);
  expect_close(tjit::rms_norm(x, {50}), at::rms_norm(x, {50}), 1e-4);
  const auto [out, sum] = tjit::add_rms_norm(x, r, {50}, w[0], 1e-6);
  expect_close(sum, x + r, 0);
  expect_close(out, at::rms_norm(x + r, {50}, w[0], 1e-6), 1e-4);
  const auto [out2, rstd] = tjit::rms_norm_forward(x, {50});
  EXPECT_EQ(rstd.sizes(), (std::vector<int64_t>{4, 3}));
  expect_close(out2, tjit::rms_norm(x, {50}), 0);
}

TEST_P(OpsTest, BackwardThroughAutogradKernels) {
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kDouble);
  const at::Tensor x = at::randn({6, 40}, opts).requires_grad_();
  const at::Tensor y = at::randn({40}, opts).requires_grad_();
  const at::Tensor w = at::randn({40}, opts).requires_grad_();
  const at::Tensor b = at::randn({40}, opts).requires_grad_();
  const at::Tensor g = at::randn({6, 40}, opts);

  auto check = [&](const at::Tensor& mine, const at::Tensor& ref, const std::vector<at::Tensor>& inputs) {
    const auto got = grads_of(mine, g.expand(mine.sizes()).contiguous().narrow(0, 0, mine.size(0)), inputs);
    const auto want = grads_of(ref, g.expand(ref.sizes()).contiguous().narrow(0, 0, ref.size(0)), inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(at::allclose(got[i], want[i], 1e-9, 1e-9)) << "input " << i;
    }
  };
  check(tjit::add(x, y, 2.5), at::add(x, y, 2.5), {x, y});
  check(tjit::softmax(x, 1), at::softmax(x, 1), {x});
  check(tjit::layer_norm(x, {40}, w, b, 1e-5), at::layer_norm(x, {40}, w, b, 1e-5), {x, w, b});
  check(std::get<0>(tjit::layer_norm_forward(x, {40}, w, b, 1e-5)), at::layer_norm(x, {40}, w, b, 1e-5), {x, w, b});
  check(tjit::rms_norm(x, {40}, w, 1e-5), at::rms_norm(x, {40}, w, 1e-5), {x, w});
  // add_rms_norm: both outputs' gradients reach input, residual (y) and weight.
  const auto [normed, summed] = tjit::add_rms_norm(x, y.expand({6, 40}), {40}, w, 1e-5);
  const at::Tensor ref_sum = x + y.expand({6, 40});
  check(normed + summed * 0.5, at::rms_norm(ref_sum, {40}, w, 1e-5) + ref_sum * 0.5, {x, y, w});
  // sum: every element gets the output's gradient.
  const at::Tensor s = tjit::sum(x, std::vector<int64_t>{0});
  const auto gs = torch::autograd::grad({s.sum()}, {x});
  EXPECT_TRUE(at::allclose(gs[0], at::ones_like(x)));
}

TEST_P(OpsTest, Errors) {
  const at::Tensor x = random({4, 5});
  EXPECT_NE(tjit::testing::error_message([&] { tjit::sum(x, std::vector<int64_t>{5}); }).find("tjit::sum: dim 5 is out of range"),
            std::string::npos);
  EXPECT_NE(tjit::testing::error_message([&] { tjit::softmax(x.to(at::kInt), 0); }).find("softmax needs a floating-point tensor"),
            std::string::npos);
  EXPECT_NE(tjit::testing::error_message([&] { tjit::layer_norm(x, {4}); }).find("does not match the trailing dims"), std::string::npos);
  EXPECT_NE(tjit::testing::error_message([&] { tjit::add_rms_norm(x, x.narrow(1, 0, 4), {5}); })
                .find("tjit::add_rms_norm: residual has shape [4, 4] but input has shape [4, 5]"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Devices, OpsTest, ::testing::ValuesIn(tjit::testing::test_devices()),
                         tjit::testing::device_label);

}  // namespace
