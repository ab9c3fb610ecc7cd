// Autograd for tjit's operators, registered at the Autograd key so gradients work from C++
// programs as well as from Python. Each backward calls tjit operators through the dispatcher (so
// torch.compile traces it into tjit ops); only trivial glue (views, a scalar multiply) uses aten.

#include "op_support.h"
#include "operator_impls.h"

#include <tjit/operators.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/mul.h>
#include <c10/core/SymInt.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

namespace tjit::impl {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Sums `grad` down to `shape` (the inverse of broadcasting `shape` to grad's shape).
at::Tensor reduce_to_shape(const at::Tensor& grad, const std::vector<c10::SymInt>& shape) {
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) {
    dims.push_back(d);
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1 && grad.sym_size(lead + static_cast<int64_t>(i)) != 1) {
      dims.push_back(lead + static_cast<int64_t>(i));
    }
  }
  if (dims.empty()) {
    return grad;
  }
  return tjit::sum(grad, dims, /*keepdim=*/true).view_symint(shape);
}

class AddFunction : public torch::autograd::Function<AddFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other,
                            const at::Scalar& alpha) {
    ctx->saved_data["self_shape"] = self.sym_sizes();
    ctx->saved_data["other_shape"] = other.sym_sizes();
    ctx->saved_data["alpha"] = alpha;
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return tjit::add(self, other, alpha);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& grad = grads[0];
    at::Tensor grad_self;
    at::Tensor grad_other;
    if (ctx->needs_input_grad(0)) {
      grad_self = reduce_to_shape(grad, ctx->saved_data["self_shape"].toSymIntVector());
    }
    if (ctx->needs_input_grad(1)) {
      const at::Scalar alpha = ctx->saved_data["alpha"].toScalar();
      grad_other = reduce_to_shape(grad, ctx->saved_data["other_shape"].toSymIntVector());
      if (!(alpha.isIntegral(false) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0)) {
        grad_other = at::mul(grad_other, alpha);
      }
    }
    return {grad_self, grad_other, at::Tensor()};
  }
};

class SumFunction : public torch::autograd::Function<SumFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
    // Reduced dims, wrapped and sorted, so backward can put them back.
    std::vector<int64_t> dims;
    const int64_t n = std::max<int64_t>(self.dim(), 1);
    if (dim.has_value() && !dim->empty()) {
      for (int64_t d : *dim) {
        dims.push_back(d < 0 ? d + n : d);
      }
    } else {
      for (int64_t d = 0; d < self.dim(); ++d) {
        dims.push_back(d);
      }
    }
    std::sort(dims.begin(), dims.end());
    ctx->saved_data["dims"] = dims;
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["input_shape"] = self.sym_sizes();
    ctx->saved_data["input_dtype"] = self.scalar_type();
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return tjit::sum(self, dim, keepdim, dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::Tensor grad = grads[0];
    const auto shape = ctx->saved_data["input_shape"].toSymIntVector();
    if (!ctx->saved_data["keepdim"].toBool() && !shape.empty()) {
      for (int64_t d : ctx->saved_data["dims"].toIntVector()) {
        grad = grad.unsqueeze(d);
      }
    }
    grad = grad.expand_symint(shape);  // every summed element receives the output's gradient
    const auto input_dtype = static_cast<at::ScalarType>(ctx->saved_data["input_dtype"].toInt());
    if (grad.scalar_type() != input_dtype) {
      grad = grad.to(input_dtype);
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = tjit::softmax(self, dim, dtype);
    }
    ctx->save_for_backward({out});
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["input_dtype"] = self.scalar_type();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor out = ctx->get_saved_variables()[0];
    const auto input_dtype = static_cast<at::ScalarType>(ctx->saved_data["input_dtype"].toInt());
    at::Tensor grad_in = tjit::softmax_backward(grads[0].to(out.scalar_type()), out,
                                                ctx->saved_data["dim"].toInt(), input_dtype);
    return {grad_in, at::Tensor(), at::Tensor()};
  }
};

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                            const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                            double eps) {
    static const auto forward_op = c10::Dispatcher::singleton()
                                       .findSchemaOrThrow("tjit::layer_norm_forward", "")
                                       .typed<Tensor3(const at::Tensor&, c10::SymIntArrayRef,
                                                      const std::optional<at::Tensor>&,
                                                      const std::optional<at::Tensor>&, double)>();
    at::Tensor out;
    at::Tensor mean;
    at::Tensor rstd;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      std::tie(out, mean, rstd) = forward_op.call(input, normalized_shape, weight, bias, eps);
    }
    ctx->save_for_backward({input, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()), mean, rstd});
    ctx->saved_data["normalized_shape"] = normalized_shape;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto backward_op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("tjit::layer_norm_backward", "")
            .typed<Tensor3(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, const at::Tensor&,
                           const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                           std::array<bool, 3>)>();
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const std::optional<at::Tensor> weight = saved[1].defined() ? std::optional(saved[1]) : std::nullopt;
    const std::optional<at::Tensor> bias = saved[2].defined() ? std::optional(saved[2]) : std::nullopt;
    const auto shape = ctx->saved_data["normalized_shape"].toSymIntVector();
    // Edges exist only for tensor inputs that were given: weight and bias shift when absent.
    size_t next_edge = 1;
    const bool want_dw = weight.has_value() && ctx->needs_input_grad(next_edge++);
    const bool want_db = bias.has_value() && ctx->needs_input_grad(next_edge);
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), want_dw, want_db};
    auto [dx, dw, db] = backward_op.call(grads[0].contiguous(), input, shape, saved[3], saved[4], weight, bias, mask);
    return {dx, at::Tensor(), dw, db, at::Tensor()};
  }
};

}  // namespace

// The autograd kernels run first on every call. Undefined tensors must fail here with the
// operator's own message; and a call that records no graph (no input requires grad, or grad
// mode is off) goes straight to the kernel below autograd, skipping the custom Function's
// bookkeeping, which would cost about a microsecond per call.

namespace {

bool records_graph(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) {
    return false;
  }
  for (const at::Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) {
      return true;
    }
  }
  return false;
}

template <typename Signature>
const c10::TypedOperatorHandle<Signature>& handle(const char* name) {
  static const auto h = c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
  return h;
}

// Whether the dispatcher, asked to redispatch below autograd, would call the CUDA kernel. Then
// add calls it directly: add is the operator whose whole cost is host overhead, and the
// redispatch is a measurable part of it. Any other key left (Python, Functionalize, vmap, ...)
// takes the dispatcher's path.
bool cuda_kernel_is_next(c10::DispatchKeySet ks) {
  return (ks & c10::after_autograd_keyset).highestPriorityTypeId() == c10::DispatchKey::CUDA;
}

}  // namespace

at::Tensor add_autograd(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other,
                        const at::Scalar& alpha) {
  detail::check_defined(self, "tjit::add", "self");
  detail::check_defined(other, "tjit::add", "other");
  if (!records_graph({&self, &other})) {
    if (cuda_kernel_is_next(ks)) {
      return add_triton(self, other, alpha);
    }
    return handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>("tjit::add")
        .redispatch(ks & c10::after_autograd_keyset, self, other, alpha);
  }
  return AddFunction::apply(self, other, alpha);
}

at::Tensor sum_autograd(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  detail::check_defined(self, "tjit::sum", "self");
  if (!records_graph({&self})) {
    return handle<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>)>(
               "tjit::sum")
        .redispatch(ks & c10::after_autograd_keyset, self, dim, keepdim, dtype);
  }
  return SumFunction::apply(self, dim, keepdim, dtype);
}

at::Tensor softmax_autograd(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
  detail::check_defined(self, "tjit::softmax", "self");
  if (!records_graph({&self})) {
    return handle<at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>)>("tjit::softmax")
        .redispatch(ks & c10::after_autograd_keyset, self, dim, dtype);
  }
  return SoftmaxFunction::apply(self, dim, dtype);
}

at::Tensor layer_norm_autograd(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                               double eps) {
  detail::check_defined(input, "tjit::layer_norm", "input");
  const at::Tensor none;
  if (!records_graph({&input, weight ? &*weight : &none, bias ? &*bias : &none})) {
    return handle<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                             const std::optional<at::Tensor>&, double)>("tjit::layer_norm")
        .redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, bias, eps);
  }
  return LayerNormFunction::apply(input, normalized_shape, weight, bias, eps);
}

}  // namespace tjit::impl
