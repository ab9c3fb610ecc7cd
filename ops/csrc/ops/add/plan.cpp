#include "plan.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/rows.h>

#include <algorithm>
#include <iterator>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::add";

// The candidates: elements a program adds (BLOCK) and its warps, 8 to 32 elements a thread. Every
// one is right at any size; which is fastest at a size is measured.
struct AddForm {
  const char* name;
  int64_t block;
  int num_warps;
};

constexpr AddForm kForms[] = {
    {"b1024_w4", 1024, 4}, {"b2048_w4", 2048, 4}, {"b2048_w8", 2048, 8},
    {"b4096_w4", 4096, 4}, {"b4096_w8", 4096, 8}, {"b8192_w8", 8192, 8},
};
constexpr int kNumForms = static_cast<int>(std::size(kForms));
constexpr int kDefaultForm = 0;

const kit::PlanCandidates& candidates() {
  static const kit::PlanCandidates plan_candidates("add", kit::form_names(kForms));
  return plan_candidates;
}

// Outputs up to this many elements are one class: a launch's cost, not its bytes, decides them, so
// the many small sizes of a program tune (or read the table) once.
constexpr int64_t kSmallestClass = 65536;

// One choice serves outputs of up to the next power of two elements (as one row of that many
// columns), flat or strided.
kit::ChoiceKey choice_key(const AddInputs& in, bool flat) {
  return kit::ChoiceKey{1, kit::next_power_of_2(std::max(in.numel, kSmallestClass)), in.dtype, flat ? 0 : 1};
}

bool is_flat(const AddInputs& in) {
  // More than four non-mergeable dims: the broadcast inputs are materialised, then added flat.
  return in.same_shape_contiguous || !in.collapsed;
}

}  // namespace

AddPlan plan_add_candidate(const AddInputs& in, int candidate) {
  TORCH_CHECK(candidate >= 0 && candidate < kNumForms, kOp, ": no plan candidate ", candidate);
  AddPlan plan;
  plan.candidate = candidate;
  plan.block = kForms[candidate].block;
  plan.num_warps = kForms[candidate].num_warps;
  plan.has_alpha = in.has_alpha;
  plan.materialise = !in.same_shape_contiguous && !in.collapsed;
  plan.flat = is_flat(in);
  plan.kernel = plan.flat ? kAddKernel : kAddStridedKernel;
  plan.programs = kit::blocks_for(in.numel, plan.block, kOp);
  // Offsets go to 64 bits where the last block's or a strided input's can reach 2**31.
  plan.index64 = in.numel + plan.block > kit::kInt32Limit ||
                 (!plan.flat && (in.x_max_offset >= kit::kInt32Limit || in.y_max_offset >= kit::kInt32Limit));
  return plan;
}

AddPlan plan_add(const AddInputs& in, const kit::DeviceFacts& device, const kit::CandidateTimer* timer,
                 kit::ChoiceSource* source) {
  const auto any = [](int) { return true; };
  const auto default_form = [] { return kDefaultForm; };
  return plan_add_candidate(in, candidates().choose(choice_key(in, is_flat(in)), device, any, default_form, timer,
                                                    source));
}

std::vector<std::string> add_candidates() { return kit::form_names(kForms); }

namespace {

// Registered at load time, so tools list the candidates before a first call.
const kit::PlanCandidates& registered = candidates();

kit::PlanWriter describe(const kit::PlanQuery& q) {
  AddInputs in;
  in.numel = q.require("numel");
  in.dtype = q.dtype;
  in.same_shape_contiguous = q.get("same_shape_contiguous", 1) != 0;
  in.collapsed = q.get("collapsed", 1) != 0;
  in.x_max_offset = q.get("x_max_offset", 0);
  in.y_max_offset = q.get("y_max_offset", 0);
  in.has_alpha = q.get("has_alpha", 0) != 0;
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  int candidate = static_cast<int>(q.get("candidate", -1));
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  if (candidate < 0) {
    const auto any = [](int) { return true; };
    candidate = candidates().peek(choice_key(in, is_flat(in)), q.device, any, [] { return kDefaultForm; }, &source);
  } else {
    TORCH_CHECK(candidate < kNumForms, "describe_plan: add has no candidate ", candidate);
  }
  const AddPlan p = plan_add_candidate(in, candidate);
  kit::PlanWriter w(p.materialise ? "materialised" : p.flat ? "flat" : "strided");
  w.choice(kForms[candidate].name, kit::choice_source_name(source), add_candidates());
  w.launch(p.kernel, {p.programs}, p.num_warps)
      .constexpr_flag("HAS_ALPHA", p.has_alpha)
      .constexpr_value("BLOCK", p.block)
      .constexpr_flag("INDEX_64", p.index64);
  return w;
}

const kit::RegisterPlan add_plan("add", &describe);

}  // namespace
}  // namespace tjit::ops
