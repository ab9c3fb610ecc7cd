#pragma once
// The kernel files of the operator library this file is compiled into, wherever it was installed:
// for libraries built with tjit_add_operator_library (CMake), which defines the four
// TJIT_LIBRARY_* macros below. Search order (kit::find_kernel_dir):
//   1. the folder in the environment variable <NAME>_KERNEL_DIR (TJIT_LIBRARY_KERNEL_ENV), if set;
//   2. <name>_kernels/ next to the library's own .so (TJIT_LIBRARY_KERNEL_SUBDIR): the installed layout;
//   3. the kernel folder of the source tree it was built from (TJIT_LIBRARY_SOURCE_KERNEL_DIR).
// The library is told from its other libraries by the address of a function defined here, which
// each including file compiles into the library itself.
//
//   static auto& kernel = tjit::TritonJitFunction::get_instance(
//       tjit::kit::library_kernel_path("scaled_silu.py"), "scaled_silu_forward_kernel");

#include <tjit/kit/kernel_files.h>

#include <filesystem>
#include <string>
#include <string_view>

#if !defined(TJIT_LIBRARY_KERNEL_ENV) || !defined(TJIT_LIBRARY_KERNEL_SUBDIR) || \
    !defined(TJIT_LIBRARY_KERNEL_PROBE) || !defined(TJIT_LIBRARY_SOURCE_KERNEL_DIR)
#error "<tjit/kit/library_kernels.h> is for libraries built with tjit_add_operator_library; elsewhere call tjit::kit::find_kernel_dir"
#endif

namespace tjit::kit {
namespace {  // one copy per file, in this library: its address names the library

inline const std::string& library_kernel_dir() {
  static const std::string dir = find_kernel_dir(reinterpret_cast<const void*>(&library_kernel_dir),
                                                 {TJIT_LIBRARY_KERNEL_ENV, TJIT_LIBRARY_KERNEL_PROBE,
                                                  {TJIT_LIBRARY_KERNEL_SUBDIR}, TJIT_LIBRARY_SOURCE_KERNEL_DIR});
  return dir;
}

// The path of `file` (relative to the library's kernel folder). Call it once per kernel and keep
// the TritonJitFunction in a static: it builds a string.
inline std::string library_kernel_path(std::string_view file) {
  return (std::filesystem::path(library_kernel_dir()) / file).string();
}

}  // namespace
}  // namespace tjit::kit
