#pragma once
// A compile-time value as JSON (None -> null, bool, int, float keep their JSON types) and back:
// how the kernel store's entries and decision records, the manifests and the autotune description
// write constexprs. Json is nlohmann::json or nlohmann::ordered_json.

#include <tjit/compiled_kernel.h>

#include <cstdint>
#include <optional>
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

// The compile-time value a JSON value holds; nullopt for anything but null, a bool or a number.
template <typename Json>
std::optional<ConstexprValue> constexpr_value_from_json(const Json& j) {
  if (j.is_null()) return ConstexprValue(std::monostate{});
  if (j.is_boolean()) return ConstexprValue(j.template get<bool>());
  if (j.is_number_integer()) return ConstexprValue(j.template get<int64_t>());
  if (j.is_number_float()) return ConstexprValue(j.template get<double>());
  return std::nullopt;
}

}  // namespace tjit::detail
