#pragma once
// Kernels under @triton.autotune and @triton.heuristics, called from C++ through
// TritonJitFunction::run and ::tune (tjit/triton_jit_function.h):
//
//   @triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4),
//                             triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
//   @triton.jit
//   def scale_kernel(x, out, n, BLOCK: tl.constexpr): ...
//
//   auto& scale = tjit::TritonJitFunction::get_instance("kernels.py", "scale_kernel");
//   scale.run(stream, [&](const tjit::KernelMeta& meta) { return tjit::Grid((n + meta["BLOCK"] - 1) / meta["BLOCK"]); },
//             x, out, n);  // BLOCK and num_warps come from the config tuned for this n
//
// The caller passes the parameters that no config and no heuristic sets, in order; the grid is a
// tjit::Grid or a callable from the chosen meta-parameters to one (Python's grid=lambda META: ...).

#include <tjit/argument_pack.h>
#include <tjit/compiled_kernel.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace tjit {

// One config of an autotuned kernel (triton.Config): the meta-parameters it sets, by parameter
// name, and its launch options (num_warps, num_stages, num_ctas, maxnreg).
struct KernelConfig {
  std::vector<std::pair<std::string, ConstexprValue>> values;
  LaunchOptions options;
  // As Triton prints a config: "BLOCK: 1024, num_warps: 8, num_ctas: 1, num_stages: 3, maxnreg: None".
  std::string describe() const;
};

// What a grid callable sees: the call's parameters by name, as Python's META dict has them: the
// values the chosen config and the heuristics set, and the caller's scalar arguments.
class KernelMeta {
 public:
  // The integer (or bool) value of parameter `name`. Throws c10::Error naming the kernel and the
  // parameter when it is not a parameter with such a value (a tensor, a float, a typo).
  int64_t operator[](std::string_view name) const;
  // Its value as a double (integers and floats).
  double value_as_double(std::string_view name) const;
  // Its value whatever its kind (None, bool, integer, float, string, tjit::Dtype), as META[name].
  const ConstexprValue& value(std::string_view name) const { return find(name); }
  // The chosen config's launch options.
  const LaunchOptions& options() const { return *options_; }

  // Built by the runtime for each launch: one slot per kernel parameter; `has_value[i]` false for
  // a parameter with no scalar value (a tensor, a pointer).
  KernelMeta(const std::vector<KernelParam>& params, const ConstexprValue* values, const bool* has_value,
             const LaunchOptions& options, const char* kernel_name) noexcept
      : params_(params), values_(values), has_value_(has_value), options_(&options), kernel_name_(kernel_name) {}

 private:
  const ConstexprValue& find(std::string_view name) const;

  const std::vector<KernelParam>& params_;
  const ConstexprValue* values_;
  const bool* has_value_;
  const LaunchOptions* options_;
  const char* kernel_name_;
};

namespace detail {

// Walks the elements of a tuple argument of run(): each one reaches the member for its kind,
// nested tuples between begin_tuple and end_tuple, as add_argument hands them to an ArgumentPack.
class ArgumentVisitor {
 public:
  virtual void add_tensor(const at::Tensor& t) = 0;
  virtual void add_pointer(const DevicePointer& p) = 0;
  virtual void add_signed(int64_t v) = 0;
  virtual void add_unsigned(uint64_t v) = 0;
  virtual void add_float(double v) = 0;
  virtual void add_bool(bool v) = 0;
  virtual void add_none() = 0;
  virtual void add_string(std::string_view text) = 0;
  virtual void add_dtype(Dtype dtype) = 0;
  virtual void add_tensor_descriptor(const TensorDescriptor& descriptor) = 0;
  virtual void begin_tuple(size_t size) = 0;
  virtual void end_tuple() = 0;

 protected:
  ~ArgumentVisitor() = default;
};

// One argument of a run() call, kept until the runtime has placed the config's values among them.
// Tensors, descriptors and tuples are held by address: they outlive the call. It takes its value
// through add_argument, so run() accepts exactly the argument types operator() accepts.
struct CapturedArg {
  enum class Kind : uint8_t { Tensor, Pointer, Signed, Unsigned, Float, Bool, None, String, Dtype, TensorDescriptor, Tuple };
  Kind kind = Kind::None;
  const at::Tensor* tensor = nullptr;
  const TensorDescriptor* descriptor = nullptr;
  // A tuple: the caller's std::tuple / std::pair, and the function that walks it.
  const void* tuple = nullptr;
  void (*visit_tuple)(const void* tuple, ArgumentVisitor& visitor) = nullptr;
  DevicePointer pointer;
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;  // also a String's id (intern_constexpr_string) and a Dtype's index
  double float_value = 0;
  bool bool_value = false;

  void add_tensor(const at::Tensor& t);  // an undefined tensor is None, as operator() takes it
  void add_pointer(const DevicePointer& p) { kind = Kind::Pointer, pointer = p; }
  void add_signed(int64_t v) { kind = Kind::Signed, signed_value = v; }
  void add_unsigned(uint64_t v) { kind = Kind::Unsigned, unsigned_value = v; }
  void add_float(double v) { kind = Kind::Float, float_value = v; }
  void add_bool(bool v) { kind = Kind::Bool, bool_value = v; }
  void add_none() { kind = Kind::None; }
  void add_string(std::string_view text) { kind = Kind::String, unsigned_value = intern_constexpr_string(text); }
  void add_dtype(Dtype dtype) { kind = Kind::Dtype, unsigned_value = dtype.index(); }
  void add_tensor_descriptor(const TensorDescriptor& d) { kind = Kind::TensorDescriptor, descriptor = &d; }
  // Tuples are captured whole by capture_argument; one reaching here sits in a std::optional.
  [[noreturn]] void begin_tuple(size_t size);
  void end_tuple() {}
};

template <typename T>
CapturedArg capture_argument(const T& value) {
  CapturedArg a;
  if constexpr (is_std_tuple<std::decay_t<T>>::value) {
    a.kind = CapturedArg::Kind::Tuple;
    a.tuple = &value;
    a.visit_tuple = [](const void* tuple, ArgumentVisitor& visitor) {
      add_argument(visitor, *static_cast<const T*>(tuple));
    };
  } else {
    add_argument(a, value);
  }
  return a;
}

// A fixed grid or a callable from KernelMeta to Grid, referenced without copying or allocating.
class GridSource {
 public:
  GridSource(const Grid& grid) : fixed_(grid) {}  // NOLINT: a Grid is a grid source
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Grid> &&
                                                    std::is_invocable_r_v<Grid, const F&, const KernelMeta&>>>
  GridSource(const F& callable)  // NOLINT
      : callable_(&callable), call_([](const void* f, const KernelMeta& meta) {
          return (*static_cast<const F*>(f))(meta);
        }) {}
  Grid operator()(const KernelMeta& meta) const { return call_ != nullptr ? call_(callable_, meta) : fixed_; }

 private:
  Grid fixed_;
  const void* callable_ = nullptr;
  Grid (*call_)(const void*, const KernelMeta&) = nullptr;
};

}  // namespace detail
}  // namespace tjit
