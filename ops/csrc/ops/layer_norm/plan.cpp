#include "plan.h"

#include "../norm_backward.h"
#include "../norm_forward.h"
#include "../norm_forward_forms.h"
#include "../norm_team.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/row_exchange.h>
#include <tjit/kit/rows.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::layer_norm";
constexpr const char* kBackwardOp = "tjit::layer_norm_backward";

}  // namespace

namespace {

// The forward's candidate forms (the norm family's, norm_forward_forms.h): those its kernels have.
// Which one runs at a size is measured; the family's default rule serves where nothing may. Rows
// past the one-pass limit on CUDA go to the long-row kernel first, which @triton.autotune tunes.
using norm::FormKind;
constexpr norm::ForwardForm kForwardForms[] = {
    {"short_rows", FormKind::ShortRows, 0, 0, false, false, false, 0},
    {"row_w4", FormKind::Row, 0, 4, false, false, false, 0},
    {"row_w8", FormKind::Row, 0, 8, false, false, false, 0},
    {"row_w16", FormKind::Row, 0, 16, false, false, false, 0},
    {"row_w32", FormKind::Row, 0, 32, false, false, false, 0},
    {"row_w4_preload", FormKind::Row, 0, 4, true, false, false, 0},
    {"row_w8_preload", FormKind::Row, 0, 8, true, false, false, 0},
    {"row_w16_preload", FormKind::Row, 0, 16, true, false, false, 0},
    {"tail4096_w4", FormKind::Tail, 4096, 4, false, false, false, 0},
    {"tail4096_w8", FormKind::Tail, 4096, 8, false, false, false, 0},
    {"tail8192_w8", FormKind::Tail, 8192, 8, false, false, false, 0},
    {"tail8192_w16", FormKind::Tail, 8192, 16, false, false, false, 0},
    {"tail16384_w16", FormKind::Tail, 16384, 16, false, false, false, 0},
    // The row loop pipelined 2 deep; 8192-column heads capped at 168 registers, three programs an SM.
    {"persistent4096", FormKind::Persistent, 4096, 4, false, false, false, 0},
    {"persistent8192_reg168", FormKind::Persistent, 8192, 4, false, false, false, 168},
    {"loop2048_w8", FormKind::Looped, 2048, 8, false, false, false, 0},
    {"loop4096_w16", FormKind::Looped, 4096, 16, false, false, false, 0},
    {"keep2048_w8", FormKind::Looped, 2048, 8, false, true, true, 0},
    {"keep4096_w16", FormKind::Looped, 4096, 16, false, true, true, 0},
    {"keeprow_w16", FormKind::Looped, 0, 16, false, true, true, 0},
};

const norm::FormList& forward_forms() {
  static const norm::FormList forms("layer_norm_forward", kForwardForms,
                                    static_cast<int>(std::size(kForwardForms)));
  return forms;
}

}  // namespace

LayerNormForwardPlan plan_layer_norm_forward_candidate(const LayerNormForwardInputs& in, int candidate,
                                                       const kit::DeviceFacts& device) {
  TORCH_CHECK(candidate >= 0 && candidate < forward_forms().size(), kOp, ": no forward plan candidate ", candidate);
  const norm::ForwardForm& f = forward_forms()[candidate];
  const int64_t element_size = c10::elementSize(in.dtype);
  const int64_t block = kit::next_power_of_2(in.cols);
  LayerNormForwardPlan plan;
  plan.candidate = candidate;
  plan.index64 = in.index64;
  plan.num_warps = f.num_warps;
  plan.maxnreg = f.maxnreg;
  switch (f.kind) {
    case FormKind::ShortRows:
      plan.kind = LayerNormForwardPlan::Kind::ShortRows;
      plan.kernel = norm::kForwardKernel;
      plan.block_n = block;
      plan.block_m = std::max<int64_t>(4, (element_size == 2 ? 2048 : 1024) / plan.block_n);
      plan.num_warps = plan.block_n <= 128 ? 8 : 4;
      plan.programs = kit::blocks_for(in.rows, plan.block_m, kOp);
      return plan;
    case FormKind::Persistent:
      plan.kind = LayerNormForwardPlan::Kind::Persistent;
      plan.kernel = kLayerNormFwdPersistentKernel;
      plan.block_n = f.block;
      plan.block_tail = norm::tail_block(in.cols, f.block);
      plan.stages = 2;
      // As many programs as the GPU holds at once, at most one a row.
      plan.needs_occupancy = in.resident_programs_per_sm == 0;
      plan.programs = static_cast<uint32_t>(
          std::min<int64_t>(in.rows, int64_t{std::max(in.resident_programs_per_sm, 1)} * device.multiprocessors));
      return plan;
    case FormKind::Row:
      plan.block_n = block;
      plan.preload_affine = f.preload;
      break;
    case FormKind::Tail:
      plan.block_n = f.block;
      plan.block_tail = norm::tail_block(in.cols, f.block);
      break;
    case FormKind::Looped:
      plan.block_n = f.block == 0 ? block : f.block;
      plan.single_pass = false;
      plan.keep_row = f.keep_row;
      plan.row_steps = f.const_steps ? kit::ceil_div(in.cols, plan.block_n) : 0;
      break;
  }
  plan.kind = LayerNormForwardPlan::Kind::OneProgramPerRow;
  plan.kernel = kLayerNormFwdKernel;
  plan.programs = kit::blocks_for(in.rows, 1, kOp);
  return plan;
}

LayerNormForwardPlan plan_layer_norm_forward(const LayerNormForwardInputs& in, const kit::DeviceFacts& device,
                                             kit::Tuner tuner, const kit::CandidateTimer* timer,
                                             kit::ChoiceSource* source) {
  if (tuner == kit::Tuner::Available &&
      kit::tuned_long_rows(in.rows, in.cols, in.dtype, device, norm::kSinglePassLimit)) {
    LayerNormForwardPlan plan;
    plan.index64 = in.index64;
    plan.kind = LayerNormForwardPlan::Kind::TunedLongRows;
    plan.kernel = kLayerNormFwdLongKernel;
    plan.programs = 0;
    plan.row_bucket = kit::long_row_bucket(in.rows);
    plan.exchange_chunks = kit::ceil_div(in.cols, kit::kLongRowMinSplitBlock);
    return plan;
  }
  const kit::ChoiceKey key{in.rows, in.cols, in.dtype, 0};
  return plan_layer_norm_forward_candidate(in, forward_forms().choose(key, in.cols, in.dtype, device, timer, source),
                                           device);
}

namespace {
// Registered at load time, so tools list the candidates before a first call.
const norm::FormList& registered_forward_forms = forward_forms();
}  // namespace

norm::ForwardSwitches short_rows_switches(const LayerNormForwardPlan& plan, bool has_weight, bool has_bias) {
  TORCH_INTERNAL_ASSERT(plan.kind == LayerNormForwardPlan::Kind::ShortRows, kOp,
                        ": norm_fwd_kernel runs layer_norm's short rows only");
  norm::ForwardSwitches s;
  s.has_weight = has_weight;
  s.has_bias = has_bias;
  s.subtract_mean = true;  // in one pass (the kernel has no Welford update)
  s.block_m = plan.block_m;
  s.block_n = plan.block_n;
  s.index64 = plan.index64;
  return s;
}

std::vector<std::string> layer_norm_forward_fitting(const LayerNormForwardInputs& in) {
  return forward_forms().fitting(in.cols, in.dtype);
}

namespace {

// The backward's candidate forms (the norm family's, norm_backward_forms.h): those its kernels have
// (the family's and layer_norm_bwd_team_kernel). Fused tiles of 2048 to 8192 elements, one or two
// programs an SM; rows just past 4096 as a 4096-column head and a tail; teams of 4096-column chunks
// two an SM, or 2048-column ones in the lag kernel capped at 128 registers; dx by rows then dw and
// db by columns.
using norm::BackwardKind;
constexpr norm::BackwardForm kBackwardForms[] = {
    {"fused2048_p1", BackwardKind::Fused, 2048, 0, 0, 1, false, 0, 0, false, 0},
    {"fused2048_p2", BackwardKind::Fused, 2048, 0, 0, 2, false, 0, 0, false, 0},
    {"fused4096_p1", BackwardKind::Fused, 4096, 0, 0, 1, false, 0, 0, false, 0},
    {"fused4096_p2", BackwardKind::Fused, 4096, 0, 0, 2, false, 0, 0, false, 0},
    {"fused8192_p1", BackwardKind::Fused, 8192, 0, 0, 1, false, 0, 0, false, 0},
    {"fused8192_p2", BackwardKind::Fused, 8192, 0, 0, 2, false, 0, 0, false, 0},
    {"tail4096_w4_p2", BackwardKind::Fused, 0, 4096, 4, 2, false, 0, 0, false, 0},
    {"tail4096_w8_p1", BackwardKind::Fused, 0, 4096, 8, 1, false, 0, 0, false, 0},
    {"tail4096_w16_p1", BackwardKind::Fused, 0, 4096, 16, 1, false, 0, 0, false, 0},
    {"team4096", BackwardKind::Team, 0, 0, 4, 2, false, 4096, 3, false, 0},
    {"team_lag2048", BackwardKind::Team, 0, 0, 4, 0, false, 2048, 2, true, 128},
    {"dx_columns", BackwardKind::DxThenColumns, 0, 0, 0, 0, false, 0, 0, false, 0},
};

constexpr norm::BackwardKernels kBackwardKernels{/*fused_limit=*/8192, /*fused_limit_fp64=*/8192,
                                                 /*team_needs_dx=*/false, /*dx_row_limit=*/16384,
                                                 /*lag_finalize_always=*/true};

// Where nothing was measured: teams past the fused limit (the lag kernel for 2-byte rows that want
// dx), else one fused pass whose tile grows with the row (two programs an SM up to 2048 columns of
// 2-byte rows, 512 of 4-byte ones, whose mean and sums leave fewer registers), else dx then columns.
int default_backward_form(const norm::BackwardFormList& forms, const norm::BackwardCall& c,
                          const kit::DeviceFacts& device, bool teams) {
  const int64_t element_size = c10::elementSize(c.dtype);
  if (teams && c.cols > kBackwardKernels.fused_limit) {
    const int lag = forms.index_of("team_lag2048");
    const int team = forms.index_of("team4096");
    if (element_size == 2 && forms.fits(lag, c, device)) {
      return lag;
    }
    if (forms.fits(team, c, device)) {
      return team;
    }
  }
  if (c.cols <= kBackwardKernels.fused_limit) {
    const int64_t block = kit::next_power_of_2(c.cols);
    const int64_t smallest_tile_limit = element_size == 2 ? 1024 : 512;
    const int64_t pair_limit = element_size == 2 ? 2048 : 512;
    const int64_t tile = block <= smallest_tile_limit ? 2048 : block <= 2048 ? 4096 : 8192;
    return forms.fused(tile, block > 128 && block <= pair_limit ? 2 : 1, false);
  }
  return forms.index_of("dx_columns");
}

const norm::BackwardFormList& backward_forms() {
  static const norm::BackwardFormList forms("layer_norm_backward", kBackwardForms,
                                            static_cast<int>(std::size(kBackwardForms)), kBackwardKernels,
                                            &default_backward_form);
  return forms;
}
// Registered at load time, so tools list the candidates before a first call.
const norm::BackwardFormList& registered_backward_forms = backward_forms();

norm::BackwardCall backward_call(const LayerNormBackwardInputs& in) {
  norm::BackwardCall c;
  c.rows = in.rows;
  c.cols = in.cols;
  c.dtype = in.dtype;
  c.want_dx = in.want_dx;
  c.want_sums = in.want_dw || in.want_db;
  c.index64 = in.index64;
  c.resident_programs_per_sm = in.resident_programs_per_sm;
  // A choice serves calls of the same outputs wanted: dx 1, dw 2, db 4.
  c.choice_flags = int64_t{in.want_dx} | int64_t{in.want_dw} << 1 | int64_t{in.want_db} << 2;
  return c;
}

}  // namespace

int choose_layer_norm_backward(const LayerNormBackwardInputs& in, const kit::DeviceFacts& device,
                               const kit::CandidateTimer* timer, kit::ChoiceSource* source) {
  return backward_forms().choose(backward_call(in), device, timer, source);
}

LayerNormBackwardPlan plan_layer_norm_backward_candidate(const LayerNormBackwardInputs& in, int candidate,
                                                         const kit::DeviceFacts& device) {
  return backward_forms().plan(backward_call(in), candidate, device, kBackwardOp);
}

LayerNormBackwardPlan plan_layer_norm_backward(const LayerNormBackwardInputs& in, const kit::DeviceFacts& device) {
  const norm::BackwardCall call = backward_call(in);
  return backward_forms().plan(call, backward_forms().peek(call, device, nullptr), device, kBackwardOp);
}

std::vector<std::string> layer_norm_backward_fitting(const LayerNormBackwardInputs& in,
                                                     const kit::DeviceFacts& device) {
  return backward_forms().fitting(backward_call(in), device);
}

namespace {

kit::PlanWriter describe_forward(const kit::PlanQuery& q) {
  LayerNormForwardInputs in;
  in.rows = q.require("rows");
  in.cols = q.require("cols");
  in.dtype = q.dtype;
  in.index64 = q.get("index64", 0) != 0;
  in.resident_programs_per_sm = static_cast<int>(q.get("resident_programs_per_sm", 0));
  const bool has_weight = q.get("has_weight", 1) != 0;
  const bool has_bias = q.get("has_bias", 1) != 0;
  const kit::Tuner tuner = q.get("tuner_available", 1) ? kit::Tuner::Available : kit::Tuner::Unavailable;
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  const int forced = static_cast<int>(q.get("candidate", -1));
  LayerNormForwardPlan p;
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  if (forced >= 0) {
    TORCH_CHECK(forced < forward_forms().size() && norm::fits(forward_forms()[forced], in.cols, in.dtype),
                "describe_plan: layer_norm_forward candidate ", forced, " does not fit ", in.rows, " rows of ", in.cols,
                " columns");
    p = plan_layer_norm_forward_candidate(in, forced, q.device);
  } else if (tuner == kit::Tuner::Available &&
             kit::tuned_long_rows(in.rows, in.cols, in.dtype, q.device, norm::kSinglePassLimit)) {
    p = plan_layer_norm_forward(in, q.device, tuner);  // the long-row kernel: no candidate
  } else {
    const kit::ChoiceKey key{in.rows, in.cols, in.dtype, 0};
    const int peeked = forward_forms().peek(key, in.cols, in.dtype, q.device, &source);
    p = plan_layer_norm_forward_candidate(in, peeked, q.device);
  }
  using Kind = LayerNormForwardPlan::Kind;
  static const char* const kinds[] = {"long", "short_rows", "persistent", "row"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  if (p.candidate >= 0) {
    w.choice(forward_forms()[p.candidate].name, kit::choice_source_name(source), layer_norm_forward_fitting(in));
  }
  if (p.kind == Kind::ShortRows) {
    norm::describe_forward(w, p.programs, p.num_warps, p.maxnreg, short_rows_switches(p, has_weight, has_bias));
    return w;
  }
  if (p.kind == Kind::TunedLongRows) {
    w.tuned_launch(p.kernel);
  } else {
    w.launch(p.kernel, {p.programs}, p.num_warps, p.maxnreg);
  }
  w.constexpr_flag("HAS_WEIGHT", has_weight).constexpr_flag("HAS_BIAS", has_bias);
  switch (p.kind) {
    case Kind::TunedLongRows:
      w.constexpr_flag("INDEX_64", p.index64).arg("M_BUCKET", p.row_bucket);
      w.workspace("row_exchange_words", {2 + in.rows * p.exchange_chunks});
      break;
    case Kind::ShortRows:  // described above
      break;
    case Kind::Persistent:
      w.constexpr_value("BLOCK_N", p.block_n)
          .constexpr_value("BLOCK_TAIL", p.block_tail)
          .constexpr_value("STAGES", p.stages)
          .constexpr_flag("INDEX_64", p.index64);
      if (p.needs_occupancy) {
        w.needs_occupancy();
      }
      break;
    case Kind::OneProgramPerRow:
      w.constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("SINGLE_PASS", p.single_pass)
          .constexpr_flag("INDEX_64", p.index64)
          .constexpr_value("BLOCK_TAIL", p.block_tail)
          .constexpr_flag("PRELOAD", p.preload_affine)
          .constexpr_flag("KEEP_ROW", p.keep_row)
          .constexpr_value("ROW_STEPS", p.row_steps);
      break;
  }
  return w;
}

void describe_lag_finalize(kit::PlanWriter& w, const LayerNormBackwardPlan& p, const LayerNormBackwardInputs& in,
                           bool has_weight) {
  if (in.want_dw || in.want_db) {
    w.workspace("column_partials", {p.groups, in.cols});
  }
  w.launch(kLayerNormBwdTeamLagFinalizeKernel, {p.finalize.programs}, 4)
      .constexpr_flag("HAS_WEIGHT", has_weight)
      .constexpr_flag("COMPUTE_DW", in.want_dw)
      .constexpr_flag("COMPUTE_DB", in.want_db)
      .constexpr_value("BLOCK_G", p.finalize.block_g)
      .constexpr_value("BLOCK_N", p.finalize.block_n)
      .constexpr_flag("INDEX_64", p.index64)
      .arg("S", p.chunks)
      .arg("rows_per_team", p.rows_per_program)
      .arg("G", p.groups);
}

void describe_finalize(kit::PlanWriter& w, const LayerNormBackwardPlan& p, const LayerNormBackwardInputs& in) {
  if (p.finalize_launch) {
    w.workspace("column_partials", {p.groups, in.cols});
    w.launch(norm::kSumsFinalizeKernel, {p.finalize.programs}, 4)
        .constexpr_flag("COMPUTE_DW", in.want_dw)
        .constexpr_flag("COMPUTE_DB", in.want_db)
        .constexpr_value("BLOCK_G", p.finalize.block_g)
        .constexpr_value("BLOCK_N", p.finalize.block_n)
        .constexpr_flag("INDEX_64", false)
        .arg("G", p.groups);
  }
}

kit::PlanWriter describe_backward(const kit::PlanQuery& q) {
  LayerNormBackwardInputs in;
  in.rows = q.require("rows");
  in.cols = q.require("cols");
  in.dtype = q.dtype;
  in.want_dx = q.get("want_dx", 1) != 0;
  in.want_dw = q.get("want_dw", 1) != 0;
  in.want_db = q.get("want_db", 1) != 0;
  in.index64 = q.get("index64", 0) != 0;
  in.resident_programs_per_sm = static_cast<int>(q.get("resident_programs_per_sm", 0));
  const bool has_weight = q.get("has_weight", 1) != 0;
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  const int candidate =
      backward_forms().described(backward_call(in), static_cast<int>(q.get("candidate", -1)), q.device, &source);
  const LayerNormBackwardPlan p = plan_layer_norm_backward_candidate(in, candidate, q.device);
  using Kind = LayerNormBackwardPlan::Kind;
  static const char* const kinds[] = {"none", "fused", "team", "dx_dwdb"};
  kit::PlanWriter w(p.kind == Kind::Team && p.lag ? "team_lag" : kinds[static_cast<int>(p.kind)]);
  if (candidate >= 0) {
    // The plan made may be another form's (a team that cannot be resident): the chosen one is named.
    w.choice(backward_forms()[candidate].name, kit::choice_source_name(source),
             layer_norm_backward_fitting(in, q.device));
  }
  switch (p.kind) {
    case Kind::Nothing:
      break;
    case Kind::Fused:
      norm::describe_fused(w, p, has_weight, in.want_dx, in.want_dw, in.want_db);
      describe_finalize(w, p, in);
      break;
    case Kind::Team:
      // The lag kernel's teams have a mode word each after the rows' words.
      w.workspace("row_exchange_words", {2 + in.rows * p.chunks + (p.lag ? p.groups : 0)});
      w.launch(p.lag ? norm::kTeamLagKernel : kLayerNormBwdTeamKernel, {p.programs}, p.num_warps, p.maxnreg)
          .constexpr_flag("HAS_WEIGHT", has_weight);
      if (!p.lag) {
        w.constexpr_flag("COMPUTE_DX", in.want_dx);
      }
      w.constexpr_flag("COMPUTE_DW", in.want_dw)
          .constexpr_flag("COMPUTE_DB", in.want_db)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_value("S_POW2", p.s_pow2)
          .constexpr_value("STAGES", p.stages)
          .constexpr_flag("INDEX_64", p.index64)
          .arg("S", p.chunks)
          .arg("rows_per_team", p.rows_per_program);
      if (p.needs_occupancy) {
        w.needs_occupancy();
      }
      if (p.lag) {
        describe_lag_finalize(w, p, in, has_weight);
      } else {
        describe_finalize(w, p, in);
      }
      break;
    case Kind::DxThenColumns:
      if (p.dx) {
        w.launch(norm::kDxKernel, {p.programs}, p.dx_num_warps)
            .constexpr_flag("HAS_WEIGHT", has_weight)
            .constexpr_value("BLOCK_N", p.dx_block_n)
            .constexpr_flag("SINGLE_PASS", p.dx_single_pass)
            .constexpr_flag("INDEX_64", p.index64);
      }
      if (p.columns) {
        w.launch(norm::kColumnSumsKernel, {p.column_blocks, static_cast<uint32_t>(p.groups)}, 4)
            .constexpr_flag("COMPUTE_DW", in.want_dw)
            .constexpr_flag("COMPUTE_DB", in.want_db)
            .constexpr_value("BLOCK_M", p.columns_block_m)
            .constexpr_value("BLOCK_N", p.columns_block_n)
            .constexpr_flag("INDEX_64", p.index64)
            .arg("rows_per_group", p.rows_per_group);
        describe_finalize(w, p, in);
      }
      break;
  }
  return w;
}

const kit::RegisterPlan forward_plan("layer_norm_forward", &describe_forward);
const kit::RegisterPlan backward_plan("layer_norm_backward", &describe_backward);

}  // namespace
}  // namespace tjit::ops
