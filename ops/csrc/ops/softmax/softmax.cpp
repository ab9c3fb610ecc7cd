// tjit::softmax and its backward over any dim, as Triton row kernels (kernels_py/softmax.py):
// the dim is moved last and the rows go to the kernel plan.h's plan_softmax picks.

#include <tjit/ops/softmax.h>  // this folder's softmax.h, as installed

#include "../kernel_files.h"
#include "plan.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/kit/kit.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::softmax";
constexpr const char* kBackwardOp = "tjit::softmax_backward";

void check_floating(const at::Tensor& t, const char* op, const char* arg) {
  kit::check_defined(t, op, arg);
  kit::check_supported_device(t, op, arg);
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": argument '", arg, "' has dtype ", t.scalar_type(),
              "; softmax needs a floating-point tensor (convert with .float(), or pass dtype=)");
  kit::check_dtype_in(t, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, op, arg);
}

// The output dtype, after checking `self` and `dtype`. As torch.softmax: with `dtype` the input is
// converted to it first, so any real input will do (integer ones included); without, `self` must
// be floating.
at::ScalarType checked_out_dtype(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (!dtype.has_value()) {
    check_floating(self, kOp, "self");
    return self.scalar_type();
  }
  kit::check_defined(self, kOp, "self");
  kit::check_supported_device(self, kOp, "self");
  TORCH_CHECK(*dtype == at::kFloat || *dtype == at::kHalf || *dtype == at::kBFloat16 || *dtype == at::kDouble, kOp,
              ": dtype=", *dtype, " is not supported (supported: Float, Half, BFloat16, Double)");
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), kOp, ": argument 'self' has dtype ", self.scalar_type(),
              "; complex inputs are not supported");
  return *dtype;
}

// One tensor's rows as the split kernels' ALIGN needs them.
SoftmaxRows rows_facts(const at::Tensor& t, int64_t row_stride) {
  return {static_cast<int64_t>(t.element_size()), static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16),
          row_stride};
}

// `t` with `dim` moved last: a view, or `t` itself when `dim` is already last (the common case;
// movedim would still make a view, a dispatcher round trip on every call).
at::Tensor dim_last(const at::Tensor& t, int64_t dim) {
  if (t.dim() == 0) {
    return t.reshape({1});
  }
  return dim == t.dim() - 1 ? t : t.movedim(dim, -1);
}

// Output laid out contiguously with `dim` last, returned with `dim` back in place: the layout
// the Meta kernel reproduces.
template <typename Shape>
Shape moved_shape(Shape shape, int64_t dim) {
  if (shape.empty()) {
    return shape;
  }
  auto value = shape[dim];
  shape.erase(shape.begin() + dim);
  shape.push_back(value);
  return shape;
}

at::Tensor restore_dim(const at::Tensor& moved_out, const at::Tensor& like, int64_t dim) {
  if (like.dim() == 0) {
    return moved_out.reshape({});
  }
  return dim == like.dim() - 1 ? moved_out : moved_out.movedim(-1, dim);
}

const std::string& softmax_file() {
  static const std::string file = kernel_path("softmax.py");  // once: the hot path builds no paths
  return file;
}

at::Tensor softmax_meta(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = checked_out_dtype(self, dtype);
  dim = kit::wrap_dim(dim, self.dim(), kOp, "dim");
  std::vector<c10::SymInt> shape(self.sym_sizes().begin(), self.sym_sizes().end());
  at::Tensor out = at::empty_symint(moved_shape(shape, dim), self.options().dtype(out_dtype));
  return restore_dim(out, self, dim);
}

at::Tensor softmax_triton(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = checked_out_dtype(self, dtype);
  dim = kit::wrap_dim(dim, self.dim(), kOp, "dim");
  // As torch.softmax: the input is converted to `dtype` first.
  const at::Tensor x = out_dtype == self.scalar_type() ? self : self.to(out_dtype);
  c10::SmallVector<int64_t, 6> shape(x.sizes().begin(), x.sizes().end());
  at::Tensor out_moved = kit::empty_output(moved_shape(shape, dim), x.options());
  const int64_t cols = x.dim() == 0 ? 1 : x.size(dim);
  if (out_moved.numel() == 0) {
    return restore_dim(out_moved, x, dim);
  }
  const auto [in, v] = kit::rows_of(dim_last(x, dim), cols);
  const bool index64 = kit::needs_index64(in) || kit::needs_index64(out_moved);
  const Stream stream = current_stream(x.device());
  SoftmaxInputs inputs;
  inputs.rows = v.rows;
  inputs.cols = cols;
  inputs.dtype = x.scalar_type();
  inputs.index64 = index64;
  inputs.tensors = {rows_facts(out_moved, cols), rows_facts(in, v.row_stride)};
  inputs.tensor_count = 2;
  const kit::DeviceFacts device = kit::device_facts(x);
  const std::string& file = softmax_file();
  const auto launch = [&](const SoftmaxPlan& plan) {
    LaunchOptions options{plan.num_warps};
    options.maxnreg = plan.maxnreg;
    const Grid grid(plan.programs);
    switch (plan.kind) {
      case SoftmaxPlan::Kind::ShortRows: {
        static auto& rows_kernel = TritonJitFunction::get_instance(file, kSoftmaxFwdRowsKernel);
        rows_kernel(stream, grid, options, out_moved, in, v.rows, cols, v.row_stride, cols, plan.block_m, plan.block_n,
                    plan.index64);
        break;
      }
      case SoftmaxPlan::Kind::SplitRows: {
        static auto& split_kernel = TritonJitFunction::get_instance(file, kSoftmaxFwdSplitKernel);
        split_kernel(stream, grid, options, out_moved, in, kit::row_exchange_workspace(v.rows, plan.exchange_chunks, x),
                     v.rows, cols, plan.chunks, v.row_stride, cols, plan.block_n, plan.s_pow2, plan.align,
                     plan.index64);
        break;
      }
      case SoftmaxPlan::Kind::Persistent: {
        static auto& persistent_kernel = TritonJitFunction::get_instance(file, kSoftmaxFwdPersistentKernel);
        persistent_kernel(stream, grid, options, out_moved, in, v.rows, cols, v.row_stride, cols, plan.block_n,
                          plan.num_stages, plan.index64);
        break;
      }
      case SoftmaxPlan::Kind::OneProgramPerRow: {
        static auto& kernel = TritonJitFunction::get_instance(file, kSoftmaxFwdKernel);
        kernel(stream, grid, options, out_moved, in, v.rows, cols, v.row_stride, cols, plan.block_n, plan.single_pass,
               plan.index64);
        break;
      }
      case SoftmaxPlan::Kind::TunedLongRows:
        TORCH_INTERNAL_ASSERT(false, kOp, ": the plan asked for the tuner again");
    }
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors.
  // The store keeps a tuned choice beside the one-row kernel, looked up only when tuning (with JIT
  // off, a bundle without it still runs the plans that never launch it).
  const auto row_kernel = [&]() -> TritonJitFunction& {
    static auto& kernel = TritonJitFunction::get_instance(file, kSoftmaxFwdKernel);
    return kernel;
  };
  const auto plan_of = [&](int candidate) { return plan_softmax_candidate(inputs, candidate, device); };
  const kit::CallTimer timer(stream, x.device(), row_kernel, plan_of, launch);
  SoftmaxPlan plan = plan_softmax(inputs, device, kit::Tuner::Available, timer.get());
  if (plan.kind == SoftmaxPlan::Kind::TunedLongRows) {
    static auto& long_kernel = TritonJitFunction::get_instance(file, kSoftmaxFwdLongKernel);
    const at::Tensor sync = kit::row_exchange_workspace(v.rows, plan.exchange_chunks, x);
    // While a CUDA graph is being captured nothing can be timed: without a chosen config the tuner
    // is unavailable to this call, and a candidate serves it instead.
    if (!stream_is_capturing(stream, x.device()) ||
        long_kernel.chosen_config(out_moved, in, sync, plan.row_bucket, cols, v.row_stride, cols, plan.s_pow2,
                                  plan.align, plan.index64)) {
      long_kernel.run(stream, kit::long_row_grid(v.rows, cols, kOp), out_moved, in, sync, plan.row_bucket, cols,
                      v.row_stride, cols, plan.s_pow2, plan.align, plan.index64);
      return restore_dim(out_moved, x, dim);
    }
    plan = plan_softmax(inputs, device, kit::Tuner::Unavailable, timer.get());
  }
  launch(plan);
  return restore_dim(out_moved, x, dim);
}

at::Tensor softmax_backward_meta(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype) {
  check_floating(grad_output, kBackwardOp, "grad_output");
  check_floating(output, kBackwardOp, "output");
  dim = kit::wrap_dim(dim, output.dim(), kBackwardOp, "dim");
  std::vector<c10::SymInt> shape(output.sym_sizes().begin(), output.sym_sizes().end());
  at::Tensor out = at::empty_symint(moved_shape(shape, dim), output.options().dtype(input_dtype));
  return restore_dim(out, output, dim);
}

at::Tensor softmax_backward_triton(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                   at::ScalarType input_dtype) {
  check_floating(grad_output, kBackwardOp, "grad_output");
  check_floating(output, kBackwardOp, "output");
  kit::check_same_device(grad_output, "grad_output", output, "output", kBackwardOp);
  TORCH_CHECK(grad_output.sizes() == output.sizes(), kBackwardOp, ": grad_output has shape ", grad_output.sizes(),
              " but output has shape ", output.sizes());
  TORCH_CHECK(at::isFloatingType(input_dtype), kBackwardOp, ": input_dtype=", input_dtype,
              " is not a floating-point type");
  dim = kit::wrap_dim(dim, output.dim(), kBackwardOp, "dim");
  c10::SmallVector<int64_t, 6> shape(output.sizes().begin(), output.sizes().end());
  at::Tensor grad_in_moved = kit::empty_output(moved_shape(shape, dim), output.options().dtype(input_dtype));
  if (grad_in_moved.numel() == 0) {
    return restore_dim(grad_in_moved, output, dim);
  }
  const int64_t cols = output.dim() == 0 ? 1 : output.size(dim);
  const auto [g, gv] = kit::rows_of(dim_last(grad_output, dim), cols);
  const auto [y, yv] = kit::rows_of(dim_last(output, dim), cols);
  const bool index64 = kit::needs_index64(g) || kit::needs_index64(y) || kit::needs_index64(grad_in_moved);
  const Stream stream = current_stream(output.device());
  SoftmaxInputs inputs;
  inputs.rows = yv.rows;
  inputs.cols = cols;
  inputs.dtype = grad_in_moved.scalar_type();
  inputs.backward = true;
  inputs.index64 = index64;
  inputs.tensors = {rows_facts(grad_in_moved, cols), rows_facts(g, gv.row_stride), rows_facts(y, yv.row_stride)};
  inputs.tensor_count = 3;
  const kit::DeviceFacts device = kit::device_facts(output);
  const std::string& file = softmax_file();
  const auto launch = [&](const SoftmaxPlan& plan) {
    LaunchOptions options{plan.num_warps};
    options.maxnreg = plan.maxnreg;
    const Grid grid(plan.programs);
    switch (plan.kind) {
      case SoftmaxPlan::Kind::ShortRows: {
        static auto& rows_kernel = TritonJitFunction::get_instance(file, kSoftmaxBwdRowsKernel);
        rows_kernel(stream, grid, options, grad_in_moved, g, y, yv.rows, cols, cols, gv.row_stride, yv.row_stride,
                    plan.block_m, plan.block_n, plan.index64);
        break;
      }
      case SoftmaxPlan::Kind::SplitRows: {
        static auto& split_kernel = TritonJitFunction::get_instance(file, kSoftmaxBwdSplitKernel);
        split_kernel(stream, grid, options, grad_in_moved, g, y,
                     kit::row_exchange_workspace(yv.rows, plan.exchange_chunks, y), yv.rows, cols, plan.chunks, cols,
                     gv.row_stride, yv.row_stride, plan.block_n, plan.s_pow2, plan.align, plan.index64, plan.reread);
        break;
      }
      case SoftmaxPlan::Kind::OneProgramPerRow: {
        static auto& kernel = TritonJitFunction::get_instance(file, kSoftmaxBwdKernel);
        kernel(stream, grid, options, grad_in_moved, g, y, yv.rows, cols, cols, gv.row_stride, yv.row_stride,
               plan.block_n, plan.single_pass, plan.index64);
        break;
      }
      case SoftmaxPlan::Kind::Persistent:
      case SoftmaxPlan::Kind::TunedLongRows:
        TORCH_INTERNAL_ASSERT(false, kBackwardOp, ": no such plan for the backward");
    }
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors.
  // The store keeps a tuned choice beside the one-row kernel, looked up only when tuning (with JIT
  // off, a bundle without it still runs the plans that never launch it).
  const auto row_kernel = [&]() -> TritonJitFunction& {
    static auto& kernel = TritonJitFunction::get_instance(file, kSoftmaxBwdKernel);
    return kernel;
  };
  const auto plan_of = [&](int candidate) { return plan_softmax_candidate(inputs, candidate, device); };
  const kit::CallTimer timer(stream, output.device(), row_kernel, plan_of, launch);
  launch(plan_softmax(inputs, device, kit::Tuner::Unavailable, timer.get()));
  return restore_dim(grad_in_moved, output, dim);
}

using SoftmaxSignature = at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>);
using SoftmaxBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType);

// softmax's input gradient: data = {dim, input dtype}, saved = {output}.
torch::autograd::variable_list softmax_input_grad(const kit::FormulaNode& node,
                                                  torch::autograd::variable_list&& grads) {
  if (!grads[0].defined() || !node.wants(0)) {
    return {at::Tensor()};
  }
  const at::Tensor out = node.saved(0);
  return {tjit::softmax_backward(grads[0].to(out.scalar_type()), out, node.data[0].toInt(),
                                 static_cast<at::ScalarType>(node.data[1].toInt()))};
}

at::Tensor softmax_autograd(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
  kit::check_defined(self, kOp, "self");
  static const auto op = kit::typed_op<SoftmaxSignature>(kOp);
  const bool graph = kit::records_graph({&self});
  const bool forward_ad = kit::has_forward_grad({&self});
  if (!graph && !forward_ad) {
    return op.redispatch(ks & c10::after_autograd_keyset, self, dim, dtype);
  }
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = op.redispatch(ks & c10::after_autograd_keyset, self, dim, dtype);
  }
  if (graph) {
    const auto node = kit::make_formula_node("TjitSoftmaxBackward", &softmax_input_grad, self);
    kit::attach_outputs(node, {&out});
    kit::FormulaNode& f = kit::formula(node);
    f.save(out, /*is_output=*/true);
    f.data = {dim, static_cast<int64_t>(self.scalar_type())};
  }
  if (forward_ad) {
    // The Jacobian is symmetric: the tangent goes through the backward's formula.
    kit::set_tangent(out, tjit::softmax_backward(kit::tangent(self).to(out.scalar_type()), out, dim,
                                                 out.scalar_type()));
  }
  return out;
}

// softmax_backward differentiated by composing aten's differentiable operators (in float32 for
// half-precision tensors, as the kernels compute): second and higher derivatives of softmax, and
// torch.func's transforms, record this instead of the kernel.
at::Tensor softmax_backward_composite(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                      at::ScalarType input_dtype) {
  dim = kit::wrap_dim(dim, output.dim(), kBackwardOp, "dim");
  const at::ScalarType compute = kit::accumulator_type(output.scalar_type());
  const at::Tensor g = grad_output.to(compute);
  const at::Tensor y = output.to(compute);
  const at::Tensor gy = g * y;
  const at::Tensor dot = output.dim() == 0 ? gy : gy.sum(dim, /*keepdim=*/true);
  return (y * (g - dot)).to(input_dtype);
}

at::Tensor softmax_backward_autograd(c10::DispatchKeySet ks, const at::Tensor& grad_output, const at::Tensor& output,
                                     int64_t dim, at::ScalarType input_dtype) {
  kit::check_defined(grad_output, kBackwardOp, "grad_output");
  kit::check_defined(output, kBackwardOp, "output");
  if (kit::records_graph({&grad_output, &output}) || kit::has_forward_grad({&grad_output, &output})) {
    check_floating(grad_output, kBackwardOp, "grad_output");
    check_floating(output, kBackwardOp, "output");
    TORCH_CHECK(grad_output.sym_sizes() == output.sym_sizes(), kBackwardOp, ": grad_output has shape ",
                grad_output.sym_sizes(), " but output has shape ", output.sym_sizes());
    return softmax_backward_composite(grad_output, output, dim, input_dtype);
  }
  static const auto op = kit::typed_op<SoftmaxBackwardSignature>(kBackwardOp);
  return op.redispatch(ks & c10::after_autograd_keyset, grad_output, output, dim, input_dtype);
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(m, "tjit", "softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
                    "Softmax of `self` along `dim` (`torch.ops.tjit.softmax`), as `torch.softmax`.\n\n"
                    "`self`: float32, float16, bfloat16 or float64; with `dtype` (a floating type) the input is\n"
                    "converted to it first and the result has it. Rows of any length. Differentiable with respect\n"
                    "to `self` (the backward is `softmax_backward`).");
  tjit::kit::define(m, "tjit",
                    "softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
                    "Gradient of `softmax` with respect to its input, from its output and the output's gradient\n"
                    "(`torch.ops.tjit.softmax_backward`; aten's `_softmax_backward_data`).\n\n"
                    "`grad_output` and `output`: the same shape and device, float32, float16, bfloat16 or float64;\n"
                    "`input_dtype` (a floating type) is the dtype of softmax's input, which the result has.");
}
// CUDA runs compiled kernels (capture_safe: another thread's graph capture does not refuse
// them); CPU runs the same kernels through Triton's interpreter.
TORCH_LIBRARY_IMPL(tjit, CUDA, m) {
  m.impl("softmax", tjit::kit::capture_safe<&tjit::ops::softmax_triton>);
  m.impl("softmax_backward", tjit::kit::capture_safe<&tjit::ops::softmax_backward_triton>);
}
TORCH_LIBRARY_IMPL(tjit, CPU, m) {
  m.impl("softmax", &tjit::ops::softmax_triton);
  m.impl("softmax_backward", &tjit::ops::softmax_backward_triton);
}
TORCH_LIBRARY_IMPL(tjit, Meta, m) {
  m.impl("softmax", &tjit::ops::softmax_meta);
  m.impl("softmax_backward", &tjit::ops::softmax_backward_meta);
}
TORCH_LIBRARY_IMPL(tjit, Autograd, m) {
  m.impl("softmax", &tjit::ops::softmax_autograd);
  m.impl("softmax_backward", &tjit::ops::softmax_backward_autograd);
}

namespace tjit {

at::Tensor softmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  static const auto op = kit::typed_op<ops::SoftmaxSignature>("tjit::softmax");
  return op.call(self, dim, dtype);
}

at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  static const auto op = kit::typed_op<ops::SoftmaxBackwardSignature>("tjit::softmax_backward");
  return op.call(grad_output, output, dim, input_dtype);
}

}  // namespace tjit
