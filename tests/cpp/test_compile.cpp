// The compile path without a GPU: real cubins for explicit targets, their metadata, and the
// errors a user sees for bad kernels and bad calls. Runs in a pure C++ process: tjit loads
// libpython itself.

#include "test_helpers.h"

#include <tjit/triton_jit_function.h>

#include "kernel_files.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sum.h>
#include <tjit/operators.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using tjit::CompileTarget;
using tjit::LaunchOptions;
using tjit::TritonJitFunction;
using tjit::testing::test_kernels;

at::Tensor cpu_floats(int64_t n) { return at::empty({n}, at::TensorOptions().dtype(at::kFloat)); }

bool is_elf(const std::string& binary) { return binary.size() > 4 && binary.compare(0, 4, "\x7f" "ELF") == 0; }

TEST(Compile, CubinForSm80AndSm90WithoutGpu) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(4096);
  const at::Tensor out = cpu_floats(4096);
  const auto sm90 = fn.compile(CompileTarget::parse("cuda:90"), LaunchOptions{}, x, out, int64_t{4096}, 2.0f,
                               int64_t{256});
  const auto sm80 = fn.compile(CompileTarget::parse("cuda:80"), LaunchOptions{8}, x, out, int64_t{4096}, 2.0f,
                               int64_t{256});
  for (const auto* k : {&sm90, &sm80}) {
    EXPECT_TRUE(is_elf(k->binary));
    EXPECT_EQ(k->name, "scale_kernel");
    EXPECT_EQ(k->num_ctas, 1);
    EXPECT_EQ(k->global_scratch_size, 0);
  }
  EXPECT_EQ(sm90.num_warps, 4);
  EXPECT_EQ(sm80.num_warps, 8);
  EXPECT_EQ(sm90.target.arch, 90);
  EXPECT_EQ(sm80.target.arch, 80);
  EXPECT_NE(sm90.binary, sm80.binary);
}

TEST(Compile, LargeSharedMemoryIsReported) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "big_shared_kernel");
  const at::Tensor x = cpu_floats(128 * 128);
  const auto k = fn.compile(CompileTarget::parse("cuda:90"), LaunchOptions{8, 1}, x, x, int64_t{128});
  EXPECT_TRUE(is_elf(k.binary));
  EXPECT_GT(k.shared_memory, 48 * 1024);
}

TEST(Compile, SpecialisationChangesWithAlignmentAndValues) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(64);
  const auto aligned = fn.specialize(x, x, int64_t{64}, 2.0f, int64_t{32});
  const auto misaligned = fn.specialize(x.narrow(0, 1, 32), x, int64_t{63}, 2.0f, int64_t{32});
  EXPECT_EQ(aligned.types, (std::vector<std::string>{"*fp32", "*fp32", "i32", "fp32", "constexpr"}));
  EXPECT_EQ(aligned.divisible_by_16, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(misaligned.divisible_by_16, (std::vector<int>{1}));
}

// A string and a dtype constexpr reach the compiler (different strings, different binaries), and
// the same call again gives the same binary (the store's round trip of these values is checked by
// the bundle tests, which read the same entry format).
TEST(Compile, StringAndDtypeConstexprsCompileAndAreStored) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "activation_kernel");
  const at::Tensor x = cpu_floats(1024);
  const at::Tensor out = at::empty({1024}, at::TensorOptions().dtype(at::kBFloat16));
  const auto target = CompileTarget::parse("cuda:90");
  const size_t compiled = fn.num_compiled();
  const size_t stored = fn.num_loaded_from_store();
  const auto leaky = fn.compile(target, LaunchOptions{}, x, out, int64_t{1024}, "leaky_relu", at::kBFloat16,
                                int64_t{256});
  const auto relu = fn.compile(target, LaunchOptions{}, x, out, int64_t{1024}, "relu", at::kBFloat16, int64_t{256});
  const auto to_half = fn.compile(target, LaunchOptions{}, x, out, int64_t{1024}, "relu", at::kHalf, int64_t{256});
  const auto again = fn.compile(target, LaunchOptions{}, x, out, int64_t{1024}, std::string("leaky_relu"),
                                tjit::Dtype::named("bf16"), int64_t{256});
  for (const auto* k : {&leaky, &relu, &to_half}) {
    EXPECT_TRUE(is_elf(k->binary));
  }
  EXPECT_NE(leaky.binary, relu.binary);
  EXPECT_NE(relu.binary, to_half.binary);
  EXPECT_EQ(again.binary, leaky.binary);
  // The fourth is the first's entry (from the store, or compiled again where the store does not
  // serve this Triton: tests/compat runs another release than the one the store was told of).
  EXPECT_EQ(fn.num_compiled() + fn.num_loaded_from_store() - compiled - stored, 4u);
}

// Tuple arguments compile (a nested tuple type, constexpr and divisible elements) and come back
// from the kernel store.
TEST(Compile, TupleArgumentsCompileAndAreStored) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "tuple_kernel");
  const at::Tensor x = cpu_floats(1024);
  const auto target = CompileTarget::parse("cuda:90");
  const size_t compiled = fn.num_compiled();
  const size_t stored = fn.num_loaded_from_store();
  const auto one = fn.compile(target, LaunchOptions{}, std::make_tuple(x, x), std::make_tuple(2.0, std::make_tuple(3, 1)),
                              int64_t{1024}, int64_t{256});
  const auto seven = fn.compile(target, LaunchOptions{}, std::make_tuple(x, x),
                                std::make_tuple(2.0, std::make_tuple(3, 7)), int64_t{1024}, int64_t{256});
  const auto again = fn.compile(target, LaunchOptions{}, std::make_pair(x, x),
                                std::make_tuple(2.0, std::make_pair(3, 1)), int64_t{1024}, int64_t{256});
  EXPECT_TRUE(is_elf(one.binary));
  EXPECT_NE(one.binary, seven.binary);
  EXPECT_EQ(again.binary, one.binary);
  EXPECT_EQ(fn.num_compiled() + fn.num_loaded_from_store() - compiled - stored, 3u);  // as above
}

TEST(Compile, TargetParsing) {
  const auto t = CompileTarget::parse("cuda:80:32");
  EXPECT_EQ(t.arch, 80);
  EXPECT_EQ(t.warp_size, 32);
  EXPECT_EQ(CompileTarget::parse("cuda:90").to_string(), "cuda:90:32");
  EXPECT_NE(tjit::testing::error_message([] { CompileTarget::parse("sm90"); }).find("expected BACKEND:ARCH"), std::string::npos);
  EXPECT_NE(tjit::testing::error_message([] { CompileTarget::parse("hip:942"); }).find("only the cuda backend"), std::string::npos);
}

TEST(Compile, MissingFileNamesTheFile) {
  const std::string msg = tjit::testing::error_message([] { TritonJitFunction::get_instance("/nonexistent/k.py", "k"); });
  EXPECT_NE(msg.find("/nonexistent/k.py"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_LT(msg.find("does not exist"), msg.find("kernel bundle")) << msg;
}

TEST(Compile, MissingFunctionNamesTheFunction) {
  const std::string msg = tjit::testing::error_message([] { TritonJitFunction::get_instance(test_kernels(), "no_such_kernel"); });
  // The cause leads; the file exists and Python read it, so no advice about bundles follows.
  EXPECT_NE(msg.find("defines no function named 'no_such_kernel'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("bundle"), std::string::npos) << msg;
}

TEST(Compile, MisspeltFunctionSuggestsTheClosestKernels) {
  const std::string msg = tjit::testing::error_message([] { TritonJitFunction::get_instance(test_kernels(), "scale_kernal"); });
  const size_t cause = msg.find("defines no function named 'scale_kernal'");
  ASSERT_NE(cause, std::string::npos) << msg;
  const size_t suggestion = msg.find("did you mean 'scale_kernel'");
  ASSERT_NE(suggestion, std::string::npos) << msg;
  EXPECT_LT(cause, suggestion) << msg;
  EXPECT_NE(msg.find("its @triton.jit kernels: "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("bundle"), std::string::npos) << msg;
}

TEST(Compile, AnUndefinedTensorIsNamedWhenTheKernelFails) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor out = cpu_floats(8);
  const std::string msg = tjit::testing::error_message([&] {
    fn(nullptr, tjit::Grid(1), tjit::LaunchOptions{}, at::Tensor(), out, int64_t{8}, 2.0f, int64_t{8});
  });
  EXPECT_NE(msg.find("argument(s) x_ptr got None (an undefined at::Tensor"), std::string::npos) << msg;
}

TEST(Compile, PlainPythonFunctionIsRejected) {
  const std::string msg = tjit::testing::error_message([] { TritonJitFunction::get_instance(test_kernels(), "not_a_kernel"); });
  EXPECT_NE(msg.find("not a @triton.jit function"), std::string::npos) << msg;
}

TEST(Compile, WrongArgumentCountListsParameters) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(8);
  const std::string msg = tjit::testing::error_message([&] { fn.specialize(x, x, int64_t{8}); });
  EXPECT_NE(msg.find("takes 5 arguments (x_ptr, out_ptr, n, scale, BLOCK), but 3 were given"), std::string::npos)
      << msg;
}

TEST(Compile, TensorForConstexprIsRejected) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(8);
  const std::string msg = tjit::testing::error_message([&] { fn.specialize(x, x, int64_t{8}, 2.0f, x); });
  EXPECT_NE(msg.find("'BLOCK' is a tl.constexpr"), std::string::npos) << msg;
}

TEST(Compile, CompileErrorNamesKernelAndSignature) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(8);
  // tl.arange needs a power-of-two range: BLOCK=3 fails inside triton.compile.
  const std::string msg =
      tjit::testing::error_message([&] { fn.compile(CompileTarget::parse("cuda:90"), LaunchOptions{}, x, x, int64_t{8}, 2.0f, int64_t{3}); });
  EXPECT_NE(msg.find("triton.compile failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("power of 2"), std::string::npos) << msg;
}

// An int where the kernel takes a pointer (and a tensor where it takes a scalar): the compile path
// and the interpreter path (CPU tensors) both name the kernel, the parameter and what it got.
TEST(Compile, WrongKindOfArgumentIsNamed) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(8);
  const at::Tensor out = cpu_floats(8);
  const std::string compiled = tjit::testing::error_message([&] {
    fn.compile(CompileTarget::parse("cuda:90"), LaunchOptions{}, int64_t{1234}, out, int64_t{8}, 2.0f, int64_t{8});
  });
  const std::string interpreted = tjit::testing::error_message([&] {
    fn(nullptr, tjit::Grid(1), LaunchOptions{}, int64_t{1234}, out, int64_t{8}, 2.0f, int64_t{8});
  });
  const std::string tensor_for_scalar = tjit::testing::error_message([&] {
    fn(nullptr, tjit::Grid(1), LaunchOptions{}, x, out, int64_t{8}, x, int64_t{8});
  });
  for (const std::string& msg : {compiled, interpreted}) {
    EXPECT_NE(msg.find("scale_kernel(x_ptr: i32, out_ptr: *fp32"), std::string::npos) << msg;
  }
  EXPECT_NE(interpreted.find("on CPU failed"), std::string::npos) << interpreted;
  // Where in the kernel it failed: its line, which names the parameter.
  EXPECT_NE(interpreted.find("runtime_test_kernels.py:11, in scale_kernel: tl.store(out_ptr + offsets, "
                             "tl.load(x_ptr + offsets"),
            std::string::npos)
      << interpreted;
  EXPECT_NE(tensor_for_scalar.find("scale: *fp32"), std::string::npos) << tensor_for_scalar;
  EXPECT_NE(tensor_for_scalar.find("in scale_kernel: tl.store("), std::string::npos) << tensor_for_scalar;
}

TEST(Compile, BadLaunchOptionsAreRejected) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = cpu_floats(8);
  const std::string msg = tjit::testing::error_message(
      [&] { fn.compile(CompileTarget::parse("cuda:90"), LaunchOptions{3}, x, x, int64_t{8}, 2.0f, int64_t{8}); });
  EXPECT_NE(msg.find("num_warps must be a power of two"), std::string::npos) << msg;
}

TEST(Compile, TargetFromEnvironment) {
  ::setenv("TJIT_TARGET", "cuda:80", 1);
  const auto t = tjit::target_from_environment();
  ::unsetenv("TJIT_TARGET");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->arch, 80);
  EXPECT_FALSE(tjit::target_from_environment().has_value());
}

}  // namespace

namespace {

// Running kernels through Triton's interpreter patches triton.language; compiles afterwards, in
// the same process, must still see the real language (a CPU-only check of the CUDA path).
TEST(Compile, CompileAfterInterpretedRuns) {
  const at::Tensor x = at::randn({6, 40});
  const at::Tensor w = at::randn({40});
  // Every operator once through the interpreter, helpers and Triton's own @jit library included.
  (void)tjit::add(x, w, 2);
  (void)tjit::sum(x, std::vector<int64_t>{0});
  (void)tjit::sum(x, std::vector<int64_t>{1});
  (void)tjit::softmax(x, 1);
  (void)tjit::softmax_backward(x, tjit::softmax(x, 1), 1, at::kFloat);
  const auto [y, mean, rstd] = tjit::layer_norm_forward(x, {40}, w, w);
  (void)tjit::layer_norm_backward(y, x, {40}, mean, rstd, w, w, {true, true, true});

  const auto target = CompileTarget::parse("cuda:90");
  at::Tensor out = at::empty({6});
  auto& blocked = TritonJitFunction::get_instance(tjit::ops::kernel_path("sum.py"), "sum_rows_blocked_kernel");
  EXPECT_TRUE(is_elf(blocked.compile(target, LaunchOptions{}, x, out, int64_t{6}, int64_t{40}, int64_t{40},
                                     int64_t{8}, int64_t{64}, false).binary));
  auto& softmax = TritonJitFunction::get_instance(tjit::ops::kernel_path("softmax.py"), "softmax_fwd_kernel");
  EXPECT_TRUE(is_elf(softmax.compile(target, LaunchOptions{}, x, x, int64_t{6}, int64_t{40}, int64_t{40},
                                     int64_t{40}, int64_t{64}, true, false).binary));
  auto& add = TritonJitFunction::get_instance(tjit::ops::kernel_path("add.py"), "add_kernel");
  EXPECT_TRUE(is_elf(add.compile(target, LaunchOptions{}, x, x, x, int64_t{240}, 2.0f, 0.0f, true, int64_t{1024},
                                 false).binary));
}

}  // namespace
