#include "plan.h"

#include "../norm_backward.h"
#include "../norm_forward.h"
#include "../norm_forward_forms.h"
#include "../norm_team.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/rows.h>

#include <algorithm>
#include <iterator>
#include <string_view>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::rms_norm";
constexpr const char* kBackwardOp = "tjit::rms_norm_backward";

}  // namespace

namespace {

// The forward's candidate forms (the norm family's, norm_forward_forms.h): those norm_fwd_kernel
// has. Which one runs at a size is measured; the family's default rule serves where nothing may.
using norm::FormKind;
using Kind = RmsNormForwardPlan::Kind;
constexpr norm::ForwardForm kForwardForms[] = {
    {"short_rows", FormKind::ShortRows, 0, 0, false, false, false, 0},
    {"row_w4", FormKind::Row, 0, 4, false, false, false, 0},
    {"row_w8", FormKind::Row, 0, 8, false, false, false, 0},
    {"row_w16", FormKind::Row, 0, 16, false, false, false, 0},
    {"row_w32", FormKind::Row, 0, 32, false, false, false, 0},
    // Two 32-warp programs an SM at <= 32 registers a thread.
    {"row_w32_reg32", FormKind::Row, 0, 32, false, false, false, 32},
    {"loop2048_w8", FormKind::Looped, 2048, 8, false, false, false, 0},
    {"loop2048_w16", FormKind::Looped, 2048, 16, false, false, false, 0},
    {"loop4096_w8", FormKind::Looped, 4096, 8, false, false, false, 0},
    {"loop4096_w16", FormKind::Looped, 4096, 16, false, false, false, 0},
    {"keep2048_w8", FormKind::Looped, 2048, 8, false, true, true, 0},
    {"keep2048_w16", FormKind::Looped, 2048, 16, false, true, true, 0},
    {"keep4096_w8", FormKind::Looped, 4096, 8, false, true, true, 0},
    {"keep4096_w16", FormKind::Looped, 4096, 16, false, true, true, 0},
    {"keeprow_w8", FormKind::Looped, 0, 8, false, true, true, 0},
    {"keeprow_w16", FormKind::Looped, 0, 16, false, true, true, 0},
};

const norm::FormList& forward_forms() {
  static const norm::FormList forms("rms_norm_forward", kForwardForms, static_cast<int>(std::size(kForwardForms)));
  return forms;
}

}  // namespace

RmsNormForwardPlan plan_rms_norm_forward_candidate(const RmsNormForwardInputs& in, int candidate) {
  TORCH_CHECK(candidate >= 0 && candidate < forward_forms().size(), kOp, ": no forward plan candidate ", candidate);
  const norm::ForwardForm& f = forward_forms()[candidate];
  const int64_t element_size = c10::elementSize(in.dtype);
  const int64_t block = kit::next_power_of_2(in.cols);
  RmsNormForwardPlan plan;
  plan.candidate = candidate;
  plan.index64 = in.index64;
  plan.maxnreg = f.maxnreg;
  switch (f.kind) {
    case FormKind::ShortRows:
      plan.kind = Kind::ShortRows;
      plan.block_n = block;
      plan.block_m = std::max<int64_t>(1, std::min((element_size == 2 ? 2048 : 1024) / block,
                                                   kit::next_power_of_2(in.rows)));
      plan.num_warps = block <= 128 ? 8 : 4;
      plan.programs = kit::blocks_for(in.rows, plan.block_m, kOp);
      return plan;
    case FormKind::Row:
      plan.kind = Kind::Row;
      plan.block_n = block;
      break;
    case FormKind::Looped:
      plan.kind = Kind::Looped;
      plan.block_n = f.block == 0 ? block : f.block;
      plan.single_pass = false;
      plan.keep_row = f.keep_row;
      plan.row_steps = f.const_steps ? kit::ceil_div(in.cols, plan.block_n) : 0;
      break;
    case FormKind::Tail:
    case FormKind::Persistent:
      TORCH_INTERNAL_ASSERT(false, kOp, ": norm_fwd_kernel has no ", f.name, " form");
  }
  plan.num_warps = f.num_warps;
  plan.programs = kit::blocks_for(in.rows, 1, kOp);
  return plan;
}

RmsNormForwardPlan plan_rms_norm_forward(const RmsNormForwardInputs& in, const kit::DeviceFacts& device,
                                         const kit::CandidateTimer* timer, kit::ChoiceSource* source) {
  const kit::ChoiceKey key{in.rows, in.cols, in.dtype, in.has_residual ? 1 : 0};
  return plan_rms_norm_forward_candidate(in, forward_forms().choose(key, in.cols, in.dtype, device, timer, source));
}

namespace {
// Registered at load time, so tools list the candidates before a first call.
const norm::FormList& registered_forward_forms = forward_forms();
}  // namespace

norm::ForwardSwitches forward_switches(const RmsNormForwardPlan& plan, bool has_residual, bool has_weight) {
  norm::ForwardSwitches s;
  s.has_residual = has_residual;
  s.has_weight = has_weight;
  s.block_m = plan.block_m;
  s.block_n = plan.block_n;
  s.single_pass = plan.single_pass;
  s.index64 = plan.index64;
  s.keep_row = plan.keep_row;
  s.row_steps = plan.row_steps;
  return s;
}

std::vector<std::string> rms_norm_forward_fitting(const RmsNormForwardInputs& in) {
  return forward_forms().fitting(in.cols, in.dtype);
}

namespace {

// The backward's candidate forms (the norm family's, norm_backward_forms.h): those its kernels have
// (the family's and rms_norm_bwd_team_kernel). Fused tiles of 2048 to 16384 elements, one or two
// programs an SM, w held and the next tile prefetched where the registers allow or neither
// (_reload); rows just past 8192 as a head and a tail block; teams of 4096-column chunks, or
// 2048-column ones in the lag kernel capped at 128 registers; dx by rows then dw by columns.
using norm::BackwardKind;
constexpr norm::BackwardForm kBackwardForms[] = {
    {"fused2048_p1", BackwardKind::Fused, 2048, 0, 0, 1, false, 0, 0, false, 0},
    {"fused2048_p1_reload", BackwardKind::Fused, 2048, 0, 0, 1, true, 0, 0, false, 0},
    {"fused2048_p2", BackwardKind::Fused, 2048, 0, 0, 2, false, 0, 0, false, 0},
    {"fused2048_p2_reload", BackwardKind::Fused, 2048, 0, 0, 2, true, 0, 0, false, 0},
    {"fused4096_p1", BackwardKind::Fused, 4096, 0, 0, 1, false, 0, 0, false, 0},
    {"fused4096_p1_reload", BackwardKind::Fused, 4096, 0, 0, 1, true, 0, 0, false, 0},
    {"fused4096_p2", BackwardKind::Fused, 4096, 0, 0, 2, false, 0, 0, false, 0},
    {"fused4096_p2_reload", BackwardKind::Fused, 4096, 0, 0, 2, true, 0, 0, false, 0},
    {"fused8192_p1", BackwardKind::Fused, 8192, 0, 0, 1, false, 0, 0, false, 0},
    {"fused8192_p1_reload", BackwardKind::Fused, 8192, 0, 0, 1, true, 0, 0, false, 0},
    {"fused8192_p2", BackwardKind::Fused, 8192, 0, 0, 2, false, 0, 0, false, 0},
    {"fused8192_p2_reload", BackwardKind::Fused, 8192, 0, 0, 2, true, 0, 0, false, 0},
    {"fused16384_p1", BackwardKind::Fused, 16384, 0, 0, 1, false, 0, 0, false, 0},
    {"fused16384_p1_reload", BackwardKind::Fused, 16384, 0, 0, 1, true, 0, 0, false, 0},
    {"tail8192_w16_p1", BackwardKind::Fused, 0, 8192, 16, 1, false, 0, 0, false, 0},
    {"tail8192_w32_p1", BackwardKind::Fused, 0, 8192, 32, 1, false, 0, 0, false, 0},
    {"team4096", BackwardKind::Team, 0, 0, 4, 0, false, 4096, 3, false, 0},
    {"team_lag2048", BackwardKind::Team, 0, 0, 4, 0, false, 2048, 2, true, 128},
    {"dx_columns", BackwardKind::DxThenColumns, 0, 0, 0, 0, false, 0, 0, false, 0},
};

constexpr norm::BackwardKernels kBackwardKernels{/*fused_limit=*/16384, /*fused_limit_fp64=*/8192,
                                                 /*team_needs_dx=*/true, /*dx_row_limit=*/0,
                                                 /*lag_finalize_always=*/false};

// Where nothing was measured: teams past 8192 columns (the lag kernel for 2-byte rows without
// grad_sum), else one fused pass whose tile grows with the row (two programs an SM up to 2048
// columns; 4-byte rows there, and with grad_sum's fourth row, without the registers to hold w),
// rows just past 8192 as a head and a tail, else dx then columns.
int default_backward_form(const norm::BackwardFormList& forms, const norm::BackwardCall& c,
                          const kit::DeviceFacts& device, bool teams) {
  const int64_t element_size = c10::elementSize(c.dtype);
  const auto fitting = [&](const char* name) {
    const int i = forms.index_of(name);
    return forms.fits(i, c, device) ? i : -1;
  };
  if (teams && c.want_dx && c.cols > 8192) {
    const int team = fitting(element_size == 2 && !c.with_grad_sum ? "team_lag2048" : "team4096");
    if (team >= 0) {
      return team;
    }
  }
  const int64_t block = kit::next_power_of_2(c.cols);
  if (const int tail = fitting("tail8192_w32_p1"); tail >= 0 && block == 16384) {
    return tail;
  }
  if (c.cols <= (element_size == 8 ? 8192 : 16384)) {
    const int64_t tile = block <= 512 ? 2048 : block <= 2048 ? 4096 : std::max<int64_t>(8192, block);
    const int per_sm = block > 128 && block <= 2048 ? 2 : 1;
    return forms.fused(tile, per_sm, element_size == 4 && (per_sm == 2 || c.with_grad_sum));
  }
  return forms.index_of("dx_columns");
}

const norm::BackwardFormList& backward_forms() {
  static const norm::BackwardFormList forms("rms_norm_backward", kBackwardForms,
                                            static_cast<int>(std::size(kBackwardForms)), kBackwardKernels,
                                            &default_backward_form);
  return forms;
}
// Registered at load time, so tools list the candidates before a first call.
const norm::BackwardFormList& registered_backward_forms = backward_forms();

norm::BackwardCall backward_call(const RmsNormBackwardInputs& in) {
  norm::BackwardCall c;
  c.rows = in.rows;
  c.cols = in.cols;
  c.dtype = in.dtype;
  c.want_dx = in.want_dx;
  c.want_sums = in.want_dw;
  c.index64 = in.index64;
  c.with_grad_sum = in.with_grad_sum;
  c.resident_programs_per_sm = in.resident_programs_per_sm;
  // A choice serves calls of the same outputs wanted: dx 1, dw 2, grad_sum read 4.
  c.choice_flags = int64_t{in.want_dx} | int64_t{in.want_dw} << 1 | int64_t{in.with_grad_sum && in.want_dx} << 2;
  return c;
}

}  // namespace

int choose_rms_norm_backward(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device,
                             const kit::CandidateTimer* timer, kit::ChoiceSource* source) {
  return backward_forms().choose(backward_call(in), device, timer, source);
}

RmsNormBackwardPlan plan_rms_norm_backward_candidate(const RmsNormBackwardInputs& in, int candidate,
                                                     const kit::DeviceFacts& device) {
  return backward_forms().plan(backward_call(in), candidate, device, kBackwardOp);
}

RmsNormBackwardPlan plan_rms_norm_backward(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device) {
  const norm::BackwardCall call = backward_call(in);
  return backward_forms().plan(call, backward_forms().peek(call, device, nullptr), device, kBackwardOp);
}

std::vector<std::string> rms_norm_backward_fitting(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device) {
  return backward_forms().fitting(backward_call(in), device);
}

namespace {

kit::PlanWriter describe_forward(const kit::PlanQuery& q) {
  RmsNormForwardInputs in;
  in.rows = q.require("rows");
  in.cols = q.require("cols");
  in.dtype = q.dtype;
  in.index64 = q.get("index64", 0) != 0;
  in.has_residual = q.get("has_residual", 0) != 0;
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  int candidate = static_cast<int>(q.get("candidate", -1));
  if (candidate < 0) {
    const kit::ChoiceKey key{in.rows, in.cols, in.dtype, in.has_residual ? 1 : 0};
    candidate = forward_forms().peek(key, in.cols, in.dtype, q.device, &source);
  } else {
    TORCH_CHECK(candidate < forward_forms().size() && norm::fits(forward_forms()[candidate], in.cols, in.dtype),
                "describe_plan: rms_norm_forward candidate ", candidate, " does not fit ", in.rows, " rows of ",
                in.cols, " columns");
  }
  const RmsNormForwardPlan p = plan_rms_norm_forward_candidate(in, candidate);
  static const char* const kinds[] = {"short_rows", "row", "looped"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  w.choice(forward_forms()[candidate].name, kit::choice_source_name(source), rms_norm_forward_fitting(in));
  norm::describe_forward(w, p.programs, p.num_warps, p.maxnreg,
                         forward_switches(p, in.has_residual, q.get("has_weight", 1) != 0));
  return w;
}

kit::PlanWriter describe_backward(const kit::PlanQuery& q) {
  RmsNormBackwardInputs in;
  in.rows = q.require("rows");
  in.cols = q.require("cols");
  in.dtype = q.dtype;
  in.want_dx = q.get("want_dx", 1) != 0;
  in.want_dw = q.get("want_dw", 1) != 0 && q.get("has_weight", 1) != 0;
  in.index64 = q.get("index64", 0) != 0;
  in.with_grad_sum = q.get("has_grad_sum", 0) != 0;
  in.resident_programs_per_sm = static_cast<int>(q.get("resident_programs_per_sm", 0));
  const bool has_weight = q.get("has_weight", 1) != 0;
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  const int candidate =
      backward_forms().described(backward_call(in), static_cast<int>(q.get("candidate", -1)), q.device, &source);
  const bool wanted = candidate >= 0;
  const RmsNormBackwardPlan p = plan_rms_norm_backward_candidate(in, candidate, q.device);
  static const char* const kinds[] = {"none", "fused", "team", "dx_dw"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  if (wanted) {
    // The plan made may be another form's (a team that cannot be resident): the chosen one is named.
    w.choice(backward_forms()[candidate].name, kit::choice_source_name(source),
             rms_norm_backward_fitting(in, q.device));
  }
  using Kind = RmsNormBackwardPlan::Kind;
  if (p.kind == Kind::Team) {
    // The row words, then one mode word a team; dw's partial rows, one a team.
    w.workspace("row_exchange_words", {2 + in.rows * p.chunks + p.groups});
    w.launch(p.lag ? norm::kTeamLagKernel : kRmsNormBwdTeamKernel, {p.programs}, p.num_warps, p.maxnreg)
        .constexpr_flag("HAS_WEIGHT", has_weight)
        .constexpr_flag("COMPUTE_DW", in.want_dw);
    if (p.lag) {
      w.constexpr_flag("COMPUTE_DB", false);  // the family's kernel: rms_norm has no bias
    }
    w.constexpr_value("BLOCK_N", p.block_n)
        .constexpr_value("S_POW2", p.s_pow2)
        .constexpr_value("STAGES", p.stages)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("S", p.chunks)
        .arg("rows_per_team", p.rows_per_program);
    if (p.needs_occupancy) {
      w.needs_occupancy();
    }
    w.launch(kRmsNormBwdTeamRescueKernel, {static_cast<uint32_t>(p.groups)}, 4)
        .constexpr_flag("HAS_WEIGHT", has_weight)
        .constexpr_flag("COMPUTE_DW", in.want_dw)
        .constexpr_value("BLOCK_N", kRmsNormRescueBlock)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("S", p.chunks)
        .arg("rows_per_team", p.rows_per_program);
  }
  if (p.kind == Kind::Fused) {
    norm::describe_fused(w, p, has_weight, in.want_dx, in.want_dw, false);
  }
  if (p.dx) {
    w.launch(norm::kDxKernel, {p.programs}, p.dx_num_warps)
        .constexpr_flag("HAS_WEIGHT", has_weight)
        .constexpr_value("BLOCK_N", p.dx_block_n)
        .constexpr_flag("SINGLE_PASS", p.dx_single_pass)
        .constexpr_flag("INDEX_64", p.index64);
  }
  if (p.columns) {
    w.launch(norm::kColumnSumsKernel, {p.column_blocks, static_cast<uint32_t>(p.groups)}, 4)
        .constexpr_flag("COMPUTE_DW", true)
        .constexpr_flag("COMPUTE_DB", false)
        .constexpr_value("BLOCK_M", p.columns_block_m)
        .constexpr_value("BLOCK_N", p.columns_block_n)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("rows_per_group", p.rows_per_group);
  }
  if (p.finalize_launch) {
    w.launch(norm::kSumsFinalizeKernel, {p.finalize.programs}, 4)
        .constexpr_flag("COMPUTE_DW", true)
        .constexpr_flag("COMPUTE_DB", false)
        .constexpr_value("BLOCK_G", p.finalize.block_g)
        .constexpr_value("BLOCK_N", p.finalize.block_n)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("G", p.groups);
  }
  return w;
}

const kit::RegisterPlan forward_plan("rms_norm_forward", &describe_forward);
const kit::RegisterPlan backward_plan("rms_norm_backward", &describe_backward);

}  // namespace
}  // namespace tjit::ops
