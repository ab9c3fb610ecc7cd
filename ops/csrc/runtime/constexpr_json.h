#pragma once
// A compile-time value as JSON (None -> null, bool, int, float keep their JSON types): how the
// kernel store's entries and the manifests write constexprs. Json is nlohmann::json or
// nlohmann::ordered_json.

#include <tjit/compiled_kernel.h>

#include <type_traits>
#include <variant>

namespace tjit::detail {

template <typename Json>
Json constexpr_value_json(const ConstexprValue& value) {
  return std::visit(
      [](const auto& v) -> Json {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
          return nullptr;
        } else {
          return v;
        }
      },
      value);
}

}  // namespace tjit::detail
