#pragma once
// tjit::Dtype: a Triton element type (tl.bfloat16, tl.float8e4nv, ...) as a kernel argument, for a
// `tl.constexpr` parameter that takes a dtype (`OUT_DTYPE: tl.constexpr`). It is to C++ what
// passing `tl.bfloat16` is to Python:
//
//   kernel(stream, grid, options, x, out, n, tjit::Dtype(at::kBFloat16));   // or at::kBFloat16
//   kernel(stream, grid, options, x, out, n, tjit::Dtype::named("fp8e4b15"));

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string_view>

namespace tjit {

class Dtype {
 public:
  // The Triton type of a torch dtype; throws c10::Error for one Triton has no type for.
  Dtype(c10::ScalarType type);  // NOLINT: a ScalarType is a dtype
  // By Triton's name (tl.dtype's: "bf16", "fp32", "int32", "uint8", "int1", "fp8e4nv", ...) or
  // attribute name ("bfloat16", "float32", "float8e4nv", ...); throws c10::Error for others.
  static Dtype named(std::string_view name);
  // From index(); throws c10::Error for an index that is no type.
  static Dtype from_index(uint8_t index);

  const char* name() const;            // tl.dtype's name: "bf16"
  const char* attribute_name() const;  // tl's attribute: "bfloat16" (as in "tl.bfloat16")
  uint8_t index() const { return index_; }
  bool operator==(const Dtype& other) const { return index_ == other.index_; }
  bool operator!=(const Dtype& other) const { return index_ != other.index_; }

 private:
  explicit Dtype(uint8_t index) : index_(index) {}
  uint8_t index_;
};

// The signature type Triton gives a pointer to `type`'s elements ("fp32" for *fp32), or nullptr
// for a dtype Triton kernels cannot take.
const char* triton_element_type(c10::ScalarType type);

}  // namespace tjit
