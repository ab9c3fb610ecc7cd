#pragma once
// The static description of one parameter of a @triton.jit function, learned once from
// Python when the kernel is loaded.

#include <string>

namespace tjit {

struct KernelParam {
  std::string name;
  bool is_constexpr = false;                    // annotated tl.constexpr
  bool is_const = false;                        // annotated tl.const: pointer types get `*k`
  bool do_not_specialize = false;               // @triton.jit(do_not_specialize=[...])
  bool do_not_specialize_on_alignment = false;  // @triton.jit(do_not_specialize_on_alignment=[...])
  std::string annotation_type;                  // e.g. "i64" for `n: tl.int64`; empty when none

  bool operator==(const KernelParam& o) const {
    return name == o.name && is_constexpr == o.is_constexpr && is_const == o.is_const &&
           do_not_specialize == o.do_not_specialize &&
           do_not_specialize_on_alignment == o.do_not_specialize_on_alignment && annotation_type == o.annotation_type;
  }
};

}  // namespace tjit
