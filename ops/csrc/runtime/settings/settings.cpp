// The runtime's environment variables (the table is in settings.h), and the public switches that
// start from them: jit_enabled(), bundled_tuning_enabled(), target_from_environment(),
// switched_off(), log_compiles() (tjit/environment.h).

#include "settings/settings.h"

#include <tjit/environment.h>
#include <tjit/launch_types.h>
#include <tjit/triton_jit_function.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace tjit {
namespace {

namespace fs = std::filesystem;

bool is_off(const char* value) {
  if (value == nullptr) {
    return false;
  }
  const std::string v(value);
  return v == "0" || v == "off" || v == "OFF" || v == "false" || v == "no";
}

std::optional<std::string> non_empty(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

// -1 until read from the environment; then 0 or 1. The setters replace it for the process.
std::atomic<int> jit_state{-1};
std::atomic<int> bundled_tuning_state{-1};

// On unless the variable is 0, off, false or no.
bool switch_from_environment(std::atomic<int>& state, const char* variable) {
  int current = state.load(std::memory_order_acquire);
  if (current < 0) {
    current = is_off(std::getenv(variable)) ? 0 : 1;
    int expected = -1;
    state.compare_exchange_strong(expected, current);
    current = state.load(std::memory_order_acquire);
  }
  return current == 1;
}

}  // namespace

bool jit_enabled() { return switch_from_environment(jit_state, "TJIT_JIT"); }

void set_jit_enabled(bool enabled) { jit_state.store(enabled ? 1 : 0, std::memory_order_release); }

bool bundled_tuning_enabled() { return switch_from_environment(bundled_tuning_state, "TJIT_BUNDLED_TUNING"); }

void set_bundled_tuning_enabled(bool enabled) {
  bundled_tuning_state.store(enabled ? 1 : 0, std::memory_order_release);
}

bool switched_off(const char* name) { return is_off(std::getenv(name)); }

bool log_compiles() { return detail::settings::log_compiles(); }

std::optional<CompileTarget> target_from_environment() {
  const char* text = std::getenv("TJIT_TARGET");
  if (text == nullptr || *text == '\0') {
    return std::nullopt;
  }
  return CompileTarget::parse(text);
}

namespace detail::settings {

bool log_compiles() {
  static const bool enabled = [] {
    const char* v = std::getenv("TJIT_LOG_COMPILES");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

std::optional<std::string> kernel_store_directory() {
  if (is_off(std::getenv("TJIT_CACHE"))) {
    return std::nullopt;
  }
  fs::path dir;
  if (const char* d = std::getenv("TJIT_CACHE_DIR"); d != nullptr && *d != '\0') {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    dir = fs::path(x) / "tjit";
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    dir = fs::path(h) / ".cache" / "tjit";
  } else {
    std::fprintf(stderr, "[tjit] kernel store off: none of TJIT_CACHE_DIR, XDG_CACHE_HOME, HOME is set\n");
    return std::nullopt;
  }
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec);
  return (ec ? dir : absolute).lexically_normal().string();
}

std::optional<std::string> kernel_store_max_bytes() { return non_empty("TJIT_CACHE_MAX_BYTES"); }

std::optional<std::string> kernel_store_shared_group() { return non_empty("TJIT_CACHE_SHARED"); }

std::optional<std::string> record_manifest() { return non_empty("TJIT_RECORD"); }

std::optional<std::string> python_executable() { return non_empty("TJIT_PYTHON_EXECUTABLE"); }

std::optional<std::string> libpython() { return non_empty("TJIT_LIBPYTHON"); }

std::string triton_dir() {
  const char* dir = std::getenv("TJIT_TRITON_DIR");
  return dir != nullptr && *dir != '\0' ? dir : TJIT_BUILD_TRITON_DIR;
}

std::vector<std::string> environment_entries() {
  std::vector<std::string> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    entries.emplace_back(*entry);
  }
  return entries;
}

}  // namespace detail::settings
}  // namespace tjit
