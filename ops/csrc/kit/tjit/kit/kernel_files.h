#pragma once
// Finding an operator library's kernel files wherever the library was installed.

#include <initializer_list>
#include <string>
#include <string_view>

namespace tjit::kit {

// Where to look for a library's kernel files, in order; the first folder holding `probe_file` wins:
//   1. the folder named by the environment variable `env_override`, when set and not empty;
//   2. each of `next_to_library`, relative to the folder of the shared library containing `anchor`
//      (pass the address of any function of that library);
//   3. `source_dir`, the source tree the library was built from (empty: none).
struct KernelDirSearch {
  const char* env_override = nullptr;
  std::string_view probe_file;
  std::initializer_list<std::string_view> next_to_library;
  std::string_view source_dir;
};

// The folder `search` finds. When none holds `probe_file`, the first candidate: a deployment whose
// kernels all come from embedded bundles needs no files (bundles match kernels by file name), and a
// kernel missing from them names this path in its error.
std::string find_kernel_dir(const void* anchor, const KernelDirSearch& search);

}  // namespace tjit::kit
