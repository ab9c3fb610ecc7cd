// myops::scaled_silu: scale * silu(x) as two Triton kernels (kernels/scaled_silu.py), built on
// tjit's kit: schema, plan, CPU/CUDA/Meta/Autograd kernels and the C++ entry points.

#include "scaled_silu.h"

#include <tjit/current_stream.h>
#include <tjit/kit/kit.h>
#include <tjit/kit/library_kernels.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <ATen/TensorOperators.h>
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
  tjit::kit::check_same(grad, "grad", x, "x", kBackwardOp);  // device, dtype and shape
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

using ScaledSiluSignature = at::Tensor(const at::Tensor&, double);
using ScaledSiluBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, double);

// Autograd, the way torch's own operators record it (works under torch.func too). The first
// derivative is the operator scaled_silu_backward, so it runs on every device, under fake tensors
// and in compiled graphs: saved = {x}, data = {scale}.
torch::autograd::variable_list scaled_silu_input_grad(const tjit::kit::FormulaNode& node,
                                                      torch::autograd::variable_list&& grads) {
  if (!grads[0].defined() || !node.wants(0)) {
    return {at::Tensor()};
  }
  return {scaled_silu_backward(grads[0].contiguous(), node.saved(0), node.data[0].toDouble())};
}

// A call that records no graph and carries no tangent goes on below autograd untouched.
at::Tensor scaled_silu_autograd(c10::DispatchKeySet ks, const at::Tensor& x, double scale) {
  tjit::kit::check_defined(x, kOp, "x");
  static const auto op = tjit::kit::typed_op<ScaledSiluSignature>(kOp);
  const bool graph = tjit::kit::records_graph({&x});
  const bool forward_ad = tjit::kit::has_forward_grad({&x});
  if (!graph && !forward_ad) {
    return op.redispatch(ks & c10::after_autograd_keyset, x, scale);
  }
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = op.redispatch(ks & c10::after_autograd_keyset, x, scale);
  }
  if (graph) {
    const auto node = tjit::kit::make_formula_node("ScaledSiluBackward", &scaled_silu_input_grad, x);
    tjit::kit::attach_outputs(node, {&out});
    tjit::kit::formula(node).save(x);
    tjit::kit::formula(node).data = {scale};
  }
  if (forward_ad) {
    // Elementwise: the tangent goes through the backward's formula.
    tjit::kit::set_tangent(out, scaled_silu_backward(tjit::kit::tangent(x), tjit::kit::primal(x), scale));
  }
  return out;
}

// The backward operator's own derivatives (second and higher of scaled_silu): where a graph or a
// tangent is asked for, its formula composed of aten's differentiable operators records instead
// of the kernel: scale * grad * sigmoid(x) * (1 + x * (1 - sigmoid(x))).
at::Tensor scaled_silu_backward_autograd(c10::DispatchKeySet ks, const at::Tensor& grad, const at::Tensor& x,
                                         double scale) {
  tjit::kit::check_defined(grad, kBackwardOp, "grad");
  tjit::kit::check_defined(x, kBackwardOp, "x");
  if (tjit::kit::records_graph({&grad, &x}) || tjit::kit::has_forward_grad({&grad, &x})) {
    tjit::kit::check_same(grad, "grad", x, "x", kBackwardOp);
    const at::Tensor sigmoid = x.sigmoid();
    return grad * sigmoid * (x * (1 - sigmoid) + 1) * scale;
  }
  static const auto op = tjit::kit::typed_op<ScaledSiluBackwardSignature>(kBackwardOp);
  return op.redispatch(ks & c10::after_autograd_keyset, grad, x, scale);
}

// torch.func.vmap: the kernels are elementwise, so the batch is one more leading dimension and each
// level runs the kernel once (without a rule torch would call it once per sample, with a warning).
at::Tensor scaled_silu_batched(const at::Tensor& x, double scale) {
  tjit::kit::VmapCall vmap({&x});
  if (!vmap.batched()) {
    return scaled_silu(x, scale);
  }
  return vmap.batch(scaled_silu(vmap.front(x), scale));
}

at::Tensor scaled_silu_backward_batched(const at::Tensor& grad, const at::Tensor& x, double scale) {
  tjit::kit::VmapCall vmap({&grad, &x});
  if (!vmap.batched()) {
    return scaled_silu_backward(grad, x, scale);
  }
  return vmap.batch(scaled_silu_backward(vmap.front(grad), vmap.front(x), scale));
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
TORCH_LIBRARY_IMPL(myops, Autograd, m) {
  m.impl("scaled_silu", &myops::scaled_silu_autograd);
  m.impl("scaled_silu_backward", &myops::scaled_silu_backward_autograd);
}
TORCH_LIBRARY_IMPL(myops, FuncTorchBatched, m) {
  m.impl("scaled_silu", &myops::scaled_silu_batched);
  m.impl("scaled_silu_backward", &myops::scaled_silu_backward_batched);
}
