#include "plan.h"

#include <tjit/kit/grid.h>

#include <algorithm>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::sum";

int row_warps(int64_t block_n) { return static_cast<int>(std::clamp<int64_t>(block_n / 512, 1, 16)); }

}  // namespace

SumRowsPlan plan_sum_rows(const SumRowsInputs& in, const kit::DeviceFacts& device) {
  const int64_t rows = in.rows;
  const int64_t cols = in.cols;
  const int64_t element_size = c10::elementSize(in.dtype);
  const int sms = device.multiprocessors;
  SumRowsPlan plan;
  plan.index64 = in.index64;
  // Both stages of the two-stage plan launch dependent where the device can (each launch overlaps
  // the kernel before it); one program a row is then too few for a handful of rows from 8192
  // columns on, 16384 without.
  const bool dependent = device.is_cuda && device.dependent_launch;
  const int64_t one_program_cols = dependent ? 8192 : 16384;
  if (rows < 2 * sms && cols > one_program_cols) {
    plan.num_warps = 8;
    plan.launch_pdl = dependent;
    if (element_size == 4) {
      // 4-byte elements: blocks of 4096 dealt out round-robin to up to 8 programs per SM, capped at
      // 32 registers so that all 8 fit an SM.
      plan.kind = SumRowsPlan::Kind::TwoStageStrided;
      plan.kernel = kSumPartialStridedKernel;
      plan.block_n = 4096;
      plan.maxnreg = 32;
      plan.splits = std::max<int64_t>(
          1, std::min(kit::ceil_div(cols, plan.block_n), 8 * sms / std::max<int64_t>(rows, 1)));
    } else {
      // 2- and 8-byte elements: one contiguous chunk a program, up to 4 programs per SM; 2-byte rows
      // long enough for chunks of 8 blocks take up to 16 per SM, so that the SMs finish together.
      plan.kind = SumRowsPlan::Kind::TwoStageChunked;
      plan.kernel = kSumPartialKernel;
      plan.block_n = element_size == 2 ? 8192 : 4096;
      const int64_t blocks = kit::ceil_div(cols, plan.block_n);
      const int64_t r = std::max<int64_t>(rows, 1);
      int64_t splits = 4 * sms / r;
      if (element_size == 2) {
        splits = std::max(splits, std::min(16 * sms / r, blocks / 8));
      }
      splits = std::max<int64_t>(1, std::min(blocks, splits));
      int64_t chunk = kit::ceil_div(kit::ceil_div(cols, splits), plan.block_n) * plan.block_n;
      chunk = std::min<int64_t>(chunk, (int64_t{1} << 30) / plan.block_n * plan.block_n);
      plan.chunk = chunk;
      plan.splits = kit::ceil_div(cols, chunk);
    }
    plan.programs = kit::blocks_for(rows * plan.splits, 1, kOp);
    plan.second_block_n = std::min<int64_t>(kit::next_power_of_2(plan.splits), 4096);
    plan.second_num_warps = row_warps(plan.second_block_n);
    return plan;
  }
  if (cols < 512) {
    plan.kind = SumRowsPlan::Kind::Blocked;
    plan.kernel = kSumRowsBlockedKernel;
    plan.block_n = std::min<int64_t>(kit::next_power_of_2(cols), 512);
    plan.block_m = std::max<int64_t>(1, std::min(4096 / plan.block_n, kit::next_power_of_2(rows)));
    plan.programs = kit::blocks_for(rows, plan.block_m, kOp);
    return plan;
  }
  plan.kind = SumRowsPlan::Kind::Rows;
  plan.block_n = std::min<int64_t>(kit::next_power_of_2(cols), 4096);
  plan.num_warps = row_warps(plan.block_n);
  plan.programs = kit::blocks_for(rows, 1, kOp);
  return plan;
}

SumMiddlePlan plan_sum_middle(const SumMiddleInputs& in, const kit::DeviceFacts& device) {
  SumMiddlePlan plan;
  plan.index64 = in.index64;
  plan.block_k = std::min<int64_t>(kit::next_power_of_2(in.k), 256);
  plan.block_r = std::max<int64_t>(1, std::min(2048 / plan.block_k, kit::next_power_of_2(in.r)));
  const int64_t base = in.m * kit::ceil_div(in.k, plan.block_k);
  const int sms = device.multiprocessors;
  plan.programs = kit::blocks_for(base, 1, kOp);
  if (base < 2 * sms && in.r >= 4 * plan.block_r) {
    // Too few programs: split R, reduce each split into a partial buffer, then reduce those.
    int64_t splits = std::min(kit::ceil_div(4 * sms, base), kit::ceil_div(in.r, plan.block_r));
    plan.rows_per_split = kit::ceil_div(kit::ceil_div(in.r, splits), plan.block_r) * plan.block_r;
    plan.splits = kit::ceil_div(in.r, plan.rows_per_split);
    plan.split = true;
    plan.split_programs = kit::blocks_for(base * plan.splits, 1, kOp);
    plan.second_block_r = std::max<int64_t>(1, std::min(2048 / plan.block_k, kit::next_power_of_2(plan.splits)));
  }
  return plan;
}

namespace {

kit::PlanWriter describe_rows(const kit::PlanQuery& q) {
  SumRowsInputs in;
  in.rows = q.require("rows");
  in.cols = q.require("cols");
  in.dtype = q.dtype;
  in.index64 = q.get("index64", 0) != 0;
  const SumRowsPlan p = plan_sum_rows(in, q.device);
  static const char* const kinds[] = {"rows", "blocked", "two_stage_strided", "two_stage_chunked"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  switch (p.kind) {
    case SumRowsPlan::Kind::Rows:
      w.launch(p.kernel, {p.programs}, p.num_warps)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("INDEX_64", p.index64)
          .constexpr_flag("PDL", false);
      break;
    case SumRowsPlan::Kind::Blocked:
      w.launch(p.kernel, {p.programs}, p.num_warps)
          .constexpr_value("BLOCK_M", p.block_m)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("INDEX_64", p.index64);
      break;
    case SumRowsPlan::Kind::TwoStageStrided:
    case SumRowsPlan::Kind::TwoStageChunked:
      w.workspace("partial", {in.rows, p.splits});
      w.launch(p.kernel, {p.programs}, p.num_warps, p.maxnreg, p.launch_pdl)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("INDEX_64", p.index64)
          .constexpr_flag("PDL", p.launch_pdl);
      if (p.kind == SumRowsPlan::Kind::TwoStageStrided) {
        w.arg("splits", p.splits);
      } else {
        w.arg("chunk", p.chunk);
      }
      w.launch(kSumRowsKernel, {in.rows}, p.second_num_warps, 0, p.launch_pdl)
          .constexpr_value("BLOCK_N", p.second_block_n)
          .constexpr_flag("INDEX_64", false)
          .constexpr_flag("PDL", p.launch_pdl)
          .arg("N", p.splits);
      break;
  }
  return w;
}

kit::PlanWriter describe_middle(const kit::PlanQuery& q) {
  SumMiddleInputs in;
  in.m = q.require("m");
  in.r = q.require("r");
  in.k = q.require("k");
  in.index64 = q.get("index64", 0) != 0;
  const SumMiddlePlan p = plan_sum_middle(in, q.device);
  kit::PlanWriter w(p.split ? "middle_split" : "middle");
  if (p.split) {
    w.workspace("partial", {in.m, p.splits, in.k});
    w.launch(kSumMidSplitKernel, {p.split_programs}, 4)
        .constexpr_value("BLOCK_R", p.block_r)
        .constexpr_value("BLOCK_K", p.block_k)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("rows_per_split", p.rows_per_split);
    w.launch(kSumMidKernel, {p.programs}, 4)
        .constexpr_value("BLOCK_R", p.second_block_r)
        .constexpr_value("BLOCK_K", p.block_k)
        .constexpr_flag("INDEX_64", p.index64)
        .arg("R", p.splits);
  } else {
    w.launch(kSumMidKernel, {p.programs}, 4)
        .constexpr_value("BLOCK_R", p.block_r)
        .constexpr_value("BLOCK_K", p.block_k)
        .constexpr_flag("INDEX_64", p.index64);
  }
  return w;
}

const kit::RegisterPlan rows_plan("sum_rows", &describe_rows);
const kit::RegisterPlan middle_plan("sum_middle", &describe_middle);

}  // namespace
}  // namespace tjit::ops
