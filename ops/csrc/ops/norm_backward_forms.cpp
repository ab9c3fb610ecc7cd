#include "norm_backward_forms.h"

#include "norm_backward.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/rows.h>

#include <c10/util/Exception.h>

#include <algorithm>

namespace tjit::ops::norm {
namespace {

// A program a fused tile of `tile` elements takes tile / 512 warps, 16 elements a thread.
constexpr int64_t kElementsPerWarp = 512;
// Programs an SM at most times their warps: 32 leaves each thread at least 64 registers.
constexpr int64_t kWarpsPerSmWithRegisters = 32;
// A fused program has registers left to load the next tile before this one's sums, and to hold w
// across its rows, up to this many columns (head plus tail) a tile.
constexpr int64_t kFusedRegisterRoom = 8192;
// A team has at most this many programs (its row exchange words are a power of two up to 32).
constexpr int64_t kTeamMaxChunks = 32;
// DxThenColumns: dx in 4096-column steps past the dx kernel's one-pass limit; column sums in
// blocks of up to 128 columns by 32 rows (fp64: 16).
constexpr int64_t kDxStep = 4096;
constexpr int64_t kColumnsBlockN = 128;

bool is_fp64(c10::ScalarType dtype) { return c10::elementSize(dtype) == 8; }

bool wants_any(const BackwardCall& call) { return call.want_dx || call.want_sums; }

kit::ChoiceKey choice_key(const BackwardCall& call) { return {call.rows, call.cols, call.dtype, call.choice_flags}; }

int64_t fused_tile(const BackwardForm& f, int64_t block_n, c10::ScalarType dtype) {
  return std::max(is_fp64(dtype) ? f.tile / 2 : f.tile, block_n);
}

int fused_warps(const BackwardForm& f, int64_t block_n, c10::ScalarType dtype) {
  if (f.num_warps > 0) {
    return f.num_warps;
  }
  return static_cast<int>(std::clamp<int64_t>(fused_tile(f, block_n, dtype) / kElementsPerWarp, 4, 32));
}

// Narrow column blocks keep enough programs reading (8192 columns: 256 programs of 32).
FinalizePlan plan_finalize(int64_t groups, int64_t cols, const char* op) {
  FinalizePlan plan;
  plan.block_n = std::clamp<int64_t>(kit::next_power_of_2(kit::ceil_div(cols, 256)), 16, 128);
  plan.block_g = std::min<int64_t>(kit::next_power_of_2(groups), std::max<int64_t>(32, 2048 / plan.block_n));
  plan.programs = kit::blocks_for(cols, plan.block_n, op);
  return plan;
}

}  // namespace

void describe_fused(kit::PlanWriter& w, const BackwardPlan& p, bool has_weight, bool want_dx, bool want_dw,
                    bool want_db) {
  w.launch(kFusedKernel, {p.programs}, p.num_warps)
      .constexpr_flag("HAS_WEIGHT", has_weight)
      .constexpr_flag("COMPUTE_DX", want_dx)
      .constexpr_flag("COMPUTE_DW", want_dw)
      .constexpr_flag("COMPUTE_DB", want_db)
      .constexpr_value("BLOCK_M", p.block_m)
      .constexpr_value("BLOCK_N", p.block_n)
      .constexpr_flag("INDEX_64", p.index64)
      .constexpr_value("BLOCK_TAIL", p.block_tail)
      .constexpr_flag("PREFETCH", p.prefetch)
      .constexpr_flag("PRELOAD_W", p.preload_w)
      .arg("rows_per_program", p.rows_per_program);
}

int64_t team_chunks(const BackwardForm& form, int64_t cols) { return kit::ceil_div(cols, form.chunk); }

BackwardFormList::BackwardFormList(const char* plan, const BackwardForm* forms, int count, BackwardKernels kernels,
                                   BackwardDefaultRule default_rule)
    : forms_(forms), count_(count), kernels_(kernels), default_rule_(default_rule),
      candidates_(plan, kit::form_names(forms, static_cast<std::size_t>(count))) {}

bool BackwardFormList::fits(int i, const BackwardCall& call, const kit::DeviceFacts& device) const {
  const BackwardForm& f = forms_[i];
  const int64_t block = kit::next_power_of_2(call.cols);
  const bool fp64 = is_fp64(call.dtype);
  switch (f.kind) {
    case BackwardKind::Fused: {
      if (call.cols > (fp64 ? kernels_.fused_limit_fp64 : kernels_.fused_limit)) {
        return false;
      }
      if (f.head > 0) {
        const int64_t tail = kit::next_power_of_2(std::max<int64_t>(call.cols - f.head, 1));
        if (fp64 || call.cols <= f.head || tail > f.head / 2) {
          return false;
        }
      } else if (f.tile < block) {
        return false;
      }
      return int64_t{f.programs_per_sm} * fused_warps(f, f.head > 0 ? f.head : block, call.dtype) <=
             kWarpsPerSmWithRegisters;
    }
    case BackwardKind::Team: {
      // Programs of a team wait for each other: only CUDA runs them at once. Their sums are fp32.
      const int64_t chunks = team_chunks(f, call.cols);
      return device.is_cuda && !fp64 && (call.want_dx || !(kernels_.team_needs_dx || f.lag)) && chunks >= 2 &&
             chunks <= kTeamMaxChunks && call.rows * chunks * 2 < kit::kInt32Limit;
    }
    case BackwardKind::DxThenColumns:
      return true;
  }
  return false;
}

int BackwardFormList::index_of(const char* name) const {
  const int i = candidates_.index_of(name);
  TORCH_INTERNAL_ASSERT(i >= 0, candidates_.plan(), ": no form ", name);
  return i;
}

int BackwardFormList::fused(int64_t tile, int programs_per_sm, bool reload_w) const {
  for (int i = 0; i < count_; ++i) {
    const BackwardForm& f = forms_[i];
    if (f.kind == BackwardKind::Fused && f.head == 0 && f.tile == tile && f.programs_per_sm == programs_per_sm &&
        f.reload_w == reload_w) {
      return i;
    }
  }
  TORCH_INTERNAL_ASSERT(false, candidates_.plan(), ": no fused form of ", tile, " elements, ", programs_per_sm,
                        " an SM", reload_w ? ", w reloaded" : "");
}

int BackwardFormList::default_index(const BackwardCall& call, const kit::DeviceFacts& device, bool teams) const {
  const int i = default_rule_(*this, call, device, teams);
  TORCH_INTERNAL_ASSERT(i >= 0 && i < count_ && fits(i, call, device) &&
                            (teams || forms_[i].kind != BackwardKind::Team),
                        candidates_.plan(), ": the default rule's form ", i, " does not fit ", call.rows, " rows of ",
                        call.cols, " columns");
  return i;
}

int BackwardFormList::choose(const BackwardCall& call, const kit::DeviceFacts& device,
                             const kit::CandidateTimer* timer, kit::ChoiceSource* source) const {
  if (!wants_any(call)) {
    return -1;
  }
  const auto form_fits = [&](int i) { return fits(i, call, device); };
  const auto default_form = [&] { return default_index(call, device); };
  return candidates_.choose(choice_key(call), device, form_fits, default_form, timer, source);
}

int BackwardFormList::peek(const BackwardCall& call, const kit::DeviceFacts& device,
                           kit::ChoiceSource* source) const {
  if (!wants_any(call)) {
    return -1;
  }
  const auto form_fits = [&](int i) { return fits(i, call, device); };
  const auto default_form = [&] { return default_index(call, device); };
  return candidates_.peek(choice_key(call), device, form_fits, default_form, source);
}

int BackwardFormList::described(const BackwardCall& call, int candidate, const kit::DeviceFacts& device,
                                kit::ChoiceSource* source) const {
  if (candidate < 0 || !wants_any(call)) {
    return peek(call, device, source);
  }
  TORCH_CHECK(candidate < count_ && fits(candidate, call, device), "describe_plan: ", candidates_.plan(),
              " candidate ", candidate, " does not fit ", call.rows, " rows of ", call.cols, " columns");
  if (source != nullptr) {
    *source = kit::ChoiceSource::Forced;
  }
  return candidate;
}

std::vector<std::string> BackwardFormList::fitting(const BackwardCall& call, const kit::DeviceFacts& device) const {
  return kit::fitting_names(forms_, static_cast<std::size_t>(count_),
                            [&](const BackwardForm& f) { return fits(static_cast<int>(&f - forms_), call, device); });
}

BackwardPlan BackwardFormList::plan(const BackwardCall& call, int candidate, const kit::DeviceFacts& device,
                                    const char* op) const {
  BackwardPlan plan;
  plan.index64 = call.index64;
  if (!wants_any(call)) {
    return plan;
  }
  TORCH_CHECK(candidate >= 0 && candidate < count_ && fits(candidate, call, device), op, ": backward plan candidate ",
              candidate, " does not fit ", call.rows, " rows of ", call.cols, " columns");
  const BackwardForm& f = forms_[candidate];
  const int64_t rows = call.rows;
  const int64_t cols = call.cols;
  const int sms = device.multiprocessors;
  plan.candidate = candidate;
  plan.maxnreg = f.maxnreg;
  const auto sum_groups = [&](int64_t groups, bool finalize_always) {
    plan.groups = groups;
    plan.finalize_launch = (call.want_sums && groups > 1) || finalize_always;
    if (plan.finalize_launch) {
      plan.finalize = plan_finalize(groups, cols, op);
    }
  };
  switch (f.kind) {
    case BackwardKind::Fused: {
      plan.kind = BackwardPlan::Kind::Fused;
      plan.block_n = f.head > 0 ? f.head : kit::next_power_of_2(cols);
      plan.block_tail = f.head > 0 ? kit::next_power_of_2(cols - f.head) : 0;
      plan.block_m = f.head > 0 ? 1 : fused_tile(f, plan.block_n, call.dtype) / plan.block_n;
      plan.num_warps = fused_warps(f, plan.block_n, call.dtype);
      // What the registers allow: past the room neither the next tile nor (beside a tail) w. An fp64
      // tile has half the elements, so the same room.
      const int64_t width = plan.block_n + plan.block_tail;
      plan.prefetch = !f.reload_w && width <= kFusedRegisterRoom;
      plan.preload_w = !f.reload_w && (width <= kFusedRegisterRoom || plan.block_tail == 0);
      // Programs a few an SM, each a run of whole tiles of rows.
      int64_t programs = std::min<int64_t>(int64_t{f.programs_per_sm} * sms, kit::ceil_div(rows, plan.block_m));
      plan.rows_per_program = kit::ceil_div(kit::ceil_div(rows, programs), plan.block_m) * plan.block_m;
      programs = kit::ceil_div(rows, plan.rows_per_program);
      plan.programs = kit::blocks_for(programs, 1, op);
      sum_groups(programs, false);
      return plan;
    }
    case BackwardKind::Team: {
      const int64_t chunks = team_chunks(f, cols);
      const bool by_occupancy = f.programs_per_sm == 0;
      const int64_t per_sm = by_occupancy ? std::max(call.resident_programs_per_sm, 1) : f.programs_per_sm;
      if (by_occupancy && call.resident_programs_per_sm > 0 && per_sm * sms < chunks) {
        // A team must run at once (else it gives up, and one program does its rows).
        return this->plan(call, default_index(call, device, /*teams=*/false), device, op);
      }
      plan.kind = BackwardPlan::Kind::Team;
      plan.needs_occupancy = by_occupancy && call.resident_programs_per_sm == 0;
      plan.block_n = f.chunk;
      plan.num_warps = f.num_warps;
      plan.chunks = chunks;
      plan.s_pow2 = kit::next_power_of_2(chunks);
      plan.stages = f.stages;
      plan.lag = f.lag;
      // Rows split evenly over as many teams as run at once.
      const int64_t capacity = std::max<int64_t>(1, per_sm * sms / chunks);
      plan.rows_per_program = kit::ceil_div(rows, std::min(capacity, rows));
      const int64_t teams = kit::ceil_div(rows, plan.rows_per_program);
      plan.programs = kit::blocks_for(teams * chunks, 1, op);
      sum_groups(teams, f.lag && kernels_.lag_finalize_always);
      return plan;
    }
    case BackwardKind::DxThenColumns:
      break;
  }
  plan.kind = BackwardPlan::Kind::DxThenColumns;
  if (call.want_dx) {
    plan.dx = true;
    if (cols <= kernels_.dx_row_limit) {
      plan.dx_block_n = kit::next_power_of_2(cols);
      plan.dx_single_pass = true;
      plan.dx_num_warps = static_cast<int>(std::clamp<int64_t>(plan.dx_block_n / 512, 1, 16));
    } else {
      plan.dx_block_n = kDxStep;
      plan.dx_num_warps = 16;
    }
    plan.programs = kit::blocks_for(rows, 1, op);
  }
  if (!call.want_sums) {
    return plan;
  }
  // Columns in blocks, rows split into groups when the column blocks alone would leave the GPU
  // idle; groups write partial sums that the finalize adds up.
  plan.columns = true;
  plan.columns_block_n = std::min<int64_t>(kit::next_power_of_2(cols), kColumnsBlockN);
  plan.columns_block_m = is_fp64(call.dtype) ? 16 : 32;
  const int64_t col_blocks = kit::ceil_div(cols, plan.columns_block_n);
  int64_t groups = std::min({kit::ceil_div(4 * sms, col_blocks), kit::ceil_div(rows, plan.columns_block_m),
                             int64_t{65535}});
  groups = std::max<int64_t>(groups, 1);
  plan.rows_per_group = kit::ceil_div(kit::ceil_div(rows, groups), plan.columns_block_m) * plan.columns_block_m;
  groups = kit::ceil_div(rows, plan.rows_per_group);
  plan.column_blocks = kit::blocks_for(cols, plan.columns_block_n, op);
  sum_groups(groups, false);
  return plan;
}

}  // namespace tjit::ops::norm
