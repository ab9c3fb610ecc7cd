#include "plan.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/rows.h>

#include <algorithm>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::rms_norm";
constexpr const char* kBackwardOp = "tjit::rms_norm_backward";

// Up to here the forward takes several rows a program.
constexpr int64_t kShortRowLimit = 1024;
// The forward keeps a row in registers up to this many columns (fp64: half, twice the registers an
// element); past it, the row is read in kLoopBlock steps.
constexpr int64_t kSinglePassLimit = 32768;
// The backward's one fused pass holds a row of dy, x, w and the dw sums: up to the largest hidden
// sizes (fp64: half); past it dx and dw go separately.
constexpr int64_t kFusedBackwardLimit = 16384;
constexpr int64_t kLoopBlock = 4096;
// Rows of a few whole kStepBlock steps (the widths at the forward's rule) are read twice in such
// steps at 16 warps where memory wants more bytes in flight.
constexpr int64_t kStepBlock = 4096;
constexpr int64_t kShortStepBlock = 2048;
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

RmsNormForwardPlan plan_rms_norm_forward(const RmsNormForwardInputs& in, const kit::DeviceFacts& device) {
  const int64_t element_size = c10::elementSize(in.dtype);
  RmsNormForwardPlan plan;
  plan.index64 = in.index64;
  const int64_t block = kit::next_power_of_2(in.cols);
  if (in.cols <= kShortRowLimit) {
    plan.kind = RmsNormForwardPlan::Kind::ShortRows;
    plan.block_n = block;
    plan.block_m = std::max<int64_t>(1, std::min((element_size == 2 ? 2048 : 1024) / block,
                                                 kit::next_power_of_2(in.rows)));
    plan.num_warps = block <= 128 ? 8 : 4;
    plan.programs = kit::blocks_for(in.rows, plan.block_m, kOp);
    return plan;
  }
  plan.programs = kit::blocks_for(in.rows, 1, kOp);
  // Where memory wants more bytes in flight (and on CPU, so the interpreter runs both forms), these
  // rows go faster read twice, the row kept in L2 from the first pass to the second (keep_row),
  // than held in registers through the sum. Other widths measured slower read twice with a run-time
  // step count (fp32 5120: -1%).
  const bool more_in_flight = !device.is_cuda || kit::memory_wants_more_in_flight(device);
  // fp32 rms_norm rows that fill more than 3/4 of a 2048..8192-column block: 2048-column steps.
  const bool keep_rms_row = !in.has_residual && element_size == 4 && block >= 2048 && block <= 8192 &&
                            in.cols * 4 > block * 3;
  // add_rms_norm's fp16/bf16/fp32 rows of an 8192-column block: one step, the one-pass plan's warps.
  const bool keep_add_row = in.has_residual && element_size != 8 && block == 8192;
  // Rows of whole 4096-column steps: 2..4 steps of 2-byte rows, 2..3 of fp32 rms_norm rows, 3..4 of
  // fp16/bf16/fp32 add_rms_norm rows. Their step count is a compile-time constant (row_steps), so
  // both passes unroll and issue every step's loads at once, as Inductor's code for a constant row
  // length does (bf16 12288: +5.5%, level with torch.compile).
  const int64_t whole_steps = in.cols % kStepBlock == 0 ? in.cols / kStepBlock : 0;
  const bool step_rms_row = !in.has_residual && ((element_size == 2 && whole_steps >= 2 && whole_steps <= 4) ||
                                                 (element_size == 4 && whole_steps >= 2 && whole_steps <= 3));
  const bool step_add_row = in.has_residual && element_size != 8 && whole_steps >= 3 && whole_steps <= 4;
  if (more_in_flight && (step_rms_row || step_add_row)) {
    plan.kind = RmsNormForwardPlan::Kind::Looped;
    plan.block_n = kStepBlock;
    plan.single_pass = false;
    plan.keep_row = true;
    plan.row_steps = whole_steps;
    plan.num_warps = 16;
    return plan;
  }
  // fp16/bf16 rows of two whole 2048-column steps (4096), both operators: the same at 8 warps (bf16:
  // rms_norm +2.5%, add_rms_norm +3.1%).
  if (more_in_flight && element_size == 2 && in.cols == 2 * kShortStepBlock) {
    plan.kind = RmsNormForwardPlan::Kind::Looped;
    plan.block_n = kShortStepBlock;
    plan.single_pass = false;
    plan.keep_row = true;
    plan.row_steps = 2;
    plan.num_warps = 8;
    return plan;
  }
  if (more_in_flight && (keep_rms_row || keep_add_row)) {
    plan.kind = RmsNormForwardPlan::Kind::Looped;
    plan.block_n = keep_add_row ? block : 2048;
    plan.single_pass = false;
    plan.keep_row = true;
    // fp32 add_rms_norm rows that fill at most 3/4 of the block: its one step a compile-time count
    // (fp32 5120: +1.9%).
    plan.row_steps = keep_add_row && element_size == 4 && in.cols * 4 <= block * 3 ? 1 : 0;
    plan.num_warps = (keep_add_row ? element_size == 4 : block > 2048) ? 16 : 8;
    return plan;
  }
  // 2-byte rows that fill at most 3/4 of a 8192- or 16384-column block hold it padded in registers,
  // two programs an SM at 16384 (122 registers), too few bytes in flight where the memory wants
  // more. There the row is read twice in blocks of one 16-byte load a thread, the second time from
  // its end, out of L2 (bf16 9216 columns: +17%, level with FlagGems' loop): 4096 columns where
  // they divide the row (taken above), else 2048 (a partial 4096 block idles the most lanes).
  // Rows of an 8192-column block are kept in L2 between the passes, with a compile-time step
  // count as above (bf16 5120: +5.6%); so are fp32 ones, at 16 warps (fp32 5120: +3.3%).
  // add_rms_norm, whose second pass reads back the sum the first wrote, measured within 2% either
  // way: one pass. CPU tensors take it too, so the interpreter runs both forms.
  const bool padded_quarter = in.cols * 4 <= block * 3 && (block == 8192 || block == 16384);
  const bool fp32_quarter = element_size == 4 && padded_quarter && block == 8192;
  if ((element_size == 2 || fp32_quarter) && !in.has_residual && padded_quarter && more_in_flight) {
    plan.kind = RmsNormForwardPlan::Kind::Looped;
    plan.block_n = 2048;
    plan.single_pass = false;
    plan.keep_row = block == 8192;
    plan.row_steps = plan.keep_row ? kit::ceil_div(in.cols, plan.block_n) : 0;
    plan.num_warps = fp32_quarter ? 16 : 8;
    return plan;
  }
  if (in.cols <= (element_size == 8 ? kSinglePassLimit / 2 : kSinglePassLimit)) {
    plan.kind = RmsNormForwardPlan::Kind::Row;
    plan.block_n = block;
    // 2-byte rows want fewer warps than 4-byte ones of the same length.
    if (element_size == 2) {
      plan.num_warps = block <= 2048 ? 4 : block <= 16384 ? 8 : 16;
    } else if (element_size == 4) {
      plan.num_warps = block <= 2048 ? 8 : block <= 8192 ? 16 : 32;
      // Two 32-warp programs fit an SM at <= 32 registers a thread; left to itself the compiler
      // takes 34-37 (sm_90, no spills at 32), leaving one row an SM and memory idle while it sums.
      plan.maxnreg = plan.num_warps == 32 && block <= 16384 ? 32 : 0;
    } else {
      plan.num_warps = static_cast<int>(std::clamp<int64_t>(block / 512, 1, 16));
    }
    return plan;
  }
  plan.kind = RmsNormForwardPlan::Kind::Looped;
  plan.block_n = kLoopBlock;
  plan.single_pass = false;
  plan.num_warps = 16;
  return plan;
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
  const RmsNormForwardPlan p = plan_rms_norm_forward(in, q.device);
  static const char* const kinds[] = {"short_rows", "row", "looped"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
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
