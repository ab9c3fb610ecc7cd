#include "kernel_files.h"

#include <tjit/kit/kernel_files.h>

#include <filesystem>

namespace tjit::ops {

std::string kernel_path(std::string_view file_name) {
  static const std::string dir = kit::find_kernel_dir(
      reinterpret_cast<const void*>(&kernel_path),
      {"TJIT_KERNEL_DIR", "add.py", {"../kernels_py", "../share/tjit/kernels_py"}, TJIT_SOURCE_KERNEL_DIR});
  return (std::filesystem::path(dir) / file_name).string();
}

}  // namespace tjit::ops
