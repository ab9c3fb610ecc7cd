// Argument classification, mirroring Python Triton 3.6's specialize_impl and the binder that
// JITFunction.create_binder generates (runtime/jit.py). tests/cpp/test_specialization.cpp
// compares both on the same calls.

#include <tjit/argument_pack.h>
#include <tjit/tensor_descriptor.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace tjit::detail {
namespace {

constexpr uint64_t make_word(ArgKind kind, uint64_t sub = 0, bool divisible_by_16 = false) {
  return static_cast<uint64_t>(kind) | (sub << 8) | (static_cast<uint64_t>(divisible_by_16) << 16);
}

// Marks a scalar whose type comes from the parameter's annotation, not from its value.
constexpr uint64_t kAnnotated = 0xff;

template <typename T>
uint64_t bits_of(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t out = 0;
  std::memcpy(&out, &v, sizeof(T));
  return out;
}

bool is_float_annotation(const std::string& a) { return a.rfind("fp", 0) == 0 || a.rfind("bf", 0) == 0; }
bool is_bool_annotation(const std::string& a) { return a == "u1" || a == "i1"; }

// Bytes an annotated integer takes in the launch (Triton's ty_to_cpp).
size_t annotated_int_width(const KernelParam& p) {
  const std::string& a = p.annotation_type;
  if (a == "i8" || a == "u8") return 1;
  if (a == "i16" || a == "u16") return 2;
  if (a == "i32" || a == "u32") return 4;
  if (a == "i64" || a == "u64") return 8;
  TORCH_CHECK(false, "tjit: parameter '", p.name, "' is annotated ", a,
              ", which tjit cannot pass from C++ (supported: i8..i64, u8..u64, fp32, fp64, u1)");
}

// Constexpr strings by id. Texts live in a deque (stable addresses) that the map's views point into.
struct InternedStrings {
  std::shared_mutex mutex;
  std::deque<std::string> texts;
  std::unordered_map<std::string_view, uint64_t> ids;
};

InternedStrings& interned_strings() {
  static InternedStrings strings;
  return strings;
}

}  // namespace

uint64_t intern_constexpr_string(std::string_view text) {
  InternedStrings& strings = interned_strings();
  {
    std::shared_lock<std::shared_mutex> lock(strings.mutex);
    if (const auto it = strings.ids.find(text); it != strings.ids.end()) {
      return it->second;
    }
  }
  std::unique_lock<std::shared_mutex> lock(strings.mutex);
  if (const auto it = strings.ids.find(text); it != strings.ids.end()) {
    return it->second;
  }
  const std::string& stored = strings.texts.emplace_back(text);
  const uint64_t id = strings.texts.size() - 1;
  strings.ids.emplace(std::string_view(stored), id);
  return id;
}

const std::string& interned_constexpr_string(uint64_t id) {
  InternedStrings& strings = interned_strings();
  std::shared_lock<std::shared_mutex> lock(strings.mutex);
  TORCH_CHECK(id < strings.texts.size(), "tjit: no constexpr string has id ", id);
  return strings.texts[id];  // deque elements never move
}

const KernelParam& ArgumentPackBase::begin_arg() {
  TORCH_CHECK(param_ < params_.size(), "tjit: kernel ", kernel_name_, " takes ", params_.size(),
              " arguments, but more were given");
  TORCH_CHECK(count_ < capacity_, "tjit: kernel ", kernel_name_, ": more argument slots than the call has room for");
  tensors_[count_] = nullptr;
  return params_[param_];
}

void ArgumentPackBase::begin_tuple(size_t size) {
  const KernelParam& p = begin_arg();
  TORCH_CHECK(!p.is_constexpr, "tjit: kernel ", kernel_name_, ": parameter '", p.name,
              "' is a tl.constexpr and got a tuple; tjit passes tuples to runtime parameters");
  TORCH_CHECK(p.annotation_type.empty(), "tjit: kernel ", kernel_name_, ": parameter '", p.name, "' is annotated ",
              p.annotation_type, " and cannot take a tuple");
  TORCH_CHECK(size <= 0xff, "tjit: kernel ", kernel_name_, ": parameter '", p.name, "' got a tuple of ", size,
              " elements; at most 255");
  key_[kKeyHeaderWords + kKeyWordsPerArg * count_] = make_word(ArgKind::Tuple, size);
  key_[kKeyHeaderWords + kKeyWordsPerArg * count_ + 1] = 0;
  ++count_;
  ++depth_;
}

void ArgumentPackBase::end_tuple() {
  --depth_;
  if (depth_ == 0) {
    ++param_;
  }
}

void ArgumentPackBase::pass_to_launch(const void* bytes, size_t size) {
  // The argument's own slot; the kernel reads `size` bytes from its start.
  uint64_t* slot = &values_[count_];
  *slot = 0;
  std::memcpy(slot, bytes, size);
  launch_params_[num_launch_args_++] = slot;
}

void ArgumentPackBase::finish_arg(uint64_t w0, uint64_t w1) {
  key_[kKeyHeaderWords + kKeyWordsPerArg * count_] = w0;
  key_[kKeyHeaderWords + kKeyWordsPerArg * count_ + 1] = w1;
  ++count_;
  if (depth_ == 0) {
    ++param_;
  }
}

void ArgumentPackBase::note_device(c10::Device d) {
  if (!has_device_) {
    has_device_ = true;
    device_ = d;
    return;
  }
  TORCH_CHECK(d == device_, "tjit: kernel ", kernel_name_, ": argument '", params_[param_].name,
              "' is on ", d, " but an earlier tensor argument is on ", device_,
              "; all tensors of one launch must be on the same device");
}

void ArgumentPackBase::add_tensor(const at::Tensor& t) {
  if (!t.defined()) {
    add_none();  // an undefined tensor is an absent optional: None, as in Python
    return;
  }
  const KernelParam& p = begin_arg();
  TORCH_CHECK(!p.is_constexpr, "tjit: kernel ", kernel_name_, ": parameter '", p.name,
              "' is a tl.constexpr and cannot take a tensor");
  note_device(t.device());
  const void* ptr = t.const_data_ptr();
  const bool divisible = !p.do_not_specialize && !p.do_not_specialize_on_alignment &&
                         reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  tensors_[count_] = &t;
  pass_to_launch(&ptr, sizeof(ptr));
  finish_arg(make_word(ArgKind::Pointer, static_cast<uint64_t>(t.scalar_type()), divisible));
}

void ArgumentPackBase::add_tensor_descriptor(const TensorDescriptor& d) {
  const KernelParam& p = begin_arg();
  TORCH_CHECK(!p.is_constexpr, "tjit: kernel ", kernel_name_, ": parameter '", p.name,
              "' is a tl.constexpr and cannot take a tensor descriptor");
  TORCH_CHECK(p.annotation_type.empty(), "tjit: kernel ", kernel_name_, ": parameter '", p.name, "' is annotated ",
              p.annotation_type, " and cannot take a tensor descriptor");
  TORCH_CHECK(depth_ == 0, "tjit: kernel ", kernel_name_, ": parameter '", p.name,
              "' got a tensor descriptor inside a tuple; tjit passes descriptors as parameters of their own");
  TORCH_CHECK(num_descriptors_ < kMaxTensorDescriptors, "tjit: kernel ", kernel_name_, ": more than ",
              kMaxTensorDescriptors, " tensor descriptors in one call");
  note_device(d.base().device());
  tensors_[count_] = &d.base();
  values_[count_] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&d));
  descriptors_[num_descriptors_++] = PackedDescriptor{&d, num_launch_args_};
  // Block dims are powers of two (the constructor checks): five bits of log2 each.
  uint64_t block = 0;
  for (int i = 0; i < d.rank(); ++i) {
    uint64_t log2 = 0;
    while ((int64_t{1} << log2) < d.block_shape()[i]) {
      ++log2;
    }
    block |= log2 << (5 * i);
  }
  finish_arg(make_word(ArgKind::TensorDescriptor, static_cast<uint64_t>(d.base().scalar_type())) |
                 static_cast<uint64_t>(d.rank()) << 24,
             block);
}

void ArgumentPackBase::add_pointer(const DevicePointer& dp) {
  const KernelParam& p = begin_arg();
  TORCH_CHECK(!p.is_constexpr, "tjit: kernel ", kernel_name_, ": parameter '", p.name,
              "' is a tl.constexpr and cannot take a pointer");
  const bool divisible = !p.do_not_specialize && !p.do_not_specialize_on_alignment &&
                         reinterpret_cast<uintptr_t>(dp.ptr) % 16 == 0;
  pass_to_launch(&dp.ptr, sizeof(dp.ptr));
  finish_arg(make_word(ArgKind::Pointer, static_cast<uint64_t>(dp.dtype), divisible));
}

void ArgumentPackBase::add_integer(int64_t v, bool is_unsigned_large, uint64_t raw) {
  const KernelParam& p = begin_arg();
  if (p.is_constexpr) {
    TORCH_CHECK(!is_unsigned_large, "tjit: kernel ", kernel_name_, ": constexpr '", p.name,
                "' does not fit in int64");
    finish_arg(make_word(ArgKind::ConstexprInt), bits_of(v));
    return;
  }
  const bool specialize = !p.do_not_specialize;
  const bool align = !p.do_not_specialize_on_alignment;
  // Python: divisible when value % 16 == 0, so 0 and negative multiples too.
  const bool divisible = specialize && align && (is_unsigned_large ? raw % 16 == 0 : v % 16 == 0);
  const std::string& a = p.annotation_type;

  if (!a.empty()) {
    // The annotation fixes the type; only tt.divisibility is specialised, and a value of 1
    // stays a runtime argument (Python: `("i64",) + specialize_impl(...)[1:]`).
    if (is_float_annotation(a)) {
      TORCH_CHECK(a == "fp32" || a == "fp64", "tjit: parameter '", p.name, "' is annotated ", a,
                  ", which tjit cannot pass from C++");
      const double d = is_unsigned_large ? static_cast<double>(raw) : static_cast<double>(v);
      const float f = static_cast<float>(d);
      a == "fp64" ? pass_to_launch(&d, sizeof(d)) : pass_to_launch(&f, sizeof(f));
      finish_arg(make_word(ArgKind::Float, kAnnotated));
    } else if (is_bool_annotation(a)) {
      const uint8_t b = (is_unsigned_large ? raw : static_cast<uint64_t>(v)) != 0;
      pass_to_launch(&b, sizeof(b));
      finish_arg(make_word(ArgKind::Bool, kAnnotated));
    } else {
      pass_to_launch(is_unsigned_large ? static_cast<const void*>(&raw) : static_cast<const void*>(&v),
                     annotated_int_width(p));
      finish_arg(make_word(ArgKind::Int, kAnnotated, divisible));
    }
    return;
  }

  if (specialize && !is_unsigned_large && v == 1) {
    finish_arg(make_word(ArgKind::SpecializedOne));  // Triton compiles `== 1` in as constexpr 1
  } else if (is_unsigned_large) {
    pass_to_launch(&raw, sizeof(raw));
    finish_arg(make_word(ArgKind::Int, static_cast<uint64_t>(IntType::U64), divisible));
  } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
    const int32_t narrow = static_cast<int32_t>(v);
    pass_to_launch(&narrow, sizeof(narrow));
    finish_arg(make_word(ArgKind::Int, static_cast<uint64_t>(IntType::I32), divisible));
  } else {
    pass_to_launch(&v, sizeof(v));
    finish_arg(make_word(ArgKind::Int, static_cast<uint64_t>(IntType::I64), divisible));
  }
}

void ArgumentPackBase::add_signed(int64_t v) { add_integer(v, false, static_cast<uint64_t>(v)); }

void ArgumentPackBase::add_unsigned(uint64_t v) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    add_integer(static_cast<int64_t>(v), false, v);
  } else {
    add_integer(0, true, v);  // Python: 2**63 <= v < 2**64 is u64
  }
}

void ArgumentPackBase::add_float(double v) {
  const KernelParam& p = begin_arg();
  if (p.is_constexpr) {
    finish_arg(make_word(ArgKind::ConstexprFloat), bits_of(v));
    return;
  }
  const std::string& a = p.annotation_type;
  TORCH_CHECK(a.empty() || a == "fp32" || a == "fp64", "tjit: kernel ", kernel_name_, ": parameter '",
              p.name, "' is annotated ", a, " and cannot take a floating-point value");
  if (a == "fp64") {
    pass_to_launch(&v, sizeof(v));
  } else {
    const float f = static_cast<float>(v);  // Python Triton passes every float as fp32
    pass_to_launch(&f, sizeof(f));
  }
  finish_arg(make_word(ArgKind::Float, a.empty() ? 0 : kAnnotated));
}

void ArgumentPackBase::add_bool(bool v) {
  const KernelParam& p = begin_arg();
  if (p.is_constexpr) {
    finish_arg(make_word(ArgKind::ConstexprBool), v ? 1 : 0);
    return;
  }
  const uint8_t b = v ? 1 : 0;
  pass_to_launch(&b, sizeof(b));
  finish_arg(make_word(ArgKind::Bool));
}

void ArgumentPackBase::add_string(std::string_view text) {
  const KernelParam& p = begin_arg();
  TORCH_CHECK(p.is_constexpr, "tjit: kernel ", kernel_name_, ": parameter '", p.name,
              "' got a string, which only a tl.constexpr parameter takes (as in Python Triton)");
  finish_arg(make_word(ArgKind::ConstexprString), intern_constexpr_string(text));
}

void ArgumentPackBase::add_dtype(Dtype dtype) {
  const KernelParam& p = begin_arg();
  TORCH_CHECK(p.is_constexpr, "tjit: kernel ", kernel_name_, ": parameter '", p.name, "' got the dtype tl.",
              dtype.attribute_name(), ", which only a tl.constexpr parameter takes (as in Python Triton)");
  finish_arg(make_word(ArgKind::ConstexprDtype), dtype.index());
}

void ArgumentPackBase::add_none() {
  begin_arg();
  finish_arg(make_word(ArgKind::None));  // None is always a constexpr
}

void ArgumentPackBase::complete() {
  const size_t given = param_;
  while (param_ < params_.size() && count_ < capacity_ && params_[param_].default_value) {
    add_value(*this, *params_[param_].default_value);  // as Python's binder applies a default
  }
  if (param_ == params_.size()) {
    return;
  }
  std::string names;
  std::string required;
  for (size_t i = 0; i < params_.size(); ++i) {
    names += (names.empty() ? "" : ", ") + params_[i].name;
    if (i >= given && !params_[i].default_value) {
      required += (required.empty() ? "" : ", ") + params_[i].name;
    }
  }
  TORCH_CHECK(required.empty(), "tjit: kernel ", kernel_name_, " takes ", params_.size(),
              " arguments (", names, "), but ", given, " were given; ", required,
              required.find(',') == std::string::npos ? " has" : " have", " no default");
  TORCH_CHECK(false, "tjit: kernel ", kernel_name_, " takes ", params_.size(), " arguments (", names, "), but ",
              given, " were given; a call may leave out at most ", kMaxDefaultedArgs,
              " trailing parameters with defaults: pass more of them");
}

}  // namespace tjit::detail
