#pragma once
// A compile-time value as JSON (None -> null, bool, int, float and string keep their JSON types, a
// tl.dtype is {"dtype": "bf16"}) and back:
// how the kernel store's entries and decision records, the manifests and the autotune description
// write constexprs. Json is nlohmann::json or nlohmann::ordered_json.

#include <tjit/compiled_kernel.h>

#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

namespace tjit::detail {

template <typename Json>
Json constexpr_value_json(const ConstexprValue& value) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, Dtype>) {
          Json dtype = Json::object();
          dtype["dtype"] = v.name();
          return dtype;
        } else {
          return v;
        }
      },
      value);
}

// The compile-time value a JSON value holds; nullopt for anything but null, a bool, a number, a
// string or {"dtype": <a Triton dtype's name>}.
template <typename Json>
std::optional<ConstexprValue> constexpr_value_from_json(const Json& j) {
  if (j.is_null()) return ConstexprValue(std::monostate{});
  if (j.is_boolean()) return ConstexprValue(j.template get<bool>());
  if (j.is_number_integer()) return ConstexprValue(j.template get<int64_t>());
  if (j.is_number_float()) return ConstexprValue(j.template get<double>());
  if (j.is_string()) return ConstexprValue(j.template get<std::string>());
  if (j.is_object() && j.size() == 1 && j.contains("dtype") && j.at("dtype").is_string()) {
    try {
      return ConstexprValue(Dtype::named(j.at("dtype").template get<std::string>()));
    } catch (const c10::Error&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace tjit::detail
