// The specialisation a completed pack names, as handed to triton.compile: each parameter's type
// as Triton writes it, the constexprs and the 16-divisible arguments (tuples' by path).

#include "function/function_impl.h"
#include "function/key_decoder.h"

#include <tjit/dtype.h>

#include <c10/util/Exception.h>

#include <string>
#include <utility>
#include <vector>

namespace tjit {
namespace {

// The type of the argument at slots[next] (a tuple with its elements), noting its constexprs and
// divisibility in `spec`; advances `next` past it.
std::string type_of(std::vector<detail::KeySlot>& slots, size_t& next, const KernelParam& p,
                    const std::string& kernel, Specialization& spec) {
  detail::KeySlot& s = slots[next++];
  std::string type;
  switch (s.kind) {
    case detail::ArgKind::Tuple:
      type = "[";
      for (uint64_t e = 0; e < s.sub; ++e) {
        if (e > 0) {
          type += ',';
        }
        type += type_of(slots, next, p, kernel, spec);
      }
      return type + "]";
    case detail::ArgKind::Pointer: {
      const char* dtype = triton_element_type(static_cast<c10::ScalarType>(s.sub));
      TORCH_CHECK(dtype != nullptr, "tjit: kernel ", kernel, ": argument '", p.name, "' has dtype ",
                  static_cast<c10::ScalarType>(s.sub), ", which Triton kernels cannot take");
      type = std::string(p.is_const ? "*k" : "*") + dtype;
      break;
    }
    case detail::ArgKind::Int:
      type = s.sub == static_cast<uint64_t>(detail::IntType::I32)   ? "i32"
             : s.sub == static_cast<uint64_t>(detail::IntType::I64) ? "i64"
                                                                    : "u64";
      break;
    case detail::ArgKind::TensorDescriptor: {
      // Triton's text: tensordesc<fp16[32, 16]> (element type, block shape).
      const char* dtype = triton_element_type(static_cast<c10::ScalarType>(s.sub));
      TORCH_CHECK(dtype != nullptr, "tjit: kernel ", kernel, ": argument '", p.name, "' is a descriptor of a ",
                  static_cast<c10::ScalarType>(s.sub), " tensor, which Triton kernels cannot take");
      type = std::string("tensordesc<") + dtype + "[";
      for (size_t i = 0; i < s.block_shape.size(); ++i) {
        type += (i == 0 ? "" : ", ") + std::to_string(s.block_shape[i]);
      }
      return type + "]>";
    }
    case detail::ArgKind::Bool: type = "u1"; break;
    case detail::ArgKind::Float: type = "fp32"; break;
    default: break;  // constants
  }
  const bool top = s.path.size() == 1;
  if (s.constant) {
    if (top) {
      spec.constexprs.emplace_back(s.path[0], std::move(*s.constant));
    } else {
      spec.tuple_constexprs.emplace_back(s.path, std::move(*s.constant));
    }
    return "constexpr";
  }
  if (s.divisible_by_16) {
    if (top) {
      spec.divisible_by_16.push_back(s.path[0]);
    } else {
      spec.tuple_divisible_by_16.push_back(s.path);
    }
  }
  // An annotation fixes the type of a runtime argument, as in Python.
  return top && !p.annotation_type.empty() ? p.annotation_type : type;
}

}  // namespace

Specialization TritonJitFunction::specialization_of(const detail::ArgumentPackBase& pack) const {
  std::vector<detail::KeySlot> slots = detail::decode_key(pack);
  Specialization spec;
  size_t next = 0;
  for (size_t i = 0; i < pack.num_args(); ++i) {
    spec.types.push_back(type_of(slots, next, params_[i], function_name_, spec));
  }
  return spec;
}

}  // namespace tjit
