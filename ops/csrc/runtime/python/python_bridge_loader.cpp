// Loads libtjit_python on first need. When the process has no Python of its own (a pure C++
// program), libpython is loaded first, globally, so the bridge's Python symbols resolve.

#include "python/python_bridge.h"
#include "python/python_location.h"
#include "settings/settings.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <cstdio>
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

// A Python process, or a program linked with libpython, has the interpreter's symbols already.
bool process_has_python() { return dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr; }

void load_libpython(const PythonLocation& python) {
  TORCH_CHECK(!python.libpython.empty(),
              "tjit: compiling a kernel needs Python, and no shared libpython is known (tried ", python.source,
              "); set TJIT_LIBPYTHON to the path of libpython3.X.so");
  TORCH_CHECK(dlopen(python.libpython.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr,
              "tjit: compiling a kernel needs Python, but ", python.libpython, " could not be loaded (", dlerror(),
              "); set TJIT_LIBPYTHON to the path of libpython3.X.so");
  // Starting Python and importing Triton costs most of a second: say why it happens.
  if (settings::log_compiles()) {
    std::fprintf(stderr, "[tjit] starting Python %s (%s) for Triton: it reads the kernels, compiles them for GPUs "
                 "and runs them on CPU tensors\n", python.executable.c_str(), python.source);
  }
}

PythonBridge* load_bridge() {
  const std::string library_dir = directory_of_this_library();
  const PythonLocation python = locate_python(library_dir);
  if (!process_has_python()) {
    load_libpython(python);
  }
  const std::string path = library_dir + "/libtjit_python.so";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(library != nullptr, "tjit: cannot load ", path, ": ", dlerror());
  auto instance = reinterpret_cast<decltype(&tjit_python_bridge_instance)>(
      dlsym(library, "tjit_python_bridge_instance"));
  TORCH_CHECK(instance != nullptr, "tjit: ", path, " is not a tjit Python bridge");
  return instance(python.executable.c_str());
}

}  // namespace

PythonBridge& python_bridge() {
  static PythonBridge* const bridge = load_bridge();
  return *bridge;
}

}  // namespace tjit::detail
