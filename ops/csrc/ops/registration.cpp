// The tjit operator library: schemas, per-dispatch-key implementations, and the C++ entry
// points of tjit/operators.h (which call through the dispatcher).

#include "operator_impls.h"

#include <tjit/operators.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymIntArrayRef.h>
#include <torch/library.h>

TORCH_LIBRARY(tjit, m) {
  m.def("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  m.def("sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  m.def("softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor");
  m.def("softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor");
  m.def("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> Tensor");
  m.def("layer_norm_forward(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, "
        "Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
}

// CUDA runs compiled kernels; CPU runs the same kernels through Triton's interpreter (slow, but
// every operator works on a machine without a GPU).
#define TJIT_REGISTER_TRITON_KERNELS(m)                                  \
  m.impl("add", &tjit::impl::add_triton);                                \
  m.impl("sum", &tjit::impl::sum_triton);                                \
  m.impl("softmax", &tjit::impl::softmax_triton);                        \
  m.impl("softmax_backward", &tjit::impl::softmax_backward_triton);      \
  m.impl("layer_norm", &tjit::impl::layer_norm_triton);                  \
  m.impl("layer_norm_forward", &tjit::impl::layer_norm_forward_triton);  \
  m.impl("layer_norm_backward", &tjit::impl::layer_norm_backward_triton)

TORCH_LIBRARY_IMPL(tjit, CUDA, m) { TJIT_REGISTER_TRITON_KERNELS(m); }
TORCH_LIBRARY_IMPL(tjit, CPU, m) { TJIT_REGISTER_TRITON_KERNELS(m); }

TORCH_LIBRARY_IMPL(tjit, Meta, m) {
  m.impl("add", &tjit::impl::add_meta);
  m.impl("sum", &tjit::impl::sum_meta);
  m.impl("softmax", &tjit::impl::softmax_meta);
  m.impl("softmax_backward", &tjit::impl::softmax_backward_meta);
  m.impl("layer_norm", &tjit::impl::layer_norm_meta);
  m.impl("layer_norm_forward", &tjit::impl::layer_norm_forward_meta);
  m.impl("layer_norm_backward", &tjit::impl::layer_norm_backward_meta);
}

TORCH_LIBRARY_IMPL(tjit, Autograd, m) {
  m.impl("add", &tjit::impl::add_autograd);
  m.impl("sum", &tjit::impl::sum_autograd);
  m.impl("softmax", &tjit::impl::softmax_autograd);
  m.impl("layer_norm", &tjit::impl::layer_norm_autograd);
}

namespace tjit {
namespace {

template <typename Signature>
c10::TypedOperatorHandle<Signature> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

}  // namespace

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  static const auto handle = op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>("tjit::add");
  return handle.call(self, other, alpha);
}

at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
               std::optional<at::ScalarType> dtype) {
  static const auto handle =
      op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>)>("tjit::sum");
  return handle.call(self, dim, keepdim, dtype);
}

at::Tensor softmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  static const auto handle =
      op<at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>)>("tjit::softmax");
  return handle.call(self, dim, dtype);
}

at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  static const auto handle =
      op<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType)>("tjit::softmax_backward");
  return handle.call(grad_output, output, dim, input_dtype);
}

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  static const auto handle = op<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                           const std::optional<at::Tensor>&, double)>("tjit::layer_norm");
  return handle.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& input,
                                                                  at::IntArrayRef normalized_shape,
                                                                  const std::optional<at::Tensor>& weight,
                                                                  const std::optional<at::Tensor>& bias, double eps) {
  static const auto handle = op<impl::Tensor3(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                              const std::optional<at::Tensor>&, double)>("tjit::layer_norm_forward");
  return handle.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  static const auto handle =
      op<impl::Tensor3(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, const at::Tensor&, const at::Tensor&,
                       const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, std::array<bool, 3>)>(
          "tjit::layer_norm_backward");
  return handle.call(grad_out, input, c10::fromIntArrayRefSlow(normalized_shape), mean, rstd, weight, bias,
                     output_mask);
}

}  // namespace tjit
