#pragma once
// Where tjit's own kernel files (ops/kernels_py) are.

#include <string>
#include <string_view>

namespace tjit::ops {

// Absolute path of tjit's kernel file `file_name` (relative to kernels_py). Searched in order:
// $TJIT_KERNEL_DIR; kernels_py next to liboperators' lib/ folder (the Python package);
// share/tjit/kernels_py of an installed prefix; the source tree tjit was built from.
std::string kernel_path(std::string_view file_name);

}  // namespace tjit::ops
