#pragma once
// tjit._C.kernel_launcher: the C++ half of tjit.jit (kernel_launcher.cpp says how a launch runs).

#include <torch/csrc/utils/pybind.h>

namespace tjit::python {

void register_kernel_launcher(pybind11::module_& m);

}  // namespace tjit::python
