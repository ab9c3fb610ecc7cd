// tjit::rms_norm and tjit::add_rms_norm (the residual add fused in) over the trailing
// normalized_shape dims, forward and backward, as Triton row kernels (kernels_py/rms_norm.py).
// rstd is kept (in fp32, fp64 for fp64 input) for the backward. Which kernels run, with what, is
// plan.h's plans; this file executes them.

#include <tjit/ops/rms_norm.h>  // this folder's rms_norm.h, as installed

#include "../kernel_files.h"
#include "../norm_backward.h"
#include "../norm_forward.h"
#include "../norm_formulas.h"
#include "../norm_team.h"
#include "plan.h"

#include <tjit/current_stream.h>
#include <tjit/kit/kit.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <ATen/TensorOperators.h>
#include <torch/library.h>

#include <limits>
#include <optional>
#include <vector>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::rms_norm";
constexpr const char* kAddOp = "tjit::add_rms_norm";
constexpr const char* kBackwardOp = "tjit::rms_norm_backward";

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Checks shared by every kernel of the family; returns the number of leading dims (rows' shape).
// `residual` (add_rms_norm's) may be null.
template <typename Int>
int64_t check_inputs(const at::Tensor& input, const at::Tensor* residual, c10::ArrayRef<Int> normalized_shape,
                     const std::optional<at::Tensor>& weight, c10::ArrayRef<Int> input_sizes, const char* op) {
  kit::check_defined(input, op, "input");
  kit::check_supported_device(input, op, "input");
  kit::check_dtype_in(input, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, op, "input");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(k >= 1, op, ": normalized_shape must name at least one dim, got []");
  TORCH_CHECK(input.dim() >= k, op, ": normalized_shape ", normalized_shape, " has ", k,
              " dims but input has only ", input.dim(), " (shape ", input_sizes, ")");
  const int64_t lead = input.dim() - k;
  for (int64_t i = 0; i < k; ++i) {
    TORCH_CHECK(input_sizes[lead + i] == normalized_shape[i], op, ": normalized_shape ", normalized_shape,
                " does not match the trailing dims of input of shape ", input_sizes,
                " (expected input.shape[-", k, ":] == normalized_shape)");
  }
  if (residual != nullptr) {
    kit::check_defined(*residual, op, "residual");
    kit::check_same_device(*residual, "residual", input, "input", op);
    TORCH_CHECK(residual->scalar_type() == input.scalar_type(), op, ": residual has dtype ",
                residual->scalar_type(), " but input has dtype ", input.scalar_type(), "; they must match");
    TORCH_CHECK(residual->sym_sizes() == input.sym_sizes(), op, ": residual has shape ", residual->sym_sizes(),
                " but input has shape ", input.sym_sizes(), "; they must match (no broadcasting)");
  }
  if (present(weight)) {
    const at::Tensor& w = *weight;
    kit::check_same_device(w, "weight", input, "input", op);
    TORCH_CHECK(w.scalar_type() == input.scalar_type(), op, ": weight has dtype ", w.scalar_type(),
                " but input has dtype ", input.scalar_type(), "; they must match");
    TORCH_CHECK(w.dim() == k, op, ": weight has shape ", w.sym_sizes(), " but normalized_shape is ", normalized_shape);
    for (int64_t i = 0; i < k; ++i) {
      TORCH_CHECK(w.sym_size(i) == normalized_shape[i], op, ": weight has shape ", w.sym_sizes(),
                  " but normalized_shape is ", normalized_shape);
    }
  }
  return lead;
}

// eps absent is the epsilon of the dtype the statistics are computed in, as torch's rms_norm has it
// (float32's for float16 and bfloat16 input).
double resolve_eps(std::optional<double> eps, at::ScalarType dtype) {
  if (eps.has_value()) {
    return *eps;
  }
  return dtype == at::kDouble ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

template <typename Int>
std::vector<Int> leading_shape(c10::ArrayRef<Int> sizes, int64_t lead) {
  return std::vector<Int>(sizes.begin(), sizes.begin() + lead);
}

const std::string& kernel_file() {
  static const std::string file = kernel_path("rms_norm.py");  // once: the hot path builds no paths
  return file;
}

using Tensor2 = std::tuple<at::Tensor, at::Tensor>;
using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// (output, input + residual or undefined, rstd or undefined) on the Meta device.
Tensor3 forward_meta(const at::Tensor& input, const at::Tensor* residual, c10::SymIntArrayRef normalized_shape,
                     const std::optional<at::Tensor>& weight, const char* op) {
  const int64_t lead = check_inputs<c10::SymInt>(input, residual, normalized_shape, weight, input.sym_sizes(), op);
  const auto stats_options = input.options().dtype(kit::accumulator_type(input.scalar_type()));
  return {at::empty_symint(input.sym_sizes(), input.options()),
          residual != nullptr ? at::empty_symint(input.sym_sizes(), input.options()) : at::Tensor(),
          at::empty_symint(leading_shape(input.sym_sizes(), lead), stats_options)};
}

// The forward launch: (output, input + residual when a residual is given, rstd when `store_rstd`;
// undefined otherwise: inference neither allocates nor writes it).
Tensor3 forward(const at::Tensor& input, const at::Tensor* residual, at::IntArrayRef normalized_shape,
                const std::optional<at::Tensor>& weight, std::optional<double> eps, bool store_rstd, const char* op) {
  const int64_t lead = check_inputs<int64_t>(input, residual, normalized_shape, weight, input.sizes(), op);
  at::Tensor out = kit::empty_output(input.sizes(), input.options());
  at::Tensor sum = residual != nullptr ? kit::empty_output(input.sizes(), input.options()) : at::Tensor();
  at::Tensor rstd;
  if (store_rstd) {
    rstd = kit::empty_output(leading_shape(input.sizes(), lead),
                             input.options().dtype(kit::accumulator_type(input.scalar_type())));
  }
  const int64_t cols = c10::multiply_integers(normalized_shape);
  if (out.numel() == 0) {
    if (rstd.defined()) {
      rstd.fill_(std::numeric_limits<double>::quiet_NaN());  // rows of no columns: a mean of nothing
    }
    return {out, sum, rstd};
  }
  const auto [x, xv] = kit::rows_of(input, cols);
  at::Tensor r;
  kit::RowsView rv;
  if (residual != nullptr) {
    std::tie(r, rv) = kit::rows_of(*residual, cols);
  }
  const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
  RmsNormForwardInputs inputs;
  inputs.rows = xv.rows;
  inputs.cols = cols;
  inputs.dtype = x.scalar_type();
  inputs.index64 = kit::needs_index64(x) || kit::needs_index64(out) || (r.defined() && kit::needs_index64(r));
  inputs.has_residual = r.defined();
  const Stream stream = current_stream(input.device());
  norm::ForwardArguments args;
  args.y = out;
  args.sum = sum;
  args.rstd = rstd;
  args.x = x;
  args.residual = r;
  args.weight = w;
  args.rows = xv.rows;
  args.cols = cols;
  args.y_row_stride = cols;
  args.sum_row_stride = cols;
  args.x_row_stride = xv.row_stride;
  args.residual_row_stride = rv.row_stride;
  args.eps = resolve_eps(eps, x.scalar_type());
  const auto launch = [&](const RmsNormForwardPlan& plan) {
    LaunchOptions options{plan.num_warps};
    options.maxnreg = plan.maxnreg;
    norm::launch_forward(stream, plan.programs, options, args, forward_switches(plan, r.defined(), w.defined()));
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors.
  const auto plan_of = [&](int candidate) { return plan_rms_norm_forward_candidate(inputs, candidate); };
  const kit::CallTimer timer(stream, input.device(), norm::forward_kernel(), plan_of, launch);
  launch(plan_rms_norm_forward(inputs, kit::device_facts(x), timer.get()));
  return {out, sum, rstd};
}

// ------------------------------------------------------------------------------ CUDA/CPU and Meta

at::Tensor rms_norm_triton(const at::Tensor& input, at::IntArrayRef normalized_shape,
                           const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  return std::get<0>(forward(input, nullptr, normalized_shape, weight, eps, /*store_rstd=*/false, kOp));
}

Tensor2 rms_norm_forward_triton(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  auto [out, sum, rstd] = forward(input, nullptr, normalized_shape, weight, eps, /*store_rstd=*/true, kOp);
  return {out, rstd};
}

Tensor2 add_rms_norm_triton(const at::Tensor& input, const at::Tensor& residual, at::IntArrayRef normalized_shape,
                            const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  auto [out, sum, rstd] = forward(input, &residual, normalized_shape, weight, eps, /*store_rstd=*/false, kAddOp);
  return {out, sum};
}

Tensor3 add_rms_norm_forward_triton(const at::Tensor& input, const at::Tensor& residual,
                                    at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                                    std::optional<double> eps) {
  return forward(input, &residual, normalized_shape, weight, eps, /*store_rstd=*/true, kAddOp);
}

at::Tensor rms_norm_meta(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                         const std::optional<at::Tensor>& weight, std::optional<double> /*eps*/) {
  return std::get<0>(forward_meta(input, nullptr, normalized_shape, weight, kOp));
}

Tensor2 rms_norm_forward_meta(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                              const std::optional<at::Tensor>& weight, std::optional<double> /*eps*/) {
  auto [out, sum, rstd] = forward_meta(input, nullptr, normalized_shape, weight, kOp);
  return {out, rstd};
}

Tensor2 add_rms_norm_meta(const at::Tensor& input, const at::Tensor& residual, c10::SymIntArrayRef normalized_shape,
                          const std::optional<at::Tensor>& weight, std::optional<double> /*eps*/) {
  auto [out, sum, rstd] = forward_meta(input, &residual, normalized_shape, weight, kAddOp);
  return {out, sum};
}

Tensor3 add_rms_norm_forward_meta(const at::Tensor& input, const at::Tensor& residual,
                                  c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                                  std::optional<double> /*eps*/) {
  return forward_meta(input, &residual, normalized_shape, weight, kAddOp);
}

template <typename Int>
Int product(c10::ArrayRef<Int> sizes) {
  Int p(1);
  for (const Int& s : sizes) {
    p = p * s;
  }
  return p;
}

// `t` (grad_out, grad_sum) has the input's device, dtype and shape.
void check_like_input(const at::Tensor& t, const char* name, const at::Tensor& input) {
  kit::check_defined(t, kBackwardOp, name);
  kit::check_same_device(t, name, input, "input", kBackwardOp);
  TORCH_CHECK(t.scalar_type() == input.scalar_type() && t.sym_sizes() == input.sym_sizes(), kBackwardOp, ": ", name,
              " must have the input's dtype and shape (", input.scalar_type(), " ", input.sym_sizes(), "), got ",
              t.scalar_type(), " ", t.sym_sizes());
}

// Checks of the backward's own arguments beyond check_inputs; `leading`: the input's leading dims.
template <typename Int>
void check_backward_inputs(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& rstd,
                           const std::optional<at::Tensor>& grad_sum, c10::ArrayRef<Int> leading) {
  check_like_input(grad_out, "grad_out", input);
  if (present(grad_sum)) {
    check_like_input(*grad_sum, "grad_sum", input);
  }
  kit::check_defined(rstd, kBackwardOp, "rstd");
  kit::check_same_device(rstd, "rstd", input, "input", kBackwardOp);
  const auto acc = kit::accumulator_type(input.scalar_type());
  const Int rows = product(leading);
  TORCH_CHECK(rstd.scalar_type() == acc && rstd.sym_numel() == rows, kBackwardOp, ": rstd must be the ", acc,
              " tensor the forward returned (", rows, " elements), got ", rstd.scalar_type(), " ", rstd.sym_sizes());
}

Tensor2 rms_norm_backward_meta(const at::Tensor& grad_out, const at::Tensor& input,
                               c10::SymIntArrayRef normalized_shape, const at::Tensor& rstd,
                               const std::optional<at::Tensor>& weight, std::array<bool, 2> output_mask,
                               const std::optional<at::Tensor>& grad_sum) {
  const int64_t lead =
      check_inputs<c10::SymInt>(input, nullptr, normalized_shape, weight, input.sym_sizes(), kBackwardOp);
  check_backward_inputs<c10::SymInt>(grad_out, input, rstd, grad_sum, input.sym_sizes().slice(0, lead));
  return {output_mask[0] ? at::empty_symint(input.sym_sizes(), input.options()) : at::Tensor(),
          output_mask[1] && present(weight) ? at::empty_symint(weight->sym_sizes(), weight->options()) : at::Tensor()};
}

Tensor2 rms_norm_backward_triton(const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
                                 const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                 std::array<bool, 2> output_mask, const std::optional<at::Tensor>& grad_sum) {
  const int64_t lead = check_inputs<int64_t>(input, nullptr, normalized_shape, weight, input.sizes(), kBackwardOp);
  check_backward_inputs<int64_t>(grad_out, input, rstd, grad_sum, input.sizes().slice(0, lead));
  const bool want_dw = output_mask[1] && present(weight);
  at::Tensor dx = output_mask[0] ? kit::empty_output(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = want_dw ? kit::empty_output(weight->sizes(), weight->options()) : at::Tensor();
  const int64_t cols = c10::multiply_integers(normalized_shape);
  const int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  if (rows == 0 || cols == 0) {
    if (want_dw) {
      dw.zero_();  // a sum of nothing
    }
    return {dx, dw};
  }
  const auto [x, xv] = kit::rows_of(input, cols);
  const auto [dy, dyv] = kit::rows_of(grad_out, cols);
  at::Tensor ds;
  kit::RowsView dsv;
  if (dx.defined() && present(grad_sum)) {
    std::tie(ds, dsv) = kit::rows_of(*grad_sum, cols);
  }
  const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
  const at::Tensor rstd_c = rstd.contiguous();
  RmsNormBackwardInputs inputs;
  inputs.rows = rows;
  inputs.cols = cols;
  inputs.dtype = input.scalar_type();
  inputs.want_dx = dx.defined();
  inputs.want_dw = want_dw;
  inputs.with_grad_sum = ds.defined();
  inputs.index64 = kit::needs_index64(x) || kit::needs_index64(dy) || (ds.defined() && kit::needs_index64(ds));
  const kit::DeviceFacts device = kit::device_facts(input);
  const Stream stream = current_stream(input.device());
  const std::string& file = kernel_file();
  const auto partial_options = input.options().dtype(kit::accumulator_type(input.scalar_type()));
  static auto& held_team_kernel = TritonJitFunction::get_instance(file, kRmsNormBwdTeamKernel);
  static auto& lag_team_kernel = norm::team_lag_kernel();
  const auto team_options = [](const RmsNormBackwardPlan& plan) {
    LaunchOptions options{plan.num_warps};
    options.maxnreg = plan.maxnreg;
    return options;
  };
  // The team kernel of the plan and its arguments: the held form's, or the norm family's lag kernel's
  // (no mean: rms_norm's statistic; no bias).
  const auto team_arguments = [&](const RmsNormBackwardPlan& plan, const at::Tensor& dw_partial,
                                  const at::Tensor& sync, int64_t per_team, const auto& call) {
    if (plan.lag) {
      return call(lag_team_kernel, dx, dw_partial, at::Tensor(), dy, x, w, at::Tensor(), rstd_c, ds, sync, rows, cols,
                  plan.chunks, per_team, cols, dyv.row_stride, xv.row_stride, dsv.row_stride, w.defined(), want_dw,
                  false, plan.block_n, plan.s_pow2, plan.stages, plan.index64);
    }
    return call(held_team_kernel, dx, dw_partial, dy, x, w, rstd_c, ds, sync, rows, cols, plan.chunks, per_team, cols,
                dyv.row_stride, xv.row_stride, dsv.row_stride, w.defined(), want_dw, plan.block_n, plan.s_pow2,
                plan.stages, plan.index64);
  };
  // Candidate i's plan for this call: a team's count follows the occupancy of its kernel's binary,
  // asked with stand-ins of the buffers' dtypes (rstd_c: fp32, like the partial sums; the kernel does
  // not specialise on rows_per_team). A team the GPU cannot hold at once becomes another form.
  const auto plan_of = [&](int candidate) {
    RmsNormBackwardPlan plan = plan_rms_norm_backward_candidate(inputs, candidate, device);
    if (plan.needs_occupancy) {
      const at::Tensor long_stand_in = at::empty({1}, input.options().dtype(at::kLong));
      RmsNormBackwardInputs asked = inputs;
      asked.resident_programs_per_sm =
          team_arguments(plan, want_dw ? rstd_c : at::Tensor(), long_stand_in, 1,
                         [&](TritonJitFunction& team_kernel, const auto&... args) {
                           return team_kernel.resident_programs_per_sm(team_options(plan), args...);
                         });
      plan = plan_rms_norm_backward_candidate(asked, candidate, device);
    }
    return plan;
  };
  const auto launch = [&](const RmsNormBackwardPlan& plan) {
    const norm::ColumnSums sums(dw, at::Tensor(), plan.groups, cols, partial_options);
    const at::Tensor& dw_partial = sums.dw_partial;
    switch (plan.kind) {
      case RmsNormBackwardPlan::Kind::Nothing:
        return;
      case RmsNormBackwardPlan::Kind::Team: {
        const at::Tensor sync = kit::row_exchange_workspace(rows, plan.chunks, input, plan.groups);
        team_arguments(plan, dw_partial, sync, plan.rows_per_program,
                       [&](TritonJitFunction& team_kernel, const auto&... args) {
                         team_kernel(stream, Grid(plan.programs), team_options(plan), args...);
                         return 0;
                       });
        // Always: the rows of any team that gave up.
        static auto& rescue = TritonJitFunction::get_instance(file, kRmsNormBwdTeamRescueKernel);
        rescue(stream, Grid(static_cast<uint32_t>(plan.groups)), LaunchOptions{4}, dx, dw_partial, dy, x, w, rstd_c,
               ds, sync, rows, cols, plan.chunks, plan.rows_per_program, cols, dyv.row_stride, xv.row_stride,
               dsv.row_stride, w.defined(), want_dw, kRmsNormRescueBlock, plan.index64);
        break;
      }
      case RmsNormBackwardPlan::Kind::Fused: {
        norm::fused_kernel()(stream, Grid(plan.programs), LaunchOptions{plan.num_warps}, dx, dw_partial, at::Tensor(),
                             dy, x, w, at::Tensor(), rstd_c, ds, rows, cols, cols, dyv.row_stride, xv.row_stride,
                             dsv.row_stride, plan.rows_per_program, w.defined(), dx.defined(), want_dw, false,
                             plan.block_m, plan.block_n, plan.index64, plan.block_tail, plan.prefetch,
                             plan.preload_w);
        break;
      }
      case RmsNormBackwardPlan::Kind::DxThenColumns: {
        if (plan.dx) {
          norm::dx_kernel()(stream, Grid(plan.programs), LaunchOptions{plan.dx_num_warps}, dx, dy, x, w,
                            at::Tensor(), rstd_c, ds, rows, cols, cols, dyv.row_stride, xv.row_stride,
                            dsv.row_stride, w.defined(), plan.dx_block_n, plan.dx_single_pass, plan.index64);
        }
        if (plan.columns) {
          norm::column_sums_kernel()(stream, Grid(plan.column_blocks, static_cast<uint32_t>(plan.groups)),
                                     LaunchOptions{4}, dw_partial, at::Tensor(), dy, x, at::Tensor(), rstd_c, rows,
                                     cols, dyv.row_stride, xv.row_stride, plan.rows_per_group, true, false,
                                     plan.columns_block_m, plan.columns_block_n, plan.index64);
        }
        break;
      }
    }
    sums.finish(stream, plan.finalize, dw, at::Tensor(), cols, plan.index64);
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors;
  // the store keeps the choice beside the fused kernel, looked up only when tuning.
  const kit::CallTimer timer(stream, input.device(), norm::fused_kernel, plan_of, launch);
  launch(plan_of(choose_rms_norm_backward(inputs, device, timer.get())));
  return {dx, dw};
}

// ------------------------------------------------------------------------------------- autograd

using RmsNormSignature = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                    std::optional<double>);
using RmsNormForwardSignature = Tensor2(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                        std::optional<double>);
using AddRmsNormSignature = Tensor2(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                    const std::optional<at::Tensor>&, std::optional<double>);
using AddRmsNormForwardSignature = Tensor3(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                           const std::optional<at::Tensor>&, std::optional<double>);
using RmsNormBackwardSignature = Tensor2(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, const at::Tensor&,
                                         const std::optional<at::Tensor>&, std::array<bool, 2>,
                                         const std::optional<at::Tensor>&);

// The input gradient that rstd's gradient gives (undefined when unused or not wanted).
at::Tensor rstd_input_grad(const kit::FormulaNode& node, const at::Tensor& input, const at::Tensor& rstd,
                           const at::Tensor& grad_rstd, bool wanted) {
  if (!grad_rstd.defined() || !wanted) {
    return at::Tensor();
  }
  return norm::statistics_grad(input, static_cast<int64_t>(node.data[0].toSymIntVector().size()), at::Tensor(),
                               rstd, at::Tensor(), grad_rstd);
}

at::Tensor plus(const at::Tensor& a, const at::Tensor& b) { return !a.defined() ? b : !b.defined() ? a : a + b; }

// rms_norm's and rms_norm_forward's gradients for (input, weight) from those of (out, rstd):
// saved = {input, weight, rstd (an output)}, data = {normalized_shape}.
torch::autograd::variable_list rms_norm_input_grads(const kit::FormulaNode& node,
                                                    torch::autograd::variable_list&& grads) {
  const at::Tensor input = node.saved(0);
  const std::optional<at::Tensor> weight = kit::defined_or_nullopt(node.saved(1));
  const at::Tensor rstd = node.saved(2);
  at::Tensor dx;
  at::Tensor dw;
  if (grads[0].defined()) {
    const std::array<bool, 2> mask{node.wants(0), weight.has_value() && node.wants(1)};
    static const auto backward_op = kit::typed_op<RmsNormBackwardSignature>(kBackwardOp);
    std::tie(dx, dw) =
        backward_op.call(grads[0], input, node.data[0].toSymIntVector(), rstd, weight, mask, std::nullopt);
  }
  return {plus(dx, rstd_input_grad(node, input, rstd, grads[1], node.wants(0))), dw};
}

// add_rms_norm's and add_rms_norm_forward's gradients for (input, residual, weight) from those of
// (out, input + residual, rstd): saved = {the sum, weight, rstd (outputs but the weight)},
// data = {normalized_shape}. The sum's gradient adds to the normalisation's, and the total flows
// to input and residual.
torch::autograd::variable_list add_rms_norm_input_grads(const kit::FormulaNode& node,
                                                        torch::autograd::variable_list&& grads) {
  const at::Tensor sum = node.saved(0);
  const std::optional<at::Tensor> weight = kit::defined_or_nullopt(node.saved(1));
  const at::Tensor rstd = node.saved(2);
  const bool want_input = node.wants(0);
  const bool want_residual = node.wants(1);
  const bool want_dw = weight.has_value() && node.wants(2);
  const at::Tensor& grad_out = grads[0];
  const at::Tensor& grad_sum = grads[1];
  at::Tensor d_sum;
  at::Tensor dw;
  if (grad_out.defined()) {
    static const auto backward_op = kit::typed_op<RmsNormBackwardSignature>(kBackwardOp);
    std::tie(d_sum, dw) = backward_op.call(grad_out, sum, node.data[0].toSymIntVector(), rstd, weight,
                                           {want_input || want_residual, want_dw}, kit::defined_or_nullopt(grad_sum));
  } else {
    d_sum = grad_sum;  // only the sum was used (or nothing: undefined)
  }
  d_sum = plus(d_sum, rstd_input_grad(node, sum, rstd, grads[2], want_input || want_residual));
  return {want_input ? d_sum : at::Tensor(), want_residual ? d_sum : at::Tensor(), dw};
}

bool differentiable_call(std::initializer_list<const at::Tensor*> inputs, bool& graph, bool& forward_ad) {
  graph = kit::records_graph(inputs);
  forward_ad = kit::has_forward_grad(inputs);
  return graph || forward_ad;
}

// The forward below autograd, then the graph node on `out` (rstd is not differentiable) and its
// tangent.
Tensor2 rms_norm_recorded(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                          const std::optional<at::Tensor>& weight, std::optional<double> eps, bool graph,
                          bool forward_ad) {
  static const auto forward_op = kit::typed_op<RmsNormForwardSignature>("tjit::rms_norm_forward");
  Tensor2 outputs;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    outputs = forward_op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, eps);
  }
  const auto& [out, rstd] = outputs;
  if (graph) {
    const auto node = kit::make_formula_node("TjitRmsNormBackward", &rms_norm_input_grads, input, weight);
    kit::attach_outputs(node, {&out, &rstd});
    kit::FormulaNode& f = kit::formula(node);
    f.save(input);
    f.save(weight.value_or(at::Tensor()));
    f.save(rstd, /*is_output=*/true);
    f.data = {normalized_shape.vec()};
  }
  if (forward_ad) {
    auto [out_t, rstd_t] =
        norm::rms_norm_tangents(kit::primal(input), static_cast<int64_t>(normalized_shape.size()), rstd,
                                kit::primal(weight), kit::tangent(input), kit::tangent(weight), out.scalar_type());
    kit::set_tangent(out, out_t);
    kit::set_tangent(rstd, rstd_t);
  }
  return outputs;
}

Tensor3 add_rms_norm_recorded(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& residual,
                              c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                              std::optional<double> eps, bool graph, bool forward_ad) {
  static const auto forward_op = kit::typed_op<AddRmsNormForwardSignature>("tjit::add_rms_norm_forward");
  Tensor3 outputs;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    outputs = forward_op.redispatch(ks & c10::after_autograd_keyset, input, residual, normalized_shape, weight, eps);
  }
  const auto& [out, sum, rstd] = outputs;
  if (graph) {
    const auto node =
        kit::make_formula_node("TjitAddRmsNormBackward", &add_rms_norm_input_grads, input, residual, weight);
    kit::attach_outputs(node, {&out, &sum, &rstd});
    kit::FormulaNode& f = kit::formula(node);
    f.save(sum, /*is_output=*/true);
    f.save(weight.value_or(at::Tensor()));
    f.save(rstd, /*is_output=*/true);
    f.data = {normalized_shape.vec()};
  }
  if (forward_ad) {
    const at::Tensor input_t = kit::tangent(input);
    const at::Tensor residual_t = kit::tangent(residual);
    const at::Tensor sum_t = !input_t.defined()      ? residual_t
                             : !residual_t.defined() ? input_t
                                                     : input_t + residual_t;
    auto [out_t, rstd_t] = norm::rms_norm_tangents(sum, static_cast<int64_t>(normalized_shape.size()), rstd,
                                                   kit::primal(weight), sum_t, kit::tangent(weight), out.scalar_type());
    kit::set_tangent(out, out_t);
    kit::set_tangent(sum, sum_t.defined() ? sum_t.to(sum.scalar_type()) : sum_t);
    kit::set_tangent(rstd, rstd_t);
  }
  return outputs;
}

at::Tensor rms_norm_autograd(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                             const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  kit::check_defined(input, kOp, "input");
  bool graph = false;
  bool forward_ad = false;
  if (!differentiable_call({&input, weight ? &*weight : nullptr}, graph, forward_ad)) {
    static const auto op = kit::typed_op<RmsNormSignature>(kOp);
    return op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, eps);
  }
  return std::get<0>(rms_norm_recorded(ks, input, normalized_shape, weight, eps, graph, forward_ad));
}

Tensor2 rms_norm_forward_autograd(c10::DispatchKeySet ks, const at::Tensor& input,
                                  c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                                  std::optional<double> eps) {
  kit::check_defined(input, kOp, "input");
  bool graph = false;
  bool forward_ad = false;
  if (!differentiable_call({&input, weight ? &*weight : nullptr}, graph, forward_ad)) {
    static const auto op = kit::typed_op<RmsNormForwardSignature>("tjit::rms_norm_forward");
    return op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, eps);
  }
  return rms_norm_recorded(ks, input, normalized_shape, weight, eps, graph, forward_ad);
}

Tensor2 add_rms_norm_autograd(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& residual,
                              c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                              std::optional<double> eps) {
  kit::check_defined(input, kAddOp, "input");
  kit::check_defined(residual, kAddOp, "residual");
  bool graph = false;
  bool forward_ad = false;
  if (!differentiable_call({&input, &residual, weight ? &*weight : nullptr}, graph, forward_ad)) {
    static const auto op = kit::typed_op<AddRmsNormSignature>(kAddOp);
    return op.redispatch(ks & c10::after_autograd_keyset, input, residual, normalized_shape, weight, eps);
  }
  auto outputs = add_rms_norm_recorded(ks, input, residual, normalized_shape, weight, eps, graph, forward_ad);
  return {std::get<0>(outputs), std::get<1>(outputs)};
}

Tensor3 add_rms_norm_forward_autograd(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& residual,
                                      c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                                      std::optional<double> eps) {
  kit::check_defined(input, kAddOp, "input");
  kit::check_defined(residual, kAddOp, "residual");
  bool graph = false;
  bool forward_ad = false;
  if (!differentiable_call({&input, &residual, weight ? &*weight : nullptr}, graph, forward_ad)) {
    static const auto op = kit::typed_op<AddRmsNormForwardSignature>("tjit::add_rms_norm_forward");
    return op.redispatch(ks & c10::after_autograd_keyset, input, residual, normalized_shape, weight, eps);
  }
  return add_rms_norm_recorded(ks, input, residual, normalized_shape, weight, eps, graph, forward_ad);
}

// rms_norm_backward's own derivatives (the RMS norms' second and higher ones): the composed
// formula records where a graph or a tangent is asked for, the kernels run otherwise.
Tensor2 rms_norm_backward_autograd(c10::DispatchKeySet ks, const at::Tensor& grad_out, const at::Tensor& input,
                                   c10::SymIntArrayRef normalized_shape, const at::Tensor& rstd,
                                   const std::optional<at::Tensor>& weight, std::array<bool, 2> output_mask,
                                   const std::optional<at::Tensor>& grad_sum) {
  kit::check_defined(grad_out, kBackwardOp, "grad_out");
  kit::check_defined(input, kBackwardOp, "input");
  bool graph = false;
  bool forward_ad = false;
  if (differentiable_call({&grad_out, &input, weight ? &*weight : nullptr, grad_sum ? &*grad_sum : nullptr}, graph,
                          forward_ad)) {
    const int64_t lead =
        check_inputs<c10::SymInt>(input, nullptr, normalized_shape, weight, input.sym_sizes(), kBackwardOp);
    check_backward_inputs<c10::SymInt>(grad_out, input, rstd, grad_sum, input.sym_sizes().slice(0, lead));
    return norm::rms_norm_backward(grad_out, input, static_cast<int64_t>(normalized_shape.size()), rstd, weight,
                                   output_mask, grad_sum);
  }
  static const auto op = kit::typed_op<RmsNormBackwardSignature>(kBackwardOp);
  return op.redispatch(ks & c10::after_autograd_keyset, grad_out, input, normalized_shape, rstd, weight, output_mask,
                       grad_sum);
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(
      m, "tjit", "rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor",
      "RMS normalisation over the trailing `normalized_shape` dims (`torch.ops.tjit.rms_norm`), as\n"
      "`torch.nn.functional.rms_norm`: input / sqrt(mean(input^2) + eps) * weight.\n\n"
      "`input`, and `weight` when given (shape `normalized_shape`), share one dtype (float32, float16,\n"
      "bfloat16, float64) and device. Statistics are computed in float32, in float64 for float64 input;\n"
      "`eps` None is that dtype's epsilon, as torch's. Differentiable with respect to input and weight\n"
      "(the backward is `rms_norm_backward`).");
  tjit::kit::define(
      m, "tjit",
      "rms_norm_forward(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> "
      "(Tensor, Tensor)",
      "`rms_norm` that also returns what its backward needs: (out, rstd) (`torch.ops.tjit.rms_norm_forward`).\n\n"
      "rstd = 1 / sqrt(mean(input^2) + eps) has the input's leading dims as shape and dtype float32,\n"
      "float64 for float64 input. Differentiable through `out` (rstd is not).");
  tjit::kit::define(
      m, "tjit",
      "add_rms_norm(Tensor input, Tensor residual, SymInt[] normalized_shape, Tensor? weight=None, "
      "float? eps=None) -> (Tensor, Tensor)",
      "The residual add fused into RMS normalisation (`torch.ops.tjit.add_rms_norm`): returns\n"
      "(rms_norm(input + residual, normalized_shape, weight, eps), input + residual), the sum in the\n"
      "input's dtype (as `input + residual`), the normalisation of that rounded sum.\n\n"
      "`residual` has the input's shape, dtype and device; the rest as for `rms_norm`. Differentiable\n"
      "with respect to input, residual and weight; the second output's gradient adds to the sum's.");
  tjit::kit::define(
      m, "tjit",
      "add_rms_norm_forward(Tensor input, Tensor residual, SymInt[] normalized_shape, Tensor? weight=None, "
      "float? eps=None) -> (Tensor, Tensor, Tensor)",
      "`add_rms_norm` that also returns rstd: (out, input + residual, rstd)\n"
      "(`torch.ops.tjit.add_rms_norm_forward`); rstd as for `rms_norm_forward`, of the sum.");
  tjit::kit::define(
      m, "tjit",
      "rms_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor rstd, Tensor? weight, "
      "bool[2] output_mask, Tensor? grad_sum=None) -> (Tensor, Tensor)",
      "Gradients of `rms_norm` for (input, weight) (`torch.ops.tjit.rms_norm_backward`), from the\n"
      "normalised tensor `input` (for `add_rms_norm`: input + residual) and `rstd` as the forward\n"
      "returned it.\n\n"
      "`output_mask` (two bools) says which to compute; an entry is None where it is False or the weight\n"
      "is absent. `grad_sum`, when given, is added to the input's gradient (`add_rms_norm`'s second\n"
      "output). `grad_out` and `grad_sum` have the input's shape and dtype. Differentiable (the RMS\n"
      "norms' second derivatives).");
}
// CUDA runs compiled kernels (capture_safe: another thread's graph capture does not refuse
// them); CPU runs the same kernels through Triton's interpreter.
TORCH_LIBRARY_IMPL(tjit, CUDA, m) {
  m.impl("rms_norm", tjit::kit::capture_safe<&tjit::ops::rms_norm_triton>);
  m.impl("rms_norm_forward", tjit::kit::capture_safe<&tjit::ops::rms_norm_forward_triton>);
  m.impl("add_rms_norm", tjit::kit::capture_safe<&tjit::ops::add_rms_norm_triton>);
  m.impl("add_rms_norm_forward", tjit::kit::capture_safe<&tjit::ops::add_rms_norm_forward_triton>);
  m.impl("rms_norm_backward", tjit::kit::capture_safe<&tjit::ops::rms_norm_backward_triton>);
}
TORCH_LIBRARY_IMPL(tjit, CPU, m) {
  m.impl("rms_norm", &tjit::ops::rms_norm_triton);
  m.impl("rms_norm_forward", &tjit::ops::rms_norm_forward_triton);
  m.impl("add_rms_norm", &tjit::ops::add_rms_norm_triton);
  m.impl("add_rms_norm_forward", &tjit::ops::add_rms_norm_forward_triton);
  m.impl("rms_norm_backward", &tjit::ops::rms_norm_backward_triton);
}
TORCH_LIBRARY_IMPL(tjit, Meta, m) {
  m.impl("rms_norm", &tjit::ops::rms_norm_meta);
  m.impl("rms_norm_forward", &tjit::ops::rms_norm_forward_meta);
  m.impl("add_rms_norm", &tjit::ops::add_rms_norm_meta);
  m.impl("add_rms_norm_forward", &tjit::ops::add_rms_norm_forward_meta);
  m.impl("rms_norm_backward", &tjit::ops::rms_norm_backward_meta);
}
TORCH_LIBRARY_IMPL(tjit, Autograd, m) {
  m.impl("rms_norm", &tjit::ops::rms_norm_autograd);
  m.impl("rms_norm_forward", &tjit::ops::rms_norm_forward_autograd);
  m.impl("add_rms_norm", &tjit::ops::add_rms_norm_autograd);
  m.impl("add_rms_norm_forward", &tjit::ops::add_rms_norm_forward_autograd);
  m.impl("rms_norm_backward", &tjit::ops::rms_norm_backward_autograd);
}

namespace tjit {

at::Tensor rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                    std::optional<double> eps) {
  static const auto op = kit::typed_op<ops::RmsNormSignature>("tjit::rms_norm");
  return op.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, eps);
}

std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                    const std::optional<at::Tensor>& weight,
                                                    std::optional<double> eps) {
  static const auto op = kit::typed_op<ops::RmsNormForwardSignature>("tjit::rms_norm_forward");
  return op.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, eps);
}

std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& input, const at::Tensor& residual,
                                                at::IntArrayRef normalized_shape,
                                                const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  static const auto op = kit::typed_op<ops::AddRmsNormSignature>("tjit::add_rms_norm");
  return op.call(input, residual, c10::fromIntArrayRefSlow(normalized_shape), weight, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> add_rms_norm_forward(const at::Tensor& input,
                                                                    const at::Tensor& residual,
                                                                    at::IntArrayRef normalized_shape,
                                                                    const std::optional<at::Tensor>& weight,
                                                                    std::optional<double> eps) {
  static const auto op = kit::typed_op<ops::AddRmsNormForwardSignature>("tjit::add_rms_norm_forward");
  return op.call(input, residual, c10::fromIntArrayRefSlow(normalized_shape), weight, eps);
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                     at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> output_mask,
                                                     const std::optional<at::Tensor>& grad_sum) {
  static const auto op = kit::typed_op<ops::RmsNormBackwardSignature>("tjit::rms_norm_backward");
  return op.call(grad_out, input, c10::fromIntArrayRefSlow(normalized_shape), rstd, weight, output_mask, grad_sum);
}

}  // namespace tjit
