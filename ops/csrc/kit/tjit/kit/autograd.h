#pragma once
// Helpers for operators' Autograd kernels and C++ entry points.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>

#include <initializer_list>

namespace tjit::kit {

// The typed handle of a registered operator ("namespace::name"), for entry points that call
// through the dispatcher. Keep it in a function-local static: the lookup takes a lock.
template <typename Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* qualified_name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified_name, "").typed<Signature>();
}

// Whether a call records an autograd graph: grad mode is on and a defined input requires grad.
// A call that records none can go straight to the kernel below autograd and skip a custom
// Function's bookkeeping (about a microsecond a call).
inline bool records_graph(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) {
    return false;
  }
  for (const at::Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->requires_grad()) {
      return true;
    }
  }
  return false;
}

// Whether the dispatcher, asked to redispatch below autograd, would call the CUDA kernel; then an
// Autograd kernel may call it directly. Any other key left (Python, Functionalize, vmap, ...)
// must take the dispatcher's path.
inline bool cuda_kernel_is_next(c10::DispatchKeySet ks) {
  return (ks & c10::after_autograd_keyset).highestPriorityTypeId() == c10::DispatchKey::CUDA;
}

}  // namespace tjit::kit
