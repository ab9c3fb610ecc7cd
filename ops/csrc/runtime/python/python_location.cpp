#include "python/python_location.h"

#include "settings/settings.h"

#include <fstream>
#include <sys/stat.h>

namespace tjit::detail {
namespace {

// Paths are handled as strings: libtorch exports its own copies of some std::filesystem functions
// (pytorch/pytorch#133437), and this runs in any process that links it.
std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
}

std::string name_of(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

bool is_file(const std::string& path) {
  struct stat info {};
  return !path.empty() && ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// `home = /usr/local/bin` from a virtual environment's pyvenv.cfg: where its base Python lives.
std::string venv_home(const std::string& prefix) {
  std::ifstream cfg(prefix + "/pyvenv.cfg");
  std::string line;
  while (std::getline(cfg, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    std::string key = line.substr(0, eq);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key == "home") {
      std::string value = line.substr(eq + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t\r") + 1);
      return value;
    }
  }
  return {};
}

struct EnvironmentPython {
  std::string executable;
  std::string libpython;
};

// <prefix>/lib/pythonX.Y/site-packages/tjit/lib -> <prefix>/bin/pythonX.Y and its libpython
// (in <prefix>/lib, or, for a virtual environment, beside its base Python).
EnvironmentPython environment_python(const std::string& library_dir) {
  const std::string package = parent_of(library_dir);
  const std::string site = parent_of(package);
  const std::string version_dir = parent_of(site);
  const std::string lib = parent_of(version_dir);
  const std::string version = name_of(version_dir);  // pythonX.Y
  if (name_of(site) != "site-packages" || version.rfind("python3.", 0) != 0 || lib.empty()) {
    return {};
  }
  const std::string prefix = parent_of(lib);
  EnvironmentPython found;
  for (const std::string& exe : {prefix + "/bin/" + version, prefix + "/bin/python3"}) {
    if (is_file(exe)) {
      found.executable = exe;
      break;
    }
  }
  std::string home = venv_home(prefix);
  const std::string base_lib = home.empty() ? lib : parent_of(home) + "/lib";
  for (const char* suffix : {".so.1.0", ".so"}) {
    const std::string candidate = base_lib + "/lib" + version + suffix;
    if (is_file(candidate)) {
      found.libpython = candidate;
      break;
    }
  }
  return found;
}

}  // namespace

PythonLocation locate_python(const std::string& library_dir) {
  const EnvironmentPython environment = environment_python(library_dir);
  PythonLocation location{TJIT_BUILD_PYTHON_EXECUTABLE, TJIT_BUILD_LIBPYTHON, "the Python tjit was built with"};
  if (!environment.executable.empty()) {
    location.executable = environment.executable;
    location.source = "the Python environment tjit is installed in";
  }
  if (!environment.libpython.empty()) {
    location.libpython = environment.libpython;
  }
  if (const auto exe = settings::python_executable()) {
    location.executable = *exe;
    location.source = "TJIT_PYTHON_EXECUTABLE";
  }
  if (const auto lib = settings::libpython()) {
    location.libpython = *lib;
  }
  return location;
}

}  // namespace tjit::detail
