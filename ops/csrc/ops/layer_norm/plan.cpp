#include "plan.h"

#include "../norm_forward_forms.h"

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

// Up to here the backward is one fused pass (dx plus per-program dw/db partials).
constexpr int64_t kFusedBackwardLimit = 8192;

struct RowBlocks {
  int64_t block_n;
  bool single_pass;
  int num_warps;
  int64_t block_tail = 0;
};

// One program per row: the backward's dx kernel past the fused limit, and fp64 forwards.
RowBlocks plan_rows(int64_t cols) {
  if (cols <= 16384) {
    const int64_t block = kit::next_power_of_2(cols);
    return {block, true, static_cast<int>(std::clamp<int64_t>(block / 512, 1, 16))};
  }
  return {4096, false, 16};
}

struct FusedBlocks {
  int64_t block_m;
  int64_t block_n;
  int num_warps;
  int programs_per_sm;
  int64_t block_tail = 0;
};

// The fused backward's [block_m, block_n] tiles: fewer, larger tiles for 4-byte elements; 2-byte
// rows want two programs per SM up to 2048 columns. Rows of 4609..5120 columns go as 4096 columns
// plus a 1024-column tail rather than an 8192-column tile. more_in_flight: the memory wants more
// bytes in flight per SM than one 4-byte program of a 4096-element tile keeps (its 159 registers
// leave it alone on its SM, with 32 KB of loads ahead): 2048-column rows then take 4 rows a tile at
// 16 warps, as 4096-column rows do (128 registers, 64 KB ahead).
constexpr int64_t kTailBackwardHead = 4096;

FusedBlocks plan_fused_backward(int64_t cols, int64_t element_size, bool more_in_flight) {
  if (element_size != 8 && cols > kTailBackwardHead + kTailBackwardHead / 8 &&
      cols <= kTailBackwardHead + kTailBackwardHead / 4) {
    return element_size == 2 ? FusedBlocks{1, kTailBackwardHead, 4, 2, kTailBackwardHead / 4}
                             : FusedBlocks{1, kTailBackwardHead, 16, 1, kTailBackwardHead / 4};
  }
  const int64_t block_n = kit::next_power_of_2(cols);
  int64_t tile = 0;
  int per_sm = 1;
  if (element_size == 2) {
    tile = block_n <= 1024 ? 2048 : block_n <= 2048 ? 4096 : 8192;
    per_sm = block_n > 128 && block_n <= 2048 ? 2 : 1;
  } else {
    tile = block_n <= 512 ? 2048 : block_n <= 2048 ? 4096 : 8192;
    per_sm = block_n > 128 && block_n <= 512 ? 2 : 1;
    if (element_size == 4 && block_n == 2048 && more_in_flight) {
      tile = 8192;
    }
    if (element_size == 8) {
      tile /= 2;  // twice the registers per element
    }
  }
  tile = std::max(tile, block_n);
  return {tile / block_n, block_n, static_cast<int>(std::clamp<int64_t>(tile / 512, 4, 16)), per_sm};
}

// The long-row backward on CUDA: teams of `chunks` programs share rows (their programs wait for
// each other, which only CUDA runs at once). The team kernel: 4096-column chunks, two programs per
// SM, the row loop 3 stages deep. 2-byte rows that want dx take the lag kernel: a row's dx one
// iteration after its sums, 2048-column chunks capped at 128 registers, as many programs as an SM
// holds, 2 stages.
constexpr int64_t kTeamMaxChunks = 32;

struct TeamBlocks {
  int64_t block_n;
  int64_t chunks;
  int programs_per_sm;  // 0: the occupancy's
  int stages;
  bool lag;
  int maxnreg;
};

std::optional<TeamBlocks> plan_team_backward(const LayerNormBackwardInputs& in, const kit::DeviceFacts& device) {
  if (!device.is_cuda || in.dtype == c10::kDouble || in.cols <= kFusedBackwardLimit) {
    return std::nullopt;
  }
  if (in.want_dx && c10::elementSize(in.dtype) == 2) {
    constexpr int64_t lag_block_n = 2048;
    const int64_t chunks = kit::ceil_div(in.cols, lag_block_n);
    if (chunks <= kTeamMaxChunks && in.rows * chunks * 2 < kit::kInt32Limit) {
      return TeamBlocks{lag_block_n, chunks, 0, 2, true, 128};
    }
  }
  constexpr int64_t block_n = 4096;
  const int64_t chunks = kit::ceil_div(in.cols, block_n);
  if (chunks > kTeamMaxChunks || in.rows * chunks * 2 >= kit::kInt32Limit) {
    return std::nullopt;
  }
  return TeamBlocks{block_n, chunks, 2, 3, false, 0};
}

// Narrow column blocks keep enough programs reading (N = 8192: 256 programs of 32 columns).
DwdbFinalizePlan plan_finalize(int64_t groups, int64_t cols) {
  DwdbFinalizePlan plan;
  plan.block_n = std::clamp<int64_t>(kit::next_power_of_2(kit::ceil_div(cols, 256)), 16, 128);
  plan.block_g = std::min<int64_t>(kit::next_power_of_2(groups), std::max<int64_t>(32, 2048 / plan.block_n));
  plan.programs = kit::blocks_for(cols, plan.block_n, kBackwardOp);
  return plan;
}

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
      plan.kernel = kLayerNormFwdRowsKernel;
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
  if (tuner == kit::Tuner::Available && kit::tuned_long_rows(in.rows, in.cols, in.dtype, device, norm::kSinglePassLimit)) {
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

std::vector<std::string> layer_norm_forward_fitting(const LayerNormForwardInputs& in) {
  return forward_forms().fitting(in.cols, in.dtype);
}

LayerNormBackwardPlan plan_layer_norm_backward(const LayerNormBackwardInputs& in, const kit::DeviceFacts& device) {
  const int64_t rows = in.rows;
  const int64_t cols = in.cols;
  const int64_t element_size = c10::elementSize(in.dtype);
  const int sms = device.multiprocessors;
  const bool column_sums = in.want_dw || in.want_db;
  LayerNormBackwardPlan plan;
  plan.index64 = in.index64;
  if (!in.want_dx && !column_sums) {
    return plan;
  }
  const auto sum_groups = [&](int64_t groups) {
    plan.groups = groups;
    if (column_sums && groups > 1) {
      plan.finalize = plan_finalize(groups, cols);
    }
  };
  if (cols <= kFusedBackwardLimit) {
    const FusedBlocks blocks =
        plan_fused_backward(cols, element_size, device.is_cuda && kit::memory_wants_more_in_flight(device));
    int64_t programs = std::min<int64_t>(int64_t{blocks.programs_per_sm} * sms, kit::ceil_div(rows, blocks.block_m));
    const int64_t rows_per_program = kit::ceil_div(kit::ceil_div(rows, programs), blocks.block_m) * blocks.block_m;
    programs = kit::ceil_div(rows, rows_per_program);
    plan.kind = LayerNormBackwardPlan::Kind::Fused;
    plan.kernel = kLayerNormBwdFusedKernel;
    plan.programs = static_cast<uint32_t>(programs);
    plan.num_warps = blocks.num_warps;
    plan.block_m = blocks.block_m;
    plan.block_n = blocks.block_n;
    plan.block_tail = blocks.block_tail;
    plan.rows_per_program = rows_per_program;
    sum_groups(programs);
    return plan;
  }
  if (const auto team = plan_team_backward(in, device)) {
    plan.kind = team->lag ? LayerNormBackwardPlan::Kind::TeamLag : LayerNormBackwardPlan::Kind::Team;
    plan.kernel = team->lag ? kLayerNormBwdTeamLagKernel : kLayerNormBwdTeamKernel;
    plan.num_warps = 4;
    plan.maxnreg = team->maxnreg;
    plan.block_n = team->block_n;
    plan.chunks = team->chunks;
    plan.s_pow2 = kit::next_power_of_2(team->chunks);
    plan.stages = team->stages;
    plan.exchange_chunks = team->chunks;
    plan.needs_occupancy = team->lag && in.resident_programs_per_sm == 0;
    const int64_t per_sm = team->lag ? std::max(in.resident_programs_per_sm, 1) : team->programs_per_sm;
    // Rows split evenly over as many teams as run at once.
    const int64_t capacity = std::max<int64_t>(1, per_sm * sms / team->chunks);
    const int64_t rows_per_team = kit::ceil_div(rows, std::min(capacity, rows));
    const int64_t teams = kit::ceil_div(rows, rows_per_team);
    plan.rows_per_program = rows_per_team;
    plan.programs = kit::blocks_for(teams * team->chunks, 1, kBackwardOp);
    sum_groups(teams);
    if (team->lag) {
      // Its finalize runs whatever the team count: it also does the rows of teams that gave up.
      plan.finalize = plan_finalize(teams, cols);
    }
    return plan;
  }
  plan.kind = LayerNormBackwardPlan::Kind::DxThenColumns;
  if (in.want_dx) {
    const RowBlocks blocks = plan_rows(cols);
    plan.dx = true;
    plan.dx_block_n = blocks.block_n;
    plan.dx_single_pass = blocks.single_pass;
    plan.dx_num_warps = blocks.num_warps;
    plan.programs = kit::blocks_for(rows, 1, kBackwardOp);
  }
  if (!column_sums) {
    return plan;
  }
  // Columns in blocks, rows split into groups when the column blocks alone would leave the GPU
  // idle; groups write partial sums that the finalize adds up.
  const int64_t block_n = std::min<int64_t>(kit::next_power_of_2(cols), 128);
  const int64_t block_m = in.dtype == c10::kDouble ? 16 : 32;
  const int64_t col_blocks = kit::ceil_div(cols, block_n);
  int64_t groups = std::min({kit::ceil_div(4 * sms, col_blocks), kit::ceil_div(rows, block_m), int64_t{65535}});
  groups = std::max<int64_t>(groups, 1);
  const int64_t rows_per_group = kit::ceil_div(kit::ceil_div(rows, groups), block_m) * block_m;
  groups = kit::ceil_div(rows, rows_per_group);
  plan.columns_kernel = groups == 1 ? kLayerNormBwdDwdbKernel : kLayerNormBwdDwdbPartialKernel;
  plan.column_blocks = kit::blocks_for(cols, block_n, kBackwardOp);
  plan.columns_block_m = block_m;
  plan.columns_block_n = block_n;
  plan.rows_per_group = rows_per_group;
  sum_groups(groups);
  return plan;
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
    p = plan_layer_norm_forward_candidate(in, forward_forms().peek(key, in.cols, in.dtype, q.device, &source), q.device);
  }
  using Kind = LayerNormForwardPlan::Kind;
  static const char* const kinds[] = {"long", "short_rows", "persistent", "row"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  if (p.candidate >= 0) {
    w.choice(forward_forms()[p.candidate].name, kit::choice_source_name(source), layer_norm_forward_fitting(in));
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
    case Kind::ShortRows:
      w.constexpr_value("BLOCK_M", p.block_m).constexpr_value("BLOCK_N", p.block_n).constexpr_flag("INDEX_64", p.index64);
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
  if ((in.want_dw || in.want_db) && p.groups > 1) {
    w.workspace("column_partials", {p.groups, in.cols});
    w.launch(kLayerNormBwdDwdbFinalizeKernel, {p.finalize.programs}, 4)
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
  const LayerNormBackwardPlan p = plan_layer_norm_backward(in, q.device);
  using Kind = LayerNormBackwardPlan::Kind;
  static const char* const kinds[] = {"none", "fused", "team", "team_lag", "dx_dwdb"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  switch (p.kind) {
    case Kind::Nothing:
      break;
    case Kind::Fused:
      w.launch(p.kernel, {p.programs}, p.num_warps)
          .constexpr_flag("HAS_WEIGHT", has_weight)
          .constexpr_flag("COMPUTE_DX", in.want_dx)
          .constexpr_flag("COMPUTE_DW", in.want_dw)
          .constexpr_flag("COMPUTE_DB", in.want_db)
          .constexpr_value("BLOCK_M", p.block_m)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("INDEX_64", p.index64)
          .constexpr_value("BLOCK_TAIL", p.block_tail)
          .arg("rows_per_program", p.rows_per_program);
      describe_finalize(w, p, in);
      break;
    case Kind::Team:
    case Kind::TeamLag:
      // The lag kernel's teams have a mode word each after the rows' words.
      w.workspace("row_exchange_words",
                  {2 + in.rows * p.exchange_chunks + (p.kind == Kind::TeamLag ? p.groups : 0)});
      w.launch(p.kernel, {p.programs}, p.num_warps, p.maxnreg).constexpr_flag("HAS_WEIGHT", has_weight);
      if (p.kind == Kind::Team) {
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
      if (p.kind == Kind::TeamLag) {
        describe_lag_finalize(w, p, in, has_weight);
      } else {
        describe_finalize(w, p, in);
      }
      break;
    case Kind::DxThenColumns:
      if (p.dx) {
        w.launch(kLayerNormBwdDxKernel, {p.programs}, p.dx_num_warps)
            .constexpr_flag("HAS_WEIGHT", has_weight)
            .constexpr_value("BLOCK_N", p.dx_block_n)
            .constexpr_flag("SINGLE_PASS", p.dx_single_pass)
            .constexpr_flag("INDEX_64", p.index64);
      }
      if (p.columns_kernel != nullptr) {
        if (p.groups == 1) {
          w.launch(p.columns_kernel, {p.column_blocks}, 4);
        } else {
          w.launch(p.columns_kernel, {p.column_blocks, p.groups}, 4);
        }
        w.constexpr_flag("COMPUTE_DW", in.want_dw)
            .constexpr_flag("COMPUTE_DB", in.want_db)
            .constexpr_value("BLOCK_M", p.columns_block_m)
            .constexpr_value("BLOCK_N", p.columns_block_n)
            .constexpr_flag("INDEX_64", p.index64);
        if (p.groups > 1) {
          w.arg("rows_per_group", p.rows_per_group);
        }
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
