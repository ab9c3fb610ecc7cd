// tjit::sum: sum over all dims or a set of dims, as Triton reductions (kernels_py/sum.py):
// schema, CUDA/CPU/Meta/Autograd kernels and the C++ entry point.

#include <tjit/ops/sum.h>  // this folder's sum.h, as installed

#include "../kernel_files.h"
#include "plan.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/kit/kit.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <algorithm>
#include <bitset>
#include <vector>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::sum";
constexpr int kMaxDims = 64;

using DimMask = std::bitset<kMaxDims>;

DimMask reduced_dims(int64_t ndim, at::OptionalIntArrayRef dim) {
  TORCH_CHECK(ndim <= kMaxDims, kOp, ": tensors of more than ", kMaxDims, " dims are not supported");
  DimMask mask;
  if (!dim.has_value() || dim->empty()) {
    for (int64_t d = 0; d < ndim; ++d) {
      mask.set(d);
    }
    return mask;
  }
  for (int64_t d : *dim) {
    const int64_t w = kit::wrap_dim(d, ndim, kOp, "dim");
    TORCH_CHECK(!mask.test(w), kOp, ": dim ", d, " appears more than once in dim=", *dim);
    mask.set(w);
  }
  return mask;
}

bool is_sum_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble || t == at::kInt ||
         t == at::kLong;
}

// As torch.sum: the result's dtype is `dtype`, else int64 for bool and integer inputs, else the
// input's; the input is converted to it first, so the sum runs in that precision. Shared by the
// real and the Meta kernel.
at::ScalarType check_inputs(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  kit::check_defined(self, kOp, "self");
  kit::check_supported_device(self, kOp, "self");
  const at::ScalarType in = self.scalar_type();
  TORCH_CHECK(!at::isComplexType(in), kOp, ": argument 'self' has dtype ", in, "; complex inputs are not supported");
  TORCH_CHECK(at::isFloatingType(in) || at::isIntegralType(in, /*includeBool=*/true), kOp, ": argument 'self' has dtype ",
              in, ", which is not supported (supported: floating, integer and bool dtypes)");
  const at::ScalarType out =
      dtype.value_or(at::isIntegralType(in, /*includeBool=*/true) ? at::kLong : in);
  TORCH_CHECK(is_sum_dtype(out), kOp, ": ", dtype.has_value() ? "dtype=" : "the result's dtype ", out,
              " is not supported (supported: Float, Half, BFloat16, Double, Int, Long)");
  return out;
}

template <typename T>
c10::SmallVector<T, 8> output_shape(c10::ArrayRef<T> sizes, const DimMask& mask, bool keepdim) {
  c10::SmallVector<T, 8> shape;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask.test(d)) {
      shape.push_back(sizes[d]);
    } else if (keepdim) {
      shape.push_back(T(1));
    }
  }
  return shape;
}


const std::string& sum_file() {
  static const std::string file = kernel_path("sum.py");  // once: the hot path builds no paths
  return file;
}

// out[m] = sum of row m of `in` viewed as [M, N] with `row_stride`.
void sum_rows(const at::Tensor& in, const kit::RowsView& v, const at::Tensor& out, bool index64) {
  const Stream stream = current_stream(in.device());
  const SumRowsInputs inputs{v.rows, v.cols, in.scalar_type(), index64};
  const std::string& file = sum_file();
  // Looked up only by the plans that launch it: with JIT off (a deployed program) a kernel that no
  // bundle holds cannot even be looked up.
  const auto rows_kernel = [&]() -> TritonJitFunction& {
    static auto& kernel = TritonJitFunction::get_instance(file, kSumRowsKernel);
    return kernel;
  };
  const auto launch = [&](const SumRowsPlan& plan) {
    LaunchOptions options{plan.num_warps};
    options.maxnreg = plan.maxnreg;
    options.launch_pdl = plan.launch_pdl;
    switch (plan.kind) {
      case SumRowsPlan::Kind::Rows:
        rows_kernel()(stream, Grid(plan.programs), options, in, out, v.rows, v.cols, v.row_stride, plan.block_n,
                      plan.index64, false);
        return;
      case SumRowsPlan::Kind::Blocked: {
        static auto& blocked = TritonJitFunction::get_instance(file, kSumRowsBlockedKernel);
        blocked(stream, Grid(plan.programs), options, in, out, v.rows, v.cols, v.row_stride, plan.block_m,
                plan.block_n, plan.index64);
        return;
      }
      case SumRowsPlan::Kind::TwoStageStrided:
      case SumRowsPlan::Kind::TwoStageChunked: {
        // Parts of each row into a partial buffer, then the rows of that buffer.
        const auto acc = in.options().dtype(kit::accumulator_type(in.scalar_type()));
        const at::Tensor partial = kit::empty_output({v.rows, plan.splits}, acc);
        if (plan.kind == SumRowsPlan::Kind::TwoStageStrided) {
          static auto& strided = TritonJitFunction::get_instance(file, kSumPartialStridedKernel);
          strided(stream, Grid(plan.programs), options, in, partial, v.rows, v.cols, v.row_stride, plan.splits,
                  plan.block_n, plan.index64, plan.launch_pdl);
        } else {
          static auto& chunked = TritonJitFunction::get_instance(file, kSumPartialKernel);
          chunked(stream, Grid(plan.programs), options, in, partial, v.rows, v.cols, v.row_stride, plan.chunk,
                  plan.block_n, plan.index64, plan.launch_pdl);
        }
        LaunchOptions second_stage{plan.second_num_warps};
        second_stage.launch_pdl = plan.launch_pdl;
        rows_kernel()(stream, Grid(kit::blocks_for(v.rows, 1, kOp)), second_stage, partial, out, v.rows, plan.splits,
                      plan.splits, plan.second_block_n, false, plan.launch_pdl);
        return;
      }
    }
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors
  // (the output is written again by the chosen plan).
  const kit::DeviceFacts device = kit::device_facts(in);
  const auto plan_of = [&](int candidate) { return plan_sum_rows_candidate(inputs, candidate, device); };
  const kit::CallTimer timer(stream, in.device(), rows_kernel, plan_of, launch);
  launch(plan_sum_rows(inputs, device, timer.get()));
}

// out[m, k] = sum over r of in[m, r, k] for a contiguous input viewed as [M, R, K].
void sum_middle(const at::Tensor& in, int64_t m, int64_t r, int64_t k, const at::Tensor& out, bool index64) {
  const Stream stream = current_stream(in.device());
  const SumMiddlePlan plan = plan_sum_middle({m, r, k, index64}, kit::device_facts(in));
  static auto& mid = TritonJitFunction::get_instance(sum_file(), kSumMidKernel);
  if (plan.split) {
    static auto& split = TritonJitFunction::get_instance(sum_file(), kSumMidSplitKernel);
    const auto acc = in.options().dtype(kit::accumulator_type(in.scalar_type()));
    at::Tensor partial = kit::empty_output({m, plan.splits, k}, acc);
    split(stream, Grid(plan.split_programs), LaunchOptions{4}, in, partial, m, r, k, r * k, k, plan.rows_per_split,
          plan.block_r, plan.block_k, plan.index64);
    mid(stream, Grid(plan.programs), LaunchOptions{4}, partial, out, m, plan.splits, k, plan.splits * k, k,
        plan.second_block_r, plan.block_k, plan.index64);
    return;
  }
  mid(stream, Grid(plan.programs), LaunchOptions{4}, in, out, m, r, k, r * k, k, plan.block_r, plan.block_k,
      plan.index64);
}

at::Tensor sum_meta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = check_inputs(self, dtype);
  const DimMask mask = reduced_dims(self.dim(), dim);
  const auto shape = output_shape<c10::SymInt>(self.sym_sizes(), mask, keepdim);
  return at::empty_symint(shape, self.options().dtype(out_dtype));
}

at::Tensor sum_triton(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = check_inputs(self, dtype);
  const DimMask mask = reduced_dims(self.dim(), dim);
  const auto shape = output_shape<int64_t>(self.sizes(), mask, keepdim);
  // As torch.sum: the input is converted to `dtype` first, so the sum runs in that precision.
  const at::Tensor x = out_dtype == self.scalar_type() ? self : self.to(out_dtype);
  at::Tensor out = kit::empty_output(shape, x.options());
  if (out.numel() == 0) {
    return out;
  }
  int64_t reduced = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (mask.test(d)) {
      reduced *= x.size(d);
    }
  }
  if (reduced == 0) {
    return at::zeros(shape, x.options());  // the sum of nothing
  }
  const bool index64 = kit::needs_index64(x);

  // A contiguous input whose reduced dims form one block [a, b) reduces in place as [M, R, K].
  int first = -1;
  int last = -1;
  bool consecutive = true;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 1) {
      continue;  // size-1 dims do not affect the layout
    }
    if (mask.test(d)) {
      if (last >= 0 && last != static_cast<int>(d) - 1) {
        // a kept dim of size > 1 lies between two reduced dims
        for (int64_t e = last + 1; e < d; ++e) {
          consecutive = consecutive && x.size(e) == 1;
        }
      }
      first = first < 0 ? static_cast<int>(d) : first;
      last = static_cast<int>(d);
    }
  }
  if (first < 0) {
    // Only size-1 dims are reduced: the sum is a copy.
    return out.copy_(x.reshape(shape));
  }
  if (consecutive && x.is_contiguous()) {
    int64_t m = 1;
    int64_t k = 1;
    for (int64_t d = 0; d < first; ++d) {
      m *= x.size(d);
    }
    for (int64_t d = last + 1; d < x.dim(); ++d) {
      k *= x.size(d);
    }
    if (k == 1) {
      sum_rows(x, kit::RowsView{m, reduced, reduced}, out, index64);
    } else {
      sum_middle(x, m, reduced, k, out, index64);
    }
    return out;
  }
  // Otherwise: kept dims first, reduced dims last, as rows.
  c10::SmallVector<int64_t, 8> order;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask.test(d)) {
      order.push_back(d);
    }
  }
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (mask.test(d)) {
      order.push_back(d);
    }
  }
  const auto [rows, view] = kit::rows_of(x.permute(order), reduced);
  sum_rows(rows, view, out, index64 || kit::needs_index64(rows));
  return out;
}

using SumSignature = at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>);

// The output's gradient broadcast back over the summed dims: data = {dims (wrapped, sorted),
// keepdim, input shape, input dtype}. Composed of differentiable operators, so every order works.
torch::autograd::variable_list sum_input_grad(const kit::FormulaNode& node, torch::autograd::variable_list&& grads) {
  if (!grads[0].defined() || !node.wants(0)) {
    return {at::Tensor()};
  }
  at::Tensor grad = grads[0];
  const auto shape = node.data[2].toSymIntVector();
  if (!node.data[1].toBool() && !shape.empty()) {
    for (int64_t d : node.data[0].toIntVector()) {
      grad = grad.unsqueeze(d);
    }
  }
  grad = grad.expand_symint(shape);  // every summed element receives the output's gradient
  const auto input_dtype = static_cast<at::ScalarType>(node.data[3].toInt());
  return {grad.scalar_type() == input_dtype ? grad : grad.to(input_dtype)};
}

at::Tensor sum_autograd(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  kit::check_defined(self, kOp, "self");
  static const auto op = kit::typed_op<SumSignature>(kOp);
  const bool graph = kit::records_graph({&self});
  const bool forward_ad = kit::has_forward_grad({&self});
  if (!graph && !forward_ad) {
    return op.redispatch(ks & c10::after_autograd_keyset, self, dim, keepdim, dtype);
  }
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = op.redispatch(ks & c10::after_autograd_keyset, self, dim, keepdim, dtype);
  }
  if (graph) {
    // Reduced dims, wrapped and sorted, so the backward can put them back.
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
    const auto node = kit::make_formula_node("TjitSumBackward", &sum_input_grad, self);
    kit::attach_outputs(node, {&out});
    kit::formula(node).data = {dims, keepdim, self.sym_sizes().vec(), static_cast<int64_t>(self.scalar_type())};
  }
  if (forward_ad) {
    kit::set_tangent(out, tjit::sum(kit::tangent(self), dim, keepdim, out.scalar_type()));
  }
  return out;
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(
      m, "tjit", "sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      "Sum of `self` over `dim` (`torch.ops.tjit.sum`), as `torch.sum`.\n\n"
      "`dim` is one dim or several (negative ones count from the end); None or an empty sequence sums\n"
      "over every dim. `keepdim` keeps the reduced dims with size 1. With `dtype` the input is converted\n"
      "to it first and the result has it; without `dtype`, bool and integer inputs sum to int64 and\n"
      "floating ones keep their dtype. Inputs: any real dtype; results: float32, float16, bfloat16,\n"
      "float64, int32, int64. float16 and bfloat16 accumulate in float32, integers in int64.\n"
      "Differentiable with respect to floating `self`.");
}
TORCH_LIBRARY_IMPL(tjit, CUDA, m) { m.impl("sum", tjit::kit::capture_safe<&tjit::ops::sum_triton>); }
TORCH_LIBRARY_IMPL(tjit, CPU, m) { m.impl("sum", &tjit::ops::sum_triton); }
TORCH_LIBRARY_IMPL(tjit, Meta, m) { m.impl("sum", &tjit::ops::sum_meta); }
TORCH_LIBRARY_IMPL(tjit, Autograd, m) { m.impl("sum", &tjit::ops::sum_autograd); }

namespace tjit {

at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
               std::optional<at::ScalarType> dtype) {
  static const auto op = kit::typed_op<ops::SumSignature>("tjit::sum");
  return op.call(self, dim, keepdim, dtype);
}

}  // namespace tjit
