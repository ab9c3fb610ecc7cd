// Kernels under @triton.autotune and @triton.heuristics through TritonJitFunction::run and ::tune:
// on the CPU via Triton's interpreter (wall-clock timing) and on CUDA (events), each against ATen.
// Every test uses its own kernel store folder, so tuning choices from earlier runs never leak in.

#include "allocation_counter.h"
#include "test_helpers.h"

#include <tjit/current_stream.h>
#include <tjit/kernel_store.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/all.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <thread>
#include <vector>


namespace {

using tjit::Grid;
using tjit::KernelMeta;
using tjit::TritonJitFunction;
using tjit::testing::error_message;
using tjit::testing::stream_of;
using tjit::testing::synchronize;

std::string kernels() {
  const char* path = std::getenv("TJIT_AUTOTUNE_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/autotune_test_kernels.py";
}

TritonJitFunction& kernel(const char* name) { return TritonJitFunction::get_instance(kernels(), name); }


// A store folder of the test's own, for the test's lifetime.
class FreshStore {
 public:
  explicit FreshStore(const std::string& name) {
    path_ = std::string(::testing::TempDir()) + "tjit-autotune-" + name + "-" + std::to_string(::getpid());
    std::system(("rm -rf '" + path_ + "'").c_str());
    tjit::set_kernel_store_directory(path_);
  }
  ~FreshStore() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

at::Tensor poisoned_like(const at::Tensor& t) { return at::full_like(t, std::nan("")); }

std::string value_of(const tjit::KernelConfig& config, const std::string& name) {
  for (const auto& [n, v] : config.values) {
    if (n == name) {
      return std::to_string(std::get<int64_t>(v));
    }
  }
  return "(unset)";
}

class Autotune : public ::testing::TestWithParam<c10::Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda() && !at::hasCUDA()) {
      GTEST_SKIP() << "needs a CUDA GPU (this torch build or machine has none); run on the CUDA machine";
    }
  }
  at::TensorOptions options() const { return at::TensorOptions().device(GetParam()).dtype(at::kFloat); }
};

// The configs differ ~64x in work; the tuner must pick the one that reloads once, and the result
// must be what the untuned kernel computes.
TEST_P(Autotune, PicksTheFastestConfigAndComputesTheSameResult) {
  FreshStore store("fastest");
  auto& fn = kernel("double_kernel");
  ASSERT_TRUE(fn.autotuned());
  ASSERT_EQ(fn.configs().size(), 3u);
  EXPECT_EQ(fn.caller_parameters(), (std::vector<std::string>{"x", "out", "n"}));
  const size_t tunings = fn.num_tunings();
  // Two keys, tuned once each. On a GPU the configs differ in speed only for large inputs (a few
  // thousand elements run at launch latency whatever the config).
  const std::vector<int64_t> sizes = GetParam().is_cuda() ? std::vector<int64_t>{1 << 22, (3 << 20) + 1}
                                                          : std::vector<int64_t>{1000, 4097};
  for (int64_t n : sizes) {
    const at::Tensor x = at::randn({n}, options());
    at::Tensor out = poisoned_like(x);
    // Nothing chosen for this key yet: chosen_config() neither tunes nor launches.
    EXPECT_FALSE(fn.chosen_config(x, out, n).has_value()) << "n=" << n;
    EXPECT_EQ(fn.num_tunings() - tunings, n == sizes[0] ? 0u : 1u);
    fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n);
    synchronize(out);
    EXPECT_TRUE(at::equal(out, x * 2)) << "n=" << n;
    const tjit::KernelConfig chosen = fn.tune(stream_of(x), Grid(1), x, out, n);
    EXPECT_EQ(value_of(chosen, "REPEAT"), "1") << chosen.describe();
    EXPECT_EQ(value_of(chosen, "BLOCK"), "256");
    const auto looked_up = fn.chosen_config(x, out, n);
    ASSERT_TRUE(looked_up.has_value());
    EXPECT_EQ(looked_up->describe(), chosen.describe());
  }
  EXPECT_EQ(fn.num_tunings() - tunings, 2u);
  // The first key again: no tuning.
  const int64_t n = sizes[0];
  const at::Tensor x = at::randn({n}, options());
  at::Tensor out = poisoned_like(x);
  const size_t runs = fn.num_tuning_runs();
  fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n);
  synchronize(out);
  EXPECT_TRUE(at::equal(out, x * 2));
  EXPECT_EQ(fn.num_tunings() - tunings, 2u);
  EXPECT_EQ(fn.num_tuning_runs(), runs);
  // The untuned kernel with the winner's values, through operator(): the same bits.
  at::Tensor direct = poisoned_like(x);
  fn(stream_of(x), Grid(cdiv(n, 256)), tjit::LaunchOptions{}, x, direct, n, 256, 1);
  synchronize(direct);
  EXPECT_TRUE(at::equal(direct, out));
}

TEST_P(Autotune, EmptyAndNonContiguousInputs) {
  FreshStore store("empty");
  auto& fn = kernel("double_kernel");
  const at::Tensor empty = at::randn({0}, options());
  at::Tensor out = at::empty_like(empty);
  fn.run(stream_of(empty), [](const KernelMeta& meta) { return Grid(cdiv(0, meta["BLOCK"])); }, empty, out,
         int64_t{0});
  synchronize(out);
  EXPECT_EQ(out.numel(), 0);
  // Every other element of a larger tensor, copied contiguous first as the kernel reads it flat.
  const at::Tensor base = at::randn({2 * 777}, options());
  const at::Tensor x = base.slice(0, 0, c10::nullopt, 2).contiguous();
  at::Tensor result = poisoned_like(x);
  fn.run(stream_of(x), [](const KernelMeta& meta) { return Grid(cdiv(777, meta["BLOCK"])); }, x, result,
         int64_t{777});
  synchronize(result);
  EXPECT_TRUE(at::equal(result, base.slice(0, 0, c10::nullopt, 2) * 2));
}

// Every timing run (the first estimate's too) starts from a zeroed reset_to_zero argument.
TEST_P(Autotune, EveryTimingRunStartsFromReset) {
  FreshStore store("tickets");
  auto& fn = kernel("ticket_kernel");
  const int64_t n = GetParam().is_cuda() ? 100000 : 2000;
  const auto ints = at::TensorOptions().device(GetParam()).dtype(at::kInt);
  at::Tensor counter = at::full({1}, 12345, ints);
  at::Tensor worst = at::full({1}, -7, ints);
  fn.run(stream_of(counter), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, counter, worst, n);
  synchronize(worst);
  EXPECT_GT(fn.num_tuning_runs(), 4u);
  EXPECT_EQ(worst.item<int>(), 0);
  // The caller's run started from zero too: the counter holds its programs' tickets.
  const int64_t block = std::stoll(value_of(fn.tune(stream_of(counter), Grid(1), counter, worst, n), "BLOCK"));
  EXPECT_EQ(counter.item<int>(), cdiv(n, block));
}

// Timing runs accumulate into `acc` and `total`; after tuning the caller sees one clean run.
TEST_P(Autotune, ResetToZeroAndRestoreValueGiveOneCleanRun) {
  FreshStore store("reset");
  auto& fn = kernel("accumulate_kernel");
  const int64_t n = 3001;
  const at::Tensor x = at::rand({n}, options());
  at::Tensor acc = at::randn({n}, options());
  const at::Tensor acc_before = acc.clone();
  at::Tensor total = at::full({1}, 1000.0, options());
  const size_t tunings = fn.num_tunings();
  fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, acc, total, n);
  synchronize(acc);
  EXPECT_EQ(fn.num_tunings() - tunings, 1u);
  EXPECT_GT(fn.num_tuning_runs(), 4u);
  EXPECT_TRUE(at::equal(acc, acc_before + x));
  // total was reset to zero before the caller's run, as Python Triton does.
  EXPECT_NEAR(total.item<float>(), at::sum(x).item<float>(), 1e-2);
  // A tuned key runs once, without resets: it accumulates.
  fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, acc, total, n);
  synchronize(acc);
  EXPECT_TRUE(at::allclose(acc, acc_before + x + x));
  EXPECT_NEAR(total.item<float>(), 2 * at::sum(x).item<float>(), 2e-2);
}

TEST_P(Autotune, HeuristicsSeeTheConfigAndTheArguments) {
  FreshStore store("heuristics");
  auto& fn = kernel("scale_kernel");
  EXPECT_EQ(fn.caller_parameters(), (std::vector<std::string>{"x", "out", "n", "SCALE"}));
  for (int64_t n : {256, 1000, 77}) {  // EVEN for both blocks; for 32 only (1000 % 128 != 0); for none
    const at::Tensor x = at::randn({n}, options());
    at::Tensor out = poisoned_like(x);
    int64_t even = -1;
    fn.run(stream_of(x), [&](const KernelMeta& meta) {
      even = meta["EVEN"];
      EXPECT_EQ(meta["n"], n);
      EXPECT_EQ(meta["SCALE"], 3);
      return Grid(cdiv(n, meta["BLOCK"]));
    }, x, out, n, 3);
    synchronize(out);
    EXPECT_TRUE(at::equal(out, x * 3)) << "n=" << n;
    const tjit::KernelConfig chosen = fn.tune(stream_of(x), Grid(1), x, out, n, 3);
    const int64_t block = std::stoll(value_of(chosen, "BLOCK"));
    EXPECT_EQ(even, n % block == 0 ? 1 : 0) << "n=" << n << " " << chosen.describe();
  }
}

TEST_P(Autotune, HeuristicsAloneNeedNoTuning) {
  auto& fn = kernel("row_sum_kernel");
  EXPECT_FALSE(fn.autotuned());
  EXPECT_EQ(fn.caller_parameters(), (std::vector<std::string>{"x", "out", "n_cols"}));
  for (int64_t cols : {1, 100, 129}) {
    const at::Tensor x = at::randn({5, cols}, options());
    at::Tensor out = at::full({5}, std::nan(""), options());
    int64_t block = 0;
    fn.run(stream_of(x), [&](const KernelMeta& meta) {
      block = meta["BLOCK"];
      return Grid(5);
    }, x, out, cols);
    synchronize(out);
    EXPECT_TRUE(at::allclose(out, x.sum(1), 1e-5, 1e-5)) << "cols=" << cols;
    int64_t expected = 1;
    while (expected < cols) expected *= 2;
    EXPECT_EQ(block, expected);
  }
  EXPECT_EQ(fn.num_tunings(), 0u);
}

// Tuples through run(): the tuning, the heuristics (which read a tuple's scalar element and the
// dtype of a tensor in a tuple) and the launch see them as operator() passes them.
TEST_P(Autotune, TupleArgumentsThroughRun) {
  FreshStore store("tuples");
  auto& fn = kernel("tuple_axpb_kernel");
  EXPECT_EQ(fn.caller_parameters(), (std::vector<std::string>{"inputs", "out", "coefficients", "n"}));
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    for (int64_t n : {int64_t{1}, int64_t{300}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " n=" + std::to_string(n));
      const at::Tensor x = at::randn({n}, options().dtype(dtype));
      const at::Tensor y = at::randn({n}, options().dtype(dtype));
      at::Tensor with_bias = at::full({n}, std::nan(""), options());
      at::Tensor without_bias = at::full({n}, std::nan(""), options());
      int64_t has_bias = -1;
      int64_t half_in = -1;
      fn.run(stream_of(x), [&](const KernelMeta& meta) {
        has_bias = meta["HAS_BIAS"];
        half_in = meta["HALF_IN"];
        return Grid(cdiv(n, meta["BLOCK"]));
      }, std::make_tuple(x, y), with_bias, std::make_tuple(2.5, 0.75), n);
      EXPECT_EQ(has_bias, 1);
      EXPECT_EQ(half_in, dtype == at::kHalf ? 1 : 0);
      fn.run(stream_of(x), [&](const KernelMeta& meta) {
        has_bias = meta["HAS_BIAS"];
        return Grid(cdiv(n, meta["BLOCK"]));
      }, std::make_pair(x, y), without_bias, std::make_tuple(2.5, std::nullopt), n);
      EXPECT_EQ(has_bias, 0);
      synchronize(without_bias);
      const at::Tensor expected = x.to(at::kFloat) * 2.5 + y.to(at::kFloat);
      EXPECT_TRUE(at::allclose(with_bias, expected + 0.75, 1e-5, 1e-5));
      EXPECT_TRUE(at::allclose(without_bias, expected, 1e-5, 1e-5));
    }
  }
  EXPECT_GE(fn.num_tunings(), 1u);
  // A tuple inside an optional is not a shape run() takes.
  const at::Tensor x = at::randn({4}, options());
  at::Tensor out = at::empty_like(x);
  const std::optional<std::tuple<double, double>> wrapped = std::make_tuple(1.0, 2.0);
  EXPECT_NE(error_message([&] { fn.run(stream_of(x), Grid(1), std::make_tuple(x, x), out, wrapped, int64_t{4}); })
                .find("not inside a std::optional"),
            std::string::npos);
}

// Host tensor descriptors through run(): heuristics read their block shape, the configs' launch
// options are tuned, and the launch (TMA on sm_90+) computes what aten does.
TEST_P(Autotune, TensorDescriptorsThroughRun) {
  FreshStore store("descriptors");
  auto& fn = kernel("descriptor_scale_kernel");
  for (const std::vector<int64_t> block : {std::vector<int64_t>{16, 32}, std::vector<int64_t>{32, 16}}) {
    const int64_t M = 37, N = 50, stride = 64;  // Triton 3.4's interpreter wants 16-element strides
    const at::Tensor x = at::randn({M, stride}, options()).narrow(1, 0, N);
    at::Tensor y_full = at::full({M, stride}, std::nan(""), options());
    at::Tensor y = y_full.narrow(1, 0, N);
    const auto x_desc = tjit::TensorDescriptor::from_tensor(x, block);
    const auto y_desc = tjit::TensorDescriptor::from_tensor(y, block);
    int64_t bm = 0;
    fn.run(stream_of(x), [&](const KernelMeta& meta) {
      bm = meta["BM"];
      return Grid(cdiv(M, meta["BM"]), cdiv(N, meta["BN"]));
    }, x_desc, y_desc, M, N, 1.5);
    synchronize(y);
    EXPECT_EQ(bm, block[0]) << "block " << block[0] << "x" << block[1];
    EXPECT_TRUE(at::equal(y, x * 1.5)) << "block " << block[0] << "x" << block[1];
    // Past each row's end nothing is written, but on a GPU a TMA store (like the device-side stores
    // seen on an H100 from Python and C++) may finish the row's last 16-byte granule with zeros.
    const int64_t granule = 16 / x.element_size();
    const int64_t untouched = GetParam().is_cuda() ? (N + granule - 1) / granule * granule : N;
    EXPECT_TRUE(y_full.narrow(1, untouched, stride - untouched).isnan().all().item<bool>())
        << "block " << block[0] << "x" << block[1] << ": written past column " << untouched;
  }
}

TEST_P(Autotune, HeuristicReadingATensorShapeIsRefused) {
  auto& fn = kernel("shape_reading_kernel");
  const at::Tensor x = at::randn({16}, options());
  at::Tensor out = at::empty_like(x);
  const std::string message = error_message([&] { fn.run(stream_of(x), Grid(1), x, out); });
  EXPECT_NE(message.find("shape_reading_kernel"), std::string::npos) << message;
  EXPECT_NE(message.find("x.shape"), std::string::npos) << message;
  EXPECT_NE(message.find("only the dtype"), std::string::npos) << message;
}

TEST_P(Autotune, PruningKeepsWhatPruneConfigsByKeeps) {
  FreshStore store("prune");
  auto& fn = kernel("pruned_copy_kernel");
  // n = 100: blocks up to 100 survive the early prune (16, 32, 64); the perf model keeps 64 and 32.
  for (auto [n, allowed] : {std::pair<int64_t, std::vector<std::string>>{100, {"64", "32"}},
                            std::pair<int64_t, std::vector<std::string>>{10, {"16"}}}) {
    const at::Tensor x = at::randn({n}, options());
    at::Tensor out = poisoned_like(x);
    fn.run(stream_of(x), [n = n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n);
    synchronize(out);
    EXPECT_TRUE(at::equal(out, x));
    const std::string block = value_of(fn.tune(stream_of(x), Grid(1), x, out, n), "BLOCK");
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), block), allowed.end()) << "n=" << n << " chose " << block;
  }
}

TEST_P(Autotune, PruningGetsTheArgumentsByNameAndKeysIgnoreNamesNotPassed) {
  FreshStore store("prune-by-name");
  ::testing::internal::CaptureStderr();
  auto& fn = kernel("pruned_by_name_kernel");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("key names 'BLOCK', which the caller does not pass"), std::string::npos) << log;
  // LIMIT = 64 and n = 100 keep 16, 32, 64; the perf model (smallest block first, top 1) keeps 16.
  // LIMIT = 128 and n = 40 keep 16, 32: again 16. A prune that could not read LIMIT would throw.
  for (auto [n, limit] : {std::pair<int64_t, int64_t>{100, 64}, std::pair<int64_t, int64_t>{40, 128}}) {
    const at::Tensor x = at::randn({n}, options());
    at::Tensor out = poisoned_like(x);
    fn.run(stream_of(x), [n = n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n, limit);
    synchronize(out);
    EXPECT_TRUE(at::equal(out, x * 2)) << "n=" << n;
    EXPECT_EQ(value_of(fn.tune(stream_of(x), Grid(1), x, out, n, limit), "BLOCK"), "16") << "n=" << n;
  }
}

TEST_P(Autotune, ATensorInTheKeyIsTunedPerTensorAsInPython) {
  FreshStore store("tensor-key");
  auto& fn = kernel("tensor_keyed_kernel");
  const int64_t n = 300;
  const at::Tensor a = at::randn({n}, options());
  const at::Tensor b = at::randn({n}, options());
  at::Tensor out = poisoned_like(a);
  auto grid = [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); };
  const size_t tunings = fn.num_tunings();
  fn.run(stream_of(a), grid, a, out, n);
  fn.run(stream_of(a), grid, a, out, n);  // the same tensor: the choice made for it
  synchronize(out);
  EXPECT_TRUE(at::equal(out, a - 1));
  EXPECT_EQ(fn.num_tunings(), tunings + 1);
  fn.run(stream_of(b), grid, b, out, n);  // another tensor: tuned again
  synchronize(out);
  EXPECT_TRUE(at::equal(out, b - 1));
  EXPECT_EQ(fn.num_tunings(), tunings + 2);
}

TEST_P(Autotune, AConfigThatFailsToCompileIsSkipped) {
  FreshStore store("broken");
  auto& fn = kernel("partly_broken_kernel");
  const int64_t n = 999;
  const at::Tensor x = at::randn({n}, options());
  at::Tensor out = poisoned_like(x);
  ::testing::internal::CaptureStderr();
  fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n);
  const std::string log = ::testing::internal::GetCapturedStderr();
  synchronize(out);
  EXPECT_TRUE(at::equal(out, x + 1));
  EXPECT_NE(log.find("skipping config BLOCK: 4096"), std::string::npos) << log;
  EXPECT_NE(value_of(fn.tune(stream_of(x), Grid(1), x, out, n), "BLOCK"), "4096");
}

TEST_P(Autotune, SixteenThreadsTuneEachKeyOnce) {
  FreshStore store("threads");
  auto& fn = kernel("double_kernel");
  const size_t tunings = fn.num_tunings();
  const std::vector<int64_t> sizes{11, 222, 333, 4444};
  std::vector<at::Tensor> inputs;
  for (int64_t n : sizes) {
    inputs.push_back(at::randn({n}, options()));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      const size_t k = t % sizes.size();
      const int64_t n = sizes[k];
      at::Tensor out = poisoned_like(inputs[k]);
      // Each thread on its own stream of the device would also do; the current one is shared.
      fn.run(stream_of(out), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, inputs[k], out,
             n);
      synchronize(out);
      if (!at::equal(out, inputs[k] * 2)) {
        wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(fn.num_tunings() - tunings, sizes.size());
}

TEST_P(Autotune, RunWithTheWrongArgumentsSaysWhatItTakes) {
  auto& fn = kernel("double_kernel");
  const at::Tensor x = at::randn({8}, options());
  const std::string message = error_message([&] { fn.run(stream_of(x), Grid(1), x, x); });
  EXPECT_NE(message.find("double_kernel takes 3 arguments in run() (x, out, n;"), std::string::npos) << message;
  EXPECT_NE(message.find("got 2"), std::string::npos) << message;
  const std::string meta_message = error_message([&] {
    fn.run(stream_of(x), [](const KernelMeta& meta) { return Grid(meta["BLOKC"]); }, x, x, int64_t{8});
  });
  EXPECT_NE(meta_message.find("META[\"BLOKC\"]"), std::string::npos) << meta_message;
}

// A config pre_hook that works on a tensor cannot be recorded: run() says so and names the remedy;
// operator() with every argument still works; a hook supplied in C++ makes run() work, called
// before the launch.
TEST_P(Autotune, UnrecordablePreHookIsRefusedUntilSuppliedInCpp) {
  auto& fn = kernel("hooked_kernel");
  const at::Tensor x = at::randn({100}, options());
  at::Tensor out = poisoned_like(x);
  const std::string message = error_message([&] { fn.run(stream_of(x), Grid(2), x, out, int64_t{100}); });
  for (const char* part : {"hooked_kernel", "_hook is not descriptor-only", "reads an attribute of out",
                           "set_config_pre_hook"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
  fn(stream_of(x), Grid(2), tjit::LaunchOptions{}, x, out, 100, 64);
  synchronize(out);
  EXPECT_TRUE(at::equal(out, x));

  int calls = 0;
  fn.set_config_pre_hook([&](tjit::ConfigHookArgs& args) {
    ++calls;
    EXPECT_EQ(args.config_index(), 0);
    EXPECT_EQ(args.meta()["BLOCK"], 64);
    EXPECT_EQ(args.meta()["n"], 100);
    EXPECT_FALSE(args.timing());  // one config: nothing is timed
    at::Tensor o = args.tensor("out");
    o.zero_();  // what the Python hook does
    EXPECT_NE(error_message([&] { args.tensor("n"); }).find("'n'"), std::string::npos);
  });
  out = poisoned_like(x);
  fn.run(stream_of(x), Grid(2), x, out, int64_t{100});
  synchronize(out);
  EXPECT_TRUE(at::equal(out, x));
  EXPECT_EQ(calls, 1);
  fn.set_config_pre_hook(nullptr);
  EXPECT_NE(error_message([&] { fn.run(stream_of(x), Grid(2), x, out, int64_t{100}); }).find("not descriptor-only"),
            std::string::npos);
}

// The body of a decision record of the test's store whose key starts with `kind` ("autotune choice",
// "descriptor hook"), one per record.
std::vector<std::string> decision_records(const std::string& folder, const std::string& kind) {
  std::vector<std::string> found;
  const std::string listing = folder + "/listing.txt";
  std::system(("find '" + folder + "' -name 'decision-*.tjd' > '" + listing + "'").c_str());
  std::FILE* names = std::fopen(listing.c_str(), "r");
  char name[4096];
  while (names != nullptr && std::fgets(name, sizeof(name), names) != nullptr) {
    std::string path(name);
    path.erase(path.find_last_not_of("\n") + 1);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    std::string bytes;
    char buffer[4096];
    for (size_t n; f != nullptr && (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) {
      bytes.append(buffer, n);
    }
    if (f != nullptr) std::fclose(f);
    if (bytes.find("tjit " + kind + " v1") != std::string::npos) {
      found.push_back(bytes);
    }
  }
  if (names != nullptr) std::fclose(names);
  return found;
}

// A config pre_hook on host descriptors (Triton's TMA matmul tutorials): each config's hook sets the
// descriptors' block shapes from the config and a caller constexpr. The caller's descriptors have
// 8x8 blocks, with which the kernel cannot even compile; tuning at the first call runs both configs
// (every timing finite), and the result matches aten.
TEST_P(Autotune, DescriptorPreHooksSetTheBlockShapes) {
  FreshStore store("descriptor-hook");
  auto& fn = kernel("descriptor_hook_matmul_kernel");
  EXPECT_EQ(fn.caller_parameters(),
            (std::vector<std::string>{"a_desc", "b_desc", "c_desc", "M", "N", "K", "SPLIT_STORE"}));
  const auto half = options().dtype(at::kHalf);
  // Four tuning keys (M; SPLIT_STORE is not in the key), each tuned at its first call.
  for (const bool split : {false, true}) {
    for (const int64_t M : split ? std::vector<int64_t>{24, 56} : std::vector<int64_t>{40, 64}) {
      SCOPED_TRACE(std::string("split ") + (split ? "yes" : "no") + ", M " + std::to_string(M));
      const int64_t N = 48, K = 64;  // 16-element strides (Triton 3.4's interpreter asks that)
      const at::Tensor a = at::randn({M, K}, half);
      const at::Tensor b = at::randn({N, K}, half);
      at::Tensor buffer = at::full({M + 4, N + 16}, std::nan(""), half);
      at::Tensor c = buffer.narrow(0, 2, M).narrow(1, 0, N);
      const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {8, 8});
      const auto b_desc = tjit::TensorDescriptor::from_tensor(b, {8, 8});
      const auto c_desc = tjit::TensorDescriptor::from_tensor(c, {8, 8});
      const size_t runs = fn.num_tuning_runs();
      fn.run(stream_of(a), [&](const KernelMeta& meta) {
        return Grid(cdiv(M, meta["BLOCK_M"]), cdiv(N, meta["BLOCK_N"]));
      }, a_desc, b_desc, c_desc, M, N, K, split);
      synchronize(c);
      if (!GetParam().is_cuda()) {
        EXPECT_EQ(fn.num_tuning_runs() - runs, 8u);  // 2 configs x 4 interpreted runs: neither failed
      }
      const at::Tensor expected = at::matmul(a.to(at::kFloat), b.to(at::kFloat).t());
      EXPECT_TRUE(at::allclose(c.to(at::kFloat), expected, 1e-2, 5e-2));
      EXPECT_TRUE(buffer.narrow(0, 0, 2).isnan().all().item<bool>());
      EXPECT_TRUE(buffer.narrow(0, M + 2, 2).isnan().all().item<bool>());
      EXPECT_TRUE(buffer.narrow(1, N, 16).isnan().all().item<bool>());
      // The caller's descriptors are left as they were (the hook's fields go to copies).
      EXPECT_EQ(a_desc.block_shape(), c10::IntArrayRef({8, 8}));
    }
  }
  // Every config of every key was timed (a config failing would time as null), and the hooks'
  // effects were recorded once per config and SPLIT_STORE value (not per M).
  const auto choices = decision_records(store.path(), "autotune choice");
  EXPECT_EQ(choices.size(), 4u);
  for (const std::string& record : choices) {
    EXPECT_EQ(record.find("null"), std::string::npos) << record;
  }
  const auto hooks = decision_records(store.path(), "descriptor hook");
  EXPECT_EQ(hooks.size(), 4u);
  bool split_record = false;
  for (const std::string& record : hooks) {
    split_record = split_record || record.find("[32,8]") != std::string::npos;
  }
  EXPECT_TRUE(split_record) << "no record of config 1 with SPLIT_STORE (c_desc [32, 8])";
}

// A C++ hook replaces the Python one: it is called before each timed run and the launch, and the
// block shapes it sets are what the runs use.
TEST_P(Autotune, CppPreHookRunsBeforeEveryRun) {
  FreshStore store("cpp-hook");
  auto& fn = kernel("descriptor_hook_matmul_kernel");
  int calls = 0;
  int timed = 0;
  fn.set_config_pre_hook([&](tjit::ConfigHookArgs& args) {
    ++calls;
    timed += args.timing() ? 1 : 0;
    const int64_t bm = args.meta()["BLOCK_M"], bn = args.meta()["BLOCK_N"], bk = args.meta()["BLOCK_K"];
    EXPECT_EQ(bm, args.config_index() == 0 ? 16 : 32);
    args.set_block_shape("a_desc", {bm, bk});
    args.set_block_shape("b_desc", {bn, bk});
    args.set_block_shape("c_desc", {bm, bn});
    EXPECT_EQ(args.descriptor("a_desc").block_shape(), c10::IntArrayRef({8, 8}));  // the caller's
    if (calls == 1) {  // (not on each of a GPU's thousands of timed runs)
      EXPECT_NE(error_message([&] { args.set_block_shape("M", {16, 16}); }).find("not a host tensor descriptor"),
                std::string::npos);
      EXPECT_NE(error_message([&] { args.set_block_shape("a_desc", {16, 24}); }).find("power of two"),
                std::string::npos);
    }
  });
  const auto half = options().dtype(at::kHalf);
  const int64_t M = 33, N = 32, K = 32;
  const at::Tensor a = at::randn({M, K}, half);
  const at::Tensor b = at::randn({N, K}, half);
  at::Tensor c = at::full({M, N}, std::nan(""), half);
  const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {8, 8});
  const auto b_desc = tjit::TensorDescriptor::from_tensor(b, {8, 8});
  const auto c_desc = tjit::TensorDescriptor::from_tensor(c, {8, 8});
  const size_t runs = fn.num_tuning_runs();
  fn.run(stream_of(a), [&](const KernelMeta& meta) {
    return Grid(cdiv(M, meta["BLOCK_M"]), cdiv(N, meta["BLOCK_N"]));
  }, a_desc, b_desc, c_desc, M, N, K, false);
  synchronize(c);
  fn.set_config_pre_hook(nullptr);
  const size_t timing_runs = fn.num_tuning_runs() - runs;
  EXPECT_GE(timing_runs, 8u);
  EXPECT_EQ(static_cast<size_t>(timed), timing_runs);
  EXPECT_EQ(calls, timed + 1);  // and once before the call's own launch
  EXPECT_TRUE(at::allclose(c.to(at::kFloat), at::matmul(a.to(at::kFloat), b.to(at::kFloat).t()), 1e-2, 5e-2));
  EXPECT_TRUE(decision_records(store.path(), "descriptor hook").empty());  // nothing recorded for it
}

// @triton.autotune's own pre_hook / post_hook: tuning a new key needs them, so without C++ ones run()
// names them; supplied in C++, the pre hook replaces the resets before each timed run (and once
// after the last), the post hook follows each; a key tuned before calls neither, as in Python.
TEST_P(Autotune, AutotunePreAndPostHooksSuppliedInCpp) {
  FreshStore store("tuner-hooks");
  auto& fn = kernel("tuner_hooked_sum_kernel");
  const int64_t n = 1000;
  const at::Tensor x = at::rand({n}, options());
  at::Tensor total = at::full({1}, std::nan(""), options());
  auto grid = [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); };
  const std::string message = error_message([&] { fn.run(stream_of(x), grid, x, total, n); });
  for (const char* part : {"tuner_hooked_sum_kernel", "pre_hook _zero_total and post_hook _after_run",
                           "set_autotune_hooks", "n=1000"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
  int pre = 0, post = 0, failed = 0, resets = 0;
  fn.set_autotune_hooks(
      [&](tjit::ConfigHookArgs& args) {
        ++pre;
        resets += args.timing() ? 0 : 1;
        at::Tensor t = args.tensor("total");
        t.zero_();
      },
      [&](tjit::ConfigHookArgs&, bool run_failed) {
        ++post;
        failed += run_failed ? 1 : 0;
      });
  const size_t runs = fn.num_tuning_runs();
  fn.run(stream_of(x), grid, x, total, n);
  synchronize(total);
  const size_t timed = fn.num_tuning_runs() - runs;
  EXPECT_GE(timed, 8u);
  EXPECT_EQ(static_cast<size_t>(post), timed);
  EXPECT_EQ(static_cast<size_t>(pre), timed + 1);
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(failed, 0);
  const at::Tensor expected = x.sum().reshape({1});
  EXPECT_TRUE(at::allclose(total, expected, 1e-5, 1e-3)) << total << expected;  // one clean run
  // Tuned: no hook runs (Python Triton calls them only around timed runs), so the sum adds up.
  fn.run(stream_of(x), grid, x, total, n);
  synchronize(total);
  fn.set_autotune_hooks(nullptr, nullptr);
  EXPECT_EQ(static_cast<size_t>(pre), timed + 1);
  EXPECT_TRUE(at::allclose(total, expected * 2, 1e-5, 1e-3));
}

// A hook reading what the recorded decision is not keyed on (the call's descriptor shape).
TEST_P(Autotune, PreHookReadingADescriptorShapeIsRefused) {
  auto& fn = kernel("shape_reading_hook_kernel");
  const at::Tensor a = at::randn({32, 32}, options());
  const at::Tensor out = at::empty({1}, options());
  const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {16, 16});
  const std::string message = error_message([&] { fn.run(stream_of(a), Grid(1), a_desc, out, int64_t{32}); });
  for (const char* part : {"shape_reading_hook_kernel", "_reads_shape", "reads a_desc.shape", "set_config_pre_hook"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
}

// A second process finds the choice in the store and times nothing: the parent part starts this
// binary again for the child part (DISABLED_: only run when asked for).
// Runs this binary's disabled test `test` for the CPU or CUDA in a child process on `store`, JIT off
// if asked, and expects it to pass.
void run_child(const FreshStore& store, const std::string& test, bool cuda, bool jit_off) {
  std::string self(4096, '\0');
  self.resize(::readlink("/proc/self/exe", self.data(), self.size()));
  const std::string device = cuda ? "cuda" : "cpu";
  const std::string command = "env -u TJIT_CACHE TJIT_CACHE_DIR='" + store.path() + "' " +
                              (jit_off ? "TJIT_JIT=0 " : "") + "'" + self +
                              "' --gtest_also_run_disabled_tests --gtest_filter='*/Autotune." + test + "/" + device +
                              "' > '" + store.path() + ".log' 2>&1";
  std::system(command.c_str());
  std::string log;
  if (FILE* f = std::fopen((store.path() + ".log").c_str(), "r")) {
    char buffer[4096];
    for (size_t got; (got = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) {
      log.append(buffer, got);
    }
    std::fclose(f);
  }
  std::remove((store.path() + ".log").c_str());
  EXPECT_NE(log.find("[  PASSED  ] 1 test."), std::string::npos) << command << "\n" << log;
}

TEST_P(Autotune, ASecondProcessLoadsTheChoiceWithoutTiming) {
  FreshStore store("process");
  auto& fn = kernel("double_kernel");
  const int64_t n = 5555;
  const at::Tensor x = at::randn({n}, options());
  at::Tensor out = poisoned_like(x);
  const size_t tunings = fn.num_tunings();
  fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n);
  synchronize(out);
  ASSERT_EQ(fn.num_tunings() - tunings, 1u);
  // Heuristic values are stored too (for a row length no other test uses: this process remembers
  // the values of the ones it has seen without looking at the store).
  const at::Tensor rows = at::randn({3, 101}, options());
  at::Tensor sums = at::empty({3}, options());
  kernel("row_sum_kernel").run(stream_of(rows), Grid(3), rows, sums, int64_t{101});
  synchronize(sums);
  // With CUDA, the child also runs with JIT off: signature, choice and binary all come from the store.
  run_child(store, "DISABLED_ChildLoadsTheChoice", GetParam().is_cuda(), GetParam().is_cuda());
}

TEST_P(Autotune, DISABLED_ChildLoadsTheChoice) {
  auto& fn = kernel("double_kernel");
  const int64_t n = 5555;
  const at::Tensor x = at::randn({n}, options());
  at::Tensor out = poisoned_like(x);
  // The stored choice is there before any run, with no timing (which config won is the parent's
  // business: at this size every config runs at launch latency).
  ASSERT_TRUE(fn.chosen_config(x, out, n).has_value());
  fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); }, x, out, n);
  synchronize(out);
  EXPECT_TRUE(at::equal(out, x * 2));
  EXPECT_EQ(fn.num_tunings(), 0u);
  EXPECT_EQ(fn.num_tuning_runs(), 0u);
  EXPECT_EQ(fn.num_tunings_loaded(), 1u);
  // The heuristics' values for these arguments come from the store (with CUDA and JIT off, Python
  // could not run them).
  auto& row_sum = kernel("row_sum_kernel");
  const at::Tensor rows = at::randn({3, 101}, options());
  at::Tensor sums = at::full({3}, std::nan(""), options());
  row_sum.run(stream_of(rows), Grid(3), rows, sums, int64_t{101});
  synchronize(sums);
  EXPECT_TRUE(at::allclose(sums, rows.sum(1), 1e-5, 1e-5));
  EXPECT_EQ(tjit::kernel_store_counters().tuning_hits, 2u);
  if (GetParam().is_cuda()) {
    EXPECT_EQ(fn.num_compiled(), 0u);
    EXPECT_EQ(row_sum.num_compiled(), 0u);
  }
}

// What a config pre_hook set on the descriptors survives in the kernel store: a second process
// applies it without running the hook (with CUDA, with JIT off: no Python at all).
constexpr int64_t kStoredHookM = 72, kStoredHookN = 32, kStoredHookK = 48;

void run_stored_hook_matmul(const at::TensorOptions& options) {
  auto& fn = kernel("descriptor_hook_matmul_kernel");
  const auto half = options.dtype(at::kHalf);
  const at::Tensor a = at::randn({kStoredHookM, kStoredHookK}, half);
  const at::Tensor b = at::randn({kStoredHookN, kStoredHookK}, half);
  at::Tensor c = at::full({kStoredHookM, kStoredHookN}, std::nan(""), half);
  const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {8, 8});
  const auto b_desc = tjit::TensorDescriptor::from_tensor(b, {8, 8});
  const auto c_desc = tjit::TensorDescriptor::from_tensor(c, {8, 8});
  fn.run(stream_of(a), [](const KernelMeta& meta) {
    return Grid(cdiv(kStoredHookM, meta["BLOCK_M"]), cdiv(kStoredHookN, meta["BLOCK_N"]));
  }, a_desc, b_desc, c_desc, kStoredHookM, kStoredHookN, kStoredHookK, true);
  synchronize(c);
  EXPECT_TRUE(at::allclose(c.to(at::kFloat), at::matmul(a.to(at::kFloat), b.to(at::kFloat).t()), 1e-2, 5e-2));
}

// Both parts in fresh processes: this one remembers hook decisions of other tests, which it would
// not store again.
TEST_P(Autotune, ASecondProcessAppliesTheStoredDescriptorHook) {
  FreshStore store("stored-hook");
  run_child(store, "DISABLED_ChildRecordsTheDescriptorHook", GetParam().is_cuda(), false);
  run_child(store, "DISABLED_ChildAppliesTheStoredDescriptorHook", GetParam().is_cuda(), GetParam().is_cuda());
}

TEST_P(Autotune, DISABLED_ChildRecordsTheDescriptorHook) {
  run_stored_hook_matmul(options());
  EXPECT_EQ(kernel("descriptor_hook_matmul_kernel").num_tunings(), 1u);
}

TEST_P(Autotune, DISABLED_ChildAppliesTheStoredDescriptorHook) {
  run_stored_hook_matmul(options());
  auto& fn = kernel("descriptor_hook_matmul_kernel");
  EXPECT_EQ(fn.num_tunings(), 0u);
  // The choice and what the chosen config's hook set, both from the store (a hook run in Python
  // instead would leave one hit).
  EXPECT_EQ(tjit::kernel_store_counters().tuning_hits, 2u);
  if (GetParam().is_cuda()) {
    EXPECT_EQ(fn.num_compiled(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Autotune, ::testing::ValuesIn(tjit::testing::test_devices()),
                         tjit::testing::device_label);

// ---- CUDA only: the tuned hot path and CUDA graph capture ----------------------------------

TEST(AutotuneCuda, TunedRunAllocatesNothing) {
  TJIT_SKIP_WITHOUT_CUDA();
  FreshStore store("alloc");
  auto& fn = kernel("double_kernel");
  const int64_t n = 2048;
  const at::Tensor x = at::randn({n}, at::TensorOptions().device(at::kCUDA));
  at::Tensor out = at::empty_like(x);
  const tjit::Stream stream = stream_of(x);
  auto grid = [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); };
  fn.run(stream, grid, x, out, n);
  fn.run(stream, grid, x, out, n);
  tjit::testing::allocations.store(0);
  tjit::testing::count_allocations.store(true);
  for (int i = 0; i < 100; ++i) {
    fn.run(stream, grid, x, out, n);
  }
  tjit::testing::count_allocations.store(false);
  synchronize(out);
  EXPECT_EQ(tjit::testing::allocations.load(), 0u);
  EXPECT_TRUE(at::equal(out, x * 2));
}

// A recorded config pre_hook is applied in C++ on every launch: copies of the descriptors with the
// hook's block shapes, and no allocation; nor does a C++ hook add any.
TEST(AutotuneCuda, DescriptorPreHookRunAllocatesNothing) {
  TJIT_SKIP_WITHOUT_CUDA();
  FreshStore store("hook-alloc");
  auto& fn = kernel("descriptor_hook_matmul_kernel");
  const auto half = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const int64_t M = 96, N = 64, K = 64;
  const at::Tensor a = at::randn({M, K}, half);
  const at::Tensor b = at::randn({N, K}, half);
  at::Tensor c = at::empty({M, N}, half);
  const auto a_desc = tjit::TensorDescriptor::from_tensor(a, {8, 8});
  const auto b_desc = tjit::TensorDescriptor::from_tensor(b, {8, 8});
  const auto c_desc = tjit::TensorDescriptor::from_tensor(c, {8, 8});
  const tjit::Stream stream = stream_of(a);
  auto grid = [&](const KernelMeta& meta) { return Grid(cdiv(M, meta["BLOCK_M"]), cdiv(N, meta["BLOCK_N"])); };
  const at::Tensor expected = at::matmul(a.to(at::kFloat), b.to(at::kFloat).t());
  for (const bool cpp_hook : {false, true}) {
    SCOPED_TRACE(cpp_hook ? "C++ hook" : "recorded Python hook");
    int calls = 0;
    if (cpp_hook) {
      fn.set_config_pre_hook([&](tjit::ConfigHookArgs& args) {
        ++calls;
        const int64_t bm = args.meta()["BLOCK_M"], bn = args.meta()["BLOCK_N"], bk = args.meta()["BLOCK_K"];
        args.set_block_shape("a_desc", {bm, bk});
        args.set_block_shape("b_desc", {bn, bk});
        args.set_block_shape("c_desc", {bm, bn});
      });
    }
    fn.run(stream, grid, a_desc, b_desc, c_desc, M, N, K, false);
    fn.run(stream, grid, a_desc, b_desc, c_desc, M, N, K, false);
    c.fill_(std::nan(""));
    tjit::testing::allocations.store(0);
    tjit::testing::count_allocations.store(true);
    for (int i = 0; i < 100; ++i) {
      fn.run(stream, grid, a_desc, b_desc, c_desc, M, N, K, false);
    }
    tjit::testing::count_allocations.store(false);
    synchronize(c);
    fn.set_config_pre_hook(nullptr);
    EXPECT_EQ(tjit::testing::allocations.load(), 0u);
    EXPECT_TRUE(at::allclose(c.to(at::kFloat), expected, 1e-2, 5e-2));
    if (cpp_hook) {
      EXPECT_EQ(calls, 102);  // the key was tuned before: one call per launch
    }
  }
}

TEST(AutotuneCuda, AConfigNeedingTooMuchSharedMemoryIsSkipped) {
  TJIT_SKIP_WITHOUT_CUDA();
  FreshStore store("shared");
  auto& fn = kernel("matmul_kernel");
  const int64_t m = 300, n = 260, k = 200;
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const at::Tensor a = at::randn({m, k}, opts), b = at::randn({k, n}, opts);
  at::Tensor c = at::full({m, n}, std::nan(""), opts.dtype(at::kFloat));
  ::testing::internal::CaptureStderr();
  fn.run(stream_of(a), [&](const KernelMeta& meta) { return Grid(cdiv(m, meta["BM"]), cdiv(n, meta["BN"])); }, a, b,
         c, m, n, k);
  const std::string log = ::testing::internal::GetCapturedStderr();
  synchronize(c);
  EXPECT_NE(log.find("skipping config BM: 256, BN: 256, BK: 128, num_warps: 8"), std::string::npos) << log;
  EXPECT_NE(log.find("needs 262144 bytes of shared memory"), std::string::npos) << log;
  EXPECT_TRUE(at::allclose(c, at::matmul(a.to(at::kFloat), b.to(at::kFloat)), 1e-2, 1e-2));
  EXPECT_EQ(value_of(fn.tune(stream_of(a), Grid(1), a, b, c, m, n, k), "BM"), "64");
}

// The driver's graph API, opened the way tjit opens the driver (tests link no CUDA library).
struct GraphApi {
  decltype(&::cuStreamCreate) stream_create;
  decltype(&::cuStreamBeginCapture) begin_capture;
  decltype(&::cuStreamEndCapture) end_capture;
  decltype(&::cuGraphInstantiateWithFlags) instantiate;
  decltype(&::cuGraphLaunch) launch;
  decltype(&::cuStreamSynchronize) synchronize;
  decltype(&::cuGraphExecDestroy) exec_destroy;
  decltype(&::cuGraphDestroy) destroy;
  decltype(&::cuStreamDestroy) stream_destroy;
};

#define TJIT_TEST_STRINGIFY_EXPANDED(name) TJIT_TEST_STRINGIFY(name)
#define TJIT_TEST_STRINGIFY(name) #name

GraphApi graph_api() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr);
  GraphApi api{};
  api.stream_create = reinterpret_cast<decltype(api.stream_create)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuStreamCreate)));
  api.begin_capture = reinterpret_cast<decltype(api.begin_capture)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuStreamBeginCapture)));
  api.end_capture = reinterpret_cast<decltype(api.end_capture)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuStreamEndCapture)));
  api.instantiate = reinterpret_cast<decltype(api.instantiate)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuGraphInstantiateWithFlags)));
  api.launch = reinterpret_cast<decltype(api.launch)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuGraphLaunch)));
  api.synchronize = reinterpret_cast<decltype(api.synchronize)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuStreamSynchronize)));
  api.exec_destroy = reinterpret_cast<decltype(api.exec_destroy)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuGraphExecDestroy)));
  api.destroy = reinterpret_cast<decltype(api.destroy)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuGraphDestroy)));
  api.stream_destroy = reinterpret_cast<decltype(api.stream_destroy)>(dlsym(lib, TJIT_TEST_STRINGIFY_EXPANDED(cuStreamDestroy)));
  return api;
}

TEST(AutotuneCuda, NewKeyInsideGraphCaptureDefersTuningAndTuneFirstWorks) {
  TJIT_SKIP_WITHOUT_CUDA();
  FreshStore store("graph");
  auto& fn = kernel("double_kernel");
  const GraphApi cu = graph_api();
  ASSERT_NE(cu.begin_capture, nullptr);
  const int64_t n = 7777;
  const at::Tensor x = at::randn({n}, at::TensorOptions().device(at::kCUDA));
  at::Tensor out = at::empty_like(x);
  synchronize(x);
  CUstream stream = nullptr;
  ASSERT_EQ(cu.stream_create(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  auto grid = [n](const KernelMeta& meta) { return Grid(cdiv(n, meta["BLOCK"])); };
  auto replay_gives_double = [&](CUgraph graph) {
    CUgraphExec exec = nullptr;
    ASSERT_EQ(cu.instantiate(&exec, graph, 0), CUDA_SUCCESS);
    out.fill_(std::nan(""));
    synchronize(out);
    ASSERT_EQ(cu.launch(exec, stream), CUDA_SUCCESS);
    ASSERT_EQ(cu.synchronize(stream), CUDA_SUCCESS);
    EXPECT_TRUE(at::equal(out, x * 2));
    cu.exec_destroy(exec);
  };
  // A new key inside a capture: nothing can be timed, so the launch takes the first config and the
  // key stays untuned (no timing run, no choice); tune() there is refused with what to do.
  EXPECT_FALSE(tjit::stream_is_capturing(stream));
  const size_t runs_before = fn.num_tuning_runs();
  ASSERT_EQ(cu.begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_TRUE(tjit::stream_is_capturing(stream));
  EXPECT_FALSE(fn.chosen_config(x, out, n).has_value());
  fn.run(stream, grid, x, out, n);
  EXPECT_FALSE(fn.chosen_config(x, out, n).has_value());
  const std::string message = error_message([&] { fn.tune(stream, grid, x, out, n); });
  CUgraph graph = nullptr;
  ASSERT_EQ(cu.end_capture(stream, &graph), CUDA_SUCCESS);
  ASSERT_NE(graph, nullptr) << "the first call invalidated the capture";
  EXPECT_EQ(fn.num_tuning_runs(), runs_before);
  EXPECT_NE(message.find("captured into a CUDA graph"), std::string::npos) << message;
  EXPECT_NE(message.find("tune()"), std::string::npos) << message;
  replay_gives_double(graph);
  cu.destroy(graph);
  // tune() first, then the capture records the winner's launch alone.
  fn.tune(stream, grid, x, out, n);
  const size_t runs = fn.num_tuning_runs();
  EXPECT_GT(runs, runs_before);
  ASSERT_EQ(cu.synchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cu.begin_capture(stream, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  EXPECT_TRUE(fn.chosen_config(x, out, n).has_value());
  fn.run(stream, grid, x, out, n);
  ASSERT_EQ(cu.end_capture(stream, &graph), CUDA_SUCCESS);
  EXPECT_FALSE(tjit::stream_is_capturing(stream));
  replay_gives_double(graph);
  EXPECT_EQ(fn.num_tuning_runs(), runs);
  cu.destroy(graph);
  cu.stream_destroy(stream);
}

}  // namespace

namespace {

// A thread without a current CUDA context (autograd's backward threads are such until something
// makes one current): the legacy default stream's capture status is resolved through the context,
// so the query must bring the device's own.
TEST(AutotuneCuda, CaptureStatusOnAThreadWithoutAContext) {
  TJIT_SKIP_WITHOUT_CUDA();
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  using GetCurrent = CUresult (*)(CUcontext*);
  const auto get_current = reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
  ASSERT_NE(get_current, nullptr);
  bool had_context = true;
  bool capturing = true;
  bool has_context_after = true;
  std::string error;
  std::thread([&] {
    CUcontext ctx = nullptr;
    had_context = get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr;
    try {
      capturing = tjit::stream_is_capturing(nullptr, c10::Device(c10::kCUDA, 0));
    } catch (const std::exception& e) {
      error = e.what();
    }
    has_context_after = get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr;
  }).join();
  EXPECT_FALSE(had_context) << "the new thread already had a context: the test shows nothing";
  EXPECT_EQ(error, "");
  EXPECT_FALSE(capturing);
  EXPECT_FALSE(has_context_after) << "the query left the device's context current on the thread";
  EXPECT_FALSE(tjit::stream_is_capturing(nullptr, c10::Device(c10::kCPU)));
}

}  // namespace
