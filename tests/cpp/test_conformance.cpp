// Kernels as Triton's tutorials write them (a matmul with string and dtype constexprs and defaults,
// tuple arguments, a persistent matmul and an attention forward through host tensor descriptors
// (TMA on sm_90+), descriptors made on the device), launched from C++ and from Python Triton in the same process on the same CUDA
// tensors: the outputs must be equal, bit for bit (the same kernel, inputs and launch). Needs a GPU:
// on CPU tjit's launches go through the interpreter, and LaunchTest compares those with aten.

#include "python/python_bridge.h"
#include "python_sharing.h"

#include <tjit/current_stream.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/where.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace py = pybind11;

namespace {

std::string conformance_kernels() {
  const char* path = std::getenv("TJIT_CONFORMANCE_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/conformance_kernels.py";
}

// Python Triton's launch of the same kernel: `kernel[grid](*args, **kwargs)`, tensors shared by DLPack.
const std::string kPythonLaunch = tjit::testing::kPythonValues + R"py(
import triton

# Descriptors made on the device need scratch memory, which Python Triton asks this for.
triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))

def launch(path, name, grid, args, kwargs):
    _load(path, name)[tuple(grid)](*[_value(a) for a in args], **kwargs)
    torch.cuda.synchronize()
)py";

using tjit::testing::shared;

class Conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) {
      GTEST_SKIP() << "needs a GPU: compares CUDA launches from C++ and from Python Triton (CPU launches are "
                      "compared with aten in LaunchTest)";
    }
    tjit::detail::python_bridge();  // tjit's embedded interpreter, which the Python side runs in
  }

  void launch_in_python(const char* name, py::tuple grid, py::list args, py::dict kwargs) {
    py::gil_scoped_acquire gil;
    py::dict scope;
    py::exec(kPythonLaunch, scope);
    scope["launch"](conformance_kernels(), name, grid, args, kwargs);
  }
};

void synchronize() { c10::impl::VirtualGuardImpl(c10::kCUDA).getStream(c10::Device(c10::kCUDA, 0)).synchronize(); }

TEST_F(Conformance, MatmulWithStringActivationDtypeAndDefaults) {
  auto& fn = tjit::TritonJitFunction::get_instance(conformance_kernels(), "matmul_kernel");
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const int64_t M = 200, N = 150, K = 300;
  const at::Tensor a = at::randn({M, K}, opts);
  const at::Tensor b = at::randn({K, N}, opts);
  const tjit::Stream stream = tjit::current_stream(a.device());
  const tjit::Grid grid((M + 63) / 64, (N + 63) / 64);
  for (const char* activation : {"leaky_relu", "relu", "none"}) {
    for (const at::ScalarType out_dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
      SCOPED_TRACE(std::string(activation) + " " + c10::toString(out_dtype));
      at::Tensor mine = at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), opts.dtype(out_dtype));
      at::Tensor theirs = at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), opts.dtype(out_dtype));
      // Block sizes: the kernel's defaults on both sides.
      fn(stream, grid, tjit::LaunchOptions{}, a, b, mine, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
         mine.stride(0), mine.stride(1), std::string_view(activation), out_dtype);
      synchronize();
      {
        py::gil_scoped_acquire gil;
        py::list args;
        for (py::object v : {shared(a), shared(b), shared(theirs)}) {
          args.append(v);
        }
        for (int64_t v : {M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), theirs.stride(0),
                          theirs.stride(1)}) {
          args.append(v);
        }
        args.append(activation);
        args.append(py::module_::import("triton.language").attr(tjit::Dtype(out_dtype).attribute_name()));
        launch_in_python("matmul_kernel", py::make_tuple(grid.x, grid.y), args, py::dict());
      }
      EXPECT_TRUE(at::equal(mine, theirs));
      at::Tensor expected = at::matmul(a.to(at::kFloat), b.to(at::kFloat));
      if (std::string(activation) == "leaky_relu") {
        expected = at::where(expected >= 0, expected, expected * 0.01);
      } else if (std::string(activation) == "relu") {
        expected = at::where(expected >= 0, expected, expected * 0.0);
      }
      EXPECT_TRUE(at::allclose(mine.to(at::kFloat), expected, 2e-2, 5e-2));
    }
  }
}

TEST_F(Conformance, TupleArguments) {
  auto& fn = tjit::TritonJitFunction::get_instance(conformance_kernels(), "axpby_kernel");
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{5003}}) {
    SCOPED_TRACE(n);
    const at::Tensor x = at::randn({n}, opts);
    const at::Tensor y = at::randn({n}, opts);
    at::Tensor mine = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
    at::Tensor theirs = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
    const tjit::Grid grid((n + 255) / 256);
    fn(tjit::current_stream(x.device()), grid, tjit::LaunchOptions{}, std::make_tuple(x, y), mine,
       std::make_tuple(2.0, std::make_tuple(-0.5, 1.25)), n);
    at::Tensor none_bias = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
    fn(tjit::current_stream(x.device()), grid, tjit::LaunchOptions{}, std::make_pair(x, y), none_bias,
       std::make_tuple(2.0, std::make_tuple(-0.5, std::nullopt)), n, int64_t{256});
    synchronize();
    py::gil_scoped_acquire gil;
    py::list args;
    args.append(py::make_tuple(shared(x), shared(y)));
    args.append(shared(theirs));
    args.append(py::make_tuple(2.0, py::make_tuple(-0.5, 1.25)));
    args.append(n);
    launch_in_python("axpby_kernel", py::make_tuple(grid.x), args, py::dict());
    EXPECT_TRUE(at::equal(mine, theirs));
    EXPECT_TRUE(at::allclose(mine, x * 2.0 + y * -0.5 + 1.25));
    EXPECT_TRUE(at::allclose(none_bias, x * 2.0 + y * -0.5));
  }
}

// A persistent matmul whose operands are host tensor descriptors: on sm_90+ the runtime encodes a
// TMA map per descriptor per launch. Ragged sizes: TMA zero-fills and clips at the edges.
TEST_F(Conformance, PersistentMatmulWithHostDescriptors) {
  auto& fn = tjit::TritonJitFunction::get_instance(conformance_kernels(), "persistent_matmul_tma_kernel");
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const int64_t M = 777, N = 520, K = 504, BM = 128, BN = 128, BK = 64, NUM_SMS = 132;
  const at::Tensor a = at::randn({M, K}, opts);
  const at::Tensor b_t = at::randn({N, K}, opts);
  at::Tensor mine = at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), opts);
  at::Tensor theirs = at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), opts);
  const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {BM, BK});
  const auto b_desc = tjit::TensorDescriptor::from_tensor(b_t, {BN, BK});
  const auto mine_desc = tjit::TensorDescriptor::from_tensor(mine, {BM, BN});
  const auto theirs_desc = tjit::TensorDescriptor::from_tensor(theirs, {BM, BN});
  const int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  const tjit::Grid grid(static_cast<uint32_t>(std::min(NUM_SMS, tiles)));
  fn(tjit::current_stream(a.device()), grid, tjit::LaunchOptions{8, 3}, a_desc, b_desc, mine_desc, M, N, K, BM, BN,
     BK, NUM_SMS);
  synchronize();
  {
    py::gil_scoped_acquire gil;
    py::list args;
    for (const tjit::TensorDescriptor* d : {&a_desc, &b_desc, &theirs_desc}) {
      args.append(shared(*d));
    }
    for (int64_t v : {M, N, K, BM, BN, BK, NUM_SMS}) {
      args.append(v);
    }
    py::dict kwargs;
    kwargs["num_warps"] = 8;
    kwargs["num_stages"] = 3;
    launch_in_python("persistent_matmul_tma_kernel", py::make_tuple(grid.x), args, kwargs);
  }
  EXPECT_TRUE(at::equal(mine, theirs));
  EXPECT_TRUE(at::allclose(mine.to(at::kFloat), at::matmul(a.to(at::kFloat), b_t.to(at::kFloat).t()), 1e-2, 5e-2));
}

// A flash-attention forward through host descriptors for Q, K, V and O.
TEST_F(Conformance, AttentionForwardWithHostDescriptors) {
  auto& fn = tjit::TritonJitFunction::get_instance(conformance_kernels(), "attention_fwd_tma_kernel");
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const int64_t heads = 6, N_CTX = 256, HEAD_DIM = 64, BM = 128, BN = 64;
  const double sm_scale = 0.125;
  const at::Tensor q = at::randn({heads * N_CTX, HEAD_DIM}, opts);
  const at::Tensor k = at::randn({heads * N_CTX, HEAD_DIM}, opts);
  const at::Tensor v = at::randn({heads * N_CTX, HEAD_DIM}, opts);
  at::Tensor mine = at::full({heads * N_CTX, HEAD_DIM}, std::numeric_limits<float>::quiet_NaN(), opts);
  at::Tensor theirs = at::full({heads * N_CTX, HEAD_DIM}, std::numeric_limits<float>::quiet_NaN(), opts);
  const auto q_desc = tjit::TensorDescriptor::from_tensor(q, {BM, HEAD_DIM});
  const auto k_desc = tjit::TensorDescriptor::from_tensor(k, {BN, HEAD_DIM});
  const auto v_desc = tjit::TensorDescriptor::from_tensor(v, {BN, HEAD_DIM});
  const auto mine_desc = tjit::TensorDescriptor::from_tensor(mine, {BM, HEAD_DIM});
  const auto theirs_desc = tjit::TensorDescriptor::from_tensor(theirs, {BM, HEAD_DIM});
  const tjit::Grid grid(static_cast<uint32_t>(N_CTX / BM), static_cast<uint32_t>(heads));
  fn(tjit::current_stream(q.device()), grid, tjit::LaunchOptions{8, 3}, q_desc, k_desc, v_desc, mine_desc, sm_scale,
     N_CTX, HEAD_DIM, BM, BN);
  synchronize();
  {
    py::gil_scoped_acquire gil;
    py::list args;
    for (const tjit::TensorDescriptor* d : {&q_desc, &k_desc, &v_desc, &theirs_desc}) {
      args.append(shared(*d));
    }
    args.append(sm_scale);
    for (int64_t value : {N_CTX, HEAD_DIM, BM, BN}) {
      args.append(value);
    }
    py::dict kwargs;
    kwargs["num_warps"] = 8;
    kwargs["num_stages"] = 3;
    launch_in_python("attention_fwd_tma_kernel", py::make_tuple(grid.x, grid.y), args, kwargs);
  }
  EXPECT_TRUE(at::equal(mine, theirs));
  const at::Tensor qh = q.to(at::kFloat).view({heads, N_CTX, HEAD_DIM});
  const at::Tensor kh = k.to(at::kFloat).view({heads, N_CTX, HEAD_DIM});
  const at::Tensor vh = v.to(at::kFloat).view({heads, N_CTX, HEAD_DIM});
  const at::Tensor expected = at::matmul(at::softmax(at::matmul(qh, kh.transpose(1, 2)) * sm_scale, -1), vh);
  EXPECT_TRUE(at::allclose(mine.to(at::kFloat).view({heads, N_CTX, HEAD_DIM}), expected, 1e-2, 1e-2));
}

// Descriptors made on the device (tl.make_tensor_descriptor) live in the launch's global scratch,
// which tjit takes from torch's caching allocator and Python Triton from triton.set_allocator.
// Rows whose ends are not 16-byte aligned inside padded rows too: the whole buffers, padding
// included, must match (Triton 3.6's device-side TMA stores write zeros up to the next 16 bytes).
TEST_F(Conformance, DeviceSideDescriptors) {
  auto& fn = tjit::TritonJitFunction::get_instance(conformance_kernels(), "scale_rows_device_desc_kernel");
  struct Shape {
    int64_t m, n, stride;
  };
  for (const Shape& s : {Shape{300, 200, 200}, Shape{37, 50, 56}}) {
    for (const at::ScalarType dtype : {at::kHalf, at::kFloat}) {
      SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + " " + c10::toString(dtype));
      const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
      const int64_t BM = 64, BN = 64;
      const at::Tensor x = at::randn({s.m, s.stride}, opts).narrow(1, 0, s.n);
      at::Tensor mine_full = at::full({s.m, s.stride}, -7.0, opts);  // poison, comparable with equal()
      at::Tensor theirs_full = at::full({s.m, s.stride}, -7.0, opts);
      at::Tensor mine = mine_full.narrow(1, 0, s.n);
      at::Tensor theirs = theirs_full.narrow(1, 0, s.n);
      const tjit::Grid grid((s.m + BM - 1) / BM, (s.n + BN - 1) / BN);
      fn(tjit::current_stream(x.device()), grid, tjit::LaunchOptions{}, x, mine, s.m, s.n, s.stride, 0.75, BM, BN);
      synchronize();
      {
        py::gil_scoped_acquire gil;
        py::list args;
        args.append(shared(x));
        args.append(shared(theirs));
        for (int64_t v : {s.m, s.n, s.stride}) {
          args.append(v);
        }
        args.append(0.75);
        args.append(BM);
        args.append(BN);
        launch_in_python("scale_rows_device_desc_kernel", py::make_tuple(grid.x, grid.y), args, py::dict());
      }
      EXPECT_TRUE(at::equal(mine_full, theirs_full));
      EXPECT_TRUE(at::equal(mine, (x * 0.75).to(dtype)));
    }
  }
}

}  // namespace
