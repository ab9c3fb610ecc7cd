// Triton's element types, as tl.dtype names them (triton/language/core.py: SINT_TYPES, UINT_TYPES,
// FP_TYPES), with their signature names and the torch dtype of each where torch has one.

#include <tjit/dtype.h>

#include <c10/util/Exception.h>

#include <array>
#include <string>

namespace tjit {
namespace {

struct ElementType {
  const char* name;        // tl.dtype(name)
  const char* attribute;   // tl.<attribute>
  const char* signature;   // the type in a kernel signature: "*fp32", "i32"
  c10::ScalarType torch;   // Undefined: torch has none
};

constexpr std::array<ElementType, 18> kTypes{{
    {"int1", "int1", "u1", c10::ScalarType::Bool},
    {"int8", "int8", "i8", c10::ScalarType::Char},
    {"int16", "int16", "i16", c10::ScalarType::Short},
    {"int32", "int32", "i32", c10::ScalarType::Int},
    {"int64", "int64", "i64", c10::ScalarType::Long},
    {"uint8", "uint8", "u8", c10::ScalarType::Byte},
    {"uint16", "uint16", "u16", c10::ScalarType::UInt16},
    {"uint32", "uint32", "u32", c10::ScalarType::UInt32},
    {"uint64", "uint64", "u64", c10::ScalarType::UInt64},
    {"fp16", "float16", "fp16", c10::ScalarType::Half},
    {"bf16", "bfloat16", "bf16", c10::ScalarType::BFloat16},
    {"fp32", "float32", "fp32", c10::ScalarType::Float},
    {"fp64", "float64", "fp64", c10::ScalarType::Double},
    {"fp8e4nv", "float8e4nv", "fp8e4nv", c10::ScalarType::Float8_e4m3fn},
    {"fp8e5", "float8e5", "fp8e5", c10::ScalarType::Float8_e5m2},
    {"fp8e4b8", "float8e4b8", "fp8e4b8", c10::ScalarType::Float8_e4m3fnuz},
    {"fp8e5b16", "float8e5b16", "fp8e5b16", c10::ScalarType::Float8_e5m2fnuz},
    {"fp8e4b15", "float8e4b15", "fp8e4b15", c10::ScalarType::Undefined},
}};

std::string known_names() {
  std::string out;
  for (const ElementType& t : kTypes) {
    out += (out.empty() ? "" : ", ") + std::string(t.name);
  }
  return out;
}

}  // namespace

Dtype::Dtype(c10::ScalarType type) : index_(0) {
  for (size_t i = 0; i < kTypes.size(); ++i) {
    if (kTypes[i].torch == type && type != c10::ScalarType::Undefined) {
      index_ = static_cast<uint8_t>(i);
      return;
    }
  }
  TORCH_CHECK(false, "tjit: torch dtype ", type, " has no Triton type (Triton's: ", known_names(), ")");
}

Dtype Dtype::named(std::string_view name) {
  for (size_t i = 0; i < kTypes.size(); ++i) {
    if (name == kTypes[i].name || name == kTypes[i].attribute) {
      return Dtype(static_cast<uint8_t>(i));
    }
  }
  TORCH_CHECK(false, "tjit: '", std::string(name), "' is not a Triton dtype (Triton's: ", known_names(), ")");
}

Dtype Dtype::from_index(uint8_t index) {
  TORCH_CHECK(index < kTypes.size(), "tjit: dtype index ", static_cast<int>(index), " is no Triton dtype");
  return Dtype(index);
}

const char* Dtype::name() const { return kTypes[index_].name; }
const char* Dtype::attribute_name() const { return kTypes[index_].attribute; }

const char* triton_element_type(c10::ScalarType type) {
  for (const ElementType& t : kTypes) {
    if (t.torch == type && type != c10::ScalarType::Undefined) {
      return t.signature;
    }
  }
  return nullptr;
}

}  // namespace tjit
