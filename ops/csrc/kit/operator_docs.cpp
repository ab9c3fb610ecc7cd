#include <tjit/kit/operator_docs.h>

#include <mutex>
#include <unordered_map>

namespace tjit::kit {
namespace {

struct Docs {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> by_name;
};

Docs& docs() {
  static Docs instance;
  return instance;
}

}  // namespace

void define(torch::Library& m, std::string_view ns, const char* schema, const char* doc) {
  m.def(schema);
  const std::string_view text(schema);
  // "ns::name" for the default overload, "ns::name.overload" for the others.
  const std::string name = std::string(ns) + "::" + std::string(text.substr(0, text.find('(')));
  Docs& d = docs();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.by_name[name] = doc;
}

std::string operator_doc(std::string_view qualified_name) {
  Docs& d = docs();
  std::lock_guard<std::mutex> lock(d.mutex);
  const auto it = d.by_name.find(std::string(qualified_name));
  return it == d.by_name.end() ? std::string() : it->second;
}

}  // namespace tjit::kit
