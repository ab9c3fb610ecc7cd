#pragma once
// Helpers every operator wrapper uses: where kernel files live, which stream to launch on,
// and argument checks whose messages name the operator and the argument.

#include <tjit/launch_types.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace tjit::detail {

// Absolute path of a kernel file shipped with tjit (ops/kernels_py/<file_name>). Searched, in
// order: $TJIT_KERNEL_DIR; kernels_py next to liboperators' lib/ folder (the Python package);
// share/tjit/kernels_py of an installed prefix; the source tree tjit was built from.
std::string kernel_path(std::string_view file_name);

// torch's current stream on `device`: what a launch must use to be ordered with torch's work.
// nullptr for CPU (the interpreter needs none).
Stream current_stream(const c10::Device& device);

void check_defined(const at::Tensor& t, const char* op, const char* arg);
// `t` must be on `device`; names both arguments otherwise.
void check_same_device(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg,
                       const char* op);
void check_dtype_in(const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed, const char* op,
                    const char* arg);
// CPU (interpreter), CUDA or Meta; anything else is an error naming the operator.
void check_supported_device(const at::Tensor& t, const char* op, const char* arg);

// Number of programs for n items in blocks of `block`, as a launch grid extent; throws if it
// exceeds what a grid dimension can hold.
uint32_t blocks_for(int64_t n, int64_t block, const char* op);

}  // namespace tjit::detail
