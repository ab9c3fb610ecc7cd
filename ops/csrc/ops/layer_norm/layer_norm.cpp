// tjit::layer_norm and its backward over the trailing normalized_shape dims, as Triton row kernels
// (kernels_py/layer_norm/). mean and rstd are kept (in fp32, fp64 for fp64 input) for the backward.
// Which kernels run, with what, is plan.h's plans; this file executes them.

#include <tjit/ops/layer_norm.h>  // this folder's layer_norm.h, as installed

#include "../kernel_files.h"
#include "../norm_backward.h"
#include "../norm_forward.h"
#include "../norm_formulas.h"
#include "../norm_team.h"

#include <ATen/TensorOperators.h>
#include "plan.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/kit/kit.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::layer_norm";
constexpr const char* kBackwardOp = "tjit::layer_norm_backward";

// Checks shared by every kernel of the family; returns the number of leading dims (rows' shape).
template <typename Int>
int64_t check_layer_norm_inputs(const at::Tensor& input, c10::ArrayRef<Int> normalized_shape,
                                const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                c10::ArrayRef<Int> input_sizes, const char* op) {
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
  for (const auto& [param, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!param->has_value() || !(*param)->defined()) {
      continue;
    }
    const at::Tensor& p = **param;
    kit::check_same_device(p, name, input, "input", op);
    TORCH_CHECK(p.scalar_type() == input.scalar_type(), op, ": ", name, " has dtype ", p.scalar_type(),
                " but input has dtype ", input.scalar_type(), "; they must match");
    TORCH_CHECK(p.dim() == k, op, ": ", name, " has shape ", p.sizes(), " but normalized_shape is ",
                normalized_shape);
    for (int64_t i = 0; i < k; ++i) {
      TORCH_CHECK(p.sym_size(i) == normalized_shape[i], op, ": ", name, " has shape ", p.sym_sizes(),
                  " but normalized_shape is ", normalized_shape);
    }
  }
  return lead;
}

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// The kernel files, their paths built once: the hot path builds no paths.
const std::string& forward_file() {
  static const std::string file = kernel_path("layer_norm/forward.py");
  return file;
}

const std::string& backward_file() {
  static const std::string file = kernel_path("layer_norm/backward.py");
  return file;
}

template <typename Int>
std::vector<Int> leading_shape(c10::ArrayRef<Int> sizes, int64_t lead) {
  return std::vector<Int>(sizes.begin(), sizes.begin() + lead);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward_meta(const at::Tensor& input,
                                                                       c10::SymIntArrayRef normalized_shape,
                                                                       const std::optional<at::Tensor>& weight,
                                                                       const std::optional<at::Tensor>& bias,
                                                                       double /*eps*/) {
  const int64_t lead = check_layer_norm_inputs<c10::SymInt>(input, normalized_shape, weight, bias,
                                                            input.sym_sizes(), kOp);
  const auto stats_options = input.options().dtype(kit::accumulator_type(input.scalar_type()));
  return {at::empty_symint(input.sym_sizes(), input.options()),
          at::empty_symint(leading_shape(input.sym_sizes(), lead), stats_options),
          at::empty_symint(leading_shape(input.sym_sizes(), lead), stats_options)};
}

// The forward launch. Without `store_stats` (inference: tjit::layer_norm) mean and rstd are
// neither allocated nor written, and come back undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                       const std::optional<at::Tensor>& weight,
                                                       const std::optional<at::Tensor>& bias, double eps,
                                                       bool store_stats) {
  const int64_t lead = check_layer_norm_inputs<int64_t>(input, normalized_shape, weight, bias, input.sizes(), kOp);
  const auto stats_options = input.options().dtype(kit::accumulator_type(input.scalar_type()));
  at::Tensor out = kit::empty_output(input.sizes(), input.options());
  at::Tensor mean;
  at::Tensor rstd;
  if (store_stats) {
    mean = kit::empty_output(leading_shape(input.sizes(), lead), stats_options);
    rstd = kit::empty_output(leading_shape(input.sizes(), lead), stats_options);
  }
  const int64_t cols = c10::multiply_integers(normalized_shape);
  if (out.numel() == 0) {
    return {out, mean, rstd};
  }
  const auto [x, v] = kit::rows_of(input, cols);
  const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
  const at::Tensor b = present(bias) ? bias->contiguous() : at::Tensor();
  const bool index64 = kit::needs_index64(x) || kit::needs_index64(out);
  const Stream stream = current_stream(input.device());
  LayerNormForwardInputs inputs;
  inputs.rows = v.rows;
  inputs.cols = cols;
  inputs.dtype = x.scalar_type();
  inputs.index64 = index64;
  const kit::DeviceFacts device = kit::device_facts(x);
  const std::string& file = forward_file();
  const auto launch = [&](LayerNormForwardPlan p) {
    LaunchOptions options{p.num_warps};
    options.maxnreg = p.maxnreg;
    switch (p.kind) {
      case LayerNormForwardPlan::Kind::ShortRows: {
        // The norm family's kernel, its mean subtracted in one pass: no residual (nor its sum).
        norm::ForwardArguments args;
        args.y = out;
        args.mean = mean;
        args.rstd = rstd;
        args.x = x;
        args.weight = w;
        args.bias = b;
        args.rows = v.rows;
        args.cols = cols;
        args.y_row_stride = cols;
        args.x_row_stride = v.row_stride;
        args.eps = eps;
        norm::launch_forward(stream, p.programs, options, args, short_rows_switches(p, w.defined(), b.defined()));
        break;
      }
      case LayerNormForwardPlan::Kind::Persistent: {
        static auto& persistent_kernel = TritonJitFunction::get_instance(file, kLayerNormFwdPersistentKernel);
        const auto with_arguments = [&](const auto& call) {
          return call(out, x, w, b, mean, rstd, v.rows, cols, v.row_stride, cols, eps, w.defined(), b.defined(),
                      p.block_n, p.block_tail, p.stages, p.index64);
        };
        if (p.needs_occupancy) {
          // The grid is as many programs as the GPU holds: the candidate planned again with the occupancy.
          LayerNormForwardInputs with_occupancy = inputs;
          with_occupancy.resident_programs_per_sm = with_arguments(
              [&](const auto&... args) { return persistent_kernel.resident_programs_per_sm(options, args...); });
          p = plan_layer_norm_forward_candidate(with_occupancy, p.candidate, device);
        }
        with_arguments([&](const auto&... args) { persistent_kernel(stream, Grid(p.programs), options, args...); });
        break;
      }
      case LayerNormForwardPlan::Kind::OneProgramPerRow: {
        static auto& kernel = TritonJitFunction::get_instance(file, kLayerNormFwdKernel);
        // Undefined mean/rstd reach the kernel as None, which compiles their stores out. eps goes as
        // the double it is: the kernel annotates it tl.float64 (fp64 input uses it unrounded, as aten).
        kernel(stream, Grid(p.programs), options, out, x, w, b, mean, rstd, v.rows, cols, v.row_stride, cols, eps,
               w.defined(), b.defined(), p.block_n, p.single_pass, p.index64, p.block_tail, p.preload_affine,
               p.keep_row, p.row_steps);
        break;
      }
      case LayerNormForwardPlan::Kind::TunedLongRows:
        TORCH_INTERNAL_ASSERT(false, kOp, ": the plan asked for the tuner again");
    }
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors.
  // Looked up only when tuning (with JIT off, a bundle without it still runs the other forms).
  const auto row_kernel = [&]() -> TritonJitFunction& {
    static auto& kernel = TritonJitFunction::get_instance(file, kLayerNormFwdKernel);
    return kernel;
  };
  const auto plan_of = [&](int candidate) { return plan_layer_norm_forward_candidate(inputs, candidate, device); };
  const kit::CallTimer timer(stream, input.device(), row_kernel, plan_of, launch);
  LayerNormForwardPlan plan = plan_layer_norm_forward(inputs, device, kit::Tuner::Available, timer.get());
  if (plan.kind == LayerNormForwardPlan::Kind::TunedLongRows) {
    static auto& long_kernel = TritonJitFunction::get_instance(file, kLayerNormFwdLongKernel);
    const at::Tensor sync = kit::row_exchange_workspace(v.rows, plan.exchange_chunks, x);
    // While a CUDA graph is being captured nothing can be timed: without a chosen config the tuner
    // is unavailable to this call, and a candidate serves it instead.
    if (!stream_is_capturing(stream, input.device()) ||
        long_kernel.chosen_config(out, x, w, b, mean, rstd, sync, plan.row_bucket, cols, v.row_stride, cols, eps,
                                  w.defined(), b.defined(), plan.index64)) {
      long_kernel.run(stream, kit::long_row_grid(v.rows, cols, kOp), out, x, w, b, mean, rstd, sync, plan.row_bucket,
                      cols, v.row_stride, cols, eps, w.defined(), b.defined(), plan.index64);
      return {out, mean, rstd};
    }
    plan = plan_layer_norm_forward(inputs, device, kit::Tuner::Unavailable, timer.get());
  }
  launch(plan);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward_triton(const at::Tensor& input,
                                                                         at::IntArrayRef normalized_shape,
                                                                         const std::optional<at::Tensor>& weight,
                                                                         const std::optional<at::Tensor>& bias,
                                                                         double eps) {
  return forward(input, normalized_shape, weight, bias, eps, /*store_stats=*/true);
}

at::Tensor layer_norm_meta(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                           const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                           double eps) {
  return std::get<0>(layer_norm_forward_meta(input, normalized_shape, weight, bias, eps));
}

at::Tensor layer_norm_triton(const at::Tensor& input, at::IntArrayRef normalized_shape,
                             const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                             double eps) {
  return std::get<0>(forward(input, normalized_shape, weight, bias, eps, /*store_stats=*/false));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& /*mean*/, const at::Tensor& /*rstd*/, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  check_layer_norm_inputs<c10::SymInt>(input, normalized_shape, weight, bias, input.sym_sizes(), kBackwardOp);
  at::Tensor dx = output_mask[0] ? at::empty_symint(input.sym_sizes(), input.options()) : at::Tensor();
  at::Tensor dw = output_mask[1] && present(weight) ? at::empty_symint(weight->sym_sizes(), weight->options())
                                                    : at::Tensor();
  at::Tensor db = output_mask[2] && present(bias) ? at::empty_symint(bias->sym_sizes(), bias->options())
                                                  : at::Tensor();
  (void)grad_out;
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_triton(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const int64_t lead =
      check_layer_norm_inputs<int64_t>(input, normalized_shape, weight, bias, input.sizes(), kBackwardOp);
  kit::check_defined(grad_out, kBackwardOp, "grad_out");
  kit::check_same_device(grad_out, "grad_out", input, "input", kBackwardOp);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), kBackwardOp, ": grad_out has shape ", grad_out.sizes(),
              " but input has shape ", input.sizes());
  TORCH_CHECK(grad_out.scalar_type() == input.scalar_type(), kBackwardOp, ": grad_out has dtype ",
              grad_out.scalar_type(), " but input has dtype ", input.scalar_type());
  const at::ScalarType acc = kit::accumulator_type(input.scalar_type());
  for (const auto& [stat, name] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    kit::check_defined(*stat, kBackwardOp, name);
    kit::check_same_device(*stat, name, input, "input", kBackwardOp);
    TORCH_CHECK(stat->scalar_type() == acc && stat->numel() == c10::multiply_integers(input.sizes().slice(0, lead)),
                kBackwardOp, ": ", name, " must be the ", acc, " tensor tjit::layer_norm_forward returned (",
                c10::multiply_integers(input.sizes().slice(0, lead)), " elements), got ", stat->scalar_type(), " ",
                stat->sizes());
  }
  const bool want_dw = output_mask[1] && present(weight);
  const bool want_db = output_mask[2] && present(bias);
  at::Tensor dx = output_mask[0] ? kit::empty_output(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = want_dw ? kit::empty_output(weight->sizes(), weight->options()) : at::Tensor();
  at::Tensor db = want_db ? kit::empty_output(bias->sizes(), bias->options()) : at::Tensor();
  const int64_t cols = c10::multiply_integers(normalized_shape);
  const int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  if (rows == 0 || cols == 0) {
    // No rows: parameter gradients are sums of nothing.
    if (want_dw) dw.zero_();
    if (want_db) db.zero_();
    return {dx, dw, db};
  }
  const Stream stream = current_stream(input.device());
  const std::string& file = backward_file();
  const auto [x, xv] = kit::rows_of(input, cols);
  const auto [dy, dyv] = kit::rows_of(grad_out, cols);
  const at::Tensor mean_c = mean.contiguous();
  const at::Tensor rstd_c = rstd.contiguous();
  LayerNormBackwardInputs inputs;
  inputs.rows = rows;
  inputs.cols = cols;
  inputs.dtype = input.scalar_type();
  inputs.want_dx = dx.defined();
  inputs.want_dw = want_dw;
  inputs.want_db = want_db;
  inputs.index64 = kit::needs_index64(x) || kit::needs_index64(dy);
  const kit::DeviceFacts device = kit::device_facts(input);
  const auto partial_options = input.options().dtype(acc);
  const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
  static auto& lag_kernel = norm::team_lag_kernel();
  const auto options_of = [](const LayerNormBackwardPlan& plan) {
    LaunchOptions options{plan.num_warps};
    options.maxnreg = plan.maxnreg;
    return options;
  };
  const auto lag_arguments = [&](const LayerNormBackwardPlan& plan, const at::Tensor& dw_partial,
                                 const at::Tensor& db_partial, const at::Tensor& sync, int64_t per_team,
                                 const auto& call) {
    // No ds: layer_norm has no second way for a gradient to reach x (add_rms_norm's sum).
    return call(dx, dw_partial, db_partial, dy, x, w, mean_c, rstd_c, at::Tensor(), sync, rows, cols, plan.chunks,
                per_team, cols, dyv.row_stride, xv.row_stride, int64_t{0}, w.defined(), want_dw, want_db, plan.block_n,
                plan.s_pow2, plan.stages, plan.index64);
  };
  // Candidate i's plan for this call: the lag kernel's team count follows the occupancy of its
  // binary, asked with stand-ins of the buffers' dtypes (mean_c: fp32, like the partial sums; the
  // kernel does not specialise on rows_per_team).
  const auto plan_of = [&](int candidate) {
    LayerNormBackwardPlan plan = plan_layer_norm_backward_candidate(inputs, candidate, device);
    if (plan.needs_occupancy) {
      TORCH_INTERNAL_ASSERT(plan.lag, kBackwardOp, ": only the lag kernel's teams follow its occupancy");
      const at::Tensor long_stand_in = at::empty({1}, input.options().dtype(at::kLong));
      LayerNormBackwardInputs asked = inputs;
      asked.resident_programs_per_sm =
          lag_arguments(plan, want_dw ? mean_c : at::Tensor(), want_db ? mean_c : at::Tensor(), long_stand_in, 1,
                        [&](const auto&... args) {
                          return lag_kernel.resident_programs_per_sm(options_of(plan), args...);
                        });
      plan = plan_layer_norm_backward_candidate(asked, candidate, device);
    }
    return plan;
  };
  const auto launch = [&](const LayerNormBackwardPlan& plan) {
    switch (plan.kind) {
      case LayerNormBackwardPlan::Kind::Nothing:
        break;
      case LayerNormBackwardPlan::Kind::Fused: {
        const norm::ColumnSums sums(dw, db, plan.groups, cols, partial_options);
        norm::fused_kernel()(stream, Grid(plan.programs), options_of(plan), dx, sums.dw_partial, sums.db_partial, dy, x,
                             w, mean_c, rstd_c, at::Tensor(), rows, cols, cols, dyv.row_stride, xv.row_stride,
                             int64_t{0}, plan.rows_per_program, w.defined(), dx.defined(), want_dw, want_db,
                             plan.block_m, plan.block_n, plan.index64, plan.block_tail, plan.prefetch,
                             plan.preload_w);
        sums.finish(stream, plan.finalize, dw, db, cols, /*index64=*/false);
        break;
      }
      case LayerNormBackwardPlan::Kind::Team: {
        if (plan.lag) {
          static auto& lag_finalize = TritonJitFunction::get_instance(file, kLayerNormBwdTeamLagFinalizeKernel);
          const int64_t teams = plan.groups;
          const at::Tensor sync = kit::row_exchange_workspace(rows, plan.chunks, input, teams);
          // Always partial rows (one per team), even for one team: the finalize adds them up.
          const at::Tensor dw_partial = want_dw ? kit::empty_output({teams, cols}, partial_options) : at::Tensor();
          const at::Tensor db_partial = want_db ? kit::empty_output({teams, cols}, partial_options) : at::Tensor();
          lag_arguments(plan, dw_partial, db_partial, sync, plan.rows_per_program, [&](const auto&... args) {
            lag_kernel(stream, Grid(plan.programs), options_of(plan), args...);
            return 0;
          });
          lag_finalize(stream, Grid(plan.finalize.programs), LaunchOptions{4}, dw, db, dw_partial, db_partial, dx, dy,
                       x, w, mean_c, rstd_c, sync, rows, cols, plan.chunks, plan.rows_per_program, teams, cols,
                       dyv.row_stride, xv.row_stride, w.defined(), want_dw, want_db, plan.finalize.block_g,
                       plan.finalize.block_n, plan.index64);
          break;
        }
        const at::Tensor sync = kit::row_exchange_workspace(rows, plan.chunks, input);
        const norm::ColumnSums sums(dw, db, plan.groups, cols, partial_options);
        static auto& team_kernel = TritonJitFunction::get_instance(file, kLayerNormBwdTeamKernel);
        team_kernel(stream, Grid(plan.programs), options_of(plan), dx, sums.dw_partial, sums.db_partial, dy, x, w,
                    mean_c, rstd_c, sync, rows, cols, plan.chunks, plan.rows_per_program, cols, dyv.row_stride,
                    xv.row_stride, w.defined(), dx.defined(), want_dw, want_db, plan.block_n, plan.s_pow2,
                    plan.stages, plan.index64);
        sums.finish(stream, plan.finalize, dw, db, cols, /*index64=*/false);
        break;
      }
      case LayerNormBackwardPlan::Kind::DxThenColumns: {
        if (plan.dx) {
          norm::dx_kernel()(stream, Grid(plan.programs), LaunchOptions{plan.dx_num_warps}, dx, dy, x, w, mean_c,
                            rstd_c, at::Tensor(), rows, cols, cols, dyv.row_stride, xv.row_stride, int64_t{0},
                            w.defined(), plan.dx_block_n, plan.dx_single_pass, plan.index64);
        }
        if (!plan.columns) {
          break;
        }
        const norm::ColumnSums sums(dw, db, plan.groups, cols, partial_options);
        norm::column_sums_kernel()(stream, Grid(plan.column_blocks, static_cast<uint32_t>(plan.groups)),
                                   LaunchOptions{4}, sums.dw_partial, sums.db_partial, dy, x, mean_c, rstd_c, rows,
                                   cols, dyv.row_stride, xv.row_stride, plan.rows_per_group, want_dw, want_db,
                                   plan.columns_block_m, plan.columns_block_n, plan.index64);
        sums.finish(stream, plan.finalize, dw, db, cols, /*index64=*/false);
        break;
      }
    }
  };
  // A first call of a shape class on a card without a table times the candidates on these tensors;
  // the store keeps the choice beside the fused kernel, looked up only when tuning.
  const kit::CallTimer timer(stream, input.device(), norm::fused_kernel, plan_of, launch);
  launch(plan_of(choose_layer_norm_backward(inputs, device, timer.get())));
  return {dx, dw, db};
}

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using LayerNormSignature = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                      const std::optional<at::Tensor>&, double);
using LayerNormForwardSignature = Tensor3(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                          const std::optional<at::Tensor>&, double);
using LayerNormBackwardSignature = Tensor3(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                           const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                           const std::optional<at::Tensor>&, std::array<bool, 3>);

// layer_norm's and layer_norm_forward's gradients for (input, weight, bias) from those of (out,
// mean, rstd): saved = {input, weight, bias (undefined where absent), mean, rstd (outputs)},
// data = {normalized_shape}.
torch::autograd::variable_list layer_norm_input_grads(const kit::FormulaNode& node,
                                                      torch::autograd::variable_list&& grads) {
  const at::Tensor input = node.saved(0);
  const at::Tensor weight = node.saved(1);
  const at::Tensor bias = node.saved(2);
  const at::Tensor mean = node.saved(3);
  const at::Tensor rstd = node.saved(4);
  at::Tensor dx;
  at::Tensor dw;
  at::Tensor db;
  if (grads[0].defined()) {
    const std::array<bool, 3> mask{node.wants(0), weight.defined() && node.wants(1),
                                   bias.defined() && node.wants(2)};
    static const auto backward_op = kit::typed_op<LayerNormBackwardSignature>(kBackwardOp);
    std::tie(dx, dw, db) = backward_op.call(grads[0].contiguous(), input, node.data[0].toSymIntVector(), mean, rstd,
                                            kit::defined_or_nullopt(weight), kit::defined_or_nullopt(bias), mask);
  }
  if ((grads[1].defined() || grads[2].defined()) && node.wants(0)) {
    const auto normalized_dims = static_cast<int64_t>(node.data[0].toSymIntVector().size());
    const at::Tensor from_stats = norm::statistics_grad(input, normalized_dims, mean, rstd, grads[1], grads[2]);
    dx = dx.defined() ? dx + from_stats : from_stats;
  }
  return {dx, dw, db};
}

// The forward below autograd, then the graph node on `out` (mean and rstd are not
// differentiable) and its tangent.
Tensor3 layer_norm_recorded(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                            const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                            double eps, bool graph, bool forward_ad) {
  static const auto forward_op = kit::typed_op<LayerNormForwardSignature>("tjit::layer_norm_forward");
  Tensor3 outputs;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    outputs = forward_op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, bias, eps);
  }
  const auto& [out, mean, rstd] = outputs;
  if (graph) {
    const auto node = kit::make_formula_node("TjitLayerNormBackward", &layer_norm_input_grads, input, weight, bias);
    kit::attach_outputs(node, {&out, &mean, &rstd});
    kit::FormulaNode& f = kit::formula(node);
    f.save(input);
    f.save(weight.value_or(at::Tensor()));
    f.save(bias.value_or(at::Tensor()));
    f.save(mean, /*is_output=*/true);
    f.save(rstd, /*is_output=*/true);
    f.data = {normalized_shape.vec()};
  }
  if (forward_ad) {
    auto [out_t, mean_t, rstd_t] = norm::layer_norm_tangents(
        kit::primal(input), static_cast<int64_t>(normalized_shape.size()), mean, rstd, kit::primal(weight),
        kit::tangent(input), kit::tangent(weight), kit::tangent(bias), out.scalar_type());
    kit::set_tangent(out, out_t);
    kit::set_tangent(mean, mean_t);
    kit::set_tangent(rstd, rstd_t);
  }
  return outputs;
}

at::Tensor layer_norm_autograd(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                               double eps) {
  kit::check_defined(input, kOp, "input");
  const std::initializer_list<const at::Tensor*> inputs{&input, weight ? &*weight : nullptr, bias ? &*bias : nullptr};
  const bool graph = kit::records_graph(inputs);
  const bool forward_ad = kit::has_forward_grad(inputs);
  if (!graph && !forward_ad) {
    static const auto op = kit::typed_op<LayerNormSignature>(kOp);
    return op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, bias, eps);
  }
  return std::get<0>(layer_norm_recorded(ks, input, normalized_shape, weight, bias, eps, graph, forward_ad));
}

// layer_norm_forward differentiates through its output as layer_norm does (aten's native_layer_norm
// likewise); without this kernel autograd's fallback left the inputs without gradients.
Tensor3 layer_norm_forward_autograd(c10::DispatchKeySet ks, const at::Tensor& input,
                                    c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                                    const std::optional<at::Tensor>& bias, double eps) {
  kit::check_defined(input, kOp, "input");
  const std::initializer_list<const at::Tensor*> inputs{&input, weight ? &*weight : nullptr, bias ? &*bias : nullptr};
  const bool graph = kit::records_graph(inputs);
  const bool forward_ad = kit::has_forward_grad(inputs);
  if (!graph && !forward_ad) {
    static const auto op = kit::typed_op<LayerNormForwardSignature>("tjit::layer_norm_forward");
    return op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, bias, eps);
  }
  return layer_norm_recorded(ks, input, normalized_shape, weight, bias, eps, graph, forward_ad);
}

// layer_norm_backward's own derivatives (layer_norm's second and higher ones): the composed
// formula records where a graph or a tangent is asked for, the kernels run otherwise.
Tensor3 layer_norm_backward_autograd(c10::DispatchKeySet ks, const at::Tensor& grad_out, const at::Tensor& input,
                                     c10::SymIntArrayRef normalized_shape, const at::Tensor& mean,
                                     const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                     const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  kit::check_defined(grad_out, kBackwardOp, "grad_out");
  kit::check_defined(input, kBackwardOp, "input");
  const std::initializer_list<const at::Tensor*> inputs{&grad_out, &input, weight ? &*weight : nullptr,
                                                        bias ? &*bias : nullptr};
  if (kit::records_graph(inputs) || kit::has_forward_grad(inputs)) {
    check_layer_norm_inputs<c10::SymInt>(input, normalized_shape, weight, bias, input.sym_sizes(), kBackwardOp);
    TORCH_CHECK(grad_out.sym_sizes() == input.sym_sizes(), kBackwardOp, ": grad_out has shape ", grad_out.sym_sizes(),
                " but input has shape ", input.sym_sizes());
    return norm::layer_norm_backward(grad_out, input, static_cast<int64_t>(normalized_shape.size()), mean, rstd,
                                     weight, bias, output_mask);
  }
  static const auto op = kit::typed_op<LayerNormBackwardSignature>(kBackwardOp);
  return op.redispatch(ks & c10::after_autograd_keyset, grad_out, input, normalized_shape, mean, rstd, weight, bias,
                       output_mask);
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(
      m, "tjit",
      "layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor",
      "Layer normalisation over the trailing `normalized_shape` dims (`torch.ops.tjit.layer_norm`),\n"
      "as `torch.nn.functional.layer_norm`: (input - mean) / sqrt(var + eps) * weight + bias, biased\n"
      "variance.\n\n"
      "`input`, and `weight`/`bias` when given (shape `normalized_shape`), share one dtype (float32,\n"
      "float16, bfloat16, float64) and device. Statistics are computed in float32, in float64 for\n"
      "float64 input, which also uses `eps` unrounded. Differentiable with respect to input, weight and\n"
      "bias (the backward is `layer_norm_backward`).");
  tjit::kit::define(
      m, "tjit",
      "layer_norm_forward(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> (Tensor, Tensor, Tensor)",
      "`layer_norm` that also returns the statistics its backward needs: (out, mean, rstd)\n"
      "(`torch.ops.tjit.layer_norm_forward`; aten's `native_layer_norm`).\n\n"
      "mean and rstd = 1 / sqrt(var + eps) have the input's leading dims as shape (aten's keep a\n"
      "trailing 1 per normalized dim) and dtype float32, float64 for float64 input. Differentiable\n"
      "through `out` as `layer_norm` (mean and rstd are not).");
  tjit::kit::define(
      m, "tjit",
      "layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, "
      "Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      "Gradients of `layer_norm` for (input, weight, bias) (`torch.ops.tjit.layer_norm_backward`;\n"
      "aten's `native_layer_norm_backward`), from `mean` and `rstd` as `layer_norm_forward` returned\n"
      "them.\n\n"
      "`output_mask` (three bools) says which to compute; an entry is None where it is False or the\n"
      "parameter is absent. Tensors as for `layer_norm`; `grad_out` has the input's shape and dtype.");
}
// CUDA runs compiled kernels (capture_safe: another thread's graph capture does not refuse
// them); CPU runs the same kernels through Triton's interpreter.
TORCH_LIBRARY_IMPL(tjit, CUDA, m) {
  m.impl("layer_norm", tjit::kit::capture_safe<&tjit::ops::layer_norm_triton>);
  m.impl("layer_norm_forward", tjit::kit::capture_safe<&tjit::ops::layer_norm_forward_triton>);
  m.impl("layer_norm_backward", tjit::kit::capture_safe<&tjit::ops::layer_norm_backward_triton>);
}
TORCH_LIBRARY_IMPL(tjit, CPU, m) {
  m.impl("layer_norm", &tjit::ops::layer_norm_triton);
  m.impl("layer_norm_forward", &tjit::ops::layer_norm_forward_triton);
  m.impl("layer_norm_backward", &tjit::ops::layer_norm_backward_triton);
}
TORCH_LIBRARY_IMPL(tjit, Meta, m) {
  m.impl("layer_norm", &tjit::ops::layer_norm_meta);
  m.impl("layer_norm_forward", &tjit::ops::layer_norm_forward_meta);
  m.impl("layer_norm_backward", &tjit::ops::layer_norm_backward_meta);
}
TORCH_LIBRARY_IMPL(tjit, Autograd, m) {
  m.impl("layer_norm", &tjit::ops::layer_norm_autograd);
  m.impl("layer_norm_forward", &tjit::ops::layer_norm_forward_autograd);
  m.impl("layer_norm_backward", &tjit::ops::layer_norm_backward_autograd);
}

namespace tjit {

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  static const auto op = kit::typed_op<ops::LayerNormSignature>("tjit::layer_norm");
  return op.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& input,
                                                                  at::IntArrayRef normalized_shape,
                                                                  const std::optional<at::Tensor>& weight,
                                                                  const std::optional<at::Tensor>& bias, double eps) {
  static const auto op = kit::typed_op<ops::LayerNormForwardSignature>("tjit::layer_norm_forward");
  return op.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  static const auto op = kit::typed_op<ops::LayerNormBackwardSignature>("tjit::layer_norm_backward");
  return op.call(grad_out, input, c10::fromIntArrayRefSlow(normalized_shape), mean, rstd, weight, bias,
                 output_mask);
}

}  // namespace tjit
