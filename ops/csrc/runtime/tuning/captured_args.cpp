#include "tuning/captured_args.h"

#include <tjit/tensor_descriptor.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace tjit::detail {

void CapturedArg::begin_tuple(size_t size) {
  TORCH_CHECK(false, "tjit: run() and tune() take a tuple (here of ", size,
              " elements) as an argument of its own, not inside a std::optional");
}

void CapturedArg::add_tensor(const at::Tensor& t) {
  if (t.defined()) {
    kind = Kind::Tensor, tensor = &t;
  } else {
    kind = Kind::None;
  }
}

namespace {

// A tuple's elements into a pack, as operator() would add them.
class PackVisitor final : public ArgumentVisitor {
 public:
  explicit PackVisitor(ArgumentPackBase& pack) : pack_(pack) {}
  void add_tensor(const at::Tensor& t) override { pack_.add_tensor(t); }
  void add_pointer(const DevicePointer& p) override { pack_.add_pointer(p); }
  void add_signed(int64_t v) override { pack_.add_signed(v); }
  void add_unsigned(uint64_t v) override { pack_.add_unsigned(v); }
  void add_float(double v) override { pack_.add_float(v); }
  void add_bool(bool v) override { pack_.add_bool(v); }
  void add_none() override { pack_.add_none(); }
  void add_string(std::string_view text) override { pack_.add_string(text); }
  void add_dtype(Dtype dtype) override { pack_.add_dtype(dtype); }
  void add_tensor_descriptor(const TensorDescriptor& d) override { pack_.add_tensor_descriptor(d); }
  void begin_tuple(size_t size) override { pack_.begin_tuple(size); }
  void end_tuple() override { pack_.end_tuple(); }

 private:
  ArgumentPackBase& pack_;
};

// Each element as a captured argument of its own, for the per-argument functions below.
class ElementVisitor : public ArgumentVisitor {
 public:
  void add_tensor(const at::Tensor& t) override { element([&](CapturedArg& a) { a.add_tensor(t); }); }
  void add_pointer(const DevicePointer& p) override { element([&](CapturedArg& a) { a.add_pointer(p); }); }
  void add_signed(int64_t v) override { element([&](CapturedArg& a) { a.add_signed(v); }); }
  void add_unsigned(uint64_t v) override { element([&](CapturedArg& a) { a.add_unsigned(v); }); }
  void add_float(double v) override { element([&](CapturedArg& a) { a.add_float(v); }); }
  void add_bool(bool v) override { element([&](CapturedArg& a) { a.add_bool(v); }); }
  void add_none() override { element([&](CapturedArg& a) { a.add_none(); }); }
  void add_string(std::string_view text) override { element([&](CapturedArg& a) { a.add_string(text); }); }
  void add_dtype(Dtype dtype) override { element([&](CapturedArg& a) { a.add_dtype(dtype); }); }
  void add_tensor_descriptor(const TensorDescriptor& d) override {
    element([&](CapturedArg& a) { a.add_tensor_descriptor(d); });
  }

 protected:
  virtual void on_element(const CapturedArg& a) = 0;
  ~ElementVisitor() = default;

 private:
  template <typename F>
  void element(const F& fill) {
    CapturedArg a;
    fill(a);
    on_element(a);
  }
};

class WordsVisitor final : public ElementVisitor {
 public:
  WordsVisitor(uint64_t* words, size_t& n, size_t capacity) : words_(words), n_(n), capacity_(capacity) {}
  void begin_tuple(size_t size) override { push(static_cast<uint64_t>(CapturedArg::Kind::Tuple), size); }
  void end_tuple() override { push(~uint64_t{0}, 0); }
  void on_element(const CapturedArg& a) override { append_argument_words(a, words_, n_, capacity_); }

  void push(uint64_t kind, uint64_t value) {
    TORCH_CHECK(n_ + 2 <= capacity_, "tjit: run(): the arguments have too many elements to key a tuning by");
    words_[n_++] = kind;
    words_[n_++] = value;
  }

 private:
  uint64_t* words_;
  size_t& n_;
  size_t capacity_;
};

class PythonVisitor final : public ElementVisitor {
 public:
  explicit PythonVisitor(std::vector<InterpretedArg>& out) : out_(out) {}
  void begin_tuple(size_t size) override { out_.emplace_back(InterpretedTuple{size}); }
  void end_tuple() override {}
  void on_element(const CapturedArg& a) override { python_arguments_into(a, out_); }
  static void python_arguments_into(const CapturedArg& a, std::vector<InterpretedArg>& out);

 private:
  std::vector<InterpretedArg>& out_;
};

class TextVisitor final : public ElementVisitor {
 public:
  void begin_tuple(size_t) override {
    separate();
    text_ += "(";
    first_ = true;
  }
  void end_tuple() override {
    text_ += ")";
    first_ = false;
  }
  void on_element(const CapturedArg& a) override {
    separate();
    text_ += describe_argument(a);
  }
  std::string take() { return std::move(text_); }

 private:
  void separate() {
    if (!first_) {
      text_ += ", ";
    }
    first_ = false;
  }
  std::string text_;
  bool first_ = true;
};

class DeviceVisitor final : public ElementVisitor {
 public:
  void begin_tuple(size_t) override {}
  void end_tuple() override {}
  void on_element(const CapturedArg& a) override {
    if (device_ == kNoDevice || device_ == kCurrentDevice) {
      const int d = device_of_arguments(&a, 1);
      if (d != kNoDevice && (device_ == kNoDevice || d != kCurrentDevice)) {
        device_ = d;
      }
    }
  }
  int device() const { return device_; }

 private:
  int device_ = kNoDevice;
};

void PythonVisitor::python_arguments_into(const CapturedArg& a, std::vector<InterpretedArg>& out) {
  switch (a.kind) {
    case CapturedArg::Kind::Tensor: out.emplace_back(a.tensor); break;
    case CapturedArg::Kind::TensorDescriptor: out.emplace_back(a.descriptor); break;
    case CapturedArg::Kind::Signed: out.emplace_back(a.signed_value); break;
    case CapturedArg::Kind::Unsigned: out.emplace_back(a.unsigned_value); break;
    case CapturedArg::Kind::Float: out.emplace_back(a.float_value); break;
    case CapturedArg::Kind::Bool: out.emplace_back(a.bool_value); break;
    case CapturedArg::Kind::String: out.emplace_back(interned_constexpr_string(a.unsigned_value)); break;
    case CapturedArg::Kind::Dtype: out.emplace_back(Dtype::from_index(static_cast<uint8_t>(a.unsigned_value))); break;
    case CapturedArg::Kind::Tuple: {
      PythonVisitor visitor(out);
      a.visit_tuple(a.tuple, visitor);
      break;
    }
    default: out.emplace_back(std::monostate{}); break;  // a DevicePointer has no Python form
  }
}

}  // namespace

void add_captured(ArgumentPackBase& pack, const CapturedArg& a) {
  switch (a.kind) {
    case CapturedArg::Kind::Tensor: pack.add_tensor(*a.tensor); break;
    case CapturedArg::Kind::Pointer: pack.add_pointer(a.pointer); break;
    case CapturedArg::Kind::Signed: pack.add_signed(a.signed_value); break;
    case CapturedArg::Kind::Unsigned: pack.add_unsigned(a.unsigned_value); break;
    case CapturedArg::Kind::Float: pack.add_float(a.float_value); break;
    case CapturedArg::Kind::Bool: pack.add_bool(a.bool_value); break;
    case CapturedArg::Kind::None: pack.add_none(); break;
    case CapturedArg::Kind::String: pack.add_string(interned_constexpr_string(a.unsigned_value)); break;
    case CapturedArg::Kind::Dtype: pack.add_dtype(Dtype::from_index(static_cast<uint8_t>(a.unsigned_value))); break;
    case CapturedArg::Kind::TensorDescriptor: pack.add_tensor_descriptor(*a.descriptor); break;
    case CapturedArg::Kind::Tuple: {
      PackVisitor visitor(pack);
      a.visit_tuple(a.tuple, visitor);
      break;
    }
  }
}

bool has_dtype(const CapturedArg& a) {
  return a.kind == CapturedArg::Kind::Tensor || a.kind == CapturedArg::Kind::Pointer;
}

uint64_t dtype_word(const CapturedArg& a) {
  return a.kind == CapturedArg::Kind::Tensor ? static_cast<uint64_t>(a.tensor->scalar_type())
                                             : static_cast<uint64_t>(a.pointer.dtype);
}

void append_argument_words(const CapturedArg& a, uint64_t* words, size_t& n, size_t capacity) {
  WordsVisitor out(words, n, capacity);
  uint64_t value = 0;
  switch (a.kind) {
    case CapturedArg::Kind::Tensor:
    case CapturedArg::Kind::Pointer: value = dtype_word(a); break;
    case CapturedArg::Kind::TensorDescriptor: {
      // What heuristics may read of it: its dtype and block shape (Triton's type) and its shape.
      const TensorDescriptor& d = *a.descriptor;
      out.push(static_cast<uint64_t>(a.kind), static_cast<uint64_t>(d.base().scalar_type()));
      for (int i = 0; i < d.rank(); ++i) {
        out.push(static_cast<uint64_t>(d.shape()[i]), static_cast<uint64_t>(d.block_shape()[i]));
      }
      return;
    }
    case CapturedArg::Kind::Signed: value = static_cast<uint64_t>(a.signed_value); break;
    case CapturedArg::Kind::Unsigned:
    case CapturedArg::Kind::String:
    case CapturedArg::Kind::Dtype: value = a.unsigned_value; break;
    case CapturedArg::Kind::Float: std::memcpy(&value, &a.float_value, sizeof(value)); break;
    case CapturedArg::Kind::Bool: value = a.bool_value ? 1 : 0; break;
    case CapturedArg::Kind::None: break;
    case CapturedArg::Kind::Tuple:
      a.visit_tuple(a.tuple, out);  // begin_tuple writes its kind and size
      return;
  }
  out.push(static_cast<uint64_t>(a.kind), value);
}

std::optional<ConstexprValue> scalar_value(const CapturedArg& a) {
  switch (a.kind) {
    case CapturedArg::Kind::Signed: return ConstexprValue(a.signed_value);
    case CapturedArg::Kind::Unsigned: return ConstexprValue(static_cast<int64_t>(a.unsigned_value));
    case CapturedArg::Kind::Float: return ConstexprValue(a.float_value);
    case CapturedArg::Kind::Bool: return ConstexprValue(a.bool_value);
    case CapturedArg::Kind::None: return ConstexprValue(std::monostate{});
    case CapturedArg::Kind::String: return ConstexprValue(interned_constexpr_string(a.unsigned_value));
    case CapturedArg::Kind::Dtype: return ConstexprValue(Dtype::from_index(static_cast<uint8_t>(a.unsigned_value)));
    default: return std::nullopt;
  }
}

std::vector<InterpretedArg> python_arguments(const CapturedArg* args, size_t n) {
  std::vector<InterpretedArg> out;
  for (size_t i = 0; i < n; ++i) {
    PythonVisitor::python_arguments_into(args[i], out);
  }
  return out;
}

uint64_t tensor_identity(const CapturedArg& a) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(a.tensor->unsafeGetTensorImpl()));
}

std::string describe_argument(const CapturedArg& a) {
  switch (a.kind) {
    case CapturedArg::Kind::Tensor: return c10::toString(a.tensor->scalar_type());
    case CapturedArg::Kind::Pointer: return c10::toString(a.pointer.dtype);
    case CapturedArg::Kind::Signed: return constexpr_text(a.signed_value);
    case CapturedArg::Kind::Unsigned: return std::to_string(a.unsigned_value);
    case CapturedArg::Kind::Float: return constexpr_text(a.float_value);
    case CapturedArg::Kind::Bool: return constexpr_text(a.bool_value);
    case CapturedArg::Kind::None: return constexpr_text(std::monostate{});
    case CapturedArg::Kind::String: return constexpr_text(interned_constexpr_string(a.unsigned_value));
    case CapturedArg::Kind::Dtype: return constexpr_text(Dtype::from_index(static_cast<uint8_t>(a.unsigned_value)));
    case CapturedArg::Kind::TensorDescriptor: {
      const TensorDescriptor& d = *a.descriptor;
      std::string text = std::string("descriptor ") + c10::toString(d.base().scalar_type()) + " [";
      for (int i = 0; i < d.rank(); ++i) {
        text += (i == 0 ? "" : ", ") + std::to_string(d.shape()[i]);
      }
      text += "] block [";
      for (int i = 0; i < d.rank(); ++i) {
        text += (i == 0 ? "" : ", ") + std::to_string(d.block_shape()[i]);
      }
      return text + "]";
    }
    case CapturedArg::Kind::Tuple: {
      TextVisitor visitor;
      a.visit_tuple(a.tuple, visitor);
      return visitor.take();
    }
  }
  return "";
}

int device_of_arguments(const CapturedArg* args, size_t n) {
  int device = kNoDevice;
  for (size_t i = 0; i < n; ++i) {
    const CapturedArg& a = args[i];
    const at::Tensor* t = a.kind == CapturedArg::Kind::Tensor             ? a.tensor
                          : a.kind == CapturedArg::Kind::TensorDescriptor ? &a.descriptor->base()
                                                                          : nullptr;
    if (t != nullptr) {
      return t->is_cuda() ? t->device().index() : -1;
    }
    if (a.kind == CapturedArg::Kind::Tuple) {
      DeviceVisitor visitor;
      a.visit_tuple(a.tuple, visitor);
      if (visitor.device() != kNoDevice && visitor.device() != kCurrentDevice) {
        return visitor.device();
      }
      if (visitor.device() == kCurrentDevice) {
        device = kCurrentDevice;
      }
    }
    if (a.kind == CapturedArg::Kind::Pointer && device == kNoDevice) {
      device = kCurrentDevice;
    }
  }
  return device;
}

}  // namespace tjit::detail
