#pragma once
// Which Python a process that has none (a pure C++ program) starts to compile kernels.

#include <string>

namespace tjit::detail {

struct PythonLocation {
  std::string executable;  // decides sys.prefix, and so the site-packages the compiler imports from
  std::string libpython;   // the shared library loaded into the process
  const char* source;      // where the choice came from, for messages
};

// In order: TJIT_PYTHON_EXECUTABLE / TJIT_LIBPYTHON; the Python environment tjit is installed in,
// when `library_dir` lies in one (a wheel: <prefix>/lib/pythonX.Y/site-packages/tjit/lib); the
// Python tjit was built with. Each part is chosen on its own (an override of one keeps the other).
PythonLocation locate_python(const std::string& library_dir);

}  // namespace tjit::detail
