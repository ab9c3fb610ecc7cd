#pragma once
// tjit::TritonJitFunction: load a @triton.jit kernel by file and name, then call it from C++
// like Python calls `kernel[grid](*args, num_warps=...)`.
//
//   auto& add = tjit::TritonJitFunction::get_instance("/path/add.py", "add_kernel");
//   add(stream, tjit::Grid(blocks), tjit::LaunchOptions{}, x, y, out, n, 1024 /*BLOCK*/);
//
// Arguments are classified exactly as Python Triton 3.6 classifies them (pointer dtype and
// 16-byte alignment, i32/i64/u64 by value, `== 1` and divisible-by-16 integers,
// do_not_specialize, constexprs). The first call of each specialisation looks the binary up in
// the kernel bundles the process has (tjit/kernel_bundle.h), then in tjit's kernel store
// (tjit/kernel_store.h), and otherwise compiles it through an embedded Python interpreter calling
// triton.compile (then stores it); later calls only build a key on the stack, look it up in
// memory and launch with the CUDA driver API. With bundles or a warm store a process never starts
// Python. CPU tensors run the kernel through Triton's interpreter instead.

#include <tjit/argument_pack.h>
#include <tjit/autotune.h>
#include <tjit/compiled_kernel.h>
#include <tjit/detail/run_arguments.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tjit {

class TritonJitFunction {
 public:
  // The one instance for (kernel_file, function_name); thread-safe. Learns the kernel's
  // signature on first use, from the kernel store when it has one for the file's current
  // sources, else from Python. Throws c10::Error naming the file and function when the file or
  // function does not exist or is not a @triton.jit kernel.
  static TritonJitFunction& get_instance(std::string_view kernel_file,
                                         std::string_view function_name);

  // Launches on `stream` with `grid` programs. One argument per kernel parameter, in order,
  // constexpr parameters included; trailing parameters with Python defaults (`BLOCK: tl.constexpr
  // = 1024`, `eps=1e-5`) may be left out (up to detail::kMaxDefaultedArgs) and take the defaults.
  // Arguments: at::Tensor, tjit::DevicePointer, integers, float/double, bool, std::optional and
  // std::nullopt (None), and for tl.constexpr parameters also strings (a literal, std::string,
  // std::string_view) and dtypes (tjit::Dtype, c10::ScalarType). The device is the tensors' device
  // (all tensor arguments must share it); with no tensor argument, the current CUDA context's
  // device. CPU tensors run through Triton's interpreter (stream and launch options other than
  // num_warps unused).
  template <typename... Args>
  void operator()(Stream stream, Grid grid, const LaunchOptions& options,
                  const Args&... args) const {
    detail::ArgumentPack<detail::kPackSlots<Args...>> pack(params_, function_name_.c_str());
    (detail::add_argument(pack, args), ...);
    launch(stream, grid, options, pack);
  }

  // How many programs of the binary that this launch (options and arguments as for operator())
  // runs one SM holds at once: the driver's occupancy for its warps, registers and shared memory.
  // A persistent kernel's grid is this times tjit::multiprocessor_count, so that all its programs
  // are resident from the start and share the work evenly (more programs leave a second wave;
  // fewer may be placed unevenly). Compiles or loads the binary as the launch would, which then
  // finds it loaded. CPU tensors (the interpreter) give 1.
  template <typename... Args>
  int resident_programs_per_sm(const LaunchOptions& options, const Args&... args) const {
    detail::ArgumentPack<detail::kPackSlots<Args...>> pack(params_, function_name_.c_str());
    (detail::add_argument(pack, args), ...);
    return resident_programs_per_sm_packed(options, pack);
  }

  // Calls the kernel as Python calls `kernel[grid](*args)`, for kernels under @triton.autotune
  // and @triton.heuristics (tjit/autotune.h) as for plain ones. `args` are the parameters that no
  // config and no heuristic sets, in order; `grid` is a Grid or a callable taking
  // `const KernelMeta&` and returning one. Launch options come from the chosen config (a plain
  // kernel gets Triton's defaults).
  //
  // The first call with a new tuning key (the values of the autotuner's `key` arguments and the
  // dtypes of the tensor arguments, on one device) looks the choice up in the kernel store;
  // without one it times every config prune_configs_by keeps on these arguments, on `stream`, as
  // triton.testing.do_bench does (CUDA events; CPU tensors: wall time through the interpreter),
  // zeroing reset_to_zero and restoring restore_value arguments between runs, then stores the
  // winner and logs one line. A config that fails to compile or to launch is skipped with a note.
  // The call's own result comes from one clean run of the winner. Threads racing on a new key
  // tune it once. A new key on a stream that is being captured into a CUDA graph is not timed:
  // that launch uses the first config the pruning keeps and the key stays untuned until a call
  // outside capture (tune() before the capture makes the graph use the tuned one). Tuning while
  // another thread captures (thread-local or relaxed mode) is safe: it touches only its own stream. Heuristics run in Python once per distinct set of
  // scalar argument values and tensor dtypes (then remembered), and see only tensors' dtypes.
  template <typename GridFn, typename... Args>
  void run(Stream stream, const GridFn& grid, const Args&... args) const {
    const std::array<detail::CapturedArg, sizeof...(Args)> captured{detail::capture_argument(args)...};
    run_captured(stream, detail::GridSource(grid), captured.data(), captured.size(), RunMode::Launch);
  }

  // Tunes the key these arguments have, as run() would, without the final launch, and returns the
  // chosen config (the only config of a kernel that has one). For warming up before a CUDA graph
  // capture; the timing runs write the output arguments.
  template <typename GridFn, typename... Args>
  KernelConfig tune(Stream stream, const GridFn& grid, const Args&... args) const {
    const std::array<detail::CapturedArg, sizeof...(Args)> captured{detail::capture_argument(args)...};
    return configs()[run_captured(stream, detail::GridSource(grid), captured.data(), captured.size(),
                                  RunMode::Tune)];
  }

  // The config run() would use for these arguments if choosing it needs no timing: the choice made
  // earlier in this process for their tuning key, or one the kernel store has (then remembered);
  // nullopt when the key still needs tuning. A kernel without @triton.autotune has its one config.
  // Never launches. For a caller with its own fallback where run() cannot tune, such as a stream
  // being captured into a CUDA graph (tjit::stream_is_capturing).
  template <typename... Args>
  std::optional<KernelConfig> chosen_config(const Args&... args) const {
    const std::array<detail::CapturedArg, sizeof...(Args)> captured{detail::capture_argument(args)...};
    const int config = run_captured(nullptr, detail::GridSource(Grid(1)), captured.data(), captured.size(),
                                    RunMode::Lookup);
    return config < 0 ? std::nullopt : std::optional<KernelConfig>(configs()[config]);
  }

  // Config pre_hooks (triton.Config(..., pre_hook=f)). Python Triton calls a config's pre_hook
  // before each timed run and each launch with that config, on {**named arguments, **config
  // kwargs}. run(), tune() and compile_run() honour hooks whose whole effect is setting host
  // tensor descriptors' block_shape or padding (Triton's TMA tutorials set each descriptor's block
  // shape from the config): the hook runs once in Python per (config, the caller's constexpr
  // values, which arguments are descriptors) on a mirror of the arguments, and what it set is
  // recorded (kernel store, TJIT_RECORD manifests, bundles) and applied in C++ to the descriptors
  // of each timed run and launch; a deployed program needs no Python for it. A hook that does
  // anything else (reads a tensor or a runtime scalar, sets another field) is refused by run(),
  // as is a recorded one with no record and no Python (TJIT_JIT=0), with an error naming the
  // kernel, the hook and the remedies: supply the hook in C++ here instead. The C++ hook replaces
  // every config's Python hook: it is called before each timed run, each launch (and compile_run())
  // with any config, and the descriptor fields it sets apply to that run. Set it before calls that
  // may use it; not safe against concurrent calls of this function.
  void set_config_pre_hook(ConfigPreHook hook);
  // @triton.autotune's own pre_hook and post_hook, which Python Triton runs only around timed runs
  // (a pre_hook there replaces the reset_to_zero / restore_value handling). tjit does not run the
  // Python ones: tuning a new key of a kernel that has them fails, naming them, unless C++ ones are
  // set here (either may be empty). As in Python, a pre hook set here replaces the reset_to_zero /
  // restore_value handling: it is called before each timed run, and once more with timing() false
  // after the last (Python's reset_only call); the post hook after each timed run. Keys chosen
  // earlier (memory, store, bundle) need neither. Same thread-safety as set_config_pre_hook.
  void set_autotune_hooks(AutotunePreHook pre_hook, AutotunePostHook post_hook);

  // Whether the kernel is under @triton.autotune, and its configs (one, Triton's defaults, for a
  // kernel that is not).
  bool autotuned() const;
  const std::vector<KernelConfig>& configs() const;
  // The parameters run() takes from the caller, by name, in order.
  std::vector<std::string> caller_parameters() const;
  // Tuning in this process: keys tuned by timing, the kernel launches that timing made, and
  // choices read from kernel bundles or the kernel store instead.
  size_t num_tunings() const;
  size_t num_tuning_runs() const;
  size_t num_tunings_loaded() const;

  // The binary a call with these arguments runs on a device of `target`, without launching and
  // without a GPU: from the kernel store, else compiled (and stored). Tensors only lend their
  // dtype and alignment here, so CPU tensors do; a compile here warms the store for launches.
  template <typename... Args>
  CompiledKernel compile(const CompileTarget& target, const LaunchOptions& options,
                         const Args&... args) const {
    detail::ArgumentPack<detail::kPackSlots<Args...>> pack(params_, function_name_.c_str());
    (detail::add_argument(pack, args), ...);
    return compile_packed(target, options, pack);
  }

  // The binary run() would launch for these arguments on a device of `target`, found without a
  // GPU and without timing anything: the config chosen for their tuning key on that target (from
  // a kernel bundle or the kernel store; a key with no choice is an error), the heuristics' values
  // (bundle, store, else Python), then compile() with them. For checking a deployment, or warming
  // a store, on a machine without that GPU.
  template <typename... Args>
  CompiledKernel compile_run(const CompileTarget& target, const Args&... args) const {
    const std::array<detail::CapturedArg, sizeof...(Args)> captured{detail::capture_argument(args)...};
    return compile_run_captured(target, captured.data(), captured.size());
  }

  // The specialisation a call with these arguments compiles: types, constexprs and
  // divisibility attributes, as handed to triton.compile.
  template <typename... Args>
  Specialization specialize(const Args&... args) const {
    detail::ArgumentPack<detail::kPackSlots<Args...>> pack(params_, function_name_.c_str());
    (detail::add_argument(pack, args), ...);
    pack.complete();
    return specialization_of(pack);
  }

  // operator() and run() for a front end that learns a call's arguments only at run time (tjit.jit,
  // Python's kernel[grid](...)): the arguments already handed to `pack` (every parameter, in
  // order, as operator() hands them) or captured (the caller's parameters, as run() captures them).
  void launch_packed(Stream stream, Grid grid, const LaunchOptions& options, detail::ArgumentPackBase& pack) const {
    launch(stream, grid, options, pack);
  }
  void run_with(Stream stream, const detail::GridSource& grid, const detail::CapturedArg* args, size_t num_args) const {
    run_captured(stream, grid, args, num_args, RunMode::Launch);
  }

  // A decision its caller made once by measurement (an operator's plan choice), kept in the kernel
  // store beside this kernel's entries: read back while the kernel's sources and Triton are the
  // same. `what` is the text of everything that decided it (the device included); the value is
  // JSON text. Bundles are asked first (their "caller" decisions, from a recorded run's manifest or
  // `aot build --decisions-from STORE`; not with TJIT_BUNDLED_TUNING=0); while recording, each
  // decision read or stored becomes a manifest entry. nullopt when neither has one.
  std::optional<std::string> load_decision(const std::string& what) const;
  void store_decision(const std::string& what, const std::string& json_value) const;

  const std::string& kernel_file() const { return kernel_file_; }
  const std::string& function_name() const { return function_name_; }
  const std::vector<KernelParam>& params() const { return params_; }
  // How many binaries this function compiled through Triton in this process, and how many it
  // read from kernel bundles or the kernel store instead (launches and compile() together).
  size_t num_compiled() const;
  size_t num_loaded_from_store() const;
  size_t num_loaded_from_bundles() const;

  ~TritonJitFunction();
  TritonJitFunction(const TritonJitFunction&) = delete;
  TritonJitFunction& operator=(const TritonJitFunction&) = delete;

 private:
  // The insides live in ops/csrc/runtime/function/; only what the templates above call is declared here.
  struct Impl;
  TritonJitFunction(std::string kernel_file, std::string function_name);

  void launch(Stream stream, Grid grid, const LaunchOptions& options,
              detail::ArgumentPackBase& pack) const;
  int resident_programs_per_sm_packed(const LaunchOptions& options, detail::ArgumentPackBase& pack) const;
  CompiledKernel compile_packed(const CompileTarget& target, const LaunchOptions& options,
                                detail::ArgumentPackBase& pack) const;
  Specialization specialization_of(const detail::ArgumentPackBase& pack) const;
  // Launch: choose the config (tuning a new key) and launch; Tune: choose it without launching;
  // Lookup: only a choice made before or stored (-1 when there is none).
  enum class RunMode { Launch, Tune, Lookup };
  // Returns the index of the config chosen, or -1 (Lookup only).
  int run_captured(Stream stream, const detail::GridSource& grid, const detail::CapturedArg* args, size_t num_args,
                   RunMode mode) const;
  CompiledKernel compile_run_captured(const CompileTarget& target, const detail::CapturedArg* args,
                                      size_t num_args) const;

  std::string kernel_file_;
  std::string function_name_;
  std::vector<KernelParam> params_;
  std::unique_ptr<Impl> impl_;
};

// The target to compile for when no GPU is asked: TJIT_TARGET (e.g. "cuda:90") if set.
std::optional<CompileTarget> target_from_environment();

// Whether tjit may start Python and Triton: to compile a kernel that neither a bundle nor the
// kernel store has, to read a kernel's parameters, or to run CPU tensors through Triton's
// interpreter. On unless TJIT_JIT=0. When off, such a need is a c10::Error that names the kernel,
// the specialisation, the architecture and the manifest entry that would cover it; the process
// can go on. set_jit_enabled replaces the environment's choice for the rest of the process.
bool jit_enabled();
void set_jit_enabled(bool enabled);

// Whether run() uses the autotune choices kernel bundles ship (recorded where the bundle was
// built) instead of timing configs itself. On unless TJIT_BUNDLED_TUNING=0: turn it off on a host
// unlike the build's (another GPU model, clocks or load), so each key is timed there once and the
// choice kept in the kernel store.
bool bundled_tuning_enabled();
void set_bundled_tuning_enabled(bool enabled);

}  // namespace tjit
