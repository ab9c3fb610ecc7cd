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
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <array>
#include <vector>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::add";
constexpr int kMaxCollapsedDims = 4;

// Shared by the real and the Meta kernel, so both reject the same inputs.
void check_inputs(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  kit::check_defined(self, kOp, "self");
  kit::check_defined(other, kOp, "other");
  kit::check_supported_device(self, kOp, "self");
  kit::check_same_device(other, "other", self, "self", kOp);
  kit::check_dtype_in(self,
                         {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kInt, at::kLong},
                         kOp, "self");
  TORCH_CHECK(other.scalar_type() == self.scalar_type(), kOp, ": 'self' has dtype ", self.scalar_type(),
              " but 'other' has dtype ", other.scalar_type(),
              "; both must have the same dtype (convert one with .to())");
  TORCH_CHECK(!alpha.isComplex(), kOp, ": alpha must be real, got ", alpha.toComplexDouble());
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    TORCH_CHECK(alpha.isIntegral(/*includeBool=*/false), kOp,
                ": alpha must be an integer for integer tensors, got ", alpha.toDouble());
  }
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

}  // namespace

at::Tensor add_meta(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  check_inputs(self, other, alpha);
  const auto shape = broadcast_shape<c10::SymInt>(self.sym_sizes(), other.sym_sizes());
  return at::empty_symint(shape, self.options());
}

at::Tensor add_triton(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  check_inputs(self, other, alpha);
  const auto shape = broadcast_shape<int64_t>(self.sizes(), other.sizes());
  at::Tensor out = kit::empty_output(shape, self.options());
  const int64_t n = out.numel();
  if (n == 0) {
    return out;
  }

  const bool is_integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  const bool has_alpha = is_integral ? alpha.toLong() != 1 : alpha.toDouble() != 1.0;
  // Floating alpha travels as fp32 (Triton's scalar float); for fp64 tensors the fp32 rounding
  // error travels too, so alpha keeps ~48 bits.
  const double alpha_d = alpha.toDouble();
  const float alpha_f = static_cast<float>(alpha_d);
  const double alpha_lo = self.scalar_type() == at::kDouble ? alpha_d - static_cast<double>(alpha_f) : 0.0;
  const Stream stream = current_stream(self.device());

  CollapsedShape c;
  AddInputs inputs;
  inputs.numel = n;
  inputs.has_alpha = has_alpha;
  inputs.same_shape_contiguous =
      self.sizes() == out.sizes() && other.sizes() == out.sizes() && self.is_contiguous() && other.is_contiguous();
  if (!inputs.same_shape_contiguous) {
    inputs.collapsed = collapse(shape, self, other, c);
    inputs.x_max_offset = max_offset(c, c.x_stride);
    inputs.y_max_offset = max_offset(c, c.y_stride);
  }
  const AddPlan plan = plan_add(inputs, kit::device_facts(self));
  const Grid grid(plan.programs);
  const LaunchOptions options{plan.num_warps};
  if (plan.flat) {
    static auto& kernel = TritonJitFunction::get_instance(kernel_path("add.py"), kAddKernel);
    // x and y refer to the inputs (no reference-count traffic on the common path) unless the plan
    // materialises them.
    at::Tensor materialised_x;
    at::Tensor materialised_y;
    if (plan.materialise) {
      materialised_x = self.expand(shape).contiguous();
      materialised_y = other.expand(shape).contiguous();
    }
    const at::Tensor& x = plan.materialise ? materialised_x : self;
    const at::Tensor& y = plan.materialise ? materialised_y : other;
    if (is_integral) {
      kernel(stream, grid, options, x, y, out, n, alpha.toLong(), 0.0, plan.has_alpha, plan.block, plan.index64);
    } else {
      kernel(stream, grid, options, x, y, out, n, alpha_f, alpha_lo, plan.has_alpha, plan.block, plan.index64);
    }
    return out;
  }
  static auto& strided = TritonJitFunction::get_instance(kernel_path("add.py"), kAddStridedKernel);
  auto launch = [&](auto alpha_value) {
    strided(stream, grid, options, self, other, out, n, c.size[1], c.size[2], c.size[3], c.x_stride[0],
            c.x_stride[1], c.x_stride[2], c.x_stride[3], c.y_stride[0], c.y_stride[1], c.y_stride[2], c.y_stride[3],
            alpha_value, alpha_lo, plan.has_alpha, plan.block, plan.index64);
  };
  if (is_integral) {
    launch(alpha.toLong());
  } else {
    launch(alpha_f);
  }
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

// data = {self's shape, other's shape, alpha}; composed of differentiable operators.
torch::autograd::variable_list add_input_grads(const kit::FormulaNode& node, torch::autograd::variable_list&& grads) {
  const at::Tensor& grad = grads[0];
  at::Tensor grad_self;
  at::Tensor grad_other;
  if (!grad.defined()) {
    return {grad_self, grad_other};
  }
  if (node.wants(0)) {
    grad_self = reduce_to_shape(grad, node.data[0].toSymIntVector());
  }
  if (node.wants(1)) {
    const at::Scalar alpha = node.data[2].toScalar();
    grad_other = reduce_to_shape(grad, node.data[1].toSymIntVector());
    if (!is_one(alpha)) {
      grad_other = at::mul(grad_other, alpha);
    }
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
    kit::formula(node).data = {self.sym_sizes().vec(), other.sym_sizes().vec(), alpha};
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

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(m, "tjit", "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                    "self + alpha * other, with broadcasting (`torch.ops.tjit.add`).\n\n"
                    "Both tensors must have the same dtype (float32, float16, bfloat16, float64, int32, int64)\n"
                    "and be on the same device; alpha must be an integer for integer tensors. The result is\n"
                    "contiguous. Differentiable with respect to both tensors.");
}
// CUDA runs compiled kernels (capture_safe: another thread's graph capture does not refuse
// them); CPU runs the same kernels through Triton's interpreter.
TORCH_LIBRARY_IMPL(tjit, CUDA, m) { m.impl("add", tjit::kit::capture_safe<&tjit::ops::add_triton>); }
TORCH_LIBRARY_IMPL(tjit, CPU, m) { m.impl("add", &tjit::ops::add_triton); }
TORCH_LIBRARY_IMPL(tjit, Meta, m) { m.impl("add", &tjit::ops::add_meta); }
TORCH_LIBRARY_IMPL(tjit, Autograd, m) { m.impl("add", &tjit::ops::add_autograd); }

namespace tjit {

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  static const auto op = kit::typed_op<ops::AddSignature>("tjit::add");
  return op.call(self, other, alpha);
}

}  // namespace tjit
