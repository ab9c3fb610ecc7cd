#pragma once
// Operator definitions with documentation: what Python functions generated from the schema
// (tjit.<name>) show as their docstring.

#include <torch/library.h>

#include <string>
#include <string_view>

namespace tjit::kit {

// m.def(schema), and records `doc` for the operator "<ns>::<name>" (`ns`: the library's namespace,
// as named in TORCH_LIBRARY_FRAGMENT), or "<ns>::<name>.<overload>" for a named overload.
void define(torch::Library& m, std::string_view ns, const char* schema, const char* doc);

// The doc recorded for "namespace::name" (or "namespace::name.overload"), or an empty string.
std::string operator_doc(std::string_view qualified_name);

}  // namespace tjit::kit
