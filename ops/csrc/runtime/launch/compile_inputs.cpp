#include <tjit/compiled_kernel.h>
#include <tjit/launch_types.h>

#include <c10/util/Exception.h>

#include <charconv>
#include <sstream>

namespace tjit {

CompileTarget CompileTarget::parse(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ':');) {
    parts.push_back(part);
  }
  CompileTarget target;
  try {
    TORCH_CHECK(parts.size() == 2 || parts.size() == 3);
    target.backend = parts[0];
    target.arch = std::stoi(parts[1]);
    if (parts.size() == 3) {
      target.warp_size = std::stoi(parts[2]);
    }
  } catch (const std::exception&) {
    TORCH_CHECK(false, "tjit: cannot parse compile target '", text,
                "': expected BACKEND:ARCH[:WARP_SIZE], e.g. cuda:90");
  }
  TORCH_CHECK(target.backend == "cuda", "tjit: compile target '", text,
              "': only the cuda backend is supported");
  return target;
}

std::string CompileTarget::to_string() const {
  return backend + ":" + std::to_string(arch) + ":" + std::to_string(warp_size);
}

namespace {

// A tuple parameter's type with each element described as describe() describes a parameter: a
// constexpr element by its value, a divisible one with ":16" ("(*fp32:16, 1)"). `pos` walks `type`.
std::string describe_tuple(const Specialization& spec, const std::string& type, size_t& pos, std::vector<int>& path) {
  if (type[pos] == '[') {
    ++pos;
    std::string out = "(";
    for (int e = 0; type[pos] != ']'; ++e) {
      if (e > 0) {
        ++pos;  // ','
        out += ", ";
      }
      path.push_back(e);
      out += describe_tuple(spec, type, pos, path);
      path.pop_back();
    }
    ++pos;
    return out + ")";
  }
  const size_t end = type.find_first_of(",]", pos);
  const std::string leaf = type.substr(pos, end - pos);
  pos = end;
  if (leaf == "constexpr") {
    for (const auto& [p, value] : spec.tuple_constexprs) {
      if (p == path) {
        return constexpr_text(value);
      }
    }
    return "?";
  }
  for (const auto& p : spec.tuple_divisible_by_16) {
    if (p == path) {
      return leaf + ":16";
    }
  }
  return leaf;
}

}  // namespace

std::string Specialization::describe(const std::vector<std::string>& param_names) const {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (!out.empty()) {
      out += ", ";
    }
    out += i < param_names.size() ? param_names[i] : std::to_string(i);
    if (!types[i].empty() && types[i][0] == '[') {
      size_t pos = 0;
      std::vector<int> path{static_cast<int>(i)};
      out += ": " + describe_tuple(*this, types[i], pos, path);
      continue;
    }
    if (types[i] != "constexpr") {
      out += ": " + types[i];
      for (int d : divisible_by_16) {
        if (d == static_cast<int>(i)) {
          out += ":16";
        }
      }
      continue;
    }
    for (const auto& [index, value] : constexprs) {
      if (index != static_cast<int>(i)) {
        continue;
      }
      out += '=';
      out += constexpr_text(value);
    }
  }
  return out;
}

namespace {

// Python's repr of a str: single quotes unless the text has one and no double quote; backslash
// escapes for the quote, backslashes and control characters; other bytes (UTF-8) as they are.
std::string python_string_repr(const std::string& text) {
  const bool double_quotes = text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[byte >> 4];
      out += digits[byte & 15];
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace

std::string constexpr_text(const ConstexprValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return "None";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "True" : "False";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return python_string_repr(v);
        } else if constexpr (std::is_same_v<T, Dtype>) {
          return std::string("tl.") + v.attribute_name();
        } else if constexpr (std::is_same_v<T, double>) {
          char buffer[32];
          const auto end = std::to_chars(buffer, buffer + sizeof(buffer), v).ptr;  // shortest round trip
          std::string text(buffer, end);
          return text.find_first_not_of("-0123456789") == std::string::npos ? text + ".0" : text;
        } else {
          return std::to_string(v);
        }
      },
      value);
}

}  // namespace tjit
