#include "plan.h"

#include <tjit/kit/grid.h>

#include <algorithm>
#include <iterator>
#include <string_view>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::sum";

int row_warps(int64_t block_n) { return static_cast<int>(std::clamp<int64_t>(block_n / 512, 1, 16)); }

// The candidate forms of the rows' plan. Which one runs at a size is measured (plan_choice.h): the
// card's table, else first-call tuning; the default rule serves where neither may. Every kernel
// loops over the row, so every form is right at any size; the rules below say only what a form
// needs (lanes for its block, registers, two or more parts a row for the two-stage forms).
enum class FormKind { Rows, Blocked, Strided, Chunked };

struct SumRowsForm {
  const char* name;
  FormKind kind;
  int64_t block;          // BLOCK_N (Rows, Blocked: at most this, else the row's power of two)
  int num_warps;
  int maxnreg;            // a register cap (0: none)
  int programs_per_sm;    // two-stage forms: the parts of all rows, per SM
  int64_t min_chunk_blocks;  // Chunked: blocks a part holds at least
};

constexpr SumRowsForm kForms[] = {
    // Several short rows a program.
    {"blocked_w4", FormKind::Blocked, 512, 4, 0, 0, 0},
    // One program a row.
    {"rows_w1", FormKind::Rows, 4096, 1, 0, 0, 0},
    {"rows_w2", FormKind::Rows, 4096, 2, 0, 0, 0},
    {"rows_w4", FormKind::Rows, 4096, 4, 0, 0, 0},
    {"rows_w8", FormKind::Rows, 4096, 8, 0, 0, 0},
    {"rows_w16", FormKind::Rows, 4096, 16, 0, 0, 0},
    // Parts of each row into a partial buffer, then the partial's rows. Strided: blocks dealt out
    // round-robin, 8 programs an SM at <= 32 registers a thread. Chunked: one contiguous part a
    // program.
    {"strided4096_w8_reg32", FormKind::Strided, 4096, 8, 32, 8, 0},
    {"chunk4096_w8", FormKind::Chunked, 4096, 8, 0, 4, 1},
    {"chunk8192_w8", FormKind::Chunked, 8192, 8, 0, 4, 1},
    {"chunk8192_w8_p16", FormKind::Chunked, 8192, 8, 0, 16, 8},
};
constexpr int kNumForms = static_cast<int>(std::size(kForms));

// Elements a thread holds of a block at most: more spill.
constexpr int64_t kMaxElementsPerThread = 64;

const kit::PlanCandidates& candidates() {
  static const kit::PlanCandidates plan_candidates("sum_rows", kit::form_names(kForms));
  return plan_candidates;
}

int64_t rows_block(const SumRowsInputs& in, const SumRowsForm& f) {
  return std::min<int64_t>(kit::next_power_of_2(in.cols), f.block);
}

// The parts a row goes in (two-stage forms), and a Chunked part's columns.
struct Parts {
  int64_t splits = 1;
  int64_t chunk = 0;
};

Parts parts_of(const SumRowsInputs& in, const SumRowsForm& f, int sms) {
  const int64_t rows = std::max<int64_t>(in.rows, 1);
  const int64_t blocks = kit::ceil_div(in.cols, f.block);
  const int64_t programs = int64_t{f.programs_per_sm} * sms;
  if (f.kind == FormKind::Strided) {
    return {std::max<int64_t>(1, std::min(blocks, programs / rows)), 0};
  }
  const int64_t most = std::max<int64_t>(1, blocks / f.min_chunk_blocks);
  const int64_t splits = std::max<int64_t>(1, std::min(most, programs / rows));
  int64_t chunk = kit::ceil_div(kit::ceil_div(in.cols, splits), f.block) * f.block;
  // A part's offsets stay within 32 bits.
  chunk = std::min<int64_t>(chunk, (int64_t{1} << 30) / f.block * f.block);
  return {kit::ceil_div(in.cols, chunk), chunk};
}

bool fits(const SumRowsInputs& in, const SumRowsForm& f, const kit::DeviceFacts& device) {
  switch (f.kind) {
    case FormKind::Blocked:
      return true;
    case FormKind::Rows: {
      const int64_t block = rows_block(in, f);
      return (block >= int64_t{32} * f.num_warps || f.num_warps == 1) &&
             block <= kMaxElementsPerThread * 32 * f.num_warps;
    }
    case FormKind::Strided:
    case FormKind::Chunked:
      return parts_of(in, f, device.multiprocessors).splits >= 2;
  }
  return false;
}

int form_index(const char* name) {
  for (int i = 0; i < kNumForms; ++i) {
    if (std::string_view(kForms[i].name) == name) {
      return i;
    }
  }
  TORCH_INTERNAL_ASSERT(false, kOp, ": no rows form ", name);
}

// The default rule: rows in parts when one program a row would leave most SMs idle and a row has
// several blocks to share; short rows several a program; else one program a row, a warp for each
// 512 columns of its block.
int default_form(const SumRowsInputs& in, const kit::DeviceFacts& device) {
  const int chunked = form_index("chunk4096_w8");
  if (in.rows < 2 * int64_t{device.multiprocessors} && in.cols > 4 * kForms[chunked].block &&
      fits(in, kForms[chunked], device)) {
    return chunked;
  }
  if (in.cols < 512) {
    return form_index("blocked_w4");
  }
  const int warps = row_warps(std::min<int64_t>(kit::next_power_of_2(in.cols), 4096));
  return form_index(warps <= 1 ? "rows_w1" : warps == 2 ? "rows_w2" : warps == 4 ? "rows_w4" : "rows_w8");
}

// One choice serves rows of a power-of-two class and columns up to the next power of two, so that
// sums of many different lengths tune (or read the table) once per class.
kit::ChoiceKey choice_key(const SumRowsInputs& in) {
  return kit::ChoiceKey{in.rows, kit::next_power_of_2(std::max<int64_t>(in.cols, 1)), in.dtype, 0};
}

}  // namespace

SumRowsPlan plan_sum_rows_candidate(const SumRowsInputs& in, int candidate, const kit::DeviceFacts& device) {
  TORCH_CHECK(candidate >= 0 && candidate < kNumForms, kOp, ": no rows plan candidate ", candidate);
  const SumRowsForm& f = kForms[candidate];
  SumRowsPlan plan;
  plan.candidate = candidate;
  plan.index64 = in.index64;
  plan.num_warps = f.num_warps;
  plan.maxnreg = f.maxnreg;
  switch (f.kind) {
    case FormKind::Blocked:
      plan.kind = SumRowsPlan::Kind::Blocked;
      plan.kernel = kSumRowsBlockedKernel;
      plan.block_n = rows_block(in, f);
      plan.block_m = std::max<int64_t>(1, std::min(4096 / plan.block_n, kit::next_power_of_2(in.rows)));
      plan.programs = kit::blocks_for(in.rows, plan.block_m, kOp);
      return plan;
    case FormKind::Rows:
      plan.kind = SumRowsPlan::Kind::Rows;
      plan.kernel = kSumRowsKernel;
      plan.block_n = rows_block(in, f);
      plan.programs = kit::blocks_for(in.rows, 1, kOp);
      return plan;
    case FormKind::Strided:
    case FormKind::Chunked: {
      // Both stages launch dependent where the device can (each overlaps the kernel before it).
      plan.launch_pdl = device.is_cuda && device.dependent_launch;
      const Parts parts = parts_of(in, f, device.multiprocessors);
      plan.kind = f.kind == FormKind::Strided ? SumRowsPlan::Kind::TwoStageStrided : SumRowsPlan::Kind::TwoStageChunked;
      plan.kernel = f.kind == FormKind::Strided ? kSumPartialStridedKernel : kSumPartialKernel;
      plan.block_n = f.block;
      plan.splits = parts.splits;
      plan.chunk = parts.chunk;
      plan.programs = kit::blocks_for(in.rows * plan.splits, 1, kOp);
      plan.second_block_n = std::min<int64_t>(kit::next_power_of_2(plan.splits), 4096);
      plan.second_num_warps = row_warps(plan.second_block_n);
      return plan;
    }
  }
  TORCH_INTERNAL_ASSERT(false, kOp, ": candidate ", f.name, " has no plan");
}

SumRowsPlan plan_sum_rows(const SumRowsInputs& in, const kit::DeviceFacts& device, const kit::CandidateTimer* timer,
                          kit::ChoiceSource* source) {
  const auto form_fits = [&](int i) { return fits(in, kForms[i], device); };
  const auto default_index = [&] { return default_form(in, device); };
  const int candidate = candidates().choose(choice_key(in), device, form_fits, default_index, timer, source);
  return plan_sum_rows_candidate(in, candidate, device);
}

std::vector<std::string> sum_rows_fitting(const SumRowsInputs& in, const kit::DeviceFacts& device) {
  return kit::fitting_names(kForms, [&](const SumRowsForm& f) { return fits(in, f, device); });
}

namespace {
// Registered at load time, so tools list the candidates before a first call.
const kit::PlanCandidates& registered_rows = candidates();
}  // namespace

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
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  int candidate = static_cast<int>(q.get("candidate", -1));
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  if (candidate < 0) {
    const auto form_fits = [&](int i) { return fits(in, kForms[i], q.device); };
    const auto default_index = [&] { return default_form(in, q.device); };
    candidate = candidates().peek(choice_key(in), q.device, form_fits, default_index, &source);
  } else {
    TORCH_CHECK(candidate < kNumForms && fits(in, kForms[candidate], q.device), "describe_plan: sum_rows candidate ",
                candidate, " does not fit ", in.rows, " rows of ", in.cols, " columns");
  }
  const SumRowsPlan p = plan_sum_rows_candidate(in, candidate, q.device);
  static const char* const kinds[] = {"rows", "blocked", "two_stage_strided", "two_stage_chunked"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  w.choice(kForms[candidate].name, kit::choice_source_name(source), sum_rows_fitting(in, q.device));
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
