#include "plan.h"

#include "../norm_forward_forms.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/rows.h>

#include <algorithm>
#include <iterator>
#include <string_view>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::rms_norm";
constexpr const char* kBackwardOp = "tjit::rms_norm_backward";

// The backward's one fused pass holds a row of dy, x, w and the dw sums: up to the largest hidden
// sizes (fp64: half); past it dx and dw go separately.
constexpr int64_t kFusedBackwardLimit = 16384;
constexpr int64_t kLoopBlock = 4096;
// Up to this many columns (head plus tail) a fused program of the backward has registers left to
// load the next tile before this one's sums, and to hold w across its rows (sm_90 binaries: no
// spills at the plan's warps; past it 32 warps leave 64 registers a thread).
constexpr int64_t kFusedRegisterRoom = 8192;
// Past that room on CUDA, rows that want dx go to teams of programs, one kTeamBlock chunk of the
// row each (4 warps, no spills, two an SM where the fused pass holds one), sharing each row's sum
// through the row exchange, the row loop kTeamStages deep (2 stages leave loads idle).
constexpr int64_t kTeamBlock = 4096;
constexpr int64_t kTeamMaxChunks = 32;
constexpr int kTeamStages = 3;
// 2-byte rms_norm rows take the lag kernel: 2048-column chunks capped at 128 registers hold four
// programs an SM where 4096-column ones hold two (bf16 9216-16384 columns: +2-9%). add_rms_norm's
// extra row of ds loses with it: the team kernel.
constexpr int64_t kTeamLagBlock = 2048;
constexpr int kTeamLagMaxRegisters = 128;
constexpr int kTeamLagStages = 2;

}  // namespace

namespace {

// The forward's candidate forms (the norm family's, norm_forward_forms.h): those rms_norm_fwd_kernel
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
      TORCH_INTERNAL_ASSERT(false, kOp, ": rms_norm_fwd_kernel has no ", f.name, " form");
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

std::vector<std::string> rms_norm_forward_fitting(const RmsNormForwardInputs& in) {
  return forward_forms().fitting(in.cols, in.dtype);
}

RmsNormBackwardPlan plan_rms_norm_backward(const RmsNormBackwardInputs& in, const kit::DeviceFacts& device) {
  const int64_t rows = in.rows;
  const int64_t cols = in.cols;
  const int64_t element_size = c10::elementSize(in.dtype);
  const int sms = device.multiprocessors;
  RmsNormBackwardPlan plan;
  plan.index64 = in.index64;
  if (!in.want_dx && !in.want_dw) {
    return plan;
  }
  const auto sum_groups = [&](int64_t groups) {
    plan.groups = groups;
    if (in.want_dw && groups > 1) {
      // Narrow column blocks keep enough programs reading.
      plan.finalize_block_n = std::clamp<int64_t>(kit::next_power_of_2(kit::ceil_div(cols, 256)), 16, 128);
      plan.finalize_block_g =
          std::min<int64_t>(kit::next_power_of_2(groups), std::max<int64_t>(32, 2048 / plan.finalize_block_n));
      plan.finalize_programs = kit::blocks_for(cols, plan.finalize_block_n, kBackwardOp);
    }
  };
  const bool lag = element_size == 2 && !in.with_grad_sum;
  const int64_t team_block = lag ? kTeamLagBlock : kTeamBlock;
  const int64_t team_chunks = kit::ceil_div(cols, team_block);
  // A team must fit the GPU at once (else it gives up and one program does its rows): with the
  // occupancy known, fewer programs than a team go to the other plans.
  if (device.is_cuda && element_size != 8 && in.want_dx && cols > kFusedRegisterRoom &&
      team_chunks <= kTeamMaxChunks && rows * team_chunks * 2 < kit::kInt32Limit &&
      int64_t{std::max(in.resident_programs_per_sm, 1)} * sms >= team_chunks) {
    plan.kind = RmsNormBackwardPlan::Kind::Team;
    plan.block_n = team_block;
    plan.num_warps = 4;
    plan.chunks = team_chunks;
    plan.s_pow2 = kit::next_power_of_2(team_chunks);
    plan.stages = lag ? kTeamLagStages : kTeamStages;
    plan.lag = lag;
    plan.maxnreg = lag ? kTeamLagMaxRegisters : 0;
    plan.needs_occupancy = in.resident_programs_per_sm == 0;
    // Rows split evenly over as many teams as run at once.
    const int64_t capacity =
        std::max<int64_t>(1, int64_t{std::max(in.resident_programs_per_sm, 1)} * sms / team_chunks);
    plan.rows_per_program = kit::ceil_div(rows, std::min(capacity, rows));
    const int64_t teams = kit::ceil_div(rows, plan.rows_per_program);
    plan.programs = kit::blocks_for(teams * team_chunks, 1, kBackwardOp);
    plan.rescue_block_n = kTeamBlock;
    sum_groups(teams);
    return plan;
  }
  if (cols <= (element_size == 8 ? kFusedBackwardLimit / 2 : kFusedBackwardLimit)) {
    // [block_m, block_n] tiles of about `tile` elements; programs a few per SM, each a run of rows.
    const int64_t block_n = kit::next_power_of_2(cols);
    int64_t tile = block_n <= 512 ? 2048 : block_n <= 2048 ? 4096 : 8192;
    if (element_size == 8) {
      tile /= 2;
    }
    tile = std::max(tile, block_n);
    // Up to 2048 columns two programs an SM: at one, 4-byte rows leave the SM 8 warps. 4-byte rows
    // there skip the prefetch and reload w per tile, whose registers (add_rms_norm's: 161) would
    // leave room for one.
    const int per_sm = block_n > 128 && block_n <= 2048 ? 2 : 1;
    const bool four_byte_pair = element_size == 4 && per_sm == 2;
    plan.kind = RmsNormBackwardPlan::Kind::Fused;
    plan.block_m = tile / block_n;
    plan.block_n = block_n;
    plan.num_warps = static_cast<int>(std::clamp<int64_t>(tile / 512, 4, 32));
    // Rows just past 8192 columns (12288): that block plus a tail block, not a block padded to the
    // next power of two, whose idle lanes hold registers and spill. Past 4096 (5120) the tail's
    // narrow loads cost more than the padding (bf16: 0.92x, add_rms_norm 0.71x).
    const int64_t head = block_n / 2;
    const int64_t tail = kit::next_power_of_2(std::max<int64_t>(cols - head, 1));
    if (element_size != 8 && head >= 8192 && cols > head && tail <= head / 2) {
      plan.block_n = head;
      plan.block_tail = tail;
    }
    const int64_t width = plan.block_n + plan.block_tail;
    plan.prefetch = element_size != 8 && block_n >= 2048 && width <= kFusedRegisterRoom && !four_byte_pair;
    // w is held across rows unless a tail block's spills make reloading it per tile cheaper, or
    // add_rms_norm's fourth 4-byte row leaves no registers for it (5120-8192 columns: 1.15-1.23x).
    const bool four_byte_grad_sum = element_size == 4 && in.with_grad_sum && width <= kFusedRegisterRoom;
    plan.preload_w =
        (width <= kFusedRegisterRoom || plan.block_tail == 0) && !four_byte_pair && !four_byte_grad_sum;
    int64_t programs = std::min<int64_t>(int64_t{per_sm} * sms, kit::ceil_div(rows, plan.block_m));
    plan.rows_per_program = kit::ceil_div(kit::ceil_div(rows, programs), plan.block_m) * plan.block_m;
    programs = kit::ceil_div(rows, plan.rows_per_program);
    plan.programs = kit::blocks_for(programs, 1, kBackwardOp);
    sum_groups(programs);
    return plan;
  }
  plan.kind = RmsNormBackwardPlan::Kind::DxThenColumns;
  if (in.want_dx) {
    plan.dx = true;
    plan.block_n = kLoopBlock;
    plan.num_warps = 16;
    plan.programs = kit::blocks_for(rows, 1, kBackwardOp);
  }
  if (!in.want_dw) {
    return plan;
  }
  // Columns in blocks, rows split into groups when the column blocks alone would leave the GPU
  // idle; groups write partial sums that the finalize adds up.
  plan.columns = true;
  plan.columns_block_n = std::min<int64_t>(kit::next_power_of_2(cols), 128);
  plan.columns_block_m = element_size == 8 ? 16 : 32;
  const int64_t col_blocks = kit::ceil_div(cols, plan.columns_block_n);
  int64_t groups = std::min({kit::ceil_div(4 * sms, col_blocks), kit::ceil_div(rows, plan.columns_block_m),
                             int64_t{65535}});
  groups = std::max<int64_t>(groups, 1);
  plan.rows_per_group = kit::ceil_div(kit::ceil_div(rows, groups), plan.columns_block_m) * plan.columns_block_m;
  groups = kit::ceil_div(rows, plan.rows_per_group);
  plan.column_blocks = kit::blocks_for(cols, plan.columns_block_n, kBackwardOp);
  sum_groups(groups);
  return plan;
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
                "describe_plan: rms_norm_forward candidate ", candidate, " does not fit ", in.rows, " rows of ", in.cols,
                " columns");
  }
  const RmsNormForwardPlan p = plan_rms_norm_forward_candidate(in, candidate);
  static const char* const kinds[] = {"short_rows", "row", "looped"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  w.choice(forward_forms()[candidate].name, kit::choice_source_name(source), rms_norm_forward_fitting(in));
  w.launch(kRmsNormFwdKernel, {p.programs}, p.num_warps, p.maxnreg)
      .constexpr_flag("HAS_RESIDUAL", in.has_residual)
      .constexpr_flag("HAS_WEIGHT", q.get("has_weight", 1) != 0)
      .constexpr_value("BLOCK_M", p.block_m)
      .constexpr_value("BLOCK_N", p.block_n)
      .constexpr_flag("SINGLE_PASS", p.single_pass)
      .constexpr_flag("INDEX_64", p.index64)
      .constexpr_value("BLOCK_TAIL", 0)
      .constexpr_flag("KEEP_ROW", p.keep_row)
      .constexpr_value("ROW_STEPS", p.row_steps);
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
  const RmsNormBackwardPlan p = plan_rms_norm_backward(in, q.device);
  static const char* const kinds[] = {"none", "fused", "dx_dw", "team"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  if (p.kind == RmsNormBackwardPlan::Kind::Team) {
    // The row words, then one mode word a team; dw's partial rows, one a team.
    w.workspace("row_exchange_words", {2 + in.rows * p.chunks + p.groups});
    w.launch(p.lag ? kRmsNormBwdTeamLagKernel : kRmsNormBwdTeamKernel, {p.programs}, p.num_warps, p.maxnreg)
        .constexpr_flag("HAS_WEIGHT", has_weight)
        .constexpr_flag("COMPUTE_DW", in.want_dw)
        .constexpr_value("BLOCK_N", p.block_n)
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
        .constexpr_value("BLOCK_N", p.rescue_block_n)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("S", p.chunks)
        .arg("rows_per_team", p.rows_per_program);
  }
  if (p.kind == RmsNormBackwardPlan::Kind::Fused) {
    w.launch(kRmsNormBwdFusedKernel, {p.programs}, p.num_warps)
        .constexpr_flag("HAS_WEIGHT", has_weight)
        .constexpr_flag("COMPUTE_DX", in.want_dx)
        .constexpr_flag("COMPUTE_DW", in.want_dw)
        .constexpr_value("BLOCK_M", p.block_m)
        .constexpr_value("BLOCK_N", p.block_n)
        .constexpr_flag("INDEX_64", p.index64)
        .constexpr_value("BLOCK_TAIL", p.block_tail)
        .constexpr_flag("PREFETCH", p.prefetch)
        .constexpr_flag("PRELOAD_W", p.preload_w)
        .arg("rows_per_program", p.rows_per_program);
  }
  if (p.dx) {
    w.launch(kRmsNormBwdDxKernel, {p.programs}, p.num_warps)
        .constexpr_flag("HAS_WEIGHT", has_weight)
        .constexpr_value("BLOCK_N", p.block_n)
        .constexpr_flag("INDEX_64", p.index64);
  }
  if (p.columns) {
    w.launch(kRmsNormBwdDwPartialKernel, {p.column_blocks, p.groups}, 4)
        .constexpr_value("BLOCK_M", p.columns_block_m)
        .constexpr_value("BLOCK_N", p.columns_block_n)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("rows_per_group", p.rows_per_group);
  }
  if (in.want_dw && p.groups > 1) {
    w.launch(kRmsNormBwdDwFinalizeKernel, {p.finalize_programs}, 4)
        .constexpr_value("BLOCK_G", p.finalize_block_g)
        .constexpr_value("BLOCK_N", p.finalize_block_n)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("G", p.groups);
  }
  return w;
}

const kit::RegisterPlan forward_plan("rms_norm_forward", &describe_forward);
const kit::RegisterPlan backward_plan("rms_norm_backward", &describe_backward);

}  // namespace
}  // namespace tjit::ops
