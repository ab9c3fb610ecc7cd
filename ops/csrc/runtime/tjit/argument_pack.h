#pragma once
// Classifies the C++ arguments of one kernel call the way Python Triton classifies Python
// arguments, into (1) a compact cache key and (2) the launch parameter array. Everything
// lives in fixed-size arrays on the caller's stack: no heap allocation, no strings.

#include <tjit/dtype.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>

#include <c10/core/Device.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace at {
class Tensor;
}
namespace tjit {
class TensorDescriptor;  // tjit/tensor_descriptor.h, which a caller passing one includes
}

namespace tjit::detail {

// The kind of one argument after specialisation, stored in the low byte of its key word.
enum class ArgKind : uint8_t {
  Pointer = 1,         // tensor or DevicePointer: `*<dtype>`
  Int = 2,             // i32 / i64 / u64 (or the annotated integer type)
  Bool = 3,            // u1
  Float = 4,           // fp32 (or the annotated float type)
  None = 5,            // None: a constexpr, not passed to the launch
  SpecializedOne = 6,  // an integer equal to 1: Triton turns it into constexpr 1
  ConstexprInt = 7,    // value of a tl.constexpr parameter
  ConstexprFloat = 8,
  ConstexprBool = 9,
  ConstexprString = 10,  // value: the string's id (intern_constexpr_string)
  ConstexprDtype = 11,   // value: Dtype::index()
  Tuple = 12,            // sub: the element count; the elements' slots follow
  TensorDescriptor = 13,  // sub: element dtype; bits 24-31: rank; word 1: log2 of each block dim
};

// A constexpr string's id: equal ids for equal texts, for the life of the process. Looking up a
// text seen before takes a shared lock and allocates nothing; a new one is copied once.
uint64_t intern_constexpr_string(std::string_view text);
// The text of an id intern_constexpr_string returned.
const std::string& interned_constexpr_string(uint64_t id);

// Integer type chosen from the value, as Python Triton does.
enum class IntType : uint8_t { I32 = 0, I64 = 1, U64 = 2 };

// Words of the key that precede the per-argument words: device, launch options.
inline constexpr size_t kKeyHeaderWords = 2;
// Each argument takes two key words: kind/type/divisibility, then a constexpr value. A tuple
// argument takes a slot of its own (kind Tuple, its size), then one per element, depth first.
inline constexpr size_t kKeyWordsPerArg = 2;
// Trailing parameters with defaults a call may leave out (the pack holds them on the stack too).
inline constexpr size_t kMaxDefaultedArgs = 8;
// Host tensor descriptors one call may pass.
inline constexpr size_t kMaxTensorDescriptors = 8;

// A host tensor descriptor in a pack: the launch expands it where the kernel's other launch
// arguments reach `launch_index`, once the compiled kernel says how (descriptor_launch.h).
struct PackedDescriptor {
  const TensorDescriptor* descriptor = nullptr;
  size_t launch_index = 0;
};

class ArgumentPackBase {
 public:
  ArgumentPackBase(const std::vector<KernelParam>& params, const char* kernel_name, uint64_t* key,
                   uint64_t* values, void** launch_params, const at::Tensor** tensors,
                   size_t capacity) noexcept
      : params_(params), kernel_name_(kernel_name), key_(key), values_(values),
        launch_params_(launch_params), tensors_(tensors), capacity_(capacity) {}
  ArgumentPackBase(const ArgumentPackBase&) = delete;
  ArgumentPackBase& operator=(const ArgumentPackBase&) = delete;

  // One per C++ argument type family; defined out of line (argument_pack.cpp).
  void add_tensor(const at::Tensor& t);
  void add_pointer(const DevicePointer& p);
  void add_signed(int64_t v);
  void add_unsigned(uint64_t v);
  void add_float(double v);
  void add_bool(bool v);
  void add_none();
  void add_string(std::string_view text);  // tl.constexpr parameters only
  void add_dtype(Dtype dtype);             // tl.constexpr parameters only
  void add_tensor_descriptor(const TensorDescriptor& descriptor);
  // A tuple argument (Triton 3.3+): begin_tuple(size), an add_* (or a nested tuple) per element,
  // end_tuple(). Its elements are specialised as Python Triton specialises a tuple's elements.
  void begin_tuple(size_t size);
  void end_tuple();
  // Gives the parameters after the last argument their defaults; throws unless every parameter
  // then has an argument.
  void complete();

  // Parameters given; slots filled (one per argument, tuple and tuple element).
  size_t num_args() const { return param_; }
  size_t num_slots() const { return count_; }
  size_t num_launch_args() const { return num_launch_args_; }
  const uint64_t* key() const { return key_; }
  uint64_t* mutable_key() { return key_; }
  size_t key_size() const { return kKeyHeaderWords + kKeyWordsPerArg * count_; }
  void** launch_params() const { return launch_params_; }
  const at::Tensor* tensor(size_t slot) const { return tensors_[slot]; }
  const std::vector<KernelParam>& params() const { return params_; }
  const char* kernel_name() const { return kernel_name_; }
  // Device of the tensor arguments; kCPU with has_device() false when there were none.
  bool has_device() const { return has_device_; }
  c10::Device device() const { return device_; }
  // The launch value of a slot (only for arguments passed to the launch).
  const uint64_t* value(size_t slot) const { return &values_[slot]; }
  // The host tensor descriptors, in order, and the descriptor of a TensorDescriptor slot.
  size_t num_descriptors() const { return num_descriptors_; }
  const PackedDescriptor& descriptor(size_t i) const { return descriptors_[i]; }
  const TensorDescriptor* descriptor_at(size_t slot) const {
    return reinterpret_cast<const TensorDescriptor*>(static_cast<uintptr_t>(values_[slot]));
  }

 private:
  // Each add_* calls begin_arg, then finish_arg with the argument's key words (and, for a
  // value the launch receives, pass_to_launch in between).
  const KernelParam& begin_arg();
  void pass_to_launch(const void* bytes, size_t size);
  void finish_arg(uint64_t word0, uint64_t word1 = 0);
  void add_integer(int64_t v, bool is_unsigned_large, uint64_t raw);
  void note_device(c10::Device d);

  const std::vector<KernelParam>& params_;
  const char* kernel_name_;
  uint64_t* key_;
  uint64_t* values_;
  void** launch_params_;
  const at::Tensor** tensors_;
  size_t capacity_;
  size_t count_ = 0;   // slots filled
  size_t param_ = 0;   // parameters given (a tuple counts once, at its end)
  size_t depth_ = 0;   // tuples open
  size_t num_launch_args_ = 0;
  size_t num_descriptors_ = 0;
  std::array<PackedDescriptor, kMaxTensorDescriptors> descriptors_;
  bool has_device_ = false;
  c10::Device device_{c10::kCPU};
};

template <typename T>
struct is_std_optional : std::false_type {};
template <typename T>
struct is_std_optional<std::optional<T>> : std::true_type {};
template <typename T>
struct is_std_tuple : std::false_type {};
template <typename... Ts>
struct is_std_tuple<std::tuple<Ts...>> : std::true_type {};
template <typename A, typename B>
struct is_std_tuple<std::pair<A, B>> : std::true_type {};

// Key slots a C++ argument takes: one, and one per element of a tuple (nested ones too).
template <typename T>
struct slots_of : std::integral_constant<size_t, 1> {};
template <typename T>
struct slots_of<std::optional<T>> : slots_of<std::decay_t<T>> {};
template <typename... Ts>
struct slots_of<std::tuple<Ts...>> : std::integral_constant<size_t, (size_t{1} + ... + slots_of<std::decay_t<Ts>>::value)> {};
template <typename A, typename B>
struct slots_of<std::pair<A, B>>
    : std::integral_constant<size_t, 1 + slots_of<std::decay_t<A>>::value + slots_of<std::decay_t<B>>::value> {};

// Slots a call's arguments take, and room for the defaults of the parameters they leave out.
template <typename... Args>
inline constexpr size_t kPackSlots = (size_t{0} + ... + slots_of<std::decay_t<Args>>::value) + kMaxDefaultedArgs;
template <typename>
inline constexpr bool always_false = false;

// Hands one C++ argument to `pack` (an ArgumentPackBase, or anything with the same add_* members)
// by its type: the one place that decides which C++ types a kernel argument may have.
template <typename Sink, typename T>
void add_argument(Sink& pack, const T& value) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, at::Tensor>) {
    pack.add_tensor(value);
  } else if constexpr (std::is_same_v<D, DevicePointer>) {
    pack.add_pointer(value);
  } else if constexpr (std::is_same_v<D, TensorDescriptor>) {
    pack.add_tensor_descriptor(value);
  } else if constexpr (std::is_same_v<D, std::nullopt_t> || std::is_same_v<D, std::nullptr_t>) {
    pack.add_none();
  } else if constexpr (is_std_tuple<D>::value) {
    pack.begin_tuple(std::tuple_size_v<D>);
    std::apply([&pack](const auto&... element) { (add_argument(pack, element), ...); }, value);
    pack.end_tuple();
  } else if constexpr (is_std_optional<D>::value) {
    if (value.has_value()) {
      add_argument(pack, *value);
    } else {
      pack.add_none();
    }
  } else if constexpr (std::is_same_v<D, bool>) {
    pack.add_bool(value);
  } else if constexpr (std::is_same_v<D, std::string> || std::is_same_v<D, std::string_view>) {
    pack.add_string(std::string_view(value));  // a string constexpr
  } else if constexpr (std::is_array_v<T> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>) {
    // A string literal ("leaky_relu"): up to its terminating NUL.
    size_t length = 0;
    while (length < std::extent_v<T> && value[length] != '\0') {
      ++length;
    }
    pack.add_string(std::string_view(value, length));
  } else if constexpr (std::is_same_v<D, Dtype> || std::is_same_v<D, c10::ScalarType>) {
    pack.add_dtype(Dtype(value));  // a dtype constexpr: tl.bfloat16
  } else if constexpr (std::is_integral_v<D>) {
    if constexpr (std::is_unsigned_v<D>) {
      pack.add_unsigned(static_cast<uint64_t>(value));
    } else {
      pack.add_signed(static_cast<int64_t>(value));
    }
  } else if constexpr (std::is_enum_v<D>) {
    add_argument(pack, static_cast<std::underlying_type_t<D>>(value));
  } else if constexpr (std::is_floating_point_v<D>) {
    pack.add_float(static_cast<double>(value));
  } else if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
    static_assert(always_false<D>,
                  "tjit: a char pointer may be device memory; pass a string constexpr as std::string_view "
                  "(or a literal), a pointer as tjit::DevicePointer{ptr, dtype}");
  } else if constexpr (std::is_pointer_v<D>) {
    static_assert(always_false<D>,
                  "tjit: a raw pointer has no element type; pass tjit::DevicePointer{ptr, dtype}");
  } else {
    static_assert(always_false<D>,
                  "tjit: unsupported kernel argument type (use at::Tensor, tjit::DevicePointer, "
                  "tjit::TensorDescriptor, an integer, float/double, bool, a string, tjit::Dtype or c10::ScalarType, std::optional or "
                  "std::nullopt)");
  }
}

// Hands `pack` a value of any kind a default or a config holds, as the C++ argument of that kind.
template <typename Sink>
void add_value(Sink& pack, const ConstexprValue& value) {
  std::visit(
      [&pack](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          pack.add_none();
        } else if constexpr (std::is_same_v<T, bool>) {
          pack.add_bool(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          pack.add_signed(v);
        } else if constexpr (std::is_same_v<T, double>) {
          pack.add_float(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          pack.add_string(v);
        } else {
          pack.add_dtype(v);
        }
      },
      value);
}

// The arrays behind an ArgumentPack. A base of its own so they exist before ArgumentPackBase is
// handed pointers into them; left uninitialised, as every slot is written before it is read.
template <size_t N>
struct ArgumentStorage {
  std::array<uint64_t, kKeyHeaderWords + kKeyWordsPerArg * N> key_words;
  std::array<uint64_t, N + 1> value_slots;
  // Two extra slots: Triton kernels take global and profile scratch pointers last.
  std::array<void*, N + 2> launch_slots;
  std::array<const at::Tensor*, N + 1> tensor_slots;
};

// Fixed-capacity storage for a call with N arguments, on the caller's stack.
template <size_t N>
class ArgumentPack : private ArgumentStorage<N>, public ArgumentPackBase {
 public:
  ArgumentPack(const std::vector<KernelParam>& params, const char* kernel_name) noexcept
      : ArgumentPackBase(params, kernel_name, this->key_words.data(), this->value_slots.data(),
                         this->launch_slots.data(), this->tensor_slots.data(), N) {}
};

}  // namespace tjit::detail
