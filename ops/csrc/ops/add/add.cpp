// tjit::add: self + alpha * other with broadcasting, as one Triton kernel (kernels_py/add.py):
// schema, CUDA/CPU/Meta/Autograd kernels and the C++ entry point.

#include <tjit/ops/add.h>  // this folder's add.h, as installed

#include "../kernel_files.h"
#include "plan.h"

#include <tjit/current_stream.h>
#include <tjit/kit/kit.h>
#include <tjit/operators.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <array>
#include <string>
#include <vector>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::add";
constexpr int kMaxCollapsedDims = 4;

// A CPU 0-dim tensor beside a tensor on another device (a Python number arrives as one, marked a
// wrapped number) is a scalar operand, as in torch's elementwise operators.
bool is_scalar_operand(const at::Tensor& t, const at::Tensor& partner) {
  return t.dim() == 0 && t.device().is_cpu() && !partner.device().is_cpu();
}

// Every real dtype Triton can load: the result's dtype is torch's promotion of the two.
void check_operand_dtype(const at::Tensor& t, const char* arg) {
  kit::check_dtype_in(t, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kBool, at::kByte, at::kChar,
                          at::kShort, at::kInt, at::kLong},
                      kOp, arg);
}

// Shared by the real and the Meta kernel, so both reject the same inputs. Returns the result's
// dtype: torch's type promotion (at::result_type), with torch.add's rules for alpha.
at::ScalarType check_inputs(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  kit::check_defined(self, kOp, "self");
  kit::check_defined(other, kOp, "other");
  const bool self_is_scalar = is_scalar_operand(self, other);
  const bool other_is_scalar = is_scalar_operand(other, self);
  kit::check_supported_device(self_is_scalar ? other : self, kOp, self_is_scalar ? "other" : "self");
  if (!self_is_scalar && !other_is_scalar) {
    kit::check_same_device(other, "other", self, "self", kOp);
  }
  check_operand_dtype(self, "self");
  check_operand_dtype(other, "other");
  const at::ScalarType result = at::result_type(self, other);
  TORCH_CHECK(!alpha.isComplex(), kOp, ": alpha must be real, got ", alpha.toComplexDouble());
  TORCH_CHECK(!alpha.isBoolean() || result == at::kBool, kOp, ": alpha=", alpha.toBool(),
              " is a bool, which only a Bool result takes (this one is ", result, "), as in torch.add");
  TORCH_CHECK(at::isFloatingType(result) || alpha.isIntegral(/*includeBool=*/true), kOp, ": alpha=",
              alpha.toDouble(), " is a floating-point number but the result has dtype ", result,
              "; integer results take an integer alpha, as in torch.add");
  return result;
}

// numpy-style broadcast of two shapes (int64_t or SymInt), with an error naming both.
template <typename T>
c10::SmallVector<T, 6> broadcast_shape(c10::ArrayRef<T> a, c10::ArrayRef<T> b) {
  const size_t ndim = std::max(a.size(), b.size());
  c10::SmallVector<T, 6> out(ndim, T(1));
  for (size_t i = 0; i < ndim; ++i) {
    const bool has_a = i < a.size();
    const bool has_b = i < b.size();
    const T& sa = has_a ? a[a.size() - 1 - i] : out[ndim - 1 - i];
    const T& sb = has_b ? b[b.size() - 1 - i] : out[ndim - 1 - i];
    if (!has_a || sa == 1) {
      out[ndim - 1 - i] = has_b ? sb : T(1);
    } else if (!has_b || sb == 1 || sa == sb) {
      out[ndim - 1 - i] = sa;
    } else {
      TORCH_CHECK(false, kOp, ": shapes ", a, " ('self') and ", b,
                  " ('other') cannot be broadcast together: dimension ", -static_cast<int64_t>(i) - 1,
                  " has sizes ", sa, " and ", sb);
    }
  }
  return out;
}

// The output shape collapsed to at most four dims, with each input's strides over it (0 where
// broadcast). Adjacent dims merge when both inputs are contiguous across them.
struct CollapsedShape {
  int ndim = 0;
  std::array<int64_t, kMaxCollapsedDims> size{};
  std::array<int64_t, kMaxCollapsedDims> x_stride{};
  std::array<int64_t, kMaxCollapsedDims> y_stride{};
};

int64_t broadcast_stride(const at::Tensor& t, size_t out_dim, size_t out_ndim, int64_t out_size) {
  const int64_t offset = static_cast<int64_t>(out_ndim) - t.dim();
  const int64_t d = static_cast<int64_t>(out_dim) - offset;
  if (d < 0 || (t.size(d) == 1 && out_size != 1)) {
    return 0;
  }
  return t.stride(d);
}

bool collapse(c10::IntArrayRef shape, const at::Tensor& x, const at::Tensor& y, CollapsedShape& out) {
  // Walk from the innermost dim outwards; `out` holds dims innermost-first until reversed.
  int n = 0;
  std::array<int64_t, kMaxCollapsedDims> size{};
  std::array<int64_t, kMaxCollapsedDims> xs{};
  std::array<int64_t, kMaxCollapsedDims> ys{};
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t s = shape[k];
    if (s == 1) {
      continue;
    }
    const int64_t sx = broadcast_stride(x, k, shape.size(), s);
    const int64_t sy = broadcast_stride(y, k, shape.size(), s);
    if (n > 0 && sx == xs[n - 1] * size[n - 1] && sy == ys[n - 1] * size[n - 1]) {
      size[n - 1] *= s;
      continue;
    }
    if (n == kMaxCollapsedDims) {
      return false;
    }
    size[n] = s;
    xs[n] = sx;
    ys[n] = sy;
    ++n;
  }
  // Pad to four dims (outermost first) with size-1 dims.
  out.ndim = kMaxCollapsedDims;
  for (int i = 0; i < kMaxCollapsedDims; ++i) {
    const int src = kMaxCollapsedDims - 1 - i;
    out.size[i] = src < n ? size[src] : 1;
    out.x_stride[i] = src < n ? xs[src] : 0;
    out.y_stride[i] = src < n ? ys[src] : 0;
  }
  return true;
}

// Largest element offset reachable through `strides` over `sizes` (all strides are >= 0 here).
int64_t max_offset(const CollapsedShape& c, const std::array<int64_t, kMaxCollapsedDims>& stride) {
  int64_t m = 0;
  for (int i = 0; i < kMaxCollapsedDims; ++i) {
    m += (c.size[i] - 1) * stride[i];
  }
  return m;
}

const std::string& add_file() {
  static const std::string file = kernel_path("add.py");  // once: the hot path builds no paths
  return file;
}

// The output's device: the tensor operand's when the other is a scalar operand.
c10::Device output_device(const at::Tensor& self, const at::Tensor& other) {
  return is_scalar_operand(self, other) ? other.device() : self.device();
}

}  // namespace

at::Tensor add_meta(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const at::ScalarType result = check_inputs(self, other, alpha);
  const auto shape = broadcast_shape<c10::SymInt>(self.sym_sizes(), other.sym_sizes());
  return at::empty_symint(shape, self.options().dtype(result).device(output_device(self, other)));
}

at::Tensor add_triton(const at::Tensor& self_in, const at::Tensor& other_in, const at::Scalar& alpha) {
  const at::ScalarType result = check_inputs(self_in, other_in, alpha);
  const auto shape = broadcast_shape<int64_t>(self_in.sizes(), other_in.sizes());
  const at::TensorOptions out_options = self_in.options().dtype(result).device(output_device(self_in, other_in));
  at::Tensor out = kit::empty_output(shape, out_options);
  const int64_t n = out.numel();
  if (n == 0) {
    return out;
  }
  // A scalar operand is filled into a device tensor of the result's dtype (a fill kernel: no
  // copy from the host, so CUDA graphs capture it) and broadcast like any 0-dim tensor.
  at::Tensor filled;
  if (is_scalar_operand(self_in, other_in) || is_scalar_operand(other_in, self_in)) {
    const at::Tensor& scalar = self_in.device() == out.device() ? other_in : self_in;
    filled = at::full({}, scalar.item(), out_options);
  }
  const at::Tensor& self = filled.defined() && self_in.device() != out.device() ? filled : self_in;
  const at::Tensor& other = filled.defined() && other_in.device() != out.device() ? filled : other_in;

  const bool is_integral = at::isIntegralType(result, /*includeBool=*/true);
  const bool has_alpha = is_integral ? alpha.toLong() != 1 : alpha.toDouble() != 1.0;
  // Floating alpha travels as fp32 (Triton's scalar float); for fp64 tensors the fp32 rounding
  // error travels too, so alpha keeps ~48 bits.
  const double alpha_d = alpha.toDouble();
  const float alpha_f = static_cast<float>(alpha_d);
  const double alpha_lo = result == at::kDouble ? alpha_d - static_cast<double>(alpha_f) : 0.0;
  const Stream stream = current_stream(out.device());

  CollapsedShape c;
  AddInputs inputs;
  inputs.numel = n;
  inputs.dtype = result;
  inputs.has_alpha = has_alpha;
  inputs.same_shape_contiguous =
      self.sizes() == out.sizes() && other.sizes() == out.sizes() && self.is_contiguous() && other.is_contiguous();
  if (!inputs.same_shape_contiguous) {
    inputs.collapsed = collapse(shape, self, other, c);
    inputs.x_max_offset = max_offset(c, c.x_stride);
    inputs.y_max_offset = max_offset(c, c.y_stride);
  }
  // Whether the inputs are materialised or strided does not depend on the candidate.
  const AddPlan form = plan_add_candidate(inputs, 0);
  // x and y refer to the inputs (no reference-count traffic on the common path) unless the plan
  // materialises them.
  at::Tensor materialised_x;
  at::Tensor materialised_y;
  if (form.materialise) {
    materialised_x = self.expand(shape).contiguous();
    materialised_y = other.expand(shape).contiguous();
  }
  const at::Tensor& x = form.materialise ? materialised_x : self;
  const at::Tensor& y = form.materialise ? materialised_y : other;
  const std::string& file = add_file();
  const auto flat_kernel = [&]() -> TritonJitFunction& {
    static auto& kernel = TritonJitFunction::get_instance(file, kAddKernel);
    return kernel;
  };
  const auto strided_kernel = [&]() -> TritonJitFunction& {
    static auto& kernel = TritonJitFunction::get_instance(file, kAddStridedKernel);
    return kernel;
  };
  const auto launch = [&](const AddPlan& plan) {
    const Grid grid(plan.programs);
    const LaunchOptions options{plan.num_warps};
    if (plan.flat) {
      if (is_integral) {
        flat_kernel()(stream, grid, options, x, y, out, n, alpha.toLong(), 0.0, plan.has_alpha, plan.block,
                      plan.index64);
      } else {
        flat_kernel()(stream, grid, options, x, y, out, n, alpha_f, alpha_lo, plan.has_alpha, plan.block,
                      plan.index64);
      }
      return;
    }
    const auto strided = [&](auto alpha_value) {
      strided_kernel()(stream, grid, options, self, other, out, n, c.size[1], c.size[2], c.size[3], c.x_stride[0],
                       c.x_stride[1], c.x_stride[2], c.x_stride[3], c.y_stride[0], c.y_stride[1], c.y_stride[2],
                       c.y_stride[3], alpha_value, alpha_lo, plan.has_alpha, plan.block, plan.index64);
    };
    if (is_integral) {
      strided(alpha.toLong());
    } else {
      strided(alpha_f);
    }
  };
  // A first call of a size class on a card without a table times the candidates on these tensors
  // (the output is written again by the chosen plan; it aliases no input).
  const auto plan_of = [&](int candidate) { return plan_add_candidate(inputs, candidate); };
  const auto store_with = [&]() -> TritonJitFunction& { return form.flat ? flat_kernel() : strided_kernel(); };
  const kit::CallTimer timer(stream, out.device(), store_with, plan_of, launch);
  launch(plan_add(inputs, kit::device_facts(out), timer.get()));
  return out;
}

namespace {

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

bool is_one(const at::Scalar& alpha) { return alpha.isIntegral(false) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0; }

// data = {self's shape, other's shape, alpha, self's dtype, other's dtype}; composed of
// differentiable operators. Each gradient takes its input's dtype (the result's may be wider).
torch::autograd::variable_list add_input_grads(const kit::FormulaNode& node, torch::autograd::variable_list&& grads) {
  const at::Tensor& grad = grads[0];
  at::Tensor grad_self;
  at::Tensor grad_other;
  if (!grad.defined()) {
    return {grad_self, grad_other};
  }
  if (node.wants(0)) {
    grad_self = reduce_to_shape(grad, node.data[0].toSymIntVector()).to(node.data[3].toScalarType());
  }
  if (node.wants(1)) {
    const at::Scalar alpha = node.data[2].toScalar();
    grad_other = reduce_to_shape(grad, node.data[1].toSymIntVector());
    if (!is_one(alpha)) {
      grad_other = at::mul(grad_other, alpha);
    }
    grad_other = grad_other.to(node.data[4].toScalarType());
  }
  return {grad_self, grad_other};
}

using AddSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);

// Undefined tensors fail here with the operator's own message. A call that records no graph
// calls the CUDA kernel directly when that is what the redispatch would reach: add's whole cost
// is host overhead.
at::Tensor add_autograd(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other,
                        const at::Scalar& alpha) {
  kit::check_defined(self, kOp, "self");
  kit::check_defined(other, kOp, "other");
  static const auto op = kit::typed_op<AddSignature>(kOp);
  const bool graph = kit::records_graph({&self, &other});
  const bool forward_ad = kit::has_forward_grad({&self, &other});
  if (!graph && !forward_ad) {
    if (kit::cuda_kernel_is_next(ks)) {
      return add_triton(self, other, alpha);
    }
    return op.redispatch(ks & c10::after_autograd_keyset, self, other, alpha);
  }
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = op.redispatch(ks & c10::after_autograd_keyset, self, other, alpha);
  }
  if (graph) {
    const auto node = kit::make_formula_node("TjitAddBackward", &add_input_grads, self, other);
    kit::attach_outputs(node, {&out});
    kit::formula(node).data = {self.sym_sizes().vec(), other.sym_sizes().vec(), alpha, self.scalar_type(),
                               other.scalar_type()};
  }
  if (forward_ad) {
    const at::Tensor t_self = kit::tangent(self);
    const at::Tensor t_other = kit::tangent(other);
    at::Tensor t = tjit::add(t_self.defined() ? t_self : at::zeros_like(kit::primal(self)),
                             t_other.defined() ? t_other : at::zeros_like(kit::primal(other)), alpha);
    kit::set_tangent(out, t.scalar_type() == out.scalar_type() ? t : t.to(out.scalar_type()));
  }
  return out;
}

// `number` as a CPU 0-dim tensor of the dtype torch.add would give (self, number) (at::result_type):
// a tensor of that dtype promotes with `tensor` to the same dtype and holds the number as torch
// converts it. Not a wrapped-number tensor: under a Python dispatch mode (fake tensors) torch hands
// those on as Python numbers, which the Tensor overload's schema refuses.
at::Tensor number_operand(const at::Tensor& tensor, const at::Scalar& number) {
  return at::scalar_tensor(number, at::TensorOptions().dtype(at::result_type(tensor, number)));
}

// add.Scalar and add.Scalar_Tensor, as torch.add with a Python number.
at::Tensor add_tensor_number(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  kit::check_defined(self, kOp, "self");
  return tjit::add(self, number_operand(self, other), alpha);
}

at::Tensor add_number_tensor(const at::Scalar& self, const at::Tensor& other, const at::Scalar& alpha) {
  kit::check_defined(other, kOp, "other");
  return tjit::add(number_operand(other, self), other, alpha);
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(m, "tjit", "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                    "self + alpha * other, with broadcasting and torch's type promotion, as torch.add\n"
                    "(`torch.ops.tjit.add`).\n\n"
                    "The result's dtype is torch.result_type(self, other): a Python number or a 0-dim tensor\n"
                    "takes part by category only; a CPU 0-dim tensor may meet a CUDA tensor. Real dtypes only\n"
                    "(float32, float16, bfloat16, float64, bool, uint8, int8, int16, int32, int64); alpha\n"
                    "must be an integer for an integer result and may be a bool only for a bool one. The\n"
                    "result is contiguous. Differentiable with respect to both tensors.");
  tjit::kit::define(m, "tjit", "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
                    "self + alpha * other for a number `other`, as torch.add (`torch.ops.tjit.add.Scalar`):\n"
                    "the number takes part in promotion as a Python number does.");
  tjit::kit::define(m, "tjit", "add.Scalar_Tensor(Scalar self, Tensor other, *, Scalar alpha=1) -> Tensor",
                    "self + alpha * other for a number `self`, as torch.add(2, x) "
                    "(`torch.ops.tjit.add.Scalar_Tensor`):\n"
                    "the number takes part in promotion as a Python number does.");
}
// CUDA runs compiled kernels (capture_safe: another thread's graph capture does not refuse
// them); CPU runs the same kernels through Triton's interpreter.
TORCH_LIBRARY_IMPL(tjit, CUDA, m) { m.impl("add", tjit::kit::capture_safe<&tjit::ops::add_triton>); }
TORCH_LIBRARY_IMPL(tjit, CPU, m) { m.impl("add", &tjit::ops::add_triton); }
TORCH_LIBRARY_IMPL(tjit, Meta, m) { m.impl("add", &tjit::ops::add_meta); }
TORCH_LIBRARY_IMPL(tjit, Autograd, m) { m.impl("add", &tjit::ops::add_autograd); }
// The number forms are the Tensor form with the number as a 0-dim tensor: its kernels, autograd,
// batching rule and Meta kernel apply.
TORCH_LIBRARY_IMPL(tjit, CompositeImplicitAutograd, m) {
  m.impl("add.Scalar", &tjit::ops::add_tensor_number);
  m.impl("add.Scalar_Tensor", &tjit::ops::add_number_tensor);
}

namespace tjit {

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  static const auto op = kit::typed_op<ops::AddSignature>("tjit::add");
  return op.call(self, other, alpha);
}

}  // namespace tjit
