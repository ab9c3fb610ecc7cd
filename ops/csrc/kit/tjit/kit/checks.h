#pragma once
// Input checks for operator wrappers. Every message leads with the operator's name and the
// argument's, then says what was expected, so a user can act on it.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <initializer_list>

namespace tjit::kit {

// `t` must be defined.
void check_defined(const at::Tensor& t, const char* op, const char* arg);
// `t` must be on the same device as `ref`; names both arguments otherwise.
void check_same_device(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg,
                       const char* op);
// `t` must have `ref`'s device, dtype and shape (operands of an elementwise operator, a gradient
// and its input); names both arguments and what differs.
void check_same(const at::Tensor& t, const char* arg, const at::Tensor& ref, const char* ref_arg, const char* op);
// `t`'s dtype must be one of `allowed`; the message lists them.
void check_dtype_in(const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed, const char* op,
                    const char* arg);
// CPU (Triton's interpreter), CUDA or Meta; anything else is an error naming the operator.
void check_supported_device(const at::Tensor& t, const char* op, const char* arg);
// Wraps a possibly negative dim into [0, ndim) (a 0-dim tensor takes 0 and -1), as torch does.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const char* arg);

}  // namespace tjit::kit
