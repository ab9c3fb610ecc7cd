#pragma once
// The runtime's only door to Python. The implementation lives in libtjit_python, a separate
// library loaded on first need: processes that never compile (warm caches, pure launches)
// never load Python, and a pure C++ process gets libpython loaded for it at that point.

#include <tjit/compiled_kernel.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace at {
class Tensor;
}
namespace tjit {
class TensorDescriptor;
}

namespace tjit::detail {

struct KernelDefinition {
  int64_t handle = -1;  // the kernel's index on the Python side
  std::vector<KernelParam> params;
  // (path, git blob id) of the kernel file as executed and of the files it imports.
  std::vector<std::pair<std::string, std::string>> sources;
  std::string triton_version;
  std::string tuning;  // KernelSignature::tuning
};

// One argument of an interpreted (CPU) launch, or of a call to a kernel's autotune pruning or
// heuristics, as a Python value (tensors of any device travel by DLPack).
// A tuple argument: its `size` elements follow it in the list (nested tuples the same way).
struct InterpretedTuple {
  size_t size = 0;
};
using InterpretedArg = std::variant<std::monostate, bool, int64_t, uint64_t, double, const at::Tensor*, std::string,
                                    Dtype, InterpretedTuple, const TensorDescriptor*>;

class PythonBridge {
 public:
  virtual ~PythonBridge() = default;
  // Imports `file` and returns the signature of its @triton.jit function `name`.
  virtual KernelDefinition load_kernel(const std::string& file, const std::string& name) = 0;
  // triton.compile for the given specialisation, target and options.
  virtual CompiledKernel compile(int64_t handle, const Specialization& spec,
                                 const CompileTarget& target, const LaunchOptions& options) = 0;
  // Runs the kernel on CPU tensors through Triton's interpreter.
  virtual void run_interpreted(int64_t handle, Grid grid, const LaunchOptions& options,
                               const std::vector<InterpretedArg>& args) = 0;
  // The configs @triton.autotune's prune_configs_by keeps for a call with `args` (the caller's
  // arguments), as indices into the kernel's configs, best-ranked first.
  virtual std::vector<int> prune_configs(int64_t handle, const std::vector<InterpretedArg>& args) = 0;
  // The values @triton.heuristics set for a call with `args` under config `config` (-1: none), by
  // parameter index.
  virtual std::vector<std::pair<int, ConstexprValue>> heuristic_values(int64_t handle,
                                                                       const std::vector<InterpretedArg>& args,
                                                                       int config) = 0;
  // What config `config`'s pre_hook sets on host descriptors for a call described by
  // `arguments_json` (triton_adapter.descriptor_hook: its argument and its JSON result).
  virtual std::string descriptor_hook(int64_t handle, int config, const std::string& arguments_json) = 0;
};

// The process-wide bridge; loads libtjit_python (and libpython when the process has no Python)
// on first use. Throws c10::Error saying what is missing.
PythonBridge& python_bridge();

}  // namespace tjit::detail

// The factory libtjit_python exports; looked up by name with dlsym. `python_executable` names the
// interpreter to start when the process has none (see python_location.h).
extern "C" tjit::detail::PythonBridge* tjit_python_bridge_instance(const char* python_executable);
