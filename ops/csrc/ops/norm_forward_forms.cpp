#include "norm_forward_forms.h"

#include <tjit/kit/grid.h>

#include <c10/util/Exception.h>

namespace tjit::ops::norm {
namespace {

// Elements a thread holds of a block in registers at most (fp64: half): more spill.
constexpr int64_t kMaxElementsPerThread = 64;
// Steps a compile-time step count unrolls at most.
constexpr int64_t kMaxUnrolledSteps = 16;

}  // namespace

int64_t single_pass_limit(c10::ScalarType dtype) {
  return c10::elementSize(dtype) == 8 ? kSinglePassLimit / 2 : kSinglePassLimit;
}

int64_t tail_block(int64_t cols, int64_t head) { return kit::next_power_of_2(cols - head); }

bool fits(const ForwardForm& f, int64_t cols, c10::ScalarType dtype) {
  const int64_t block = kit::next_power_of_2(cols);
  const int64_t max_per_thread = c10::elementSize(dtype) == 8 ? kMaxElementsPerThread / 2 : kMaxElementsPerThread;
  const auto holds = [&](int64_t width, int warps) {
    return width >= int64_t{32} * warps && width <= max_per_thread * 32 * warps;
  };
  switch (f.kind) {
    case FormKind::ShortRows:
      return cols <= kShortRowLimit;
    case FormKind::Row:
      // A register cap of 32 holds fp32 blocks of 1024..16384 only (sm_90: the compiler wants 34-37).
      return cols <= single_pass_limit(dtype) && holds(block, f.num_warps) &&
             (f.maxnreg == 0 || (c10::elementSize(dtype) == 4 && block >= 1024 && block <= 16384));
    case FormKind::Tail:
    case FormKind::Persistent:
      return cols > f.block && cols <= single_pass_limit(dtype) && tail_block(cols, f.block) < f.block &&
             holds(f.block, f.num_warps);
    case FormKind::Looped: {
      if (f.block == 0) {  // one block of the row, read twice
        return cols > kShortRowLimit && cols <= single_pass_limit(dtype) / 2 && holds(block, f.num_warps);
      }
      const int64_t steps = kit::ceil_div(cols, f.block);
      return steps >= 2 && holds(f.block, f.num_warps) && (!f.const_steps || steps <= kMaxUnrolledSteps);
    }
  }
  return false;
}

const char* default_form(int64_t cols, c10::ScalarType dtype) {
  if (cols <= kShortRowLimit) {
    return "short_rows";
  }
  if (cols <= single_pass_limit(dtype)) {
    const int64_t block = kit::next_power_of_2(cols);
    return block <= 2048 ? "row_w4" : block <= 4096 ? "row_w8" : block <= 8192 ? "row_w16" : "row_w32";
  }
  return "loop4096_w16";
}

FormList::FormList(const char* plan, const ForwardForm* forms, int count)
    : forms_(forms), count_(count), candidates_(plan, kit::form_names(forms, static_cast<std::size_t>(count))) {}

int FormList::index_of(const char* name) const {
  const int i = candidates_.index_of(name);
  TORCH_INTERNAL_ASSERT(i >= 0, candidates_.plan(), ": no form ", name);
  return i;
}

int FormList::choose(const kit::ChoiceKey& key, int64_t cols, c10::ScalarType dtype, const kit::DeviceFacts& device,
                     const kit::CandidateTimer* timer, kit::ChoiceSource* source) const {
  const auto form_fits = [&](int i) { return fits(forms_[i], cols, dtype); };
  const auto default_index = [&] { return index_of(default_form(cols, dtype)); };
  return candidates_.choose(key, device, form_fits, default_index, timer, source);
}

int FormList::peek(const kit::ChoiceKey& key, int64_t cols, c10::ScalarType dtype, const kit::DeviceFacts& device,
                   kit::ChoiceSource* source) const {
  const auto form_fits = [&](int i) { return fits(forms_[i], cols, dtype); };
  const auto default_index = [&] { return index_of(default_form(cols, dtype)); };
  return candidates_.peek(key, device, form_fits, default_index, source);
}

std::vector<std::string> FormList::fitting(int64_t cols, c10::ScalarType dtype) const {
  return kit::fitting_names(forms_, static_cast<std::size_t>(count_),
                            [&](const ForwardForm& f) { return fits(f, cols, dtype); });
}

}  // namespace tjit::ops::norm
