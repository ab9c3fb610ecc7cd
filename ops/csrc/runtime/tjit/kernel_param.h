#pragma once
// The static description of one parameter of a @triton.jit function, learned once from
// Python when the kernel is loaded.

#include <tjit/compiled_kernel.h>

#include <optional>
#include <string>
#include <vector>

namespace tjit {

struct KernelParam {
  std::string name;
  bool is_constexpr = false;                    // annotated tl.constexpr
  bool is_const = false;                        // annotated tl.const: pointer types get `*k`
  bool do_not_specialize = false;               // @triton.jit(do_not_specialize=[...])
  bool do_not_specialize_on_alignment = false;  // @triton.jit(do_not_specialize_on_alignment=[...])
  std::string annotation_type;                  // e.g. "i64" for `n: tl.int64`; empty when none
  // The Python default (`BLOCK: tl.constexpr = 1024`, `eps=1e-5`) a call that leaves the parameter
  // out gets, as Python passes it; none when there is none or it is no value C++ can pass.
  std::optional<ConstexprValue> default_value;

  bool operator==(const KernelParam& o) const {
    return name == o.name && is_constexpr == o.is_constexpr && is_const == o.is_const &&
           do_not_specialize == o.do_not_specialize &&
           do_not_specialize_on_alignment == o.do_not_specialize_on_alignment && annotation_type == o.annotation_type &&
           default_value == o.default_value;
  }
};

// The parameters' names in order, as Specialization::describe takes them.
inline std::vector<std::string> parameter_names(const std::vector<KernelParam>& params) {
  std::vector<std::string> names;
  names.reserve(params.size());
  for (const KernelParam& p : params) {
    names.push_back(p.name);
  }
  return names;
}

}  // namespace tjit
