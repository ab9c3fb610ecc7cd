#include "plan.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/row_exchange.h>
#include <tjit/kit/rows.h>

#include <algorithm>
#include <iterator>
#include <string_view>

namespace tjit::ops {
namespace {

constexpr int64_t kMaxSplitChunks = 128;  // programs of one row must fit on the GPU at once

// ALIGN: the elements in 16 bytes when rows start off 16-byte boundaries yet can all be cut at the
// same columns into whole vectors (every base 16-byte aligned, every row stride the same modulo a
// vector, one element size), else 1.
int64_t split_alignment(const SoftmaxInputs& in) {
  const int64_t element_size = in.tensors[0].element_size;
  const int64_t per_vector = 16 / element_size;
  const int64_t offset = in.tensors[0].row_stride % per_vector;
  bool aligned_already = in.cols % per_vector == 0;
  for (int i = 0; i < in.tensor_count; ++i) {
    const SoftmaxRows& t = in.tensors[i];
    if (t.element_size != element_size || t.base_offset % 16 != 0 || t.row_stride % per_vector != offset) {
      return 1;
    }
    aligned_already = aligned_already && t.row_stride % per_vector == 0;
  }
  return aligned_already ? 1 : per_vector;
}

const char* op_name(const SoftmaxInputs& in) { return in.backward ? "tjit::softmax_backward" : "tjit::softmax"; }

}  // namespace

namespace {

// The candidate forms of the forward and the backward. Which one runs at a size is measured
// (plan_choice.h): the card's table, else first-call tuning; the default rule serves where neither
// may. The rules below decide only what fits: registers, step counts, and what a split row needs
// (CUDA, which runs its programs at once; statistics in fp32, so no fp64; its chunks on the GPU).
enum class FormKind { ShortRows, Row, Looped, Persistent, Split };

struct SoftmaxForm {
  const char* name;
  FormKind kind;
  int64_t block;   // Looped: the step; Split: the chunk; 0: the row's power of two
  int num_warps;   // ShortRows: 0 (4)
  int maxnreg;
  bool reread;     // Split, backward: the chunk read again after the wait
  bool forward;    // a form of the forward
  bool backward;   // a form of the backward
};

constexpr SoftmaxForm kForms[] = {
    {"short_rows", FormKind::ShortRows, 0, 0, 0, false, true, true},
    {"row_w1", FormKind::Row, 0, 1, 0, false, true, true},
    {"row_w2", FormKind::Row, 0, 2, 0, false, true, true},
    {"row_w4", FormKind::Row, 0, 4, 0, false, true, true},
    {"row_w8", FormKind::Row, 0, 8, 0, false, true, true},
    {"row_w16", FormKind::Row, 0, 16, 0, false, true, true},
    {"row_w32", FormKind::Row, 0, 32, 0, false, true, true},
    {"loop4096_w16", FormKind::Looped, 4096, 16, 0, false, true, true},
    {"loop8192_w32", FormKind::Looped, 8192, 32, 0, false, true, true},
    {"loop16384_w16", FormKind::Looped, 16384, 16, 0, false, true, true},
    // One program an SM walking the rows, the next row's loads overlapping this one's reductions.
    {"persistent_w32", FormKind::Persistent, 0, 32, 0, false, true, false},
    {"split4096_w4", FormKind::Split, 4096, 4, 0, false, true, true},
    {"split4096_w4_reread", FormKind::Split, 4096, 4, 0, true, false, true},
    // Fewer, larger chunks; at most 80 registers, 3 programs an SM.
    {"split8192_w8_reg80", FormKind::Split, 8192, 8, 80, false, false, true},
};
constexpr int kNumForms = static_cast<int>(std::size(kForms));

// Elements a thread holds of a block in registers at most (fp64: half): more spill.
constexpr int64_t kMaxElementsPerThread = 64;
constexpr int64_t kShortRowLimit = 256;

const kit::PlanCandidates& candidates(bool backward) {
  static const kit::PlanCandidates forward("softmax", kit::form_names(kForms));
  static const kit::PlanCandidates backward_candidates("softmax_backward", kit::form_names(kForms));
  return backward ? backward_candidates : forward;
}

// The longest row kept in registers; the fp64 backward holds two rows of 8-byte elements.
int64_t single_pass_limit(const SoftmaxInputs& in) {
  return in.backward && in.dtype == c10::kDouble ? 16384 : 32768;
}

bool fits(const SoftmaxInputs& in, const SoftmaxForm& f, const kit::DeviceFacts& device) {
  if (!(in.backward ? f.backward : f.forward)) {
    return false;
  }
  const int64_t block = kit::next_power_of_2(in.cols);
  const int64_t max_per_thread = c10::elementSize(in.dtype) == 8 ? kMaxElementsPerThread / 2 : kMaxElementsPerThread;
  const auto holds = [&](int64_t width, int warps) {
    return width >= int64_t{32} * warps && width <= max_per_thread * 32 * warps;
  };
  switch (f.kind) {
    case FormKind::ShortRows:
      return in.cols <= kShortRowLimit;
    case FormKind::Row:
      return in.cols <= single_pass_limit(in) && (holds(block, f.num_warps) || (f.num_warps == 1 && block < 32));
    case FormKind::Looped:
      return kit::ceil_div(in.cols, f.block) >= 2 && holds(f.block, f.num_warps);
    case FormKind::Persistent:
      return in.cols > kShortRowLimit && in.cols <= single_pass_limit(in) && holds(block, f.num_warps);
    case FormKind::Split: {
      const int64_t chunks = kit::ceil_div(in.cols, f.block);
      return device.is_cuda && in.dtype != c10::kDouble && chunks >= 2 && chunks <= kMaxSplitChunks &&
             in.rows * chunks < kit::kInt32Limit / 2;
    }
  }
  return false;
}

int form_index(const char* name) {
  for (int i = 0; i < kNumForms; ++i) {
    if (std::string_view(kForms[i].name) == name) {
      return i;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "softmax: no form ", name);
}

// The default rule: short rows several a program, rows in registers with the fewest warps that
// hold at most 16 elements a thread, longer rows in 4096-column steps.
int default_form(const SoftmaxInputs& in) {
  if (in.cols <= kShortRowLimit) {
    return form_index("short_rows");
  }
  if (in.cols <= single_pass_limit(in)) {
    const int64_t block = kit::next_power_of_2(in.cols);
    return form_index(block <= 512 ? "row_w1" : block <= 1024 ? "row_w2" : block <= 2048 ? "row_w4"
                      : block <= 4096 ? "row_w8" : block <= 8192 ? "row_w16" : "row_w32");
  }
  return form_index("loop4096_w16");
}

kit::ChoiceKey choice_key(const SoftmaxInputs& in) {
  // ALIGN and the row strides decide no form: the key is the shape class and dtype.
  return kit::ChoiceKey{in.rows, in.cols, in.dtype, 0};
}

}  // namespace

SoftmaxPlan plan_softmax_candidate(const SoftmaxInputs& in, int candidate, const kit::DeviceFacts& device) {
  TORCH_CHECK(candidate >= 0 && candidate < kNumForms, op_name(in), ": no plan candidate ", candidate);
  const SoftmaxForm& f = kForms[candidate];
  const bool backward = in.backward;
  SoftmaxPlan plan;
  plan.candidate = candidate;
  plan.index64 = in.index64;
  plan.num_warps = f.num_warps;
  plan.maxnreg = f.maxnreg;
  switch (f.kind) {
    case FormKind::ShortRows:
      plan.kind = SoftmaxPlan::Kind::ShortRows;
      plan.kernel = backward ? kSoftmaxBwdRowsKernel : kSoftmaxFwdRowsKernel;
      plan.num_warps = 4;
      plan.block_n = kit::next_power_of_2(in.cols);
      plan.block_m = std::max<int64_t>(1, std::min(1024 / plan.block_n, kit::next_power_of_2(in.rows)));
      plan.programs = kit::blocks_for(in.rows, plan.block_m, op_name(in));
      return plan;
    case FormKind::Row:
    case FormKind::Looped:
      plan.kind = SoftmaxPlan::Kind::OneProgramPerRow;
      plan.kernel = backward ? kSoftmaxBwdKernel : kSoftmaxFwdKernel;
      plan.block_n = f.kind == FormKind::Row ? kit::next_power_of_2(in.cols) : f.block;
      plan.single_pass = f.kind == FormKind::Row;
      plan.programs = kit::blocks_for(in.rows, 1, op_name(in));
      return plan;
    case FormKind::Persistent:
      plan.kind = SoftmaxPlan::Kind::Persistent;
      plan.kernel = kSoftmaxFwdPersistentKernel;
      plan.block_n = kit::next_power_of_2(in.cols);
      plan.programs = static_cast<uint32_t>(std::min<int64_t>(in.rows, device.multiprocessors));
      return plan;
    case FormKind::Split:
      plan.kind = SoftmaxPlan::Kind::SplitRows;
      plan.kernel = backward ? kSoftmaxBwdSplitKernel : kSoftmaxFwdSplitKernel;
      plan.block_n = f.block;
      plan.reread = f.reread;
      plan.chunks = kit::ceil_div(in.cols, plan.block_n);
      plan.s_pow2 = kit::next_power_of_2(plan.chunks);
      plan.align = split_alignment(in);
      plan.exchange_chunks = plan.chunks;
      plan.programs = kit::blocks_for(in.rows * plan.chunks, 1, op_name(in));
      return plan;
  }
  TORCH_INTERNAL_ASSERT(false, op_name(in), ": candidate ", f.name, " has no plan");
}

SoftmaxPlan plan_softmax(const SoftmaxInputs& in, const kit::DeviceFacts& device, kit::Tuner tuner,
                         const kit::CandidateTimer* timer, kit::ChoiceSource* source) {
  // Forward rows past the one-pass limit go to the autotuned long-row kernel.
  if (!in.backward && tuner == kit::Tuner::Available &&
      kit::tuned_long_rows(in.rows, in.cols, in.dtype, device, single_pass_limit(in))) {
    SoftmaxPlan plan;
    plan.index64 = in.index64;
    plan.kind = SoftmaxPlan::Kind::TunedLongRows;
    plan.kernel = kSoftmaxFwdLongKernel;
    plan.programs = 0;
    plan.exchange_chunks = kit::ceil_div(in.cols, kit::kLongRowMinSplitBlock);
    plan.s_pow2 = kit::next_power_of_2(plan.exchange_chunks);
    plan.row_bucket = kit::long_row_bucket(in.rows);
    plan.align = split_alignment(in);
    return plan;
  }
  const auto form_fits = [&](int i) { return fits(in, kForms[i], device); };
  const int candidate = candidates(in.backward)
                            .choose(choice_key(in), device, form_fits, [&] { return default_form(in); }, timer, source);
  return plan_softmax_candidate(in, candidate, device);
}

std::vector<std::string> softmax_fitting(const SoftmaxInputs& in, const kit::DeviceFacts& device) {
  return kit::fitting_names(kForms, [&](const SoftmaxForm& f) { return fits(in, f, device); });
}

namespace {
// Registered at load time, so tools list the candidates before a first call.
const kit::PlanCandidates& registered_forward = candidates(false);
const kit::PlanCandidates& registered_backward = candidates(true);
}  // namespace

namespace {

kit::PlanWriter describe(const kit::PlanQuery& q, bool backward) {
  SoftmaxInputs in;
  in.rows = q.require("rows");
  in.cols = q.require("cols");
  in.dtype = q.dtype;
  in.backward = backward;
  in.index64 = q.get("index64", 0) != 0;
  in.tensor_count = backward ? 3 : 2;
  const auto sizes = q.list("element_sizes");
  const auto offsets = q.list("base_offsets");
  const auto strides = q.list("row_strides");
  for (int i = 0; i < in.tensor_count; ++i) {
    in.tensors[i].element_size = i < static_cast<int>(sizes.size()) ? sizes[i] : c10::elementSize(in.dtype);
    in.tensors[i].base_offset = i < static_cast<int>(offsets.size()) ? offsets[i] : 0;
    in.tensors[i].row_stride = i < static_cast<int>(strides.size()) ? strides[i] : in.cols;
  }
  const kit::Tuner tuner = q.get("tuner_available", 1) ? kit::Tuner::Available : kit::Tuner::Unavailable;
  // "candidate": that candidate's plan; else the choice as a call makes it without measuring.
  const int forced = static_cast<int>(q.get("candidate", -1));
  SoftmaxPlan p;
  kit::ChoiceSource source = kit::ChoiceSource::Forced;
  if (forced >= 0) {
    TORCH_CHECK(forced < kNumForms && fits(in, kForms[forced], q.device), "describe_plan: ",
                backward ? "softmax_backward" : "softmax", " candidate ", forced, " does not fit ", in.rows,
                " rows of ", in.cols, " columns");
    p = plan_softmax_candidate(in, forced, q.device);
  } else if (!backward && tuner == kit::Tuner::Available &&
             kit::tuned_long_rows(in.rows, in.cols, in.dtype, q.device, single_pass_limit(in))) {
    p = plan_softmax(in, q.device, tuner);  // the long-row kernel: no candidate
  } else {
    const auto form_fits = [&](int i) { return fits(in, kForms[i], q.device); };
    p = plan_softmax_candidate(
        in, candidates(backward).peek(choice_key(in), q.device, form_fits, [&] { return default_form(in); }, &source),
        q.device);
  }
  using Kind = SoftmaxPlan::Kind;
  static const char* const kinds[] = {"long", "short_rows", "row", "split", "persistent"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
  if (p.candidate >= 0) {
    w.choice(kForms[p.candidate].name, kit::choice_source_name(source), softmax_fitting(in, q.device));
  }
  switch (p.kind) {
    case Kind::TunedLongRows:
      w.tuned_launch(p.kernel)
          .constexpr_value("CHUNKS_POW2", p.s_pow2)
          .constexpr_value("ALIGN", p.align)
          .constexpr_flag("INDEX_64", p.index64)
          .arg("M_BUCKET", p.row_bucket);
      break;
    case Kind::ShortRows:
      w.launch(p.kernel, {p.programs}, p.num_warps)
          .constexpr_value("BLOCK_M", p.block_m)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("INDEX_64", p.index64);
      break;
    case Kind::SplitRows:
      w.launch(p.kernel, {p.programs}, p.num_warps, p.maxnreg)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_value("S_POW2", p.s_pow2)
          .constexpr_value("ALIGN", p.align)
          .constexpr_flag("INDEX_64", p.index64);
      if (backward) {
        w.constexpr_flag("REREAD", p.reread);
      }
      w.arg("S", p.chunks);
      break;
    case Kind::Persistent:
      w.launch(p.kernel, {p.programs}, p.num_warps)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_value("NUM_STAGES", p.num_stages)
          .constexpr_flag("INDEX_64", p.index64);
      break;
    case Kind::OneProgramPerRow:
      w.launch(p.kernel, {p.programs}, p.num_warps)
          .constexpr_value("BLOCK_N", p.block_n)
          .constexpr_flag("SINGLE_PASS", p.single_pass)
          .constexpr_flag("INDEX_64", p.index64);
      break;
  }
  if (p.exchange_chunks > 0) {
    w.workspace("row_exchange_words", {2 + in.rows * p.exchange_chunks});
  }
  return w;
}

// ALIGN alone, for launches of the split kernels that tests make by hand (row_strides etc. as above,
// one entry a tensor).
kit::PlanWriter describe_alignment(const kit::PlanQuery& q) {
  SoftmaxInputs in;
  in.cols = q.require("cols");
  const auto sizes = q.list("element_sizes");
  const auto offsets = q.list("base_offsets");
  const auto strides = q.list("row_strides");
  in.tensor_count = static_cast<int>(std::min<size_t>(sizes.size(), in.tensors.size()));
  for (int i = 0; i < in.tensor_count; ++i) {
    in.tensors[i] = {sizes[i], i < static_cast<int>(offsets.size()) ? offsets[i] : 0,
                     i < static_cast<int>(strides.size()) ? strides[i] : in.cols};
  }
  kit::PlanWriter w("alignment");
  w.workspace("ALIGN", {split_alignment(in)});
  return w;
}

const kit::RegisterPlan alignment_plan("softmax_split_alignment", &describe_alignment);
const kit::RegisterPlan forward_plan("softmax", [](const kit::PlanQuery& q) { return describe(q, false); });
const kit::RegisterPlan backward_plan("softmax_backward", [](const kit::PlanQuery& q) { return describe(q, true); });

}  // namespace
}  // namespace tjit::ops
