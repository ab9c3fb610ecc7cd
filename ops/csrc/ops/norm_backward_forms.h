#pragma once
// The normalisations' backward: one plan for the norm family (rms_norm, add_rms_norm, layer_norm).
// Each operator lists the candidate forms its kernels have (BackwardForm) and the facts of those
// kernels (BackwardKernels); which fitting form runs at a size is measured (tjit/kit/plan_choice.h),
// and this file makes the launch plan of the chosen one: the fused pass's tiles, the teams that
// share long rows through the row exchange, or dx by rows then the column sums, with the finalize
// that adds partial sums up.

#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops::norm {

enum class BackwardKind {
  Fused,          // dx and per-program column sums in one pass over [block_m, block_n] tiles
  Team,           // teams of programs, one chunk of a long row each, the row's sums exchanged
  DxThenColumns,  // dx one row a program, then the column sums by column blocks
};

struct BackwardForm {
  const char* name;
  BackwardKind kind;
  // Fused: elements of a tile (fp64: half, twice the registers an element), at least the row's
  // block; head > 0: the row as a head block and a smaller tail block beside it, one row a tile.
  int64_t tile;
  int64_t head;
  int num_warps;        // Fused without head: 0 (tile / 512, 4 to 32); otherwise the warps
  int programs_per_sm;  // Fused: programs an SM; Team: 0 = as many as the binary's occupancy holds
  bool reload_w;        // Fused: neither the next tile prefetched nor w held (w read per tile)
  int64_t chunk;        // Team: columns a program
  int stages;           // Team: the row loop's depth
  bool lag;             // Team: the lag kernel (a row's dx one iteration after its sums)
  int maxnreg;          // registers a thread (0: the compiler's choice)
};

// What an operator's backward kernels are and can do.
struct BackwardKernels {
  int64_t fused_limit;        // the fused kernel holds rows up to this many columns
  int64_t fused_limit_fp64;   // and fp64 rows up to this many
  bool team_needs_dx;         // the team kernel always writes dx
  int64_t dx_row_limit;       // the dx kernel holds a row in registers up to this (0: always steps)
  bool lag_finalize_always;   // the lag kernel's finalize runs for any team count (rows of teams that gave up)
};

// One backward call, as the plan sees it.
struct BackwardCall {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  bool want_dx = true;
  bool want_sums = true;  // dw (and db): column sums over the rows
  bool index64 = false;
  bool with_grad_sum = false;  // add_rms_norm: the gradient of input + residual is read too
  // The operator's switches in its choice key (kit::ChoiceKey::flags): the gradients it asks for.
  int64_t choice_flags = 0;
  // Programs of the chosen team kernel an SM holds at once (the driver's occupancy of its binary);
  // 0: not asked yet. A plan that needs it says so (needs_occupancy) and is made again with it.
  int resident_programs_per_sm = 0;
};

// dw (db) = the sum over `groups` rows of [groups, cols] partial sums, in one launch.
struct FinalizePlan {
  uint32_t programs = 1;
  int64_t block_g = 1;
  int64_t block_n = 1;
};

struct BackwardPlan {
  enum class Kind { Nothing, Fused, Team, DxThenColumns };
  Kind kind = Kind::Nothing;
  int candidate = -1;  // the form (plan_choice.h); -1: Nothing
  bool index64 = false;
  bool needs_occupancy = false;  // Team by occupancy without resident_programs_per_sm
  // Fused: programs of rows_per_program rows in tiles; Team: teams * chunks programs; DxThenColumns:
  // the dx kernel's rows.
  uint32_t programs = 1;
  int num_warps = 4;
  int maxnreg = 0;
  int64_t block_m = 1;
  int64_t block_n = 1;
  int64_t block_tail = 0;        // Fused: columns past block_n in a tile beside each (0: none)
  int64_t rows_per_program = 0;  // Fused: rows a program; Team: rows a team
  bool prefetch = false;         // Fused: the next tile loaded before this one's sums
  bool preload_w = true;         // Fused: w held in registers across rows
  // Team: programs a team (S) and its power of two, the row loop's depth, the lag kernel.
  int64_t chunks = 1;
  int64_t s_pow2 = 1;
  int stages = 1;
  bool lag = false;
  // DxThenColumns: dx one row a program (when dx is wanted), then the sums by column blocks.
  bool dx = false;
  int64_t dx_block_n = 1;
  bool dx_single_pass = false;
  int dx_num_warps = 4;
  bool columns = false;
  uint32_t column_blocks = 1;
  int64_t columns_block_m = 1;
  int64_t columns_block_n = 1;
  int64_t rows_per_group = 0;
  // Rows of the column sums' partials: > 1 means [groups, cols] buffers in the accumulator dtype and
  // the finalize; 1 means the kernel stores the sums directly. Team: one a team.
  int64_t groups = 1;
  FinalizePlan finalize;
  bool finalize_launch = false;  // whether the finalize runs (groups > 1, or the lag kernel's always)
};

// A fused plan's launch of norm_bwd_fused_kernel, described for tjit.plans.
void describe_fused(kit::PlanWriter& w, const BackwardPlan& p, bool has_weight, bool want_dx, bool want_dw,
                    bool want_db);

// The chunks of a team form for `cols` columns.
int64_t team_chunks(const BackwardForm& form, int64_t cols);

class BackwardFormList;

// An operator's default rule: the form a call takes where nothing was measured (teams: whether
// team forms may be taken). It must return a fitting form.
using BackwardDefaultRule = int (*)(const BackwardFormList& forms, const BackwardCall& call,
                                    const kit::DeviceFacts& device, bool teams);

// An operator's backward forms as the candidates of its plan `plan` (registered for tools at first
// use), with its kernels' facts and its default rule.
class BackwardFormList {
 public:
  BackwardFormList(const char* plan, const BackwardForm* forms, int count, BackwardKernels kernels,
                   BackwardDefaultRule default_rule);
  const BackwardForm& operator[](int i) const { return forms_[i]; }
  int size() const { return count_; }
  const kit::PlanCandidates& candidates() const { return candidates_; }
  int index_of(const char* name) const;  // asserts it is one of them
  // The fused form without a head of these tile, programs an SM and reload_w (asserts it exists).
  int fused(int64_t tile, int programs_per_sm, bool reload_w) const;

  // Whether form i may serve the call: registers, what its kernel computes, whether its programs
  // run at once (teams: CUDA only), the row exchange's index width.
  bool fits(int i, const BackwardCall& call, const kit::DeviceFacts& device) const;
  // The default rule's form for the call.
  int default_index(const BackwardCall& call, const kit::DeviceFacts& device, bool teams = true) const;
  // The form chosen for the call (plan_choice.h's order; its class: rows, columns, dtype and
  // choice_flags); -1 when it asks for no gradient. peek: without measuring.
  int choose(const BackwardCall& call, const kit::DeviceFacts& device, const kit::CandidateTimer* timer,
             kit::ChoiceSource* source) const;
  int peek(const BackwardCall& call, const kit::DeviceFacts& device, kit::ChoiceSource* source) const;
  // What a describer names: `candidate` (-1: the choice peek makes, with its source; else checked to
  // fit, the source Forced); -1 when the call asks for no gradient.
  int described(const BackwardCall& call, int candidate, const kit::DeviceFacts& device,
                kit::ChoiceSource* source) const;
  std::vector<std::string> fitting(const BackwardCall& call, const kit::DeviceFacts& device) const;

  // Form `candidate`'s plan for the call (it must fit; a call that asks for no gradient: Nothing).
  // A team whose programs the GPU cannot hold at once (with the occupancy known) gives the default
  // rule's plan without teams instead.
  BackwardPlan plan(const BackwardCall& call, int candidate, const kit::DeviceFacts& device,
                    const char* op) const;

 private:
  const BackwardForm* forms_;
  int count_;
  BackwardKernels kernels_;
  BackwardDefaultRule default_rule_;
  kit::PlanCandidates candidates_;
};

}  // namespace tjit::ops::norm
