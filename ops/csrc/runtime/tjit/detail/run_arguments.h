#pragma once
// What TritonJitFunction::run(), tune(), chosen_config() and compile_run() keep of their call
// until the runtime has chosen a config: the caller's arguments (CapturedArg) and the grid
// (GridSource), both on the caller's stack. The public header's templates need them; nothing
// else should.

#include <tjit/argument_pack.h>
#include <tjit/autotune.h>
#include <tjit/dtype.h>
#include <tjit/launch_types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace at {
class Tensor;
}

namespace tjit::detail {

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

}  // namespace tjit::detail
