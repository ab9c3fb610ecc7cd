// myops::scaled_silu: scale * silu(x) as two Triton kernels (kernels/scaled_silu.py), built on
// tjit's kit: schema, plan, CPU/CUDA/Meta/Autograd kernels and the C++ entry points.

#include "scaled_silu.h"

#include <tjit/current_stream.h>
#include <tjit/kit/kit.h>
#include <tjit/kit/library_kernels.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace myops {
namespace {

constexpr const char* kOp = "myops::scaled_silu";
constexpr const char* kBackwardOp = "myops::scaled_silu_backward";

// The plan: a pure function from the call's size to what the kernels are launched with.
struct ScaledSiluPlan {
  int64_t block = 1024;
  int num_warps = 4;
  uint32_t programs = 1;
  bool index64 = false;
};

ScaledSiluPlan plan_scaled_silu(int64_t numel, const char* op) {
  ScaledSiluPlan plan;
  plan.programs = tjit::kit::blocks_for(numel, plan.block, op);
  // The last block's offsets reach numel + block.
  plan.index64 = numel + plan.block > tjit::kit::kInt32Limit;
  return plan;
}

// Shared by the real and the Meta kernels, so both reject the same inputs.
void check_input(const at::Tensor& x, const char* op, const char* arg) {
  tjit::kit::check_defined(x, op, arg);
  tjit::kit::check_supported_device(x, op, arg);
  tjit::kit::check_dtype_in(x, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, op, arg);
}

void check_backward_inputs(const at::Tensor& grad, const at::Tensor& x) {
  check_input(grad, kBackwardOp, "grad");
  check_input(x, kBackwardOp, "x");
  tjit::kit::check_same_device(grad, "grad", x, "x", kBackwardOp);
  TORCH_CHECK(grad.scalar_type() == x.scalar_type(), kBackwardOp, ": 'grad' has dtype ", grad.scalar_type(),
              " but 'x' has dtype ", x.scalar_type(), "; both must have the same dtype");
  TORCH_CHECK(grad.sym_sizes() == x.sym_sizes(), kBackwardOp, ": 'grad' has shape ", grad.sym_sizes(),
              " but 'x' has shape ", x.sym_sizes(), "; they must be equal");
}

// Launches `kernel` over `n` elements with scale in the kernels' type for the dtype (see the
// kernel file's contract) and the inputs' current stream.
template <typename... Tensors>
void launch(tjit::TritonJitFunction& kernel, const ScaledSiluPlan& plan, double scale, const at::Tensor& first,
            const Tensors&... rest) {
  const tjit::Stream stream = tjit::current_stream(first.device());
  const tjit::Grid grid(plan.programs);
  const tjit::LaunchOptions options{plan.num_warps};
  const int64_t n = first.numel();
  if (first.scalar_type() == at::kDouble) {
    kernel(stream, grid, options, first, rest..., n, scale, plan.block, plan.index64);
  } else {
    kernel(stream, grid, options, first, rest..., n, static_cast<float>(scale), plan.block, plan.index64);
  }
}

}  // namespace

// CUDA runs compiled kernels; CPU runs the same kernels through Triton's interpreter.
at::Tensor scaled_silu_triton(const at::Tensor& x, double scale) {
  check_input(x, kOp, "x");
  const at::Tensor input = x.contiguous();
  at::Tensor out = tjit::kit::empty_output(x.sizes(), x.options());
  if (out.numel() == 0) {
    return out;
  }
  // Found once: the kernel file next to the installed library, or in the source tree.
  static auto& kernel = tjit::TritonJitFunction::get_instance(tjit::kit::library_kernel_path("scaled_silu.py"),
                                                              "scaled_silu_forward_kernel");
  launch(kernel, plan_scaled_silu(out.numel(), kOp), scale, input, out);
  return out;
}

at::Tensor scaled_silu_backward_triton(const at::Tensor& grad, const at::Tensor& x, double scale) {
  check_backward_inputs(grad, x);
  const at::Tensor g = grad.contiguous();
  const at::Tensor input = x.contiguous();
  at::Tensor grad_x = tjit::kit::empty_output(x.sizes(), x.options());
  if (grad_x.numel() == 0) {
    return grad_x;
  }
  static auto& kernel = tjit::TritonJitFunction::get_instance(tjit::kit::library_kernel_path("scaled_silu.py"),
                                                              "scaled_silu_backward_kernel");
  launch(kernel, plan_scaled_silu(grad_x.numel(), kBackwardOp), scale, g, input, grad_x);
  return grad_x;
}

// Meta: shapes only (fake tensors, torch.compile, export), with the same checks.
at::Tensor scaled_silu_meta(const at::Tensor& x, double /*scale*/) {
  check_input(x, kOp, "x");
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor scaled_silu_backward_meta(const at::Tensor& grad, const at::Tensor& x, double /*scale*/) {
  check_backward_inputs(grad, x);
  return at::empty_symint(x.sym_sizes(), x.options());
}

namespace {

// Autograd: the backward is the operator scaled_silu_backward, so it runs on every device, under
// fake tensors and in compiled graphs.
class ScaledSiluFunction : public torch::autograd::Function<ScaledSiluFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return scaled_silu(x, scale);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    return {scaled_silu_backward(grads[0].contiguous(), x, ctx->saved_data["scale"].toDouble()), at::Tensor()};
  }
};

using ScaledSiluSignature = at::Tensor(const at::Tensor&, double);
using ScaledSiluBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, double);

// A call that records no graph goes on below autograd without the Function's bookkeeping.
at::Tensor scaled_silu_autograd(c10::DispatchKeySet ks, const at::Tensor& x, double scale) {
  tjit::kit::check_defined(x, kOp, "x");
  if (!tjit::kit::records_graph({&x})) {
    static const auto op = tjit::kit::typed_op<ScaledSiluSignature>(kOp);
    return op.redispatch(ks & c10::after_autograd_keyset, x, scale);
  }
  return ScaledSiluFunction::apply(x, scale);
}

}  // namespace

// The typed C++ entry points: through the dispatcher, like at:: functions.
at::Tensor scaled_silu(const at::Tensor& x, double scale) {
  static const auto op = tjit::kit::typed_op<ScaledSiluSignature>(kOp);
  return op.call(x, scale);
}

at::Tensor scaled_silu_backward(const at::Tensor& grad, const at::Tensor& x, double scale) {
  static const auto op = tjit::kit::typed_op<ScaledSiluBackwardSignature>(kBackwardOp);
  return op.call(grad, x, scale);
}

}  // namespace myops

// The library's namespace, `myops`: torch.ops.myops.scaled_silu in Python.
TORCH_LIBRARY(myops, m) {
  tjit::kit::define(m, "myops", "scaled_silu(Tensor x, float scale=1.0) -> Tensor",
                    "scale * x * sigmoid(x) (silu, scaled). x: float32, float16, bfloat16 or float64; the\n"
                    "result is contiguous. Differentiable with respect to x.");
  tjit::kit::define(m, "myops", "scaled_silu_backward(Tensor grad, Tensor x, float scale) -> Tensor",
                    "The gradient of scaled_silu with respect to x.");
}
// capture_safe: a call on one thread while another captures a CUDA graph is not refused.
TORCH_LIBRARY_IMPL(myops, CUDA, m) {
  m.impl("scaled_silu", tjit::kit::capture_safe<&myops::scaled_silu_triton>);
  m.impl("scaled_silu_backward", tjit::kit::capture_safe<&myops::scaled_silu_backward_triton>);
}
TORCH_LIBRARY_IMPL(myops, CPU, m) {
  m.impl("scaled_silu", &myops::scaled_silu_triton);
  m.impl("scaled_silu_backward", &myops::scaled_silu_backward_triton);
}
TORCH_LIBRARY_IMPL(myops, Meta, m) {
  m.impl("scaled_silu", &myops::scaled_silu_meta);
  m.impl("scaled_silu_backward", &myops::scaled_silu_backward_meta);
}
TORCH_LIBRARY_IMPL(myops, Autograd, m) { m.impl("scaled_silu", &myops::scaled_silu_autograd); }
