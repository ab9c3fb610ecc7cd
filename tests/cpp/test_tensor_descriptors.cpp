// Host tensor descriptors (tjit::TensorDescriptor) and descriptors built on the device: the
// specialisation equals Python Triton's (in-process, on CPU tensors), the checks Triton's
// TensorDescriptor makes, what a compile for sm_90 (TMA) and sm_80 (decomposed) records, and
// launches compared with aten, through the interpreter on CPU and through TMA on a GPU.

#include "python/python_bridge.h"
#include "python_sharing.h"

#include <tjit/current_stream.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/all.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using tjit::CompileTarget;
using tjit::Grid;
using tjit::LaunchOptions;
using tjit::Padding;
using tjit::TensorDescriptor;
using tjit::TritonJitFunction;

std::string kernels() {
  const char* path = std::getenv("TJIT_CONFORMANCE_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/conformance_kernels.py";
}

// Python Triton's specialisation of the same call, descriptors rebuilt as Triton's own over the
// same (shared) tensors.
const std::string kPythonSide = tjit::testing::kPythonValues + R"py(
import tjit_triton_adapter

def derive(path, name, args):
    return tjit_triton_adapter.triton_specialization(_load(path, name), [_value(a) for a in args], ("cuda", 90, 32))
)py";

using tjit::testing::shared;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}

class TensorDescriptorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tjit::detail::python_bridge(); }
};

TEST_F(TensorDescriptorTest, SpecializationMatchesTriton) {
  auto& fn = TritonJitFunction::get_instance(kernels(), "persistent_matmul_tma_kernel");
  struct Case {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    std::vector<int64_t> block;
    int64_t m;
    const char* type;
  };
  const std::vector<Case> cases = {
      {at::kHalf, {64, 48}, {32, 16}, 1000, "tensordesc<fp16[32, 16]>"},
      {at::kBFloat16, {8, 128}, {8, 128}, 1, "tensordesc<bf16[8, 128]>"},
      {at::kFloat, {100}, {64}, 48, "tensordesc<fp32[64]>"},
      {at::kChar, {4, 6, 32}, {2, 1, 32}, 7, "tensordesc<i8[2, 1, 32]>"},
      {at::kFloat8_e4m3fn, {2, 2, 2, 2, 16}, {1, 2, 1, 2, 16}, 16, "tensordesc<fp8e4nv[1, 2, 1, 2, 16]>"},
  };
  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kPythonSide, scope);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    const at::Tensor a = at::empty(c.shape, at::TensorOptions().dtype(c.dtype));
    const at::Tensor b = at::empty({32, 64}, at::TensorOptions().dtype(at::kHalf));
    const auto a_desc = TensorDescriptor::from_tensor(a, c.block);
    const auto b_desc = TensorDescriptor::from_tensor(b, {16, 64}, Padding::Nan);  // padding: a launch value
    const tjit::Specialization mine = fn.specialize(a_desc, b_desc, a_desc, c.m, int64_t{72}, int64_t{80},
                                                    int64_t{32}, int64_t{32}, int64_t{32}, int64_t{4});
    EXPECT_EQ(mine.types[0], c.type);
    EXPECT_EQ(mine.types[1], "tensordesc<fp16[16, 64]>");
    py::list args;
    for (const TensorDescriptor* d : {&a_desc, &b_desc, &a_desc}) {
      args.append(shared(*d));
    }
    for (int64_t v : {c.m, int64_t{72}, int64_t{80}, int64_t{32}, int64_t{32}, int64_t{32}, int64_t{4}}) {
      args.append(v);
    }
    const py::tuple theirs = scope["derive"](kernels(), "persistent_matmul_tma_kernel", args);
    EXPECT_EQ(mine.types, theirs[0].cast<std::vector<std::string>>());
    EXPECT_EQ(mine.divisible_by_16, theirs[2].cast<std::vector<int>>());
    std::vector<int> constexpr_indices;
    for (const auto& [index, value] : mine.constexprs) {
      constexpr_indices.push_back(index);
    }
    std::vector<int> their_indices;
    for (py::handle pair : py::list(theirs[1])) {
      their_indices.push_back(pair.cast<py::tuple>()[0].cast<int>());
    }
    EXPECT_EQ(constexpr_indices, their_indices);
  }
}

TEST_F(TensorDescriptorTest, ChecksWhatTritonChecks) {
  const auto opts = at::TensorOptions().dtype(at::kHalf);
  const at::Tensor x = at::empty({64, 64}, opts);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(x, {32, 24}); }).find("block dimension 1 must be a power of two"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(at::empty({64, 128}, opts).slice(1, 0, 128, 2), {32, 32}); })
                .find("the last dimension must be contiguous"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(at::empty({64, 50}, opts), {32, 32}); })
                .find("stride 0 is 100 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(x.view(-1).narrow(0, 1, 64), {64}); })
                .find("16-byte aligned"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(at::empty({64}, at::kInt), {64}, Padding::Nan); })
                .find("NaN padding needs a floating-point tensor"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(at::empty({2, 2, 2, 2, 2, 16}, opts), {1, 1, 1, 1, 1, 16}); })
                .find("rank must be 1 to 5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TensorDescriptor::from_tensor(x, {1024, 2048}); }).find("at most 1048576"),
            std::string::npos);
  // A descriptor is a runtime argument, never a constexpr.
  auto& fn = TritonJitFunction::get_instance(kernels(), "persistent_matmul_tma_kernel");
  const auto d = TensorDescriptor::from_tensor(x, {32, 32});
  EXPECT_NE(error_of([&] { fn.specialize(d, d, d, 1, 2, 3, d, 32, 32, 4); })
                .find("persistent_matmul_tma_kernel: parameter 'BLOCK_M' is a tl.constexpr and cannot take a tensor "
                      "descriptor"),
            std::string::npos);
}

// What the compile records for the launch: on sm_90 each descriptor is a TMA map with Triton's
// metadata (the store keeps it), on sm_80 it is decomposed.
TEST_F(TensorDescriptorTest, CompileRecordsHowDescriptorsLaunch) {
  auto& fn = TritonJitFunction::get_instance(kernels(), "persistent_matmul_tma_kernel");
  const auto opts = at::TensorOptions().dtype(at::kHalf);
  const at::Tensor a = at::empty({256, 128}, opts);
  const at::Tensor b = at::empty({256, 128}, opts);
  const at::Tensor c = at::empty({256, 256}, opts);
  const auto a_desc = TensorDescriptor::from_tensor(a, {128, 64});
  const auto b_desc = TensorDescriptor::from_tensor(b, {128, 64});
  const auto c_desc = TensorDescriptor::from_tensor(c, {128, 128});
  const LaunchOptions options{8, 3};
  const auto sm90 = fn.compile(CompileTarget::parse("cuda:90"), options, a_desc, b_desc, c_desc, int64_t{256},
                               int64_t{256}, int64_t{128}, int64_t{128}, int64_t{128}, int64_t{64}, int64_t{132});
  ASSERT_EQ(sm90.tensor_descriptors.size(), 3u);
  for (const tjit::DescriptorLaunch& d : sm90.tensor_descriptors) {
    EXPECT_TRUE(d.tma);
    EXPECT_EQ(d.elem_size, 2);
    EXPECT_EQ(d.elem_type, 6);  // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    EXPECT_EQ(d.block_size.size(), 2u);
    EXPECT_FALSE(d.fp4_padded);
  }
  EXPECT_EQ(sm90.tensor_descriptors[0].block_size, (std::vector<int>{128, 64}));
  // The same binary again (from memory of the store, or compiled again): the same launch.
  const auto again = fn.compile(CompileTarget::parse("cuda:90"), options, a_desc, b_desc, c_desc, int64_t{256},
                                int64_t{256}, int64_t{128}, int64_t{128}, int64_t{128}, int64_t{64}, int64_t{132});
  EXPECT_EQ(again.tensor_descriptors, sm90.tensor_descriptors);

  const auto a32 = TensorDescriptor::from_tensor(a, {32, 32});
  const auto b32 = TensorDescriptor::from_tensor(b, {32, 32});
  const auto c32 = TensorDescriptor::from_tensor(c, {32, 32});
  const auto sm80 = fn.compile(CompileTarget::parse("cuda:80"), LaunchOptions{4, 2}, a32, b32, c32, int64_t{256},
                               int64_t{256}, int64_t{128}, int64_t{32}, int64_t{32}, int64_t{32}, int64_t{4});
  ASSERT_EQ(sm80.tensor_descriptors.size(), 3u);
  for (const tjit::DescriptorLaunch& d : sm80.tensor_descriptors) {
    EXPECT_FALSE(d.tma);
    EXPECT_GE(d.flags, 0);  // 0 (Triton 3.4), 1 (padding), 2 (3.9: padding, round_f32_to_tf32)
    EXPECT_LE(d.flags, 2);
  }
}

void synchronize(const at::Tensor& t) {
  if (t.is_cuda()) {
    c10::impl::VirtualGuardImpl(c10::kCUDA).getStream(t.device()).synchronize();
  }
}

class DescriptorLaunchTest : public ::testing::TestWithParam<c10::Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda() && !at::hasCUDA()) {
      GTEST_SKIP() << "needs a GPU (the CPU run goes through Triton's interpreter)";
    }
  }
};

// Ragged sizes: TMA zero-fills the reads past the edges and clips the writes; C is a view into a
// larger poisoned buffer, which must stay untouched outside it.
TEST_P(DescriptorLaunchTest, PersistentMatmulMatchesAten) {
  auto& fn = TritonJitFunction::get_instance(kernels(), "persistent_matmul_tma_kernel");
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kHalf);
  // Strides (in elements) multiples of 16: Triton 3.4's interpreter asks that of a descriptor.
  const int64_t M = 100, N = 80, K = 80;
  const at::Tensor a = at::randn({M, K}, opts);
  const at::Tensor b_t = at::randn({N, K}, opts);
  at::Tensor buffer = at::full({M + 8, N + 16}, std::numeric_limits<float>::quiet_NaN(), opts);
  at::Tensor c = buffer.narrow(0, 4, M).narrow(1, 8, N);
  const auto a_desc = TensorDescriptor::from_tensor(a, {32, 32});
  const auto b_desc = TensorDescriptor::from_tensor(b_t, {32, 32});
  const auto c_desc = TensorDescriptor::from_tensor(c, {32, 32});
  const int64_t tiles = ((M + 31) / 32) * ((N + 31) / 32);
  const int64_t programs = 4;
  fn(tjit::current_stream(a.device()), Grid(static_cast<uint32_t>(programs)), LaunchOptions{4, 2}, a_desc, b_desc,
     c_desc, M, N, K, int64_t{32}, int64_t{32}, int64_t{32}, programs);
  synchronize(c);
  EXPECT_GT(tiles, programs);  // every program loops over several tiles
  const at::Tensor expected = at::matmul(a.to(at::kFloat), b_t.to(at::kFloat).t());
  EXPECT_TRUE(at::allclose(c.to(at::kFloat), expected, 1e-2, 5e-2));
  EXPECT_TRUE(buffer.narrow(0, 0, 4).isnan().all().item<bool>());
  EXPECT_TRUE(buffer.narrow(1, 0, 8).isnan().all().item<bool>());
  EXPECT_TRUE(buffer.narrow(1, N + 8, 8).isnan().all().item<bool>());
}

// Descriptors made on the device (tl.make_tensor_descriptor): on a GPU they live in the launch's
// global scratch memory, which the runtime takes from torch's caching allocator.
TEST_P(DescriptorLaunchTest, DeviceSideDescriptorsMatchAten) {
  auto& fn = TritonJitFunction::get_instance(kernels(), "scale_rows_device_desc_kernel");
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    const auto opts = at::TensorOptions().device(GetParam()).dtype(dtype);
    const int64_t M = 37, N = 50, stride = 64;  // rows 16-byte aligned (Triton 3.4's interpreter: 16 elements)
    const at::Tensor x = at::randn({M, stride}, opts).narrow(1, 0, N);
    at::Tensor y_full = at::full({M, stride}, std::numeric_limits<float>::quiet_NaN(), opts);
    at::Tensor y = y_full.narrow(1, 0, N);
    fn(tjit::current_stream(x.device()), Grid((M + 15) / 16, (N + 31) / 32), LaunchOptions{}, x, y, M, N, stride,
       1.75, int64_t{16}, int64_t{32});
    synchronize(y);
    EXPECT_TRUE(at::equal(y, (x * 1.75).to(dtype)));
    // On a GPU, Triton 3.6's device-side TMA stores write zeros past the row's end up to its next
    // 16 bytes, from Python as from C++ (seen on an H100; Conformance.DeviceSideDescriptors compares
    // the whole buffer with Python Triton's); nothing beyond that granule.
    const int64_t granule = 16 / x.element_size();
    const int64_t untouched = GetParam().is_cuda() ? (N + granule - 1) / granule * granule : N;
    EXPECT_TRUE(y_full.narrow(1, untouched, stride - untouched).isnan().all().item<bool>())
        << "written past column " << untouched;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DescriptorLaunchTest, ::testing::Values(c10::Device(c10::kCPU), c10::Device(c10::kCUDA)),
                         [](const auto& info) { return info.param.is_cuda() ? "cuda" : "cpu"; });

}  // namespace
