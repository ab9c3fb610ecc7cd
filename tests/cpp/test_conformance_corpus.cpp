// A conformance corpus of kernels tjit did not write, called from C++ exactly as their own Python
// wrappers call them, and from Python Triton (`kernel[grid](...)`, the same kernel file) on the same
// inputs: the outputs must be equal bit for bit, and close to aten's.
//
// - Peers' kernels, loaded by path from the installed packages at test time (never copied here):
//   Liger-Kernel (rms_norm, layer_norm, swiglu forward) and FlagGems (an autotuned MoE sum, the
//   repetition penalty, the top-k gating softmax; @libentry() kernels, one of them autotuned, one
//   importing its package's helpers by relative import). The file is found
//   through $TJIT_CORPUS_<PACKAGE> (the package's folder) or importlib in the embedded Python,
//   without importing the package; a test whose package is not installed skips, saying so.
// - Kernels modelled on Triton's tutorials (kernels/corpus_kernels.py): config pre_hooks shaping
//   host descriptors, pruning by argument name, keys naming a tensor or names the caller does not
//   pass, heuristics, tuples, descriptors made on the device, pointer arrays, PDL.
//
// Every case that Triton's interpreter can run also runs on the CPU: tjit's interpreted launch
// against Python Triton's interpreted launch of the same file (bit for bit), then aten; the others
// compile their kernel for sm_90 there from the call's own arguments, then skip. Autotuned
// kernels: Python is given the config tjit chose (its other configs are dropped), so both sides
// launch the same binary.

#include "python/python_bridge.h"
#include "python_sharing.h"
#include "test_helpers.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/one_hot.h>
#include <ATen/ops/zeros.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/var_mean.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using tjit::Grid;
using tjit::KernelMeta;
using tjit::LaunchOptions;
using tjit::TritonJitFunction;
using tjit::testing::shared;
using tjit::testing::stream_of;
using tjit::testing::synchronize;

// Python's side: finding a peer's file without importing its package, and launching a kernel of a
// file as its Python wrapper does (interpreted for CPU tensors, as under TRITON_INTERPRET=1).
const std::string kPython = tjit::testing::kPythonValues + R"py(
import importlib.util, os, triton
from triton import knobs

def peer_file(package, relative):
    spec = importlib.util.find_spec(package)  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return ""
    path = os.path.join(list(spec.submodule_search_locations)[0], relative)
    return path if os.path.isfile(path) else ""

def _load_interpreted(path, name):
    saved = knobs.runtime.interpret
    knobs.runtime.interpret = True  # read by @triton.jit as the file runs
    try:
        spec = importlib.util.spec_from_file_location("tjit_corpus_interpreted_" + str(abs(hash(path))), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        knobs.runtime.interpret = saved
    return getattr(module, name)

def _keep_only_config(kernel, index):
    # The autotuner keeps config `index` of its own list only; that list is kept aside, since a
    # kernel imported by its package's name is the same object on every call.
    from triton.runtime.autotuner import Autotuner
    layer = kernel
    while not isinstance(layer, Autotuner):
        layer = layer.fn
    if not hasattr(layer, "tjit_all_configs"):
        layer.tjit_all_configs = list(layer.configs)
    layer.configs = [layer.tjit_all_configs[index]]
    layer.cache = {}

def launch(path, name, grid, grid_vars, args, kwargs, config_index, on_cpu):
    if not on_cpu:
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    kernel = _load_interpreted(path, name) if on_cpu else _load(path, name)
    if config_index >= 0:
        _keep_only_config(kernel, config_index)
    if isinstance(grid, str):
        grid = eval(grid, {"triton": triton, **grid_vars})
    kernel[grid if callable(grid) else tuple(grid)](*[_value(a) for a in args],
                                                     **{k: _value(v) for k, v in kwargs.items()})
    if not on_cpu:
        torch.cuda.synchronize()

def capability():
    return list(torch.cuda.get_device_capability())
)py";

py::dict& python_scope() {
  static py::dict* scope = [] {
    tjit::detail::python_bridge();
    py::gil_scoped_acquire gil;
    auto* s = new py::dict();
    py::exec(kPython, *s);
    return s;
  }();
  return *scope;
}

std::string corpus_kernels() {
  const char* path = std::getenv("TJIT_CORPUS_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/corpus_kernels.py";
}

// The file `relative` of an installed peer package: under $env (the package's folder) if set, else
// where the embedded Python finds the package; "" when neither has it.
std::string peer_file(const char* package, const char* env, const std::string& relative) {
  if (const char* root = std::getenv(env); root != nullptr && *root != '\0') {
    return std::string(root) + "/" + relative;
  }
  py::dict& scope = python_scope();
  py::gil_scoped_acquire gil;
  return scope["peer_file"](package, relative).cast<std::string>();
}

// Python's launch: `kernel[grid](*args, **kwargs)`; `grid` a tuple, or the text of a Python grid
// expression (a lambda of META) over `grid_vars`; `config` the index of the only config left to an
// autotuned kernel (-1: all of them).
// Made and used with the GIL held.
struct PythonCall {
  PythonCall(std::string path_, std::string name_, py::object grid_)
      : path(std::move(path_)), name(std::move(name_)), grid(std::move(grid_)) {}
  std::string path, name;
  py::object grid;
  py::dict grid_vars;
  py::list args;
  py::dict kwargs;
  int config = -1;
};

void launch_in_python(const PythonCall& call, bool on_cpu) {
  py::dict& scope = python_scope();
  py::gil_scoped_acquire gil;
  scope["launch"](call.path, call.name, call.grid, call.grid_vars, call.args, call.kwargs, call.config, on_cpu);
}

// Where `config` sits in fn's configs (Python's order).
int config_index(const TritonJitFunction& fn, const tjit::KernelConfig& config) {
  const auto& configs = fn.configs();
  for (size_t i = 0; i < configs.size(); ++i) {
    if (configs[i].describe() == config.describe()) return static_cast<int>(i);
  }
  ADD_FAILURE() << "config " << config.describe() << " is not one of " << fn.function_name() << "'s";
  return -1;
}

at::Tensor poison_like(const at::Tensor& t) { return at::full_like(t, std::numeric_limits<float>::quiet_NaN()); }

std::string describe(const c10::Device& d, at::ScalarType dtype) {
  return std::string(d.is_cuda() ? "cuda " : "cpu ") + c10::toString(dtype);
}

// Liger-Kernel's calculate_settings: the row's block and its warps.
std::pair<int64_t, int> liger_settings(int64_t n_cols) {
  int64_t block = 1;
  while (block < n_cols) block *= 2;
  const int warps = block >= 32768 ? 32 : block >= 8192 ? 16 : block >= 2048 ? 8 : 4;
  return {block, warps};
}

// A kernel refused because of a gap tjit has today: the test skips, naming the gap, only when the
// refusal says exactly that; any other error fails.
#define TJIT_KNOWN_GAP(statement, needle, gap)                                                   \
  try {                                                                                          \
    statement;                                                                                   \
  } catch (const c10::Error& e) {                                                                \
    const std::string message = e.what_without_backtrace();                                      \
    if (message.find(needle) == std::string::npos) throw;                                        \
    GTEST_SKIP() << "known gap (" << gap << "): " << message.substr(0, message.find('\n'));    \
  }

// For a kernel Triton's interpreter cannot run (Python Triton under TRITON_INTERPRET=1 fails the
// same way): on the CPU, compile it for sm_90 from the call's own arguments (loading the peer's
// file, specialising, triton.compile; no GPU needed), then skip the launches, saying why.
template <typename... Args>
void check_compiles(const TritonJitFunction& fn, const LaunchOptions& options, const Args&... args) {
  const tjit::CompiledKernel k = fn.compile(tjit::CompileTarget::parse("cuda:90"), options, args...);
  EXPECT_FALSE(k.binary.empty());
  EXPECT_EQ(k.num_warps, options.num_warps);
}

#define TJIT_ON_CPU_COMPILE_THEN_SKIP(why, fn, options, ...)                                                   \
  if (on_cpu()) {                                                                                              \
    check_compiles(fn, options, __VA_ARGS__);                                                                  \
    GTEST_SKIP() << "launches need a GPU: Triton's interpreter cannot run " << (fn).function_name() << " (" \
                 << why << "; Python Triton under TRITON_INTERPRET=1 fails the same way); compiled for sm_90"; \
  }

class ConformanceCorpus : public ::testing::TestWithParam<c10::Device> {
 protected:
  void SetUp() override { python_scope(); }
  bool on_cpu() const { return GetParam().is_cpu(); }
  at::TensorOptions options(at::ScalarType dtype) const { return at::TensorOptions().device(GetParam()).dtype(dtype); }
  // The interpreter is slow: smaller problems on the CPU.
  int64_t rows() const { return on_cpu() ? 5 : 67; }
};

// CUDA launches only (TMA descriptors, pointer arrays, PDL, FlagGems' package). Without a GPU each
// test compiles its kernel for sm_90 from the call's own arguments (CPU tensors lend their dtypes),
// then skips the launches, saying so.
class ConformanceCorpusGpu : public ::testing::Test {
 protected:
  void SetUp() override { python_scope(); }
  static bool gpu() { return at::hasCUDA(); }
  static at::TensorOptions options(at::ScalarType dtype) {
    return at::TensorOptions().device(gpu() ? at::kCUDA : at::kCPU).dtype(dtype);
  }
  static std::vector<int> capability() {
    py::gil_scoped_acquire gil;
    return python_scope()["capability"]().cast<std::vector<int>>();
  }
};

#define TJIT_WITHOUT_GPU_COMPILE_THEN_SKIP(fn, options, ...)                                            \
  if (!gpu()) {                                                                                        \
    check_compiles(fn, options, __VA_ARGS__);                                                          \
    GTEST_SKIP() << "needs a GPU: compares CUDA launches; compiled " << (fn).function_name() << " for " \
                 << "sm_90 from the same arguments instead";                                          \
  }

#define TJIT_PEER_OR_SKIP(var, package, env, relative)                                              \
  const std::string var = peer_file(package, env, relative);                                       \
  if (var.empty()) {                                                                               \
    GTEST_SKIP() << package << " is not installed here (pip install it, or set " << env            \
                 << " to its package folder): " << relative << " is a peer's kernel, never copied"; \
  }

// --- Liger-Kernel ------------------------------------------------------------------------------

// liger_kernel.ops.rms_norm.rms_norm_forward's row-mode launch: every casting mode (llama, gemma,
// none, passed as Liger passes them: an int constexpr), with and without a weight (None then).
TEST_P(ConformanceCorpus, LigerRmsNormForward) {
  TJIT_PEER_OR_SKIP(path, "liger_kernel", "TJIT_CORPUS_LIGER_KERNEL", "ops/rms_norm.py");
  auto& fn = TritonJitFunction::get_instance(path, "_rms_norm_forward_kernel");
  const int64_t n_rows = rows(), n_cols = 1000;
  const auto [block, warps] = liger_settings(n_cols);
  const double eps = 1e-6;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (const int64_t casting_mode : {int64_t{0}, int64_t{1}, int64_t{-1}}) {
      for (const bool affine : {true, false}) {
        SCOPED_TRACE(describe(GetParam(), dtype) + " casting_mode " + std::to_string(casting_mode) +
                     (affine ? " affine" : " no weight"));
        const double offset = casting_mode == 1 ? 1.0 : 0.0;  // Gemma's (1 + w)
        const at::Tensor x = at::randn({n_rows, n_cols}, options(dtype));
        const at::Tensor w = at::randn({n_cols}, options(dtype));
        const at::ScalarType rstd_dtype = casting_mode == -1 ? dtype : at::kFloat;
        at::Tensor y[2], rstd[2];
        for (int side = 0; side < 2; ++side) {
          y[side] = poison_like(x);
          rstd[side] = at::full({n_rows}, std::numeric_limits<float>::quiet_NaN(), options(rstd_dtype));
        }
        const std::optional<at::Tensor> weight = affine ? std::optional<at::Tensor>(w) : std::nullopt;
        TJIT_ON_CPU_COMPILE_THEN_SKIP("eps.to() on a float argument", fn, LaunchOptions{warps}, y[0], y[0].stride(0), x,
                                      x.stride(0), weight, affine ? w.stride(0) : 0, rstd[0], rstd[0].stride(0), n_cols,
                                      eps, offset, casting_mode, affine, block);
        fn(stream_of(x), Grid(n_rows), LaunchOptions{warps}, y[0], y[0].stride(0), x, x.stride(0), weight,
           affine ? w.stride(0) : 0, rstd[0], rstd[0].stride(0), n_cols, eps, offset, casting_mode, affine, block);
        synchronize(x);
        {
          py::gil_scoped_acquire gil;
          PythonCall call{path, "_rms_norm_forward_kernel", py::make_tuple(n_rows)};
          for (py::object v : {shared(y[1]), py::cast(y[1].stride(0)), shared(x), py::cast(x.stride(0)),
                               affine ? shared(w) : py::none(), py::cast(affine ? w.stride(0) : 0), shared(rstd[1]),
                               py::cast(rstd[1].stride(0)), py::cast(n_cols), py::cast(eps), py::cast(offset),
                               py::cast(casting_mode)}) {
            call.args.append(v);
          }
          call.kwargs["elementwise_affine"] = affine;
          call.kwargs["BLOCK_SIZE"] = block;
          call.kwargs["num_warps"] = warps;
          launch_in_python(call, on_cpu());
        }
        EXPECT_TRUE(at::equal(y[0], y[1]));
        EXPECT_TRUE(at::equal(rstd[0], rstd[1]));
        const at::Tensor xf = x.to(at::kFloat);
        const at::Tensor expected_rstd = at::rsqrt(at::mean(xf * xf, {1}) + eps);
        at::Tensor expected = xf * expected_rstd.unsqueeze(1);
        if (affine) expected = expected * (w.to(at::kFloat) + offset);
        // Casting mode none computes in the input's dtype.
        const double tol = dtype == at::kFloat ? 1e-4 : casting_mode == -1 ? 1e-1 : 3e-2;
        EXPECT_TRUE(at::allclose(rstd[0].to(at::kFloat), expected_rstd, tol, tol));
        EXPECT_TRUE(at::allclose(y[0].to(at::kFloat), expected, tol, tol));
      }
    }
  }
}

// liger_kernel.ops.layer_norm.layer_norm_forward's launch.
TEST_P(ConformanceCorpus, LigerLayerNormForward) {
  TJIT_PEER_OR_SKIP(path, "liger_kernel", "TJIT_CORPUS_LIGER_KERNEL", "ops/layer_norm.py");
  auto& fn = TritonJitFunction::get_instance(path, "_layer_norm_forward_kernel");
  const int64_t n_rows = rows(), n_cols = 777;
  const auto [block, warps] = liger_settings(n_cols);
  const double eps = 1e-5;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(describe(GetParam(), dtype));
    const at::Tensor x = at::randn({n_rows, n_cols}, options(dtype));
    const at::Tensor w = at::randn({n_cols}, options(dtype));
    const at::Tensor b = at::randn({n_cols}, options(dtype));
    at::Tensor y[2], mean[2], rstd[2];
    for (int side = 0; side < 2; ++side) {
      y[side] = poison_like(x);
      mean[side] = at::full({n_rows}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat));
      rstd[side] = poison_like(mean[side]);
    }
    TJIT_ON_CPU_COMPILE_THEN_SKIP("eps.to() on a float argument", fn, LaunchOptions{warps}, y[0], y[0].stride(0), x,
                                  x.stride(0), w, w.stride(0), b, b.stride(0), mean[0], mean[0].stride(0), rstd[0],
                                  rstd[0].stride(0), n_cols, eps, block);
    fn(stream_of(x), Grid(n_rows), LaunchOptions{warps}, y[0], y[0].stride(0), x, x.stride(0), w, w.stride(0), b,
       b.stride(0), mean[0], mean[0].stride(0), rstd[0], rstd[0].stride(0), n_cols, eps, block);
    synchronize(x);
    {
      py::gil_scoped_acquire gil;
      PythonCall call{path, "_layer_norm_forward_kernel", py::make_tuple(n_rows)};
      for (py::object v : {shared(y[1]), py::cast(y[1].stride(0)), shared(x), py::cast(x.stride(0)), shared(w),
                           py::cast(w.stride(0)), shared(b), py::cast(b.stride(0)), shared(mean[1]),
                           py::cast(mean[1].stride(0)), shared(rstd[1]), py::cast(rstd[1].stride(0)),
                           py::cast(n_cols), py::cast(eps)}) {
        call.args.append(v);
      }
      call.kwargs["BLOCK_SIZE"] = block;
      call.kwargs["num_warps"] = warps;
      launch_in_python(call, on_cpu());
    }
    EXPECT_TRUE(at::equal(y[0], y[1]));
    EXPECT_TRUE(at::equal(mean[0], mean[1]));
    EXPECT_TRUE(at::equal(rstd[0], rstd[1]));
    const auto [var, mu] = at::var_mean(x.to(at::kFloat), {1}, /*correction=*/0, /*keepdim=*/true);
    const at::Tensor expected = (x.to(at::kFloat) - mu) * at::rsqrt(var + eps) * w.to(at::kFloat) + b.to(at::kFloat);
    const double tol = dtype == at::kFloat ? 1e-4 : 5e-2;
    EXPECT_TRUE(at::allclose(mean[0], mu.squeeze(1), tol, tol));
    EXPECT_TRUE(at::allclose(y[0].to(at::kFloat), expected, tol, tol));
  }
}

// liger_kernel.ops.swiglu.swiglu_forward's launch (n_cols a constexpr, passed by keyword).
TEST_P(ConformanceCorpus, LigerSwigluForward) {
  TJIT_PEER_OR_SKIP(path, "liger_kernel", "TJIT_CORPUS_LIGER_KERNEL", "ops/swiglu.py");
  auto& fn = TritonJitFunction::get_instance(path, "_swiglu_forward_kernel");
  const int64_t n_rows = rows(), n_cols = 1500;
  const auto [block, warps] = liger_settings(n_cols);
  const double gate_multiplier = 1.0;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(describe(GetParam(), dtype));
    const at::Tensor a = at::randn({n_rows, n_cols}, options(dtype));
    const at::Tensor b = at::randn({n_rows, n_cols}, options(dtype));
    at::Tensor c[2] = {poison_like(a), poison_like(a)};
    TJIT_ON_CPU_COMPILE_THEN_SKIP("gate_multiplier.to() on a float argument", fn, LaunchOptions{warps}, a, b, c[0],
                                  c[0].stride(-2), gate_multiplier, n_cols, block);
    fn(stream_of(a), Grid(n_rows), LaunchOptions{warps}, a, b, c[0], c[0].stride(-2), gate_multiplier, n_cols, block);
    synchronize(a);
    {
      py::gil_scoped_acquire gil;
      PythonCall call{path, "_swiglu_forward_kernel", py::make_tuple(n_rows)};
      for (py::object v : {shared(a), shared(b), shared(c[1]), py::cast(c[1].stride(-2)), py::cast(gate_multiplier)}) {
        call.args.append(v);
      }
      call.kwargs["n_cols"] = n_cols;
      call.kwargs["BLOCK_SIZE"] = block;
      call.kwargs["num_warps"] = warps;
      launch_in_python(call, on_cpu());
    }
    EXPECT_TRUE(at::equal(c[0], c[1]));
    const at::Tensor af = a.to(at::kFloat);
    const at::Tensor expected = (af * at::sigmoid(af)).to(dtype).to(at::kFloat) * b.to(at::kFloat);
    const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
    EXPECT_TRUE(at::allclose(c[0].to(at::kFloat), expected, tol, tol));
  }
}

// liger_kernel.ops.cross_entropy.cross_entropy_forward's launch: 28 arguments by keyword, None for
// the pointers a call does not use and for softcap (a runtime parameter), float and string
// constexprs (label_smoothing, reduction), the gradient written over the logits in place.
TEST_P(ConformanceCorpus, LigerCrossEntropyForward) {
  TJIT_PEER_OR_SKIP(path, "liger_kernel", "TJIT_CORPUS_LIGER_KERNEL", "ops/cross_entropy.py");
  auto& fn = TritonJitFunction::get_instance(path, "liger_cross_entropy_kernel");
  struct Case {
    const char* reduction;
    bool weighted;
    std::optional<double> softcap;
    double label_smoothing, lse_square_scale;
    bool z_loss, accuracy, predicted, gradients;
    at::ScalarType dtype;
  };
  const Case cases[] = {
      {"mean", false, std::nullopt, 0.0, 0.0, false, false, false, true, at::kFloat},
      {"sum", true, 30.0, 0.1, 1e-4, true, true, true, true, at::kFloat},
      {"mean", false, std::nullopt, 0.0, 0.0, true, false, true, true, at::kBFloat16},
      {"none", true, std::nullopt, 0.05, 0.0, false, true, false, false, at::kFloat},
  };
  const int64_t n_rows = rows(), V = 5000, ignore_index = -100;
  int64_t block = 1;
  while (block < V) block *= 2;  // min(32768, next_power_of_2(V)) on CUDA
  const int warps = 32;          // cross_entropy_forward's num_warps below Blackwell
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.reduction) + (c.weighted ? " weighted" : "") + (c.softcap ? " softcap" : "") + " " +
                 describe(GetParam(), c.dtype));
    const at::Tensor x = at::randn({n_rows, V}, options(c.dtype));
    at::Tensor target = at::randint(V, {n_rows}, options(at::kLong));
    target.index_put_({0}, ignore_index);
    const at::Tensor weight = at::rand({V}, options(at::kFloat)) + 0.5;
    const at::Tensor kept = target != ignore_index;
    const int64_t n_non_ignore = kept.sum().item<int64_t>();
    at::Tensor logits[2] = {x.clone(), x.clone()}, loss[2], z[2], accuracy[2], predicted[2];
    for (int side = 0; side < 2; ++side) {
      loss[side] = at::zeros({n_rows}, options(c.dtype));
      if (c.z_loss) z[side] = at::zeros({n_rows}, options(c.dtype));
      if (c.accuracy) accuracy[side] = at::zeros({n_rows}, options(at::kFloat));
      if (c.predicted) predicted[side] = at::full({n_rows}, -1, options(at::kLong));
    }
    const std::optional<at::Tensor> w = c.weighted ? std::optional<at::Tensor>(weight) : std::nullopt;
    // As the wrapper computes them: an int without a weight, floats with one.
    const double sum_weight = c.weighted ? at::gather(weight, 0, target.masked_select(kept)).sum().item<double>() : 0.0;
    const double weight_sum = c.weighted ? weight.sum().item<double>() : 0.0;
    const auto launch_mine = [&](auto sum_non_ignore_weight) {
      const auto optional = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
      TJIT_ON_CPU_COMPILE_THEN_SKIP("range() over an integer argument", fn, LaunchOptions{warps}, logits[0],
                                    logits[0].stride(-2), target, target.stride(-1), w, loss[0], optional(z[0]),
                                    loss[0].stride(-1), optional(accuracy[0]), c.accuracy ? 1 : 0,
                                    optional(predicted[0]), c.predicted ? 1 : 0, V, n_non_ignore,
                                    sum_non_ignore_weight, weight_sum, ignore_index, c.lse_square_scale,
                                    c.label_smoothing, std::string_view(c.reduction), c.softcap, c.z_loss, c.accuracy, c.predicted,
                                    block, c.weighted, c.softcap.has_value(), c.gradients);
      fn(stream_of(x), Grid(n_rows), LaunchOptions{warps}, logits[0], logits[0].stride(-2), target, target.stride(-1),
         w, loss[0], optional(z[0]), loss[0].stride(-1), optional(accuracy[0]), c.accuracy ? 1 : 0,
         optional(predicted[0]), c.predicted ? 1 : 0, V, n_non_ignore, sum_non_ignore_weight, weight_sum,
         ignore_index, c.lse_square_scale, c.label_smoothing, std::string_view(c.reduction), c.softcap, c.z_loss, c.accuracy,
         c.predicted, block, c.weighted, c.softcap.has_value(), c.gradients);
    };
    if (c.weighted) {
      launch_mine(sum_weight);
    } else {
      launch_mine(n_non_ignore);
    }
    if (on_cpu()) return;  // the lambda's skip returned from the lambda only
    synchronize(x);
    {
      py::gil_scoped_acquire gil;
      PythonCall call{path, "liger_cross_entropy_kernel", py::make_tuple(n_rows)};
      const auto shared_or_none = [](const at::Tensor& t) { return t.defined() ? shared(t) : py::object(py::none()); };
      py::dict& k = call.kwargs;
      k["X_ptr"] = shared(logits[1]);
      k["X_stride"] = logits[1].stride(-2);
      k["Y_ptr"] = shared(target);
      k["Y_stride"] = target.stride(-1);
      k["weight_ptr"] = c.weighted ? shared(weight) : py::object(py::none());
      k["loss_ptr"] = shared(loss[1]);
      k["z_loss_ptr"] = shared_or_none(z[1]);
      k["loss_stride"] = loss[1].stride(-1);
      k["token_accuracy_ptr"] = shared_or_none(accuracy[1]);
      k["token_accuracy_stride"] = c.accuracy ? 1 : 0;
      k["predicted_tokens_ptr"] = shared_or_none(predicted[1]);
      k["predicted_tokens_stride"] = c.predicted ? 1 : 0;
      k["n_cols"] = V;
      k["n_non_ignore"] = n_non_ignore;
      k["sum_non_ignore_weight"] = c.weighted ? py::object(py::float_(sum_weight)) : py::object(py::int_(n_non_ignore));
      k["ignore_index"] = ignore_index;
      k["weight_sum"] = weight_sum;
      k["lse_square_scale"] = c.lse_square_scale;
      k["label_smoothing"] = c.label_smoothing;
      k["reduction"] = c.reduction;
      k["softcap"] = c.softcap ? py::object(py::float_(*c.softcap)) : py::object(py::none());
      k["RETURN_Z_LOSS"] = c.z_loss;
      k["RETURN_TOKEN_ACCURACY"] = c.accuracy;
      k["RETURN_PREDICTED_TOKENS"] = c.predicted;
      k["BLOCK_SIZE"] = block;
      k["HAS_WEIGHT"] = c.weighted;
      k["HAS_SOFTCAPPING"] = c.softcap.has_value();
      k["HAS_GRADIENTS"] = c.gradients;
      k["num_warps"] = warps;
      launch_in_python(call, false);
    }
    EXPECT_TRUE(at::equal(logits[0], logits[1]));
    EXPECT_TRUE(at::equal(loss[0], loss[1]));
    if (c.z_loss) EXPECT_TRUE(at::equal(z[0], z[1]));
    if (c.accuracy) EXPECT_TRUE(at::equal(accuracy[0], accuracy[1]));
    if (c.predicted) {
      EXPECT_TRUE(at::equal(predicted[0], predicted[1]));
      if (c.dtype == at::kFloat) {  // bfloat16 logits tie often, and ties may break either way
        EXPECT_TRUE(at::equal(predicted[0].masked_select(kept), x.argmax(-1).masked_select(kept)));
      }
    }
    if (!c.weighted && !c.softcap && c.label_smoothing == 0.0 && c.dtype == at::kFloat) {
      // Plain mean cross entropy: the loss and its gradient, which the kernel left in the logits.
      const at::Tensor xf = x.to(at::kFloat);
      const at::Tensor expected = at::cross_entropy_loss(xf, target, {}, at::Reduction::Mean, ignore_index);
      EXPECT_TRUE(at::allclose(loss[0].sum(), expected, 1e-4, 1e-4));
      const at::Tensor onehot = at::one_hot(target.clamp_min(0), V).to(at::kFloat);
      const at::Tensor grad = (at::softmax(xf, -1) - onehot) / static_cast<double>(n_non_ignore) *
                              kept.unsqueeze(1).to(at::kFloat);
      EXPECT_TRUE(at::allclose(logits[0], grad, 1e-4, 1e-6));
    }
  }
}

// --- FlagGems: kernels in files that import nothing of flag_gems (its package needs a GPU) -------

// flag_gems.fused.moe_sum: @triton.autotune (key: hidden_size, topk), a grid from META, via run().
TEST_P(ConformanceCorpus, FlagGemsMoeSumAutotuned) {
  TJIT_PEER_OR_SKIP(path, "flag_gems", "TJIT_CORPUS_FLAG_GEMS", "fused/moe_sum.py");
  auto& fn = TritonJitFunction::get_instance(path, "moe_sum_kernel");
  ASSERT_TRUE(fn.autotuned());
  const int64_t tokens = rows(), topk = 3, hidden = 1100;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    SCOPED_TRACE(describe(GetParam(), dtype));
    const at::Tensor input = at::randn({tokens, topk, hidden}, options(dtype));
    at::Tensor out[2] = {at::full({tokens, hidden}, std::numeric_limits<float>::quiet_NaN(), options(dtype)),
                         at::full({tokens, hidden}, std::numeric_limits<float>::quiet_NaN(), options(dtype))};
    TJIT_ON_CPU_COMPILE_THEN_SKIP("range() over an integer argument", fn, LaunchOptions{2}, input, out[0], tokens,
                                  topk, hidden, input.stride(0), input.stride(1), input.stride(2), out[0].stride(0),
                                  out[0].stride(1), int64_t{128});
    const auto grid = [&](const KernelMeta& meta) {
      return Grid(tokens, (hidden + meta["BLOCK_SIZE"] - 1) / meta["BLOCK_SIZE"]);
    };
    fn.run(stream_of(input), grid, input, out[0], tokens, topk, hidden, input.stride(0), input.stride(1),
           input.stride(2), out[0].stride(0), out[0].stride(1));
    synchronize(input);
    const std::optional<tjit::KernelConfig> chosen = fn.chosen_config(
        input, out[0], tokens, topk, hidden, input.stride(0), input.stride(1), input.stride(2), out[0].stride(0),
        out[0].stride(1));
    ASSERT_TRUE(chosen.has_value());
    {
      py::gil_scoped_acquire gil;
      PythonCall call{path, "moe_sum_kernel", py::str("lambda meta: (num_tokens, triton.cdiv(hidden_size, meta['BLOCK_SIZE']))")};
      call.grid_vars["num_tokens"] = tokens;
      call.grid_vars["hidden_size"] = hidden;
      call.args.append(shared(input));
      call.args.append(shared(out[1]));
      for (int64_t v : {tokens, topk, hidden, input.stride(0), input.stride(1), input.stride(2), out[1].stride(0),
                        out[1].stride(1)}) {
        call.args.append(v);
      }
      call.config = config_index(fn, *chosen);
      launch_in_python(call, on_cpu());
    }
    EXPECT_TRUE(at::equal(out[0], out[1]));
    EXPECT_TRUE(at::allclose(out[0].to(at::kFloat), at::sum(input.to(at::kFloat), {1}), 1e-3, 1e-2));
  }
}

// flag_gems.fused.apply_repetition_penalties: bool masks, in place, BLOCK_SIZE by keyword.
TEST_P(ConformanceCorpus, FlagGemsRepetitionPenalty) {
  TJIT_PEER_OR_SKIP(path, "flag_gems", "TJIT_CORPUS_FLAG_GEMS", "fused/apply_repetition_penalties.py");
  auto& fn = TritonJitFunction::get_instance(path, "_repetition_penalty_kernel");
  const int64_t seqs = on_cpu() ? 3 : 9, vocab = 3001, block = 1024;
  const at::Tensor logits = at::randn({seqs, vocab}, options(at::kFloat));
  const at::Tensor prompt = at::rand({seqs, vocab}, options(at::kFloat)) < 0.2;
  const at::Tensor output = at::rand({seqs, vocab}, options(at::kFloat)) < 0.2;
  const at::Tensor penalties = at::rand({seqs}, options(at::kFloat)) + 1.0;
  at::Tensor mine = logits.clone(), theirs = logits.clone();
  const Grid grid(seqs, (vocab + block - 1) / block);
  fn(stream_of(logits), grid, LaunchOptions{}, mine, prompt, output, penalties, seqs, vocab, block);
  synchronize(logits);
  {
    py::gil_scoped_acquire gil;
    PythonCall call{path, "_repetition_penalty_kernel", py::make_tuple(grid.x, grid.y)};
    for (py::object v : {shared(theirs), shared(prompt), shared(output), shared(penalties), py::cast(seqs),
                         py::cast(vocab)}) {
      call.args.append(v);
    }
    call.kwargs["BLOCK_SIZE"] = block;
    launch_in_python(call, on_cpu());
  }
  EXPECT_TRUE(at::equal(mine, theirs));
  const at::Tensor repeated = prompt | output;
  const at::Tensor p = penalties.unsqueeze(1);
  const at::Tensor expected = at::where(repeated, at::where(logits > 0, logits / p, logits * p), logits);
  EXPECT_TRUE(at::allclose(mine, expected));
}

// flag_gems.fused.topk_softmax: every argument by keyword, None for an unused pointer, a bool and
// a tl.dtype constexpr, num_warps.
TEST_P(ConformanceCorpus, FlagGemsTopkGatingSoftmax) {
  TJIT_PEER_OR_SKIP(path, "flag_gems", "TJIT_CORPUS_FLAG_GEMS", "fused/topk_softmax.py");
  auto& fn = TritonJitFunction::get_instance(path, "topk_gating_softmax_kernel");
  const int64_t tokens = on_cpu() ? 6 : 77, experts = 60, k = 4;
  const int64_t block_experts = 64, block_rows = 1024 / block_experts;  // the wrapper's sizes for 60 experts
  for (const bool renormalize : {false, true}) {
    for (const at::ScalarType index_dtype : {at::kInt, at::kLong}) {
      SCOPED_TRACE(std::string(renormalize ? "renormalize " : "") + describe(GetParam(), index_dtype));
      const at::Tensor gating = at::randn({tokens, experts}, options(at::kFloat));
      at::Tensor weights[2], indices[2], sources[2];
      for (int side = 0; side < 2; ++side) {
        weights[side] = at::full({tokens, k}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat));
        indices[side] = at::full({tokens, k}, -1, options(index_dtype));
        sources[side] = at::full({tokens, k}, -1, options(at::kInt));
      }
      const Grid grid((tokens + block_rows - 1) / block_rows);
      TJIT_ON_CPU_COMPILE_THEN_SKIP("range() over an integer argument", fn, LaunchOptions{4}, gating, std::nullopt,
                                    weights[0], indices[0], sources[0], tokens, k, experts, 0, experts, renormalize,
                                    index_dtype, block_rows, block_experts);
      fn(stream_of(gating), grid, LaunchOptions{4}, gating, std::nullopt, weights[0], indices[0], sources[0], tokens,
         k, experts, 0, experts, renormalize, index_dtype, block_rows, block_experts);
      synchronize(gating);
      {
        py::gil_scoped_acquire gil;
        PythonCall call{path, "topk_gating_softmax_kernel", py::make_tuple(grid.x)};
        const py::module_ tl = py::module_::import("triton.language");
        call.kwargs["input_ptr"] = shared(gating);
        call.kwargs["finished_ptr"] = py::none();
        call.kwargs["output_ptr"] = shared(weights[1]);
        call.kwargs["indices_ptr"] = shared(indices[1]);
        call.kwargs["source_rows_ptr"] = shared(sources[1]);
        call.kwargs["num_rows"] = tokens;
        call.kwargs["k"] = k;
        call.kwargs["num_experts"] = experts;
        call.kwargs["start_expert"] = 0;
        call.kwargs["end_expert"] = experts;
        call.kwargs["renormalize"] = renormalize;
        call.kwargs["INDEX_TY"] = tl.attr(index_dtype == at::kInt ? "int32" : "int64");
        call.kwargs["BLOCK_SIZE_ROWS"] = block_rows;
        call.kwargs["BLOCK_SIZE_EXPERTS"] = block_experts;
        call.kwargs["num_warps"] = 4;
        launch_in_python(call, on_cpu());
      }
      EXPECT_TRUE(at::equal(weights[0], weights[1]));
      EXPECT_TRUE(at::equal(indices[0], indices[1]));
      EXPECT_TRUE(at::equal(sources[0], sources[1]));
      auto [top, top_indices] = at::topk(at::softmax(gating, -1), k);
      if (renormalize) top = top / top.sum(-1, true);
      EXPECT_TRUE(at::allclose(weights[0], top, 1e-4, 1e-5));
      EXPECT_TRUE(at::equal(indices[0].to(at::kLong), top_indices));
    }
  }
}

// --- Tutorial-modelled: keys, heuristics, tuples through run() -----------------------------------

// axpb_kernel: the key names a tensor (out), a parameter a config sets (BLOCK) and a misspelt name;
// a heuristic (EVEN) reads the config's BLOCK; x, y and the coefficients come as tuples. run(), then
// operator() with every argument (the config's and the heuristic's values too).
TEST_P(ConformanceCorpus, KeysNamingTensorsAndMissingNamesWithHeuristicsAndTuples) {
  auto& fn = TritonJitFunction::get_instance(corpus_kernels(), "axpb_kernel");
  EXPECT_EQ(fn.caller_parameters(), (std::vector<std::string>{"xy", "out", "coefficients", "n"}));
  for (const int64_t n : {int64_t{1}, int64_t{1000}, int64_t{2048}}) {
    SCOPED_TRACE(n);
    const at::Tensor x = at::randn({n}, options(at::kFloat));
    const at::Tensor y = at::randn({n}, options(at::kFloat));
    at::Tensor out[3] = {poison_like(x), poison_like(x), poison_like(x)};
    const auto grid = [n](const KernelMeta& meta) { return Grid((n + meta["BLOCK"] - 1) / meta["BLOCK"]); };
    const auto coefficients = std::make_tuple(2.0, -0.5);
    fn.run(stream_of(x), grid, std::make_tuple(x, y), out[0], coefficients, n);
    synchronize(x);
    const std::optional<tjit::KernelConfig> chosen = fn.chosen_config(std::make_tuple(x, y), out[0], coefficients, n);
    ASSERT_TRUE(chosen.has_value()) << "a key naming a tensor still keeps the choice for that tensor";
    int64_t block = 0;
    for (const auto& [name, value] : chosen->values) {
      if (name == "BLOCK") block = std::get<int64_t>(value);
    }
    ASSERT_GT(block, 0);
    {
      py::gil_scoped_acquire gil;
      PythonCall call{corpus_kernels(), "axpb_kernel", py::str("lambda META: (triton.cdiv(n, META['BLOCK']),)")};
      call.grid_vars["n"] = n;
      call.args.append(py::make_tuple(shared(x), shared(y)));
      call.args.append(shared(out[1]));
      call.args.append(py::make_tuple(2.0, -0.5));
      call.args.append(n);
      call.config = config_index(fn, *chosen);
      launch_in_python(call, on_cpu());
    }
    fn(stream_of(x), Grid((n + block - 1) / block), chosen->options, std::make_tuple(x, y), out[2], coefficients, n,
       block, n % block == 0);
    synchronize(x);
    EXPECT_TRUE(at::equal(out[0], out[1]));
    EXPECT_TRUE(at::equal(out[0], out[2]));
    EXPECT_TRUE(at::allclose(out[0], x * 2.0 + y * -0.5));
  }
}

// square_kernel's key names the tensor x: Python Triton keys on the tensor object, tjit on the
// tensor itself too; each new tensor may be tuned again, and the results stay Python's.
TEST_P(ConformanceCorpus, KeyNamingATensor) {
  auto& fn = TritonJitFunction::get_instance(corpus_kernels(), "square_kernel");
  const int64_t n = 3001;
  for (int round = 0; round < 2; ++round) {
    const at::Tensor x = at::randn({n}, options(at::kFloat));
    at::Tensor out[2] = {poison_like(x), poison_like(x)};
    fn.run(stream_of(x), [n](const KernelMeta& meta) { return Grid((n + meta["BLOCK"] - 1) / meta["BLOCK"]); }, x,
           out[0], n);
    synchronize(x);
    const std::optional<tjit::KernelConfig> chosen = fn.chosen_config(x, out[0], n);
    ASSERT_TRUE(chosen.has_value());
    {
      py::gil_scoped_acquire gil;
      PythonCall call{corpus_kernels(), "square_kernel", py::str("lambda META: (triton.cdiv(n, META['BLOCK']),)")};
      call.grid_vars["n"] = n;
      call.args.append(shared(x));
      call.args.append(shared(out[1]));
      call.args.append(n);
      call.config = config_index(fn, *chosen);
      launch_in_python(call, on_cpu());
    }
    EXPECT_TRUE(at::equal(out[0], out[1]));
    EXPECT_TRUE(at::equal(out[0], x * x));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ConformanceCorpus, ::testing::ValuesIn(tjit::testing::test_devices()),
                         tjit::testing::device_label);

// --- GPU only ---------------------------------------------------------------------------------------

// FlagGems' own operators wrap their kernels in @libentry() (a launch cache of FlagGems'), and
// flag_gems.ops imports flag_gems, which needs a GPU. rms_norm_kernel as flag_gems.ops.rms_norm
// launches it for rows that fit one block.
TEST_F(ConformanceCorpusGpu, FlagGemsLibentryRmsNorm) {
  if (!gpu()) GTEST_SKIP() << "needs a GPU: flag_gems.ops.rms_norm imports flag_gems, which refuses to load without one";
  TJIT_PEER_OR_SKIP(path, "flag_gems", "TJIT_CORPUS_FLAG_GEMS", "ops/rms_norm.py");
  auto* fn = &TritonJitFunction::get_instance(path, "rms_norm_kernel");  // the @triton.jit under @libentry()
  const int64_t M = 67, N = 1000, block = 1024;
  const double eps = 1e-5;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor x = at::randn({M, N}, options(dtype));
    const at::Tensor w = at::randn({N}, options(dtype));
    at::Tensor y[2] = {poison_like(x), poison_like(x)};
    at::Tensor inv[2] = {at::full({M}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat)),
                         at::full({M}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat))};
    (*fn)(stream_of(x), Grid(M), LaunchOptions{}, y[0], inv[0], x, w, N, 1, N, 1, N, eps, block);
    synchronize(x);
    {
      py::gil_scoped_acquire gil;
      PythonCall call{path, "rms_norm_kernel", py::make_tuple(M)};
      for (py::object v : {shared(y[1]), shared(inv[1]), shared(x), shared(w), py::cast(N), py::cast(1), py::cast(N),
                           py::cast(1), py::cast(N), py::cast(eps), py::cast(block)}) {
        call.args.append(v);
      }
      launch_in_python(call, false);
    }
    EXPECT_TRUE(at::equal(y[0], y[1]));
    EXPECT_TRUE(at::equal(inv[0], inv[1]));
    const at::Tensor xf = x.to(at::kFloat);
    const at::Tensor expected = xf * at::rsqrt(at::mean(xf * xf, {1}, true) + eps) * w.to(at::kFloat);
    EXPECT_TRUE(at::allclose(y[0].to(at::kFloat), expected, 2e-2, 2e-2));
  }
}

// flag_gems.ops.logspace: a kernel file whose module imports its package's helpers by relative
// import (`from ..utils import libentry`), under @libentry(), with a float constexpr (log2_base).
TEST_F(ConformanceCorpusGpu, FlagGemsRelativeImportsLogspace) {
  if (!gpu()) GTEST_SKIP() << "needs a GPU: flag_gems.ops.logspace imports flag_gems, which refuses to load without one";
  TJIT_PEER_OR_SKIP(path, "flag_gems", "TJIT_CORPUS_FLAG_GEMS", "ops/logspace.py");
  auto& fn = TritonJitFunction::get_instance(path, "logspace_kernel");
  const double start = -2.0, end = 3.0, log2_base = std::log2(10.0);
  const int64_t steps = 1000, block = 256;
  const double step_size = (end - start) / static_cast<double>(steps - 1);
  at::Tensor out[2] = {at::full({steps}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat)),
                       at::full({steps}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat))};
  const Grid grid((steps + block - 1) / block);
  fn(stream_of(out[0]), grid, LaunchOptions{}, out[0], out[0].stride(0), start, step_size, steps, log2_base, block);
  synchronize(out[0]);
  {
    py::gil_scoped_acquire gil;
    PythonCall call{path, "logspace_kernel", py::make_tuple(grid.x)};
    for (py::object v : {shared(out[1]), py::cast(out[1].stride(0)), py::cast(start), py::cast(step_size),
                         py::cast(steps)}) {
      call.args.append(v);
    }
    call.kwargs["log2_base"] = log2_base;
    call.kwargs["BLOCK_SIZE"] = block;
    launch_in_python(call, false);
  }
  EXPECT_TRUE(at::equal(out[0], out[1]));
  const at::Tensor exponents = at::arange(steps, options(at::kDouble)) * step_size + start;
  EXPECT_TRUE(at::allclose(out[0].to(at::kDouble), at::pow(10.0, exponents), 1e-4, 0.0));
}

// flag_gems.ops.rms_norm's long-row kernel: @libentry() over @triton.autotune (FlagGems' tuned
// configs, key N), launched as `rms_norm_loop_kernel[M,](y, inv_rms, x, weight, N, eps)`: run().
TEST_F(ConformanceCorpusGpu, FlagGemsLibentryAutotunedRmsNormLoop) {
  if (!gpu()) GTEST_SKIP() << "needs a GPU: flag_gems.ops.rms_norm imports flag_gems, which refuses to load without one";
  TJIT_PEER_OR_SKIP(path, "flag_gems", "TJIT_CORPUS_FLAG_GEMS", "ops/rms_norm.py");
  auto& fn = TritonJitFunction::get_instance(path, "rms_norm_loop_kernel");
  const int64_t M = 33, N = 5000;
  const double eps = 1e-5;
  const at::Tensor x = at::randn({M, N}, options(at::kHalf));
  const at::Tensor w = at::randn({N}, options(at::kHalf));
  at::Tensor y[2] = {poison_like(x), poison_like(x)};
  at::Tensor inv[2] = {at::full({M}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat)),
                       at::full({M}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat))};
  TJIT_KNOWN_GAP(fn.run(stream_of(x), Grid(M), y[0], inv[0], x, w, N, eps), "LibEntry",
                 "FlagGems' @libentry() wrapper: run() takes @triton.autotune and @triton.heuristics layers only");
  synchronize(x);
  const std::optional<tjit::KernelConfig> chosen = fn.chosen_config(y[0], inv[0], x, w, N, eps);
  ASSERT_TRUE(chosen.has_value());
  {
    py::gil_scoped_acquire gil;
    PythonCall call{path, "rms_norm_loop_kernel", py::make_tuple(M)};
    for (py::object v : {shared(y[1]), shared(inv[1]), shared(x), shared(w), py::cast(N), py::cast(eps)}) {
      call.args.append(v);
    }
    call.config = config_index(fn, *chosen);
    launch_in_python(call, false);
  }
  EXPECT_TRUE(at::equal(y[0], y[1]));
  EXPECT_TRUE(at::equal(inv[0], inv[1]));
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor expected = xf * at::rsqrt(at::mean(xf * xf, {1}, true) + eps) * w.to(at::kFloat);
  EXPECT_TRUE(at::allclose(y[0].to(at::kFloat), expected, 2e-2, 2e-2));
}

// The attention forward as the tutorial runs it: host descriptors made with a placeholder block
// shape, which each config's pre_hook sets; configs pruned by N_CTX and STAGE, read by name.
TEST_F(ConformanceCorpusGpu, AttentionForwardConfigPreHookAndPruneByName) {
  auto* fn = &TritonJitFunction::get_instance(corpus_kernels(), "attn_fwd_kernel");
  const int64_t Z = 2, H = 3, N_CTX = 256, HEAD_DIM = 64, STAGE = 1;
  const double sm_scale = 0.125;
  const at::Tensor q = at::randn({Z * H * N_CTX, HEAD_DIM}, options(at::kHalf));
  const at::Tensor k = at::randn({Z * H * N_CTX, HEAD_DIM}, options(at::kHalf));
  const at::Tensor v = at::randn({Z * H * N_CTX, HEAD_DIM}, options(at::kHalf));
  at::Tensor o[2] = {poison_like(q), poison_like(q)};
  at::Tensor m[2] = {at::full({Z * H * N_CTX}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat)),
                     at::full({Z * H * N_CTX}, std::numeric_limits<float>::quiet_NaN(), options(at::kFloat))};
  const auto desc = [](const at::Tensor& t) { return tjit::TensorDescriptor::from_tensor(t, {1, 1}); };
  const auto blocks = [](const at::Tensor& t, int64_t rows) { return tjit::TensorDescriptor::from_tensor(t, {rows, 64}); };
  // What the first config's pre_hook makes of the descriptors.
  TJIT_WITHOUT_GPU_COMPILE_THEN_SKIP(*fn, LaunchOptions{4, 2}, sm_scale, m[0], Z, H, blocks(q, 64), blocks(k, 32),
                                     blocks(v, 32), blocks(o[0], 64), N_CTX, HEAD_DIM, int64_t{64}, int64_t{32}, STAGE);
  if (capability()[0] < 9) GTEST_SKIP() << "host tensor descriptors need TMA (sm_90+)";
  const auto grid = [&](const KernelMeta& meta) { return Grid((N_CTX + meta["BLOCK_M"] - 1) / meta["BLOCK_M"], Z * H); };
  fn->run(tjit::current_stream(q.device()), grid, sm_scale, m[0], Z, H, desc(q), desc(k), desc(v), desc(o[0]), N_CTX,
          HEAD_DIM, STAGE);
  synchronize(q);
  const std::optional<tjit::KernelConfig> chosen =
      fn->chosen_config(sm_scale, m[0], Z, H, desc(q), desc(k), desc(v), desc(o[0]), N_CTX, HEAD_DIM, STAGE);
  ASSERT_TRUE(chosen.has_value());
  {
    py::gil_scoped_acquire gil;
    PythonCall call{corpus_kernels(), "attn_fwd_kernel",
                    py::str("lambda META: (triton.cdiv(N_CTX, META['BLOCK_M']), Z * H)")};
    call.grid_vars["N_CTX"] = N_CTX;
    call.grid_vars["Z"] = Z;
    call.grid_vars["H"] = H;
    for (py::object a : {py::cast(sm_scale), shared(m[1]), py::cast(Z), py::cast(H)}) call.args.append(a);
    for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&q, &k, &v, &o[1]}) call.args.append(shared(desc(*t)));
    call.kwargs["N_CTX"] = N_CTX;
    call.kwargs["HEAD_DIM"] = HEAD_DIM;
    call.kwargs["STAGE"] = STAGE;
    call.config = config_index(*fn, *chosen);
    launch_in_python(call, false);
  }
  EXPECT_TRUE(at::equal(o[0], o[1]));
  EXPECT_TRUE(at::equal(m[0], m[1]));
  const at::Tensor qh = q.to(at::kFloat).view({Z * H, N_CTX, HEAD_DIM});
  const at::Tensor kh = k.to(at::kFloat).view({Z * H, N_CTX, HEAD_DIM});
  const at::Tensor vh = v.to(at::kFloat).view({Z * H, N_CTX, HEAD_DIM});
  const at::Tensor scores = at::matmul(qh, kh.transpose(1, 2)) * sm_scale;
  EXPECT_TRUE(at::allclose(o[0].to(at::kFloat).view({Z * H, N_CTX, HEAD_DIM}),
                           at::matmul(at::softmax(scores, -1), vh), 1e-2, 1e-2));
  EXPECT_TRUE(at::allclose(m[0].view({Z * H, N_CTX}), at::logsumexp(scores, -1) * 1.4426950408889634, 1e-2, 1e-2));
}

// The autotuned TMA matmul: descriptors made with a placeholder block shape, set by the configs'
// pre_hook. Ragged sizes: TMA zero-fills and clips.
TEST_F(ConformanceCorpusGpu, MatmulTmaConfigPreHook) {
  auto* fn = &TritonJitFunction::get_instance(corpus_kernels(), "matmul_tma_kernel");
  const int64_t M = 777, N = 520, K = 504;
  const at::Tensor a = at::randn({M, K}, options(at::kHalf));
  const at::Tensor b = at::randn({N, K}, options(at::kHalf));
  at::Tensor c[2] = {at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), options(at::kHalf)),
                     at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), options(at::kHalf))};
  const auto desc = [](const at::Tensor& t) { return tjit::TensorDescriptor::from_tensor(t, {1, 1}); };
  using tjit::TensorDescriptor;
  TJIT_WITHOUT_GPU_COMPILE_THEN_SKIP(*fn, LaunchOptions{8, 3}, TensorDescriptor::from_tensor(a, {128, 64}),
                                     TensorDescriptor::from_tensor(b, {128, 64}),
                                     TensorDescriptor::from_tensor(c[0], {128, 128}), M, N, K, int64_t{128},
                                     int64_t{128}, int64_t{64}, int64_t{8});
  if (capability()[0] < 9) GTEST_SKIP() << "host tensor descriptors need TMA (sm_90+)";
  const auto grid = [&](const KernelMeta& meta) {
    return Grid(((M + meta["BLOCK_M"] - 1) / meta["BLOCK_M"]) * ((N + meta["BLOCK_N"] - 1) / meta["BLOCK_N"]));
  };
  fn->run(tjit::current_stream(a.device()), grid, desc(a), desc(b), desc(c[0]), M, N, K);
  synchronize(a);
  const std::optional<tjit::KernelConfig> chosen = fn->chosen_config(desc(a), desc(b), desc(c[0]), M, N, K);
  ASSERT_TRUE(chosen.has_value());
  {
    py::gil_scoped_acquire gil;
    PythonCall call{corpus_kernels(), "matmul_tma_kernel",
                    py::str("lambda META: (triton.cdiv(M, META['BLOCK_M']) * triton.cdiv(N, META['BLOCK_N']),)")};
    call.grid_vars["M"] = M;
    call.grid_vars["N"] = N;
    for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&a, &b, &c[1]}) call.args.append(shared(desc(*t)));
    for (int64_t value : {M, N, K}) call.args.append(value);
    call.config = config_index(*fn, *chosen);
    launch_in_python(call, false);
  }
  EXPECT_TRUE(at::equal(c[0], c[1]));
  EXPECT_TRUE(at::allclose(c[0].to(at::kFloat), at::matmul(a.to(at::kFloat), b.to(at::kFloat).t()), 1e-2, 5e-2));
}

// The descriptor-persistent matmul: descriptors made on the device; the prune reads FLATTEN by
// name, and drops the split epilogue when FLATTEN is False (the choice must respect that).
TEST_F(ConformanceCorpusGpu, PersistentMatmulDeviceDescriptorsPrunedByName) {
  auto& fn = TritonJitFunction::get_instance(corpus_kernels(), "matmul_descriptor_persistent_kernel");
  const int64_t M = 300, N = 520, K = 256;
  const int64_t NUM_SMS = gpu() ? tjit::multiprocessor_count(c10::Device(c10::kCUDA, 0)) : 132;
  for (const bool flatten : {false, true}) {
    SCOPED_TRACE(flatten ? "FLATTEN" : "not FLATTEN");
    const at::Tensor a = at::randn({M, K}, options(at::kHalf));
    const at::Tensor b = at::randn({N, K}, options(at::kHalf));
    at::Tensor c[2] = {at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), options(at::kHalf)),
                       at::full({M, N}, std::numeric_limits<float>::quiet_NaN(), options(at::kHalf))};
    TJIT_WITHOUT_GPU_COMPILE_THEN_SKIP(fn, LaunchOptions{8, 3}, a, b, c[0], M, N, K, int64_t{128}, int64_t{128},
                                       int64_t{64}, true, NUM_SMS, flatten);
    if (capability()[0] < 9) GTEST_SKIP() << "device-side tensor descriptors need TMA (sm_90+)";
    const auto grid = [&](const KernelMeta& meta) {
      const int64_t tiles = ((M + meta["BLOCK_M"] - 1) / meta["BLOCK_M"]) * ((N + meta["BLOCK_N"] - 1) / meta["BLOCK_N"]);
      return Grid(std::min(NUM_SMS, tiles));
    };
    fn.run(tjit::current_stream(a.device()), grid, a, b, c[0], M, N, K, NUM_SMS, flatten);
    synchronize(a);
    const std::optional<tjit::KernelConfig> chosen = fn.chosen_config(a, b, c[0], M, N, K, NUM_SMS, flatten);
    ASSERT_TRUE(chosen.has_value());
    for (const auto& [name, value] : chosen->values) {
      if (name == "EPILOGUE_SUBTILE" && !flatten) {
        EXPECT_FALSE(std::get<bool>(value)) << "the prune (FLATTEN False) drops the split epilogue";
      }
    }
    {
      py::gil_scoped_acquire gil;
      PythonCall call{corpus_kernels(), "matmul_descriptor_persistent_kernel",
                      py::str("lambda META: (min(NUM_SMS, triton.cdiv(M, META['BLOCK_M']) * "
                              "triton.cdiv(N, META['BLOCK_N'])),)")};
      call.grid_vars["M"] = M;
      call.grid_vars["N"] = N;
      call.grid_vars["NUM_SMS"] = NUM_SMS;
      for (py::object v : {shared(a), shared(b), shared(c[1]), py::cast(M), py::cast(N), py::cast(K)}) {
        call.args.append(v);
      }
      call.kwargs["NUM_SMS"] = NUM_SMS;
      call.kwargs["FLATTEN"] = flatten;
      call.config = config_index(fn, *chosen);
      launch_in_python(call, false);
    }
    EXPECT_TRUE(at::equal(c[0], c[1]));
    EXPECT_TRUE(at::allclose(c[0].to(at::kFloat), at::matmul(a.to(at::kFloat), b.to(at::kFloat).t()), 1e-2, 5e-2));
  }
}

// The grouped GEMM over arrays of pointers (int64 tensors of data_ptr()s), autotuned on the
// group's size, its grid the config's NUM_SM.
TEST_F(ConformanceCorpusGpu, GroupedGemmOverPointerArrays) {
  auto& fn = TritonJitFunction::get_instance(corpus_kernels(), "grouped_matmul_kernel");
  const std::vector<std::array<int64_t, 3>> shapes{{200, 150, 96}, {64, 64, 64}, {37, 300, 130}};
  const int64_t group = static_cast<int64_t>(shapes.size());
  std::vector<at::Tensor> a, b, c[2];
  std::vector<int64_t> a_ptrs, b_ptrs, c_ptrs[2];
  std::vector<int32_t> sizes, lds;
  for (const auto& [m, n, k] : shapes) {
    a.push_back(at::randn({m, k}, options(at::kHalf)));
    b.push_back(at::randn({k, n}, options(at::kHalf)));
    for (int side = 0; side < 2; ++side) {
      c[side].push_back(at::full({m, n}, std::numeric_limits<float>::quiet_NaN(), options(at::kHalf)));
      c_ptrs[side].push_back(reinterpret_cast<int64_t>(c[side].back().data_ptr()));
    }
    a_ptrs.push_back(reinterpret_cast<int64_t>(a.back().data_ptr()));
    b_ptrs.push_back(reinterpret_cast<int64_t>(b.back().data_ptr()));
    for (int64_t v : {m, n, k}) sizes.push_back(static_cast<int32_t>(v));
    for (int64_t v : {k, n, n}) lds.push_back(static_cast<int32_t>(v));
  }
  const auto on_gpu = [](auto values, at::ScalarType dtype) {
    return at::tensor(values, at::TensorOptions().dtype(dtype)).to(options(dtype).device());
  };
  const at::Tensor d_a = on_gpu(a_ptrs, at::kLong), d_b = on_gpu(b_ptrs, at::kLong);
  const at::Tensor d_c[2] = {on_gpu(c_ptrs[0], at::kLong), on_gpu(c_ptrs[1], at::kLong)};
  const at::Tensor d_sizes = on_gpu(sizes, at::kInt), d_lds = on_gpu(lds, at::kInt);
  TJIT_WITHOUT_GPU_COMPILE_THEN_SKIP(fn, LaunchOptions{}, d_a, d_b, d_c[0], d_sizes, d_lds, group, int64_t{84},
                                     int64_t{64}, int64_t{64}, int64_t{32});
  fn.run(tjit::current_stream(d_a.device()), [](const KernelMeta& meta) { return Grid(meta["NUM_SM"]); }, d_a, d_b,
         d_c[0], d_sizes, d_lds, group);
  synchronize(d_a);
  const std::optional<tjit::KernelConfig> chosen = fn.chosen_config(d_a, d_b, d_c[0], d_sizes, d_lds, group);
  ASSERT_TRUE(chosen.has_value());
  {
    py::gil_scoped_acquire gil;
    PythonCall call{corpus_kernels(), "grouped_matmul_kernel", py::str("lambda META: (META['NUM_SM'],)")};
    for (py::object v : {shared(d_a), shared(d_b), shared(d_c[1]), shared(d_sizes), shared(d_lds), py::cast(group)}) {
      call.args.append(v);
    }
    call.config = config_index(fn, *chosen);
    launch_in_python(call, false);
  }
  for (size_t g = 0; g < shapes.size(); ++g) {
    SCOPED_TRACE(g);
    EXPECT_TRUE(at::equal(c[0][g], c[1][g]));
    EXPECT_TRUE(at::allclose(c[0][g].to(at::kFloat), at::matmul(a[g].to(at::kFloat), b[g].to(at::kFloat)), 1e-2, 5e-2));
  }
}

// Programmatic dependent launch: two dependent kernels on one stream, the second launched with
// launch_pdl and waiting (gdc_wait) for what the first wrote.
TEST_F(ConformanceCorpusGpu, ProgrammaticDependentLaunch) {
  auto& fn = TritonJitFunction::get_instance(corpus_kernels(), "pdl_add_kernel");
  const int64_t n = gpu() ? (1 << 22) + 17 : 1000, block = 1024;
  const at::Tensor x = at::randn({n}, options(at::kFloat));
  const at::Tensor y = at::randn({n}, options(at::kFloat));
  at::Tensor first[2] = {poison_like(x), poison_like(x)}, second[2] = {poison_like(x), poison_like(x)};
  const Grid grid((n + block - 1) / block);
  LaunchOptions pdl;
  pdl.launch_pdl = true;
  if (!gpu()) {
    EXPECT_TRUE(fn.compile(tjit::CompileTarget::parse("cuda:90"), pdl, x, y, first[0], n, block, true).launch_pdl);
  }
  TJIT_WITHOUT_GPU_COMPILE_THEN_SKIP(fn, pdl, x, y, first[0], n, block, true);
  if (!tjit::dependent_launch_supported(c10::Device(c10::kCUDA, 0))) {
    GTEST_SKIP() << "PDL needs sm_90+ and a CUDA 12.3+ driver";
  }
  const tjit::Stream stream = tjit::current_stream(x.device());
  fn(stream, grid, pdl, x, y, first[0], n, block, true);
  fn(stream, grid, pdl, first[0], y, second[0], n, block, true);
  synchronize(x);
  for (int step = 0; step < 2; ++step) {
    py::gil_scoped_acquire gil;
    PythonCall call{corpus_kernels(), "pdl_add_kernel", py::make_tuple(grid.x)};
    for (py::object v : {step == 0 ? shared(x) : shared(first[1]), shared(y), shared(step == 0 ? first[1] : second[1]),
                         py::cast(n)}) {
      call.args.append(v);
    }
    call.kwargs["BLOCK"] = block;
    call.kwargs["USE_GDC"] = true;
    call.kwargs["launch_pdl"] = true;
    launch_in_python(call, false);
  }
  EXPECT_TRUE(at::equal(first[0], first[1]));
  EXPECT_TRUE(at::equal(second[0], second[1]));
  EXPECT_TRUE(at::equal(second[0], (x + y) + y));
}

}  // namespace
