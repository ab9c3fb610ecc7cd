// A user's program: its own Triton kernel through tjit::TritonJitFunction, and tjit's operators,
// each checked against ATen. Runs on CUDA when there is a GPU, else on the CPU through Triton's
// interpreter. Prints "consumer passed" and exits 0, or names what differed and exits 1.
//
// Built as tjit_consumer_deployed (CONSUMER_DEPLOYED), it has its kernels embedded as a bundle
// (tjit_add_kernel_bundle) and is meant to run with TJIT_JIT=0 where Python cannot be loaded. It
// then also checks that every kernel came from the bundle, that a specialisation or an
// architecture the bundle lacks gives the documented error and the program goes on, and that at
// exit neither libpython nor Triton's libtriton is mapped into the process. Without a GPU it checks
// what runs without one: the bundle's kernels through compile() for the bundle's targets.
//
// Given a file argument (tests/deploy/deploy.sh passes one on a GPU of sm_90+), it also runs the
// autotuned TMA matmul and the attention forward of tests/cpp/kernels/corpus_kernels.py through
// run(): config pre_hooks set the host descriptors' block shapes, the attention's prune reads
// N_CTX by name. tjit_consumer tunes them at the first call and writes inputs, outputs and choices
// to the file (for deploy.sh's comparison with Python Triton's call); the deployed
// program reads the inputs back, takes choice and hooks from the bundle, and must reproduce the
// outputs bit for bit.

#include <tjit/current_stream.h>
#include <tjit/kernel_bundle.h>
#include <tjit/operators.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace {

int failures = 0;

void expect_close(const char* what, const at::Tensor& actual, const at::Tensor& expected) {
  const bool ok = actual.sizes() == expected.sizes() && actual.dtype() == expected.dtype() &&
                  at::allclose(actual.cpu(), expected.cpu(), 1e-5, 1e-5);
  std::printf("%-24s %s\n", what, ok ? "ok" : "DIFFERS from ATen");
  failures += ok ? 0 : 1;
}

// Within a tolerance (kernels whose order of additions differs from ATen's).
void expect_near(const char* what, const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol) {
  const bool ok = actual.sizes() == expected.sizes() &&
                  at::allclose(actual.cpu().to(at::kFloat), expected.cpu().to(at::kFloat), rtol, atol);
  std::printf("%-24s %s\n", what, ok ? "ok" : "DIFFERS from ATen");
  failures += ok ? 0 : 1;
}

void expect(const char* what, bool ok) {
  std::printf("%-24s %s\n", what, ok ? "ok" : "FAILED");
  failures += ok ? 0 : 1;
}

// Runs `call`, which must throw a c10::Error whose message contains every one of `parts`.
void expect_error(const char* what, const std::function<void()>& call, const std::vector<std::string>& parts) {
  try {
    call();
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        std::printf("%-24s FAILED: the error lacks '%s':\n%s\n", what, part.c_str(), message.c_str());
        ++failures;
        return;
      }
    }
    std::printf("%-24s ok (%zu-character error)\n", what, message.size());
    return;
  }
  std::printf("%-24s FAILED: no error\n", what);
  ++failures;
}

// What of Python and Triton this process has mapped (nothing, for a deployed program).
std::string python_or_triton_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string found;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libpython") != std::string::npos || line.find("/libtriton.so") != std::string::npos) {
      found += line + "\n";
    }
  }
  return found;
}

// The program's kernels with @triton.heuristics and @triton.autotune, through run().
void run_decorated_kernels(const at::Tensor& x, at::Tensor& out, int64_t n, int64_t block, tjit::Stream stream) {
  auto& even = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "even_axpb_kernel");
  out.fill_(std::numeric_limits<float>::quiet_NaN());
  even.run(stream, tjit::Grid(static_cast<uint32_t>((n + block - 1) / block)), x, out, n, 2.5, -1.0, block);
  expect_close("heuristics kernel", out, x * 2.5 - 1.0);
  auto& tuned = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "tuned_axpb_kernel");
  out.fill_(std::numeric_limits<float>::quiet_NaN());
  tuned.run(stream, [&](const tjit::KernelMeta& meta) {
    return tjit::Grid(static_cast<uint32_t>((n + meta["BLOCK"] - 1) / meta["BLOCK"]));
  }, x, out, n, 2.5, -1.0);
  expect_close("autotuned kernel", out, x * 2.5 - 1.0);
  std::printf("autotuned kernel: %s; keys tuned by timing %zu (%zu timing launches), choices loaded %zu\n",
              tuned.tune(stream, tjit::Grid(1), x, out, n, 2.5, -1.0).describe().c_str(), tuned.num_tunings(),
              tuned.num_tuning_runs(), tuned.num_tunings_loaded());
}

// --- The autotuned TMA matmul and the attention forward (a GPU of sm_90+) ---------------------
// Kernels of tests/cpp/kernels/corpus_kernels.py (CONSUMER_CORPUS_KERNEL_FILE), called as Triton's
// tutorials call them: host descriptors made with a placeholder block shape that each config's
// pre_hook replaces; the attention's prune reads N_CTX and STAGE by name.

// What tjit_consumer writes for the deployed run and python_triton_check.py: one header line a
// record, "tensor NAME DTYPE SIZES..." followed by the tensor's bytes (contiguous), or "value NAME
// TEXT" (ints in decimal, floats in hexadecimal, configs as describe() prints them). Plain records
// rather than torch's pickler, whose headers add much to this program's compile time.
struct IoFile {
  std::map<std::string, at::Tensor> tensors;  // on the CPU
  std::map<std::string, std::string> values;
};

[[maybe_unused]] void write_io(const std::string& path, const IoFile& io) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& [name, tensor] : io.tensors) {
    const at::Tensor t = tensor.cpu().contiguous();
    out << "tensor " << name << ' ' << c10::toString(t.scalar_type());
    for (const int64_t size : t.sizes()) {
      out << ' ' << size;
    }
    out << '\n';
    out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  }
  for (const auto& [name, text] : io.values) {
    out << "value " << name << ' ' << text << '\n';
  }
  TORCH_CHECK(out.good(), "consumer: cannot write ", path);
}

[[maybe_unused]] IoFile read_io(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in.good(), "consumer: cannot read ", path, ", which tjit_consumer writes when given it (deploy.sh)");
  IoFile io;
  for (std::string line; std::getline(in, line);) {
    std::istringstream header(line);
    std::string kind, name, rest;
    header >> kind >> name;
    if (kind == "tensor") {
      std::string dtype;
      header >> dtype;
      std::vector<int64_t> sizes;
      for (int64_t size = 0; header >> size;) {
        sizes.push_back(size);
      }
      TORCH_CHECK(dtype == "Half" || dtype == "Float", "consumer: ", path, ": tensor ", name, " of dtype ", dtype);
      at::Tensor t = at::empty(sizes, dtype == "Half" ? at::kHalf : at::kFloat);
      in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
      TORCH_CHECK(in.gcount() == static_cast<std::streamsize>(t.nbytes()), "consumer: ", path,
                  " is cut short in tensor ", name);
      io.tensors[name] = t;
    } else {
      TORCH_CHECK(kind == "value", "consumer: ", path, " has a record '", line, "', not one tjit_consumer writes");
      std::getline(header >> std::ws, rest);
      io.values[name] = rest;
    }
  }
  TORCH_CHECK(!in.bad(), "consumer: cannot read ", path);
  return io;
}

// Looks `name` up in `map`, naming the file's record that is missing.
template <typename Map>
const typename Map::mapped_type& record(const Map& map, const std::string& name, const std::string& path) {
  const auto it = map.find(name);
  TORCH_CHECK(it != map.end(), "consumer: ", path, " has no record ", name, "; tjit_consumer writes it");
  return it->second;
}

// JIT build: fresh inputs, tuned at the first call (run with a fresh kernel store, as deploy.sh
// does), checked against ATen, then written to `io_path`. Deployed: the inputs read from `io_path`,
// choice and descriptor hooks from the bundle (nothing timed or compiled), the outputs equal to the
// JIT run's bit for bit (same binaries, same config) and checked against ATen.
void run_tma_kernels(const std::string& io_path, const at::Device& device) {
  auto& matmul = tjit::TritonJitFunction::get_instance(CONSUMER_CORPUS_KERNEL_FILE, "matmul_tma_kernel");
  auto& attention = tjit::TritonJitFunction::get_instance(CONSUMER_CORPUS_KERNEL_FILE, "attn_fwd_kernel");
  const auto half = at::TensorOptions().device(device).dtype(at::kHalf);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t M = 777, N = 520, K = 504;  // ragged: TMA zero-fills and clips the edge tiles
  // N_CTX 64: the prune keeps the 8 configs with BLOCK_M <= N_CTX of 16.
  const int64_t Z = 2, H = 3, N_CTX = 64, HEAD_DIM = 64, STAGE = 1;
  const double sm_scale = 0.125;
#ifdef CONSUMER_DEPLOYED
  const IoFile io = read_io(io_path);
#else
  IoFile io;
#endif
  const auto input = [&](const char* name, std::initializer_list<int64_t> sizes) {
#ifdef CONSUMER_DEPLOYED
    const at::Tensor t = record(io.tensors, name, io_path).to(device);
    TORCH_CHECK(t.sizes() == c10::IntArrayRef(sizes) && t.scalar_type() == at::kHalf, "consumer: ", io_path,
                " has ", name, " of ", t.sizes(), " ", t.scalar_type(), ", not what tjit_consumer writes");
#else
    const at::Tensor t = at::randn(sizes, half);
    io.tensors[name] = t.cpu();
#endif
    return t;
  };
  const auto desc = [](const at::Tensor& t) { return tjit::TensorDescriptor::from_tensor(t, {1, 1}); };
  const tjit::Stream stream = tjit::current_stream(device);

  const at::Tensor a = input("a", {M, K});
  const at::Tensor b = input("b", {N, K});  // C = A @ B^T
  const at::Tensor c = at::full({M, N}, nan, half);
  matmul.run(stream, [&](const tjit::KernelMeta& meta) {
    return tjit::Grid(static_cast<uint32_t>(((M + meta["BLOCK_M"] - 1) / meta["BLOCK_M"]) *
                                            ((N + meta["BLOCK_N"] - 1) / meta["BLOCK_N"])));
  }, desc(a), desc(b), desc(c), M, N, K);
  const std::string matmul_config = matmul.chosen_config(desc(a), desc(b), desc(c), M, N, K).value().describe();
  expect_near("TMA matmul", c, at::matmul(a.to(at::kFloat), b.to(at::kFloat).t()), 1e-2, 5e-2);

  const at::Tensor q = input("q", {Z * H * N_CTX, HEAD_DIM});
  const at::Tensor k = input("k", {Z * H * N_CTX, HEAD_DIM});
  const at::Tensor v = input("v", {Z * H * N_CTX, HEAD_DIM});
  const at::Tensor o = at::full_like(q, nan);
  const at::Tensor lse2 = at::full({Z * H * N_CTX}, nan, half.dtype(at::kFloat));  // the kernel's M
  const auto grid = [&](const tjit::KernelMeta& meta) {
    return tjit::Grid(static_cast<uint32_t>((N_CTX + meta["BLOCK_M"] - 1) / meta["BLOCK_M"]),
                      static_cast<uint32_t>(Z * H));
  };
  attention.run(stream, grid, sm_scale, lse2, Z, H, desc(q), desc(k), desc(v), desc(o), N_CTX, HEAD_DIM, STAGE);
  const tjit::KernelConfig attention_chosen =
      attention.chosen_config(sm_scale, lse2, Z, H, desc(q), desc(k), desc(v), desc(o), N_CTX, HEAD_DIM, STAGE).value();
  const std::string attention_config = attention_chosen.describe();
  for (const auto& [name, value] : attention_chosen.values) {
    if (name == "BLOCK_M") {
      expect("attention: pruned by N_CTX", std::get<int64_t>(value) <= N_CTX);
    }
  }
  const auto heads = [&](const at::Tensor& t) { return t.view({Z, H, N_CTX, HEAD_DIM}); };
  expect_near("attention forward", heads(o),
              at::scaled_dot_product_attention(heads(q), heads(k), heads(v), {}, 0.0, false, sm_scale), 1e-2, 1e-2);
  const at::Tensor scores =
      at::matmul(heads(q).to(at::kFloat), heads(k).to(at::kFloat).transpose(-1, -2)) * sm_scale;
  expect_near("attention log2-sum-exp", lse2.view({Z, H, N_CTX}), at::logsumexp(scores, -1) * 1.4426950408889634,
              1e-2, 1e-2);
  std::printf("TMA matmul: %s\nattention forward: %s\n", matmul_config.c_str(), attention_config.c_str());

#ifdef CONSUMER_DEPLOYED
  expect("TMA matmul = JIT run's", at::equal(c.cpu(), record(io.tensors, "c", io_path)));
  expect("attention = JIT run's", at::equal(o.cpu(), record(io.tensors, "o", io_path)) &&
                                      at::equal(lse2.cpu(), record(io.tensors, "lse2", io_path)));
  expect("TMA: JIT run's configs", matmul_config == record(io.values, "matmul_config", io_path) &&
                                       attention_config == record(io.values, "attention_config", io_path));
  // The choices and the pre_hooks' descriptor fields came from the bundle: with TJIT_JIT=0 and no
  // Python a missing one is an error.
  expect("TMA: nothing timed", matmul.num_tunings() == 0 && matmul.num_tuning_runs() == 0 &&
                                   matmul.num_tunings_loaded() == 1 && attention.num_tunings() == 0 &&
                                   attention.num_tuning_runs() == 0 && attention.num_tunings_loaded() == 1);
  expect("TMA: from the bundle", matmul.num_compiled() == 0 && attention.num_compiled() == 0 &&
                                     matmul.num_loaded_from_bundles() >= 1 &&
                                     attention.num_loaded_from_bundles() >= 1);
#else
  expect("TMA: tuned at first call", matmul.num_tunings() == 1 && matmul.num_tuning_runs() > 0 &&
                                         attention.num_tunings() == 1 && attention.num_tuning_runs() > 0);
  io.tensors["c"] = c.cpu();
  io.tensors["o"] = o.cpu();
  io.tensors["lse2"] = lse2.cpu();
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"Z", Z}, {"H", H}, {"N_CTX", N_CTX},
                                     {"HEAD_DIM", HEAD_DIM}, {"STAGE", STAGE}}) {
    io.values[name] = std::to_string(value);
  }
  std::ostringstream scale;
  scale << std::hexfloat << sm_scale;  // exactly
  io.values["sm_scale"] = scale.str();
  io.values["matmul_config"] = matmul_config;
  io.values["attention_config"] = attention_config;
  write_io(io_path, io);
  std::printf("TMA inputs and outputs written to %s\n", io_path.c_str());
#endif
}

#ifdef CONSUMER_DEPLOYED
// The checks only a deployed program makes; `x` and `out` are inputs of the own kernel.
void check_deployment(const at::Tensor& x, at::Tensor& out, int64_t n, int64_t block) {
  auto& axpb = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "axpb_kernel");
  const auto target = tjit::CompileTarget::parse("cuda:90");
  const tjit::Stream stream = tjit::current_stream(x.device());
  const tjit::Grid grid(static_cast<uint32_t>((n + block - 1) / block));
  if (!x.is_cuda()) {
    // No GPU: the bundle's binary for a target, as a launch there would get it.
    const tjit::CompiledKernel k = axpb.compile(target, tjit::LaunchOptions{}, x, out, n, 2.5, -1.0, block);
    expect("own kernel from bundle", k.binary.size() > 4 && k.binary.compare(0, 4, "\x7f" "ELF") == 0);
    // The heuristic's value from the bundle, then the binary with it.
    auto& even = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "even_axpb_kernel");
    const tjit::CompiledKernel h = even.compile_run(target, x, out, n, 2.5, -1.0, block);
    expect("heuristics from bundle", h.binary.size() > 4 && h.binary.compare(0, 4, "\x7f" "ELF") == 0);
    // Recorded on the CPU, the autotune choice is the interpreter's: none for a GPU.
    auto& tuned = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "tuned_axpb_kernel");
    expect_error("no GPU tuning choice", [&] { tuned.compile_run(target, x, out, n, 2.5, -1.0); },
                 {"tuned_axpb_kernel is autotuned", "on cuda:90:32"});
  }
  // A specialisation the manifest never had (another BLOCK), then one for an architecture the
  // bundle was not built for: clear errors, and the program goes on.
  expect_error("missing specialisation", [&] {
    if (x.is_cuda()) {
      axpb(stream, grid, tjit::LaunchOptions{}, x, out, n, 2.5, -1.0, block / 2);
    } else {
      axpb.compile(target, tjit::LaunchOptions{}, x, out, n, 2.5, -1.0, block / 2);
    }
  }, {"axpb_kernel", "TJIT_JIT=0", "\"BLOCK\":" + std::to_string(block / 2), "python -m tjit aot build"});
  expect_error("missing architecture", [&] {
    axpb.compile(tjit::CompileTarget::parse("cuda:89"), tjit::LaunchOptions{}, x, out, n, 2.5, -1.0, block);
  }, {"axpb_kernel", "only, not for cuda:89", "--target cuda:89"});
  if (x.is_cuda()) {
    out.fill_(std::numeric_limits<float>::quiet_NaN());
    axpb(stream, grid, tjit::LaunchOptions{}, x, out, n, 2.5, -1.0, block);
    expect_close("own kernel after errors", out, x * 2.5 - 1.0);
  }
  expect("nothing compiled", axpb.num_compiled() == 0);
  expect("kernels from the bundle", axpb.num_loaded_from_bundles() >= 1);
  auto& even = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "even_axpb_kernel");
  auto& tuned = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "tuned_axpb_kernel");
  expect("decorated: nothing compiled", even.num_compiled() == 0 && tuned.num_compiled() == 0);
  if (x.is_cuda()) {
    // The choice recorded on the build's GPU, shipped in the bundle: nothing timed here.
    expect("autotune: nothing timed", tuned.num_tunings() == 0 && tuned.num_tuning_runs() == 0 &&
                                          tuned.num_tunings_loaded() == 1);
    expect("decorated from the bundle", even.num_loaded_from_bundles() >= 1 && tuned.num_loaded_from_bundles() >= 1);
    // A tuning key the recording never saw (n = 1016: the same specialisation as 1000, both 8 mod
    // 16) is tuned here at its first call, with JIT off: every config's binary is in the bundle.
    const int64_t m = 1016;
    const at::Tensor x2 = at::randn({m}, x.options());
    at::Tensor out2 = at::full({m}, std::numeric_limits<float>::quiet_NaN(), x.options());
    tuned.run(tjit::current_stream(x.device()), [&](const tjit::KernelMeta& meta) {
      return tjit::Grid(static_cast<uint32_t>((m + meta["BLOCK"] - 1) / meta["BLOCK"]));
    }, x2, out2, m, 2.5, -1.0);
    expect_close("autotune: a new key", out2, x2 * 2.5 - 1.0);
    expect("new key timed here", tuned.num_tunings() == 1 && tuned.num_tuning_runs() > 0 && tuned.num_compiled() == 0);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  // The file for the TMA matmul and the attention forward (see the top), or none: they are skipped.
  const std::string tma_io = argc > 1 ? argv[1] : "";
  try {
    const at::Device device = at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    std::printf("device: %s\n", device.str().c_str());
    TORCH_CHECK(tma_io.empty() || device.is_cuda(), "consumer: given ", tma_io, " for the TMA matmul and the ",
                "attention forward, which need a CUDA GPU of sm_90+, but there is none");
#ifdef CONSUMER_DEPLOYED
    for (const tjit::KernelBundleInfo& b : tjit::loaded_bundles()) {
      std::string targets;
      for (const std::string& t : b.targets) {
        targets += " " + t;
      }
      std::printf("bundle %s%s: %zu kernels, %zu entries, targets%s, built by Triton %s\n", b.name.c_str(),
                  b.embedded ? " (embedded)" : "", b.num_kernels, b.num_entries, targets.c_str(),
                  b.triton_version.c_str());
    }
    expect("bundle embedded", !tjit::loaded_bundles().empty() && tjit::loaded_bundles().front().embedded);
    expect("JIT off (TJIT_JIT=0)", !tjit::jit_enabled());
#endif
    const auto options = at::TensorOptions().device(device).dtype(at::kFloat);

    // The program's own kernel, with a grid and launch options of its choosing.
    const int64_t n = 1000;
    const at::Tensor x = at::randn({n}, options);
    at::Tensor out = at::full({n}, std::numeric_limits<float>::quiet_NaN(), options);
    auto& axpb = tjit::TritonJitFunction::get_instance(CONSUMER_KERNEL_FILE, "axpb_kernel");
    constexpr int64_t kBlock = 256;
    // The current stream of the device, without CUDA headers (nullptr on the CPU).
    const tjit::Stream stream = tjit::current_stream(device);
#ifdef CONSUMER_DEPLOYED
    if (!x.is_cuda()) {
      // CPU tensors run through Triton's interpreter, which a deployed program does not have.
      check_deployment(x, out, n, kBlock);
      const std::string mapped = python_or_triton_mapped();
      expect("no Python, no Triton", mapped.empty());
      std::printf("%s", mapped.c_str());
      std::printf(failures == 0 ? "consumer passed (no GPU: bundle checks only)\n" : "consumer FAILED\n");
      return failures == 0 ? 0 : 1;
    }
#endif
    axpb(stream, tjit::Grid(static_cast<uint32_t>((n + kBlock - 1) / kBlock)), tjit::LaunchOptions{}, x, out, n,
         2.5, -1.0, kBlock);
    expect_close("own kernel (axpb)", out, x * 2.5 - 1.0);
    run_decorated_kernels(x, out, n, kBlock, stream);

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

    if (!tma_io.empty()) {
      run_tma_kernels(tma_io, device);
    } else {
      std::printf("TMA matmul, attention:   skipped (no file argument; deploy.sh passes one on a GPU of sm_90+)\n");
    }
#ifdef CONSUMER_DEPLOYED
    check_deployment(x, out, n, kBlock);
    const std::string mapped = python_or_triton_mapped();
    expect("no Python, no Triton", mapped.empty());
    std::printf("%s", mapped.c_str());
#endif
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
