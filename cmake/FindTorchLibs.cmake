# Locates torch's headers and libraries through the Python interpreter, without
# torch's own CMake config: that config insists on a CUDA toolkit for CUDA builds
# of torch, and tjit needs none (libcuda is opened at run time).
#
# Defines the imported target tjit::torch and the variables TORCH_INSTALL_DIR,
# TORCH_LIB_DIR.

execute_process(
  COMMAND "${Python3_EXECUTABLE}" -c
    "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_info
  RESULT_VARIABLE _torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "tjit: `import torch` failed for ${Python3_EXECUTABLE}. Install torch first "
                      "(CPU build: pip install torch==2.13.0).")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 TORCH_INSTALL_DIR)
list(GET _torch_info 1 TORCH_CXX11_ABI)
list(GET _torch_info 2 TORCH_VERSION)
set(TORCH_LIB_DIR "${TORCH_INSTALL_DIR}/lib")
message(STATUS "tjit: torch ${TORCH_VERSION} at ${TORCH_INSTALL_DIR}")

add_library(tjit_torch INTERFACE)
add_library(tjit::torch ALIAS tjit_torch)
target_include_directories(tjit_torch SYSTEM INTERFACE
  "${TORCH_INSTALL_DIR}/include"
  "${TORCH_INSTALL_DIR}/include/torch/csrc/api/include")
target_compile_definitions(tjit_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
# libtorch.so pulls in libtorch_cuda.so on CUDA builds of torch, which registers the
# CUDA allocator and hooks: keep it even under --as-needed (Ubuntu's default).
target_link_libraries(tjit_torch INTERFACE
  "-Wl,--no-as-needed"
  "${TORCH_LIB_DIR}/libtorch.so"
  "-Wl,--as-needed"
  "${TORCH_LIB_DIR}/libtorch_cpu.so"
  "${TORCH_LIB_DIR}/libc10.so")
