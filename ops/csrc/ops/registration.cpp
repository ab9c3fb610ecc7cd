// The tjit operator library: schemas, per-dispatch-key implementations, and the C++ entry
// points of tjit/operators.h (which call through the dispatcher).

#include "operator_impls.h"

#include <tjit/operators.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

TORCH_LIBRARY(tjit, m) {
  m.def("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
}

TORCH_LIBRARY_IMPL(tjit, CUDA, m) { m.impl("add", &tjit::impl::add_triton); }

// CPU runs the same kernels through Triton's interpreter: slow, but every operator works on a
// machine without a GPU.
TORCH_LIBRARY_IMPL(tjit, CPU, m) { m.impl("add", &tjit::impl::add_triton); }

TORCH_LIBRARY_IMPL(tjit, Meta, m) { m.impl("add", &tjit::impl::add_meta); }

namespace tjit {

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("tjit::add", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>();
  return op.call(self, other, alpha);
}

}  // namespace tjit
