# Locates torch's headers and libraries through a Python interpreter (Python3_EXECUTABLE), without
# torch's own CMake config: that config insists on a CUDA toolkit for CUDA builds of torch, and
# tjit needs none (libcuda is opened at run time).
#
# Used by tjit's build and by its installed CMake package (tjitConfig.cmake), so a consumer gets the
# torch of its own environment, never the build machine's. Defines the imported target tjit::torch
# (once; C++20, which torch's headers need, comes with it) and the variables TORCH_INSTALL_DIR,
# TORCH_LIB_DIR and TORCH_VERSION.

if(NOT Python3_EXECUTABLE)
  message(FATAL_ERROR "tjit: FindTorchLibs needs Python3_EXECUTABLE (the Python that has torch)")
endif()
execute_process(
  COMMAND "${Python3_EXECUTABLE}" -c
    "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
  OUTPUT_VARIABLE _tjit_torch_info
  RESULT_VARIABLE _tjit_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _tjit_torch_rc EQUAL 0)
  message(FATAL_ERROR "tjit: `import torch` failed for ${Python3_EXECUTABLE}. Install torch into it "
                      "(CPU build: pip install torch==2.13.0), or point Python3_EXECUTABLE at a Python "
                      "that has torch.")
endif()
string(REPLACE "\n" ";" _tjit_torch_info "${_tjit_torch_info}")
list(GET _tjit_torch_info 0 TORCH_INSTALL_DIR)
list(GET _tjit_torch_info 1 TORCH_CXX11_ABI)
list(GET _tjit_torch_info 2 TORCH_VERSION)
set(TORCH_LIB_DIR "${TORCH_INSTALL_DIR}/lib")
# For tjit_add_operator_library's run paths, from any folder of a project (FetchContent).
set_property(GLOBAL PROPERTY TJIT_TORCH_LIB_DIR "${TORCH_LIB_DIR}")
message(STATUS "tjit: torch ${TORCH_VERSION} at ${TORCH_INSTALL_DIR}")

if(NOT TARGET tjit::torch)
  # GLOBAL: tjit's targets name it in their link interface, which a parent project (FetchContent)
  # resolves from its own folders.
  add_library(tjit::torch INTERFACE IMPORTED GLOBAL)
  set_target_properties(tjit::torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${TORCH_INSTALL_DIR}/include;${TORCH_INSTALL_DIR}/include/torch/csrc/api/include"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES
      "${TORCH_INSTALL_DIR}/include;${TORCH_INSTALL_DIR}/include/torch/csrc/api/include"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI}"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    # libtorch.so pulls in libtorch_cuda.so on CUDA builds of torch, which registers the CUDA
    # allocator and hooks: keep it even under --as-needed (Ubuntu's default).
    INTERFACE_LINK_LIBRARIES
      "-Wl,--no-as-needed;${TORCH_LIB_DIR}/libtorch.so;-Wl,--as-needed;${TORCH_LIB_DIR}/libtorch_cpu.so;${TORCH_LIB_DIR}/libc10.so")
endif()
