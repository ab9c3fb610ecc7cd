#include "binaries/compiler_identity.h"

#include "settings/settings.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

namespace tjit::detail {
namespace {

// Triton reads these (its C++ passes and its Python knobs); any of them may change the binary.
constexpr std::string_view kPrefixes[] = {"TRITON_", "MLIR_", "LLVM_", "NVPTX_", "AMDGCN_"};
constexpr std::string_view kNames[] = {"DISABLE_LLVM_OPT", "DISABLE_MMA_V3", "DISABLE_MMA_V5", "DISABLE_PTXAS_OPT",
                                       "ALLOW_LHS_TMEM_LAYOUT_CONVERSION", "USE_IR_LOC"};
// Those with the prefixes above that name folders, caches or logging, not code generation.
constexpr std::string_view kIgnored[] = {
    "TRITON_CACHE_DIR",       "TRITON_HOME",          "TRITON_DUMP_DIR",           "TRITON_OVERRIDE_DIR",
    "TRITON_INTERPRET",       "TRITON_CACHE_MANAGER", "TRITON_REMOTE_CACHE_BACKEND", "TRITON_PRINT_AUTOTUNING",
    "TRITON_ALWAYS_COMPILE",  "TRITON_LIBCUDA_PATH",  "TRITON_STORE_BINARY_ONLY",  "TRITON_REPRODUCER_PATH",
    "MLIR_ENABLE_TIMING",     "LLVM_ENABLE_TIMING",   "MLIR_ENABLE_DIAGNOSTICS",   "TRITON_ENABLE_PYTHON_STACKTRACE"};

bool changes_code(std::string_view name) {
  if (std::find(std::begin(kIgnored), std::end(kIgnored), name) != std::end(kIgnored)) {
    return false;
  }
  if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) {
    return true;
  }
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; });
}

std::string code_generation_environment() {
  std::vector<std::string> lines;
  for (std::string& entry : settings::environment_entries()) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && changes_code(std::string_view(entry).substr(0, eq))) {
      lines.push_back(std::move(entry));
    }
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& line : lines) {
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string read_package_version(const std::string& package_dir) {
  std::ifstream file(package_dir + "/__init__.py");
  for (std::string line; std::getline(file, line);) {
    // __version__ = '3.6.0'
    const size_t name = line.find("__version__");
    if (name != 0) {
      continue;
    }
    const size_t open = line.find_first_of("'\"", name);
    if (open == std::string::npos) {
      continue;
    }
    const size_t close = line.find(line[open], open + 1);
    if (close != std::string::npos && close > open + 1) {
      return line.substr(open + 1, close - open - 1);
    }
  }
  return "";
}

const CompilerIdentity& compiler_identity() {
  static const CompilerIdentity identity = [] {
    CompilerIdentity id;
    id.triton_version = read_package_version(settings::triton_dir());
    id.environment = code_generation_environment();
    return id;
  }();
  return identity;
}

}  // namespace tjit::detail
