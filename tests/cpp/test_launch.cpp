// Launching through the runtime: on the CPU via Triton's interpreter (runs everywhere) and on
// CUDA (skipped, with the reason, where there is no GPU).

#include "allocation_counter.h"
#include "test_helpers.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/prepare.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/where.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>


#define TJIT_LAUNCH_TEST_STRINGIFY_EXPANDED(name) TJIT_LAUNCH_TEST_STRINGIFY(name)
#define TJIT_LAUNCH_TEST_STRINGIFY(name) #name

namespace {

using tjit::Grid;
using tjit::LaunchOptions;
using tjit::TritonJitFunction;
using tjit::testing::stream_of;
using tjit::testing::synchronize;
using tjit::testing::test_kernels;



// Binaries the function made ready, compiled or read from the kernel store (the tests' store may
// be warm from an earlier run).
size_t binaries(const TritonJitFunction& fn) { return fn.num_compiled() + fn.num_loaded_from_store(); }

class LaunchTest : public ::testing::TestWithParam<c10::Device> {};

// Inside a PrepareOnlyScope a launch gets its kernel ready (compiled, loaded) and runs nothing.
TEST_P(LaunchTest, PrepareOnlyScopeLaunchesNothing) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const int64_t n = 3001;
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kFloat);
  const at::Tensor x = at::randn({n}, opts);
  at::Tensor out = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
  {
    tjit::PrepareOnlyScope prepare;
    EXPECT_TRUE(tjit::preparing_only());
    fn(stream_of(x), Grid(12), LaunchOptions{2}, x, out, n, 0.25f, int64_t{256});
    {
      tjit::PrepareOnlyScope launch_again(false);
      EXPECT_FALSE(tjit::preparing_only());
    }
    EXPECT_TRUE(tjit::preparing_only());
  }
  EXPECT_FALSE(tjit::preparing_only());
  synchronize(out);
  EXPECT_TRUE(out.isnan().all().item<bool>()) << "a launch ran inside PrepareOnlyScope";
  const size_t prepared = binaries(fn);
  fn(stream_of(x), Grid(12), LaunchOptions{2}, x, out, n, 0.25f, int64_t{256});
  synchronize(out);
  EXPECT_TRUE(at::allclose(out, x * 0.25));
  EXPECT_EQ(binaries(fn), prepared) << "the launch after preparing compiled again";
}

TEST_P(LaunchTest, ScaleMatchesAten) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{4097}}) {
    const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kFloat);
    const at::Tensor x = at::randn({n}, opts);
    at::Tensor out = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
    const int64_t block = 256;
    fn(stream_of(x), Grid(static_cast<uint32_t>((n + block - 1) / block)), LaunchOptions{}, x, out, n, 1.5f, block);
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, x * 1.5)) << "n=" << n;
  }
}

TEST_P(LaunchTest, EmptyGridLaunchesNothing) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kFloat);
  const at::Tensor x = at::randn({16}, opts);
  at::Tensor out = at::full({16}, 7.0, opts);
  const size_t compiled = binaries(fn);
  fn(stream_of(x), Grid(0), LaunchOptions{}, x, out, int64_t{16}, 2.0f, int64_t{16});
  synchronize(out);
  EXPECT_TRUE(at::equal(out, at::full({16}, 7.0, opts)));
  EXPECT_EQ(binaries(fn), compiled);
}

// String and dtype constexprs, as Python passes "leaky_relu" and tl.bfloat16: each activation by
// name (a literal, std::string, std::string_view) and each output dtype (tjit::Dtype, ScalarType).
TEST_P(LaunchTest, StringAndDtypeConstexprsMatchAten) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "activation_kernel");
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kFloat);
  const int64_t n = 1000;
  const int64_t block = 256;
  const Grid grid((n + block - 1) / block);
  const at::Tensor x = at::randn({n}, opts);
  const at::Tensor leaky = at::where(x >= 0, x, x * 0.01);
  const at::Tensor relu = at::clamp_min(x, 0.0);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    auto fresh = [&] { return at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts.dtype(dtype)); };
    // One rounding of the output's type apart: Triton's interpreter rounds bf16 toward zero.
    const double tolerance = dtype == at::kFloat ? 1e-6 : 1e-2;
    auto close = [&](const at::Tensor& out, const at::Tensor& expected) {
      return at::allclose(out.to(at::kFloat), expected.to(dtype).to(at::kFloat), tolerance, tolerance);
    };
    at::Tensor out = fresh();
    fn(stream_of(x), grid, LaunchOptions{}, x, out, n, "leaky_relu", tjit::Dtype(dtype), block);
    synchronize(out);
    EXPECT_TRUE(close(out, leaky));
    out = fresh();
    fn(stream_of(x), grid, LaunchOptions{}, x, out, n, std::string("relu"), dtype, block);
    synchronize(out);
    EXPECT_TRUE(close(out, relu));
    out = fresh();
    fn(stream_of(x), grid, LaunchOptions{}, x, out, n, std::string_view("none"), tjit::Dtype(dtype), block);
    synchronize(out);
    EXPECT_TRUE(close(out, x));
  }
}

// Parameters left out take the kernel's defaults (scale 2.0, BLOCK 128, relu, fp32, no bias), as in
// a Python call, through operator() and through run().
TEST_P(LaunchTest, LeftOutParametersTakeTheirDefaults) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "defaults_kernel");
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kFloat);
  for (int64_t n : {int64_t{1}, int64_t{127}, int64_t{1000}}) {
    SCOPED_TRACE(n);
    const at::Tensor x = at::randn({n}, opts);
    const at::Tensor bias = at::randn({n}, opts);
    at::Tensor out = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
    const Grid grid((n + 127) / 128);
    fn(stream_of(x), grid, LaunchOptions{}, x, out, n);
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, at::clamp_min(x * 2.0, 0.0)));
    out.fill_(std::numeric_limits<float>::quiet_NaN());
    fn(stream_of(x), Grid((n + 63) / 64), LaunchOptions{}, x, out, n, 0.5, int64_t{64}, "none", at::kFloat, bias);
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, x * 0.5 + bias));
    out.fill_(std::numeric_limits<float>::quiet_NaN());
    fn.run(stream_of(x), grid, x, out, n, -1.0);
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, at::clamp_min(-x, 0.0)));
  }
}

// Tuple arguments: a pair of tensors and a nested tuple of scalars, their elements specialised and
// passed to the launch (on CUDA, flattened as Triton's launcher flattens them).
TEST_P(LaunchTest, TupleArgumentsMatchAten) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "tuple_kernel");
  const auto opts = at::TensorOptions().device(GetParam()).dtype(at::kFloat);
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{4099}}) {
    SCOPED_TRACE(n);
    const at::Tensor x = at::randn({n}, opts);
    at::Tensor out = at::full({n}, std::numeric_limits<float>::quiet_NaN(), opts);
    const Grid grid((n + 255) / 256);
    fn(stream_of(x), grid, LaunchOptions{}, std::make_tuple(x, out), std::make_tuple(2.0, std::make_tuple(3, 1)), n,
       int64_t{256});
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, x * 2.0 + 3.0));
    out.fill_(std::numeric_limits<float>::quiet_NaN());
    fn(stream_of(x), grid, LaunchOptions{}, std::make_pair(x.narrow(0, 0, n), out), std::make_tuple(-0.5f,
       std::make_tuple(int64_t{16}, int64_t{5})), n, int64_t{256});
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, x * -0.5 + 80.0));
  }
  // run() takes tuples as operator() does (a plain kernel: its one config).
  const at::Tensor x = at::randn({8}, opts);
  at::Tensor out = at::full({8}, std::numeric_limits<float>::quiet_NaN(), opts);
  fn.run(stream_of(x), Grid(1), std::make_tuple(x, out), std::make_tuple(2.0, std::make_tuple(3, 5)), int64_t{8},
         int64_t{256});
  synchronize(out);
  EXPECT_TRUE(at::allclose(out, x * 2.0 + 15.0)) << "through run()";
}

INSTANTIATE_TEST_SUITE_P(Devices, LaunchTest, ::testing::ValuesIn(tjit::testing::test_devices()),
                         tjit::testing::device_label);

TEST(CudaLaunch, MixedDevicesAreRejected) {
  TJIT_SKIP_WITHOUT_CUDA();
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({16}, at::kCUDA);
  const at::Tensor out = at::empty({16});
  try {
    fn(stream_of(x), Grid(1), LaunchOptions{}, x, out, int64_t{16}, 2.0f, int64_t{16});
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("argument 'out_ptr' is on cpu but an earlier tensor argument is on cuda:0"),
              std::string::npos)
        << msg;
  }
}

TEST(CudaLaunch, CacheKeyCoversOptionsAndAlignment) {
  TJIT_SKIP_WITHOUT_CUDA();
  // A kernel file of its own would share nothing with other tests; scale_kernel with a block
  // size no other test uses keeps the counts exact.
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({1024}, at::kCUDA);
  at::Tensor out = at::empty({1024}, at::kCUDA);
  const size_t before = binaries(fn);
  auto run = [&](const at::Tensor& in, int warps) {
    fn(stream_of(in), Grid(8), LaunchOptions{warps}, in, out, int64_t{1000}, 3.0f, int64_t{128});
  };
  run(x, 4);
  run(x, 4);  // hit
  EXPECT_EQ(binaries(fn), before + 1);
  run(x, 8);  // num_warps is part of the key
  EXPECT_EQ(binaries(fn), before + 2);
  run(x.narrow(0, 1, 1000), 4);  // misaligned pointer: another specialisation
  EXPECT_EQ(binaries(fn), before + 3);
  synchronize(out);
}

TEST(CudaLaunch, ConcurrentMissesCompileOnce) {
  TJIT_SKIP_WITHOUT_CUDA();
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({4096}, at::kCUDA);
  const size_t before = binaries(fn);
  std::vector<at::Tensor> outs(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    outs[t] = at::empty({4096}, at::kCUDA);
    threads.emplace_back([&, t] {
      fn(stream_of(x), Grid(4), LaunchOptions{2}, x, outs[t], int64_t{4096}, static_cast<float>(t), int64_t{1024});
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(binaries(fn), before + 1);
  synchronize(x);
  for (int t = 0; t < 8; ++t) {
    EXPECT_TRUE(at::allclose(outs[t], x * static_cast<float>(t))) << "thread " << t;
  }
}

TEST(CudaLaunch, CachedLaunchAllocatesNothing) {
  TJIT_SKIP_WITHOUT_CUDA();
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({1024}, at::kCUDA);
  at::Tensor out = at::empty({1024}, at::kCUDA);
  const tjit::Stream stream = stream_of(x);
  fn(stream, Grid(4), LaunchOptions{}, x, out, int64_t{1024}, 2.0f, int64_t{256});  // compile
  tjit::testing::allocations = 0;
  tjit::testing::count_allocations = true;
  for (int i = 0; i < 100; ++i) {
    fn(stream, Grid(4), LaunchOptions{}, x, out, int64_t{1024}, 2.0f, int64_t{256});
  }
  tjit::testing::count_allocations = false;
  EXPECT_EQ(tjit::testing::allocations.load(), 0u);
  synchronize(out);
  EXPECT_TRUE(at::allclose(out, x * 2.0));
}

// A call with host tensor descriptors (a TMA map encoded per descriptor per launch) allocates
// nothing either, descriptors made in the loop included.
TEST(CudaLaunch, DescriptorLaunchAllocatesNothing) {
  TJIT_SKIP_WITHOUT_CUDA();
  const char* kernels = std::getenv("TJIT_CONFORMANCE_KERNELS");
  auto& fn = TritonJitFunction::get_instance(kernels != nullptr ? kernels : "tests/cpp/kernels/conformance_kernels.py",
                                             "persistent_matmul_tma_kernel");
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const at::Tensor a = at::randn({256, 128}, opts);
  const at::Tensor b_t = at::randn({192, 128}, opts);
  at::Tensor c = at::empty({256, 192}, opts);
  const tjit::Stream stream = stream_of(a);
  auto call = [&] {
    const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {64, 64});
    const auto b_desc = tjit::TensorDescriptor::from_tensor(b_t, {64, 64});
    const auto c_desc = tjit::TensorDescriptor::from_tensor(c, {64, 64});
    fn(stream, Grid(8), LaunchOptions{4, 3}, a_desc, b_desc, c_desc, int64_t{256}, int64_t{192}, int64_t{128},
       int64_t{64}, int64_t{64}, int64_t{64}, int64_t{8});
  };
  call();  // compile
  tjit::testing::allocations = 0;
  tjit::testing::count_allocations = true;
  for (int i = 0; i < 100; ++i) {
    call();
  }
  tjit::testing::count_allocations = false;
  EXPECT_EQ(tjit::testing::allocations.load(), 0u);
  synchronize(c);
  EXPECT_TRUE(at::allclose(c.to(at::kFloat), at::matmul(a.to(at::kFloat), b_t.to(at::kFloat).t()), 1e-2, 5e-2));
}

TEST(CudaLaunch, SharedMemoryAbove48KiB) {
  TJIT_SKIP_WITHOUT_CUDA();
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "big_shared_kernel");
  const at::Tensor x = at::randn({128, 128}, at::kCUDA) / 16;
  at::Tensor out = at::full({128, 128}, std::numeric_limits<float>::quiet_NaN(), at::kCUDA);
  fn(stream_of(x), Grid(1), LaunchOptions{8, 1}, x, out, int64_t{128});
  synchronize(out);
  // tl.dot on fp32 uses tf32 by default: compare loosely.
  EXPECT_TRUE(at::allclose(out, at::matmul(x, x), 1e-2, 1e-2));
}

// resident_programs_per_sm: the driver's occupancy of the binary the same launch runs. Warps cap
// scale_kernel (few registers, no shared memory): twice the warps, half the programs; a kernel
// with more than 48 KiB of shared memory fits fewer. The query loads the launch's binary, so the launch after it compiles nothing.
TEST(CudaLaunch, ResidentProgramsPerSm) {
  TJIT_SKIP_WITHOUT_CUDA();
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({2048}, at::kCUDA);
  at::Tensor out = at::empty({2048}, at::kCUDA);
  const auto resident = [&](int warps) {
    return fn.resident_programs_per_sm(LaunchOptions{warps}, x, out, int64_t{2048}, 2.0f, int64_t{512});
  };
  const int with8 = resident(8);
  const int with16 = resident(16);
  EXPECT_GE(with16, 1);
  EXPECT_EQ(with8, 2 * with16) << "8 warps: " << with8 << ", 16 warps: " << with16;
  const size_t before = binaries(fn);
  fn(stream_of(x), Grid(4), LaunchOptions{8}, x, out, int64_t{2048}, 2.0f, int64_t{512});
  EXPECT_EQ(binaries(fn), before) << "the launch after the query compiled again";
  synchronize(out);
  EXPECT_TRUE(at::allclose(out, x * 2.0));

  auto& big = TritonJitFunction::get_instance(test_kernels(), "big_shared_kernel");
  const at::Tensor square = at::randn({128, 128}, at::kCUDA);
  at::Tensor product = at::empty({128, 128}, at::kCUDA);
  const LaunchOptions big_options{8, 1};
  const int big_resident = big.resident_programs_per_sm(big_options, square, product, int64_t{128});
  EXPECT_GE(big_resident, 1);
  EXPECT_LT(big_resident, with8) << "shared memory did not limit big_shared_kernel";
}

// Peak DRAM bandwidth from the driver's memory clock and bus width, which plans weigh against the
// SM count: between a laptop's ~100 GB/s and a B200's ~8000 (the H100 SXM reads 3352, the H200
// 4800), and 0 for a CPU.
TEST(CudaLaunch, MemoryBandwidthOfTheDevice) {
  TJIT_SKIP_WITHOUT_CUDA();
  const c10::Device gpu(c10::kCUDA, 0);
  const int gbps = tjit::memory_bandwidth_gbps(gpu);
  EXPECT_GE(gbps, 100);
  EXPECT_LE(gbps, 20000);
  EXPECT_EQ(tjit::memory_bandwidth_gbps(gpu), gbps);
}

TEST(Launch, MemoryBandwidthOfCpuIsZero) { EXPECT_EQ(tjit::memory_bandwidth_gbps(c10::Device(c10::kCPU)), 0); }

// CPU tensors run one program at a time through Triton's interpreter.
TEST(Launch, ResidentProgramsPerSmOnCpuIsOne) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({64});
  at::Tensor out = at::empty({64});
  EXPECT_EQ(fn.resident_programs_per_sm(LaunchOptions{4}, x, out, int64_t{64}, 2.0f, int64_t{64}), 1);
}

TEST(CudaLaunch, DriverErrorNamesKernel) {
  TJIT_SKIP_WITHOUT_CUDA();
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const at::Tensor x = at::randn({16}, at::kCUDA);
  at::Tensor out = at::empty({16}, at::kCUDA);
  try {
    fn(stream_of(x), Grid(1, 70000), LaunchOptions{}, x, out, int64_t{16}, 2.0f, int64_t{16});  // y > 65535
    FAIL() << "expected a launch error";
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("scale_kernel("), std::string::npos) << msg;
    EXPECT_NE(msg.find("grid (1, 70000, 1)"), std::string::npos) << msg;
  }
}

TEST(CudaLaunch, SecondDeviceIfPresent) {
  TJIT_SKIP_WITHOUT_CUDA();
  if (at::getNumGPUs() < 2) {
    GTEST_SKIP() << "needs two GPUs; the CUDA machine used has one";
  }
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  for (int d : {0, 1}) {
    const at::Tensor x = at::randn({1000}, c10::Device(c10::kCUDA, d));
    at::Tensor out = at::empty_like(x);
    fn(stream_of(x), Grid(4), LaunchOptions{}, x, out, int64_t{1000}, 2.0f, int64_t{256});
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, x * 2.0)) << "device " << d;
  }
}


// A C++ program's own context (cuCtxCreate): its memory and streams belong to it, so the kernel
// must be loaded into it and launched there, not in the device's primary context.
TEST(CudaLaunch, LaunchesInTheCallersOwnContext) {
  TJIT_SKIP_WITHOUT_CUDA();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
#define TJIT_DRIVER(name) reinterpret_cast<decltype(&::name)>(dlsym(lib, TJIT_LAUNCH_TEST_STRINGIFY_EXPANDED(name)))
  const auto ctx_create = TJIT_DRIVER(cuCtxCreate);
  const auto ctx_destroy = TJIT_DRIVER(cuCtxDestroy);
  const auto ctx_pop = TJIT_DRIVER(cuCtxPopCurrent);
  const auto mem_alloc = TJIT_DRIVER(cuMemAlloc);
  const auto mem_free = TJIT_DRIVER(cuMemFree);
  const auto copy_to_device = TJIT_DRIVER(cuMemcpyHtoD);
  const auto copy_to_host = TJIT_DRIVER(cuMemcpyDtoH);
  const auto stream_create = TJIT_DRIVER(cuStreamCreate);
  const auto stream_destroy = TJIT_DRIVER(cuStreamDestroy);
  const auto stream_synchronize = TJIT_DRIVER(cuStreamSynchronize);
#undef TJIT_DRIVER
  ASSERT_TRUE(ctx_create && ctx_destroy && ctx_pop && mem_alloc && mem_free && copy_to_device && copy_to_host &&
              stream_create && stream_destroy && stream_synchronize);
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const int64_t n = 5003;
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) {
    host[i] = static_cast<float>(i % 97) - 48.0f;
  }
  // The primary context's binary first, so the own context's launch finds a ready entry.
  const at::Tensor warm = at::randn({n}, at::kCUDA);
  at::Tensor warm_out = at::empty_like(warm);
  fn(stream_of(warm), Grid(20), LaunchOptions{}, warm, warm_out, n, 3.0f, int64_t{256});
  synchronize(warm_out);
  for (int round = 0; round < 2; ++round) {  // a second context after the first is destroyed
    CUcontext own = nullptr;
    ASSERT_EQ(ctx_create(&own, 0, 0), CUDA_SUCCESS);  // and makes it current
    CUdeviceptr x = 0;
    CUdeviceptr out = 0;
    ASSERT_EQ(mem_alloc(&x, n * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(mem_alloc(&out, n * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(copy_to_device(x, host.data(), n * sizeof(float)), CUDA_SUCCESS);
    CUstream stream = nullptr;
    ASSERT_EQ(stream_create(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    const auto opts = at::TensorOptions().device(c10::Device(c10::kCUDA, 0)).dtype(at::kFloat);
    const at::Tensor xt = at::from_blob(reinterpret_cast<void*>(x), {n}, opts);
    const at::Tensor outt = at::from_blob(reinterpret_cast<void*>(out), {n}, opts);
    fn(static_cast<tjit::Stream>(stream), Grid(20), LaunchOptions{}, xt, outt, n, 3.0f, int64_t{256});
    ASSERT_EQ(stream_synchronize(stream), CUDA_SUCCESS);
    std::vector<float> result(n);
    ASSERT_EQ(copy_to_host(result.data(), out, n * sizeof(float)), CUDA_SUCCESS);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(result[i], host[i] * 3.0f) << "element " << i << ", round " << round;
    }
    stream_destroy(stream);
    mem_free(x);
    mem_free(out);
    CUcontext popped = nullptr;
    ctx_pop(&popped);
    ctx_destroy(own);
  }
  // The primary context still launches right afterwards.
  fn(stream_of(warm), Grid(20), LaunchOptions{}, warm, warm_out, n, 2.0f, int64_t{256});
  synchronize(warm_out);
  EXPECT_TRUE(at::allclose(warm_out, warm * 2.0));
}

}  // namespace
