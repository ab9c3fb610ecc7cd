// Kernel bundles end to end, without a GPU: a manifest recorded from launches (CPU, Triton's
// interpreter), a bundle built from it for cuda:80 and cuda:90 by tjit's builder (ctest fixtures,
// tests/cpp/CMakeLists.txt), then, in processes with JIT off and no kernel store, the loader:
// lookups through compile(), the errors for what the bundle lacks, damaged bundles, embedded
// registration. Every test runs in its own process (ctest), so each starts with no bundle.
//
//   tjit_bundle_tests --record-manifest      the launches whose specialisations the bundle holds
//   tjit_bundle_tests [gtest options]        the tests (TJIT_TEST_BUNDLE: the bundle built)
//   tjit_bundle_tests --check-bundle FILE    loads FILE and looks every entry of its index up
//                                            through the runtime's lookup (tests/deploy/suite_bundle.sh)

#include "test_helpers.h"

#include "binaries/kernel_bundle_detail.h"
#include "binaries/kernel_entry.h"

#include <tjit/kernel_bundle.h>
#include <tjit/kernel_manifest.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <execinfo.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <ucontext.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using tjit::CompileTarget;
using tjit::LaunchOptions;
using tjit::TritonJitFunction;
using tjit::testing::error_message;
using tjit::testing::test_kernels;

constexpr int64_t kN = 1000;
constexpr int64_t kBlock = 256;

// The arguments of the two recorded launches; the tests compile with the same ones.
struct Inputs {
  at::Tensor x = at::randn({kN});
  at::Tensor out = at::empty({kN});
};

tjit::CompiledKernel compile_scale(const std::string& file, const Inputs& in, const CompileTarget& target,
                                   int64_t block = kBlock) {
  auto& fn = TritonJitFunction::get_instance(file, "scale_kernel");
  return fn.compile(target, LaunchOptions{}, in.x, in.out, kN, 2.0, block);
}

// variety_kernel: every kind of value a manifest holds (float, bool and None constexprs, an int
// specialised to 1, i64 and fp64 arguments, a None pointer), with non-default options.
const LaunchOptions kVarietyOptions{2, 2};

tjit::CompiledKernel compile_variety(const Inputs& in, const CompileTarget& target) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "variety_kernel");
  return fn.compile(target, kVarietyOptions, in.x, in.out, kN, int64_t{1}, int64_t{5} << 40, 2.5,
                    std::optional<at::Tensor>(), 0.5, true, std::nullopt, kBlock);
}

// activation_kernel: a string and a dtype constexpr.
tjit::CompiledKernel compile_activation(const Inputs& in, const CompileTarget& target, const char* activation) {
  auto& fn = TritonJitFunction::get_instance(test_kernels(), "activation_kernel");
  const at::Tensor out = at::empty({kN}, at::TensorOptions().dtype(at::kBFloat16));
  return fn.compile(target, LaunchOptions{}, in.x, out, kN, std::string_view(activation),
                    tjit::Dtype(at::kBFloat16), kBlock);
}

// autotune_test_kernels.py: row_sum_kernel (@triton.heuristics set BLOCK) and scale_kernel
// (@triton.autotune over BLOCK 32 and 128, then a heuristic EVEN that sees the config).
std::string decorated_kernels() {
  const char* path = std::getenv("TJIT_AUTOTUNE_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/autotune_test_kernels.py";
}

constexpr int64_t kRowCols = 101;

struct DecoratedInputs {
  at::Tensor rows = at::randn({3, kRowCols});
  at::Tensor sums = at::empty({3});
  at::Tensor x = at::randn({kN});
  at::Tensor out = at::empty({kN});
};

// Callers' decisions (an operator's plan choice): one made while the manifest is recorded
// (store_decision on runtime_test_kernels' scale_kernel), one a manifest states
// (bundle_decisions.manifest.json, autotune_test_kernels' row_sum_kernel).
constexpr const char* kRecordedCallerWhat = "plan test_plan\ncandidates narrow wide \ncall Float rows_class 8 cols 100\n";
constexpr const char* kManifestCallerWhat = "plan test_plan\ncandidates narrow wide \ncall Float rows_class 1 cols 7\n";

// descriptor_hook_matmul_kernel: its configs' pre_hook sets the descriptors' block shapes (the
// caller's are 8x8); the bundle ships what it set per config, for SPLIT_STORE false only.
constexpr int64_t kHookM = 40, kHookN = 48, kHookK = 64;

struct HookInputs {
  at::Tensor a = at::randn({kHookM, kHookK}, at::TensorOptions().dtype(at::kHalf));
  at::Tensor b = at::randn({kHookN, kHookK}, at::TensorOptions().dtype(at::kHalf));
  at::Tensor c = at::empty({kHookM, kHookN}, at::TensorOptions().dtype(at::kHalf));
  tjit::TensorDescriptor a_desc = tjit::TensorDescriptor::from_tensor(a, {8, 8});
  tjit::TensorDescriptor b_desc = tjit::TensorDescriptor::from_tensor(b, {8, 8});
  tjit::TensorDescriptor c_desc = tjit::TensorDescriptor::from_tensor(c, {8, 8});
};

int record_manifest() {
  Inputs in;
  {
    HookInputs h;
    TritonJitFunction::get_instance(decorated_kernels(), "descriptor_hook_matmul_kernel")
        .run(nullptr, [](const tjit::KernelMeta& meta) {
          return tjit::Grid(static_cast<uint32_t>((kHookM + meta["BLOCK_M"] - 1) / meta["BLOCK_M"]),
                            static_cast<uint32_t>((kHookN + meta["BLOCK_N"] - 1) / meta["BLOCK_N"]));
        }, h.a_desc, h.b_desc, h.c_desc, kHookM, kHookN, kHookK, false);
  }
  // Through run(), so that their heuristics' values and the autotune choice (for the interpreter)
  // are recorded too, and every config's specialisation.
  DecoratedInputs d;
  TritonJitFunction::get_instance(decorated_kernels(), "row_sum_kernel").run(nullptr, tjit::Grid(3), d.rows, d.sums,
                                                                              kRowCols);
  TritonJitFunction::get_instance(decorated_kernels(), "scale_kernel")
      .run(nullptr, [](const tjit::KernelMeta& meta) {
        return tjit::Grid(static_cast<uint32_t>((kN + meta["BLOCK"] - 1) / meta["BLOCK"]));
      }, d.x, d.out, kN, int64_t{3});
  auto& scale = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  scale(nullptr, tjit::Grid((kN + kBlock - 1) / kBlock), LaunchOptions{}, in.x, in.out, kN, 2.0, kBlock);
  scale.store_decision(kRecordedCallerWhat, R"({"candidate": "wide", "timings_ms": {"narrow": 2.0, "wide": 1.0}})");
  auto& variety = TritonJitFunction::get_instance(test_kernels(), "variety_kernel");
  variety(nullptr, tjit::Grid((kN + kBlock - 1) / kBlock), kVarietyOptions, in.x, in.out, kN, int64_t{1},
          int64_t{5} << 40, 2.5, std::optional<at::Tensor>(), 0.5, true, std::nullopt, kBlock);
  at::Tensor half_out = at::empty({kN}, at::TensorOptions().dtype(at::kBFloat16));
  TritonJitFunction::get_instance(test_kernels(), "activation_kernel")(
      nullptr, tjit::Grid((kN + kBlock - 1) / kBlock), LaunchOptions{}, in.x, half_out, kN, "leaky_relu",
      at::kBFloat16, kBlock);
  TritonJitFunction::get_instance(test_kernels(), "defaults_kernel")(
      nullptr, tjit::Grid((kN + 127) / 128), LaunchOptions{}, in.x, in.out, kN);  // every default
  TritonJitFunction::get_instance(test_kernels(), "tuple_kernel")(
      nullptr, tjit::Grid((kN + kBlock - 1) / kBlock), LaunchOptions{}, std::make_tuple(in.x, in.out),
      std::make_tuple(2.0, std::make_tuple(3, 1)), kN, kBlock);
  const auto recording = tjit::recording_manifest();
  std::printf("recorded into %s\n", recording ? recording->c_str() : "(nothing: TJIT_RECORD is not set)");
  return recording ? 0 : 1;
}

std::string bundle_path() {
  const char* path = std::getenv("TJIT_TEST_BUNDLE");
  return path != nullptr ? path : "";
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string write_copy(const std::string& bytes, const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("tjit_bundle_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

bool is_elf(const std::string& binary) { return binary.size() > 4 && std::memcmp(binary.data(), "\x7f" "ELF", 4) == 0; }

bool python_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libpython") != std::string::npos) {
      return true;
    }
  }
  return false;
}

class Bundle : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(bundle_path().empty()) << "TJIT_TEST_BUNDLE is not set (ctest sets it)";
    ASSERT_FALSE(tjit::jit_enabled()) << "these tests run with TJIT_JIT=0";
  }
};

TEST_F(Bundle, LoadsAndDescribesItself) {
  const tjit::KernelBundleInfo info = tjit::load_bundle(bundle_path());
  EXPECT_FALSE(info.embedded);
  EXPECT_EQ(info.targets, (std::vector<std::string>{"cuda:80:32", "cuda:90:32"}));
  EXPECT_EQ(info.num_kernels, 8u);
  // Ten specialisations (scale, variety, activation, defaults, tuple, row_sum, the autotuned
  // scale_kernel's two configs and descriptor_hook_matmul_kernel's two), two targets.
  EXPECT_EQ(info.num_entries, 20u);
  EXPECT_FALSE(info.triton_version.empty());
  tjit::load_bundle(bundle_path());  // again: the same bundle, not a second one
  ASSERT_EQ(tjit::loaded_bundles().size(), 1u);
  EXPECT_EQ(tjit::loaded_bundles()[0].num_entries, 20u);
}

// --- What @triton.heuristics and @triton.autotune decided, shipped in the bundle ---

TEST_F(Bundle, HeuristicValuesComeFromTheBundle) {
  tjit::load_bundle(bundle_path());
  DecoratedInputs d;
  auto& row_sum = TritonJitFunction::get_instance(decorated_kernels(), "row_sum_kernel");
  for (int arch : {80, 90}) {
    CompileTarget target;
    target.arch = arch;
    const tjit::CompiledKernel k = row_sum.compile_run(target, d.rows, d.sums, kRowCols);
    EXPECT_TRUE(is_elf(k.binary));
    EXPECT_EQ(k.target.arch, arch);
    if (arch == 90) {
      // With the value the recorded run's heuristic returned: BLOCK = next power of two of 101.
      EXPECT_EQ(k.binary, row_sum.compile(target, LaunchOptions{}, d.rows, d.sums, kRowCols, int64_t{128}).binary);
    }
  }
  EXPECT_EQ(row_sum.num_compiled(), 0u);
  EXPECT_EQ(row_sum.num_loaded_from_bundles(), 3u);
  EXPECT_FALSE(python_mapped());
}

TEST_F(Bundle, HeuristicsForUnrecordedArgumentsNameTheManifestEntry) {
  tjit::load_bundle(bundle_path());
  DecoratedInputs d;
  auto& row_sum = TritonJitFunction::get_instance(decorated_kernels(), "row_sum_kernel");
  const std::string message = error_message([&] { row_sum.compile_run(CompileTarget{}, d.rows, d.sums, int64_t{77}); });
  for (const char* part : {"row_sum_kernel", "@triton.heuristics", "x=Float, out=Float, n_cols=77", "TJIT_JIT=0",
                           "TJIT_RECORD", "python -m tjit aot build",
                           "\"heuristics\": {\"config\": -1, \"arguments\": {\"x\":\"Float\",\"out\":\"Float\",\"n_cols\":\"77\"}"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
  EXPECT_TRUE(is_elf(row_sum.compile_run(CompileTarget{}, d.rows, d.sums, kRowCols).binary));  // it goes on
}

TEST_F(Bundle, AutotuneChoiceComesFromTheBundleWithoutTiming) {
  tjit::load_bundle(bundle_path());
  DecoratedInputs d;
  auto& scale = TritonJitFunction::get_instance(decorated_kernels(), "scale_kernel");
  // The manifest's choice for cuda:90 (bundle_decisions.manifest.json): BLOCK 128, and EVEN from
  // the heuristics the recorded run evaluated with that config.
  const tjit::CompiledKernel k = scale.compile_run(CompileTarget::parse("cuda:90"), d.x, d.out, kN, int64_t{3});
  EXPECT_TRUE(is_elf(k.binary));
  const tjit::CompiledKernel block_128 = scale.compile(CompileTarget::parse("cuda:90"), LaunchOptions{}, d.x, d.out, kN,
                                                       int64_t{3}, int64_t{128}, false);
  EXPECT_EQ(k.binary, block_128.binary);
  EXPECT_EQ(scale.num_tunings(), 0u);
  EXPECT_EQ(scale.num_tuning_runs(), 0u);
  EXPECT_EQ(scale.num_tunings_loaded(), 1u);
  EXPECT_EQ(scale.num_compiled(), 0u);
  // No choice for cuda:80 (and nothing can be timed without a GPU): an error naming the key.
  const std::string message =
      error_message([&] { scale.compile_run(CompileTarget::parse("cuda:80"), d.x, d.out, kN, int64_t{3}); });
  for (const char* part : {"scale_kernel is autotuned", "n=1000", "on cuda:80:32", "TJIT_RECORD"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
  EXPECT_FALSE(python_mapped());
}

TEST_F(Bundle, BundledTuningCanBeTurnedOff) {
  tjit::load_bundle(bundle_path());
  tjit::set_bundled_tuning_enabled(false);  // TJIT_BUNDLED_TUNING=0: time on this host instead
  DecoratedInputs d;
  auto& scale = TritonJitFunction::get_instance(decorated_kernels(), "scale_kernel");
  const std::string message =
      error_message([&] { scale.compile_run(CompileTarget::parse("cuda:90"), d.x, d.out, kN, int64_t{3}); });
  EXPECT_NE(message.find("no kernel bundle or kernel store has a choice"), std::string::npos) << message;
  EXPECT_EQ(scale.num_tunings_loaded(), 0u);
  tjit::set_bundled_tuning_enabled(true);
  EXPECT_TRUE(is_elf(scale.compile_run(CompileTarget::parse("cuda:90"), d.x, d.out, kN, int64_t{3}).binary));
}

// Callers' decisions come from the bundle with the kernel store off: the one recorded through
// store_decision, and the one a manifest states; TJIT_BUNDLED_TUNING=0 leaves them out.
TEST_F(Bundle, CallerDecisionsComeFromTheBundle) {
  tjit::load_bundle(bundle_path());
  auto& scale = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  const auto recorded = scale.load_decision(kRecordedCallerWhat);
  ASSERT_TRUE(recorded.has_value());
  EXPECT_NE(recorded->find("\"candidate\":\"wide\""), std::string::npos) << *recorded;
  EXPECT_FALSE(scale.load_decision("plan test_plan\ncandidates narrow wide \ncall Float rows_class 16 cols 100\n"));
  EXPECT_FALSE(scale.load_decision(kManifestCallerWhat)) << "another kernel's decision";
  auto& row_sum = TritonJitFunction::get_instance(decorated_kernels(), "row_sum_kernel");
  const auto stated = row_sum.load_decision(kManifestCallerWhat);
  ASSERT_TRUE(stated.has_value());
  EXPECT_NE(stated->find("\"candidate\":\"narrow\""), std::string::npos) << *stated;
  tjit::set_bundled_tuning_enabled(false);
  EXPECT_FALSE(scale.load_decision(kRecordedCallerWhat));
  tjit::set_bundled_tuning_enabled(true);
  EXPECT_FALSE(python_mapped());
}

// What a config pre_hook set on the descriptors, shipped in the bundle: applied with Python absent.
// The choice for cuda:90 is bundle_decisions.manifest.json's (config 1: 32x16x32); the recorded run
// (CPU) recorded what the hook set for both configs.
TEST_F(Bundle, DescriptorHookDecisionComesFromTheBundle) {
  tjit::load_bundle(bundle_path());
  HookInputs h;
  auto& fn = TritonJitFunction::get_instance(decorated_kernels(), "descriptor_hook_matmul_kernel");
  const CompileTarget target = CompileTarget::parse("cuda:90");
  const tjit::CompiledKernel k = fn.compile_run(target, h.a_desc, h.b_desc, h.c_desc, kHookM, kHookN, kHookK, false);
  EXPECT_TRUE(is_elf(k.binary));
  // The binary of the descriptors as the hook sets them for config 1, and not of the caller's.
  const auto a_desc = tjit::TensorDescriptor::from_tensor(h.a, {32, 32});
  const auto b_desc = tjit::TensorDescriptor::from_tensor(h.b, {16, 32});
  const auto c_desc = tjit::TensorDescriptor::from_tensor(h.c, {32, 16});
  const tjit::CompiledKernel expected = fn.compile(target, LaunchOptions{4, 2}, a_desc, b_desc, c_desc, kHookM, kHookN,
                                                   kHookK, false, int64_t{32}, int64_t{16}, int64_t{32});
  EXPECT_EQ(k.binary, expected.binary);
  EXPECT_EQ(fn.num_compiled(), 0u);
  EXPECT_EQ(fn.num_tunings_loaded(), 1u);
  EXPECT_FALSE(python_mapped());
}

// A call whose hook effect the bundle lacks (SPLIT_STORE true was never recorded), with JIT off: the
// error names the kernel, the hook and both remedies; a C++ hook then makes the call work.
TEST_F(Bundle, UnrecordedDescriptorHookNamesTheRemediesAndACppHookWorks) {
  tjit::load_bundle(bundle_path());
  HookInputs h;
  auto& fn = TritonJitFunction::get_instance(decorated_kernels(), "descriptor_hook_matmul_kernel");
  const CompileTarget target = CompileTarget::parse("cuda:90");
  const std::string message = error_message(
      [&] { fn.compile_run(target, h.a_desc, h.b_desc, h.c_desc, kHookM, kHookN, kHookK, true); });
  for (const char* part : {"descriptor_hook_matmul_kernel", "pre_hook _descriptor_blocks", "SPLIT_STORE=True",
                           "TJIT_JIT=0", "TJIT_RECORD", "set_config_pre_hook", "\"descriptor_hook\": {\"config\": 1"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
  // Supplied in C++, the hook replaces the recorded one: here it sets config 1's recorded shapes.
  int calls = 0;
  fn.set_config_pre_hook([&](tjit::ConfigHookArgs& args) {
    ++calls;
    args.set_block_shape("a_desc", {args.meta()["BLOCK_M"], args.meta()["BLOCK_K"]});
    args.set_block_shape("b_desc", {args.meta()["BLOCK_N"], args.meta()["BLOCK_K"]});
    args.set_block_shape("c_desc", {args.meta()["BLOCK_M"], args.meta()["BLOCK_N"]});
  });
  const tjit::CompiledKernel k = fn.compile_run(target, h.a_desc, h.b_desc, h.c_desc, kHookM, kHookN, kHookK, false);
  fn.set_config_pre_hook(nullptr);
  EXPECT_EQ(calls, 1);
  const auto a_desc = tjit::TensorDescriptor::from_tensor(h.a, {32, 32});
  const auto b_desc = tjit::TensorDescriptor::from_tensor(h.b, {16, 32});
  const auto c_desc = tjit::TensorDescriptor::from_tensor(h.c, {32, 16});
  EXPECT_EQ(k.binary, fn.compile(target, LaunchOptions{4, 2}, a_desc, b_desc, c_desc, kHookM, kHookN, kHookK, false,
                                 int64_t{32}, int64_t{16}, int64_t{32}).binary);
  EXPECT_FALSE(python_mapped());
}

TEST_F(Bundle, CompilesFromTheBundleWithoutPython) {
  tjit::load_bundle(bundle_path());
  Inputs in;
  for (int arch : {80, 90}) {
    CompileTarget target;
    target.arch = arch;
    const tjit::CompiledKernel scale = compile_scale(test_kernels(), in, target);
    EXPECT_TRUE(is_elf(scale.binary));
    EXPECT_EQ(scale.target.arch, arch);
    EXPECT_EQ(scale.num_warps, 4);
    EXPECT_NE(scale.name.find("scale_kernel"), std::string::npos);
    const tjit::CompiledKernel variety = compile_variety(in, target);
    EXPECT_TRUE(is_elf(variety.binary));
    EXPECT_EQ(variety.num_warps, 2);
    EXPECT_NE(variety.binary, scale.binary);
    // A string and a dtype constexpr find their entry: the C++ key is aot's key byte for byte.
    const tjit::CompiledKernel activation = compile_activation(in, target, "leaky_relu");
    EXPECT_TRUE(is_elf(activation.binary));
    EXPECT_NE(activation.name.find("activation_kernel"), std::string::npos);
  }
  // The defaults come from the bundle's signature (no Python): leaving them out finds the entry.
  const tjit::CompiledKernel defaulted = TritonJitFunction::get_instance(test_kernels(), "defaults_kernel")
                                             .compile(CompileTarget{}, LaunchOptions{}, in.x, in.out, kN);
  EXPECT_TRUE(is_elf(defaulted.binary));
  // A tuple's entry: the manifest's arrays, aot's keys and the runtime's agree.
  const tjit::CompiledKernel tupled = TritonJitFunction::get_instance(test_kernels(), "tuple_kernel")
                                          .compile(CompileTarget{}, LaunchOptions{}, std::make_tuple(in.x, in.out),
                                                   std::make_tuple(2.0, std::make_tuple(3, 1)), kN, kBlock);
  EXPECT_TRUE(is_elf(tupled.binary));
  // Another string is another specialisation, which the bundle lacks.
  const std::string message = error_message([&] { compile_activation(in, CompileTarget{}, "relu"); });
  EXPECT_NE(message.find("\"ACTIVATION\":\"relu\""), std::string::npos) << message;
  EXPECT_NE(message.find("\"OUT_DTYPE\":{\"dtype\":\"bf16\"}"), std::string::npos) << message;
  const auto& fn = TritonJitFunction::get_instance(test_kernels(), "scale_kernel");
  EXPECT_EQ(fn.num_compiled(), 0u);
  EXPECT_EQ(fn.num_loaded_from_bundles(), 2u);
  EXPECT_EQ(fn.num_loaded_from_store(), 0u);
  EXPECT_FALSE(python_mapped());
}

TEST_F(Bundle, MissingSpecialisationNamesTheManifestEntry) {
  tjit::load_bundle(bundle_path());
  Inputs in;
  const std::string message = error_message([&] { compile_scale(test_kernels(), in, CompileTarget{}, 128); });
  for (const char* part : {"no compiled kernel for scale_kernel", "cuda:90", "JIT compiles are off (TJIT_JIT=0)",
                           "have scale_kernel but not this specialisation", "\"function\":\"scale_kernel\"",
                           "\"BLOCK\":128", "\"x_ptr\":\"*fp32:16\"", "python -m tjit aot build --target cuda:90"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
  // The process goes on: the bundle's specialisation still works.
  EXPECT_TRUE(is_elf(compile_scale(test_kernels(), in, CompileTarget{}).binary));
}

TEST_F(Bundle, MissingArchitectureSaysWhichTheBundleHas) {
  tjit::load_bundle(bundle_path());
  Inputs in;
  const std::string message = error_message([&] { compile_scale(test_kernels(), in, CompileTarget::parse("cuda:89")); });
  for (const char* part : {"for cuda:80:32, cuda:90:32 only, not for cuda:89:32", "--target cuda:89"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
}

TEST_F(Bundle, KernelFileMayBeAbsent) {
  tjit::load_bundle(bundle_path());
  Inputs in;
  const std::string elsewhere = "/nonexistent/deployed/" + fs::path(test_kernels()).filename().string();
  EXPECT_TRUE(is_elf(compile_scale(elsewhere, in, CompileTarget{}).binary));
}

TEST_F(Bundle, EditedSourceIsNotUsed) {
  tjit::load_bundle(bundle_path());
  const fs::path folder = fs::temp_directory_path() / ("tjit_bundle_edit_" + std::to_string(::getpid()));
  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
  const fs::path edited = folder / fs::path(test_kernels()).filename();
  std::ofstream(edited) << read_bytes(test_kernels()) << "\n# edited after the bundle was built\n";
  const std::string message = error_message([&] { TritonJitFunction::get_instance(edited.string(), "scale_kernel"); });
  // POSIX calls, not std::filesystem::remove_all: libtorch 2.11 exports a copy of it that wins
  // symbol lookup and crashes (pytorch/pytorch#133437; test_kernel_store.cpp works around it too).
  std::remove(edited.c_str());
  ::rmdir(folder.c_str());
  for (const char* part : {"no kernel bundle", "has scale_kernel from a file named runtime_test_kernels.py built from its current source",
                           "JIT is off (TJIT_JIT=0)"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
}

TEST_F(Bundle, DamagedFilesAreRejected) {
  const std::string good = read_bytes(bundle_path());
  ASSERT_GT(good.size(), 200u);
  std::string flipped_index = good;
  flipped_index[70] ^= 0x20;
  std::string wrong_magic = good;
  wrong_magic[0] = 'X';
  std::string newer = good;
  newer[8] = 9;
  const std::pair<std::string, const char*> cases[] = {
      {flipped_index, "index checksum mismatch"},
      {good.substr(0, good.size() - 1), "its frame says"},
      {good.substr(0, 30), "shorter"},
      {wrong_magic, "not a tjit kernel bundle"},
      {newer, "bundle format 9"},
  };
  for (const auto& [bytes, reason] : cases) {
    const std::string path = write_copy(bytes, "damaged.tjb");
    const std::string message = error_message([&] { tjit::load_bundle(path); });
    std::remove(path.c_str());
    EXPECT_NE(message.find("cannot load the kernel bundle"), std::string::npos) << message;
    EXPECT_NE(message.find(reason), std::string::npos) << "missing '" << reason << "' in:\n" << message;
  }
  EXPECT_TRUE(tjit::loaded_bundles().empty());
}

TEST_F(Bundle, DamagedEntryFailsItsLookup) {
  // Entries are checked when first used: flip a byte inside every entry's binary.
  std::string bytes = read_bytes(bundle_path());
  const tjit::detail::BundleIndex index = tjit::detail::decode_bundle_index(bytes);
  for (const auto& e : index.entries) {
    bytes[index.payload_offset + e.offset + e.size - 100] ^= 0x01;
  }
  const std::string path = write_copy(bytes, "damaged_entry.tjb");
  tjit::load_bundle(path);  // the index is intact
  std::remove(path.c_str());
  Inputs in;
  const std::string message = error_message([&] { compile_scale(test_kernels(), in, CompileTarget{}); });
  for (const char* part : {"is damaged: its entry for scale_kernel for cuda:90:32", "checksum mismatch"}) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
}

TEST_F(Bundle, EmbeddedBundleIsRegisteredWithoutCopying) {
  static const std::string bytes = read_bytes(bundle_path());
  ASSERT_TRUE(tjit::register_embedded_bundle(bytes.data(), bytes.size(), "test bundle"));
  const auto bundles = tjit::loaded_bundles();
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_TRUE(bundles[0].embedded);
  EXPECT_EQ(bundles[0].name, "test bundle");
  Inputs in;
  EXPECT_TRUE(is_elf(compile_scale(test_kernels(), in, CompileTarget{}).binary));
}

TEST_F(Bundle, DamagedEmbeddedBundleIsNamed) {
  static const std::string bytes = read_bytes(bundle_path()).substr(0, 100);
  ASSERT_TRUE(tjit::register_embedded_bundle(bytes.data(), bytes.size(), "broken"));
  const std::string message = error_message([] { tjit::loaded_bundles(); });
  EXPECT_NE(message.find("the kernel bundle 'broken' embedded in this program is damaged"), std::string::npos)
      << message;
  Inputs in;
  EXPECT_NE(error_message([&] { compile_scale(test_kernels(), in, CompileTarget{}); }).find("'broken'"),
            std::string::npos);
}

// Every entry of the bundle at `path`, looked up as a launch would look it up: prints how many,
// exits 1 (naming it) at the first that is missing, damaged or not a cubin.
int check_bundle(const std::string& path) {
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  };
  auto start = Clock::now();
  static const std::string bytes = read_bytes(path);
  const double read_ms = ms(start);
  start = Clock::now();
  tjit::register_embedded_bundle(bytes.data(), bytes.size(), path.c_str());  // as a program embeds it
  const tjit::KernelBundleInfo info = tjit::loaded_bundles().front();
  const double index_ms = ms(start);
  const tjit::detail::BundleIndex index = tjit::detail::decode_bundle_index(bytes);
  size_t checked = 0;
  double first_ms = 0;
  start = Clock::now();
  for (const auto& record : index.entries) {
    // Looked up by what the entry itself says it is: the builder's key must be the runtime's.
    tjit::detail::KernelEntry e;
    try {
      e = tjit::detail::decode_entry(bytes.substr(index.payload_offset + record.offset, record.size));
    } catch (const tjit::detail::CorruptStoreFile& damage) {
      std::fprintf(stderr, "check-bundle: %s is damaged: entry %zu (%s): %s\n", path.c_str(), checked,
                   index.kernels[record.kernel].signature.function.c_str(), damage.what());
      return 1;
    }
    const auto& kernel = index.kernels[record.kernel].signature;
    const auto found = tjit::detail::find_bundled_kernel(kernel.file, kernel.function, e.specialization, e.options,
                                                         e.compiled.target);
    if (!found || !is_elf(found->binary) || found->name != e.compiled.name) {
      std::fprintf(stderr, "check-bundle: entry %zu (%s for %s) %s\n", checked, kernel.function.c_str(),
                   e.compiled.target.to_string().c_str(), found ? "is not a usable cubin" : "was not found");
      return 1;
    }
    if (++checked == 1) {
      first_ms = ms(start);
    }
  }
  std::printf("check-bundle: %zu of %zu entries found through the runtime's lookup (%zu kernels); loading "
              "reading the file %.1f ms, its index %.2f ms, first lookup %.3f ms, all %.1f ms\n", checked,
              info.num_entries, info.num_kernels, read_ms, index_ms, first_ms, ms(start));
  // And as a file: load_bundle reads and checks it.
  start = Clock::now();
  tjit::load_bundle(path);
  std::printf("check-bundle: load_bundle %.1f ms\n", ms(start));
  return checked == info.num_entries ? 0 : 1;
}

}  // namespace

// A crash names where it happened (this binary is run by ctest, where no debugger is attached):
// the faulting address and instruction, the frames, and the process's code mappings.
void print_crash_and_die(int signal, siginfo_t* info, void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  std::fprintf(stderr, "signal %d at address %p, instruction %p\n", signal, info->si_addr,
               reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]));
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("r-xp") != std::string::npos) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // what ran before a crash is in the log
  struct sigaction action = {};
  action.sa_sigaction = print_crash_and_die;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  if (argc == 3 && std::string(argv[1]) == "--check-bundle") {
    tjit::set_jit_enabled(false);
    try {
      return check_bundle(argv[2]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "check-bundle: %s\n", e.what());
      return 1;
    }
  }
  if (argc == 2 && std::string(argv[1]) == "--record-manifest") {
    try {
      return record_manifest();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "recording failed: %s\n", e.what());
      return 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
