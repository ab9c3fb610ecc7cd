// Loads libtjit_python on first need. When the process has no Python of its own (a pure C++
// program), libpython is loaded first, globally, so the bridge's Python symbols resolve.

#include "python_bridge.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace tjit::detail {
namespace {

std::string directory_of_this_library() {
  Dl_info info{};
  TORCH_CHECK(dladdr(reinterpret_cast<void*>(&python_bridge), &info) != 0 && info.dli_fname != nullptr,
              "tjit: cannot locate libtriton_jit on disk");
  std::string path = info.dli_fname;
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

void ensure_libpython() {
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr) {
    return;  // a Python process, or a program linked with libpython
  }
  const char* override_lib = std::getenv("TJIT_LIBPYTHON");
  const std::string lib = override_lib != nullptr ? override_lib : TJIT_BUILD_LIBPYTHON;
  TORCH_CHECK(!lib.empty(),
              "tjit: compiling a kernel needs Python, and this build knows no shared libpython; "
              "set TJIT_LIBPYTHON to the path of libpython3.X.so");
  TORCH_CHECK(dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr,
              "tjit: compiling a kernel needs Python, but ", lib, " could not be loaded (", dlerror(),
              "); set TJIT_LIBPYTHON to the path of libpython3.X.so");
}

PythonBridge* load_bridge() {
  ensure_libpython();
  const std::string path = directory_of_this_library() + "/libtjit_python.so";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(library != nullptr, "tjit: cannot load ", path, ": ", dlerror());
  auto instance = reinterpret_cast<decltype(&tjit_python_bridge_instance)>(
      dlsym(library, "tjit_python_bridge_instance"));
  TORCH_CHECK(instance != nullptr, "tjit: ", path, " is not a tjit Python bridge");
  return instance();
}

}  // namespace

PythonBridge& python_bridge() {
  static PythonBridge* const bridge = load_bridge();
  return *bridge;
}

}  // namespace tjit::detail
