#include "plan.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/row_exchange.h>
#include <tjit/kit/rows.h>

#include <algorithm>

namespace tjit::ops {
namespace {

constexpr int64_t kSplitBlock = 4096;
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

SoftmaxPlan plan_softmax(const SoftmaxInputs& in, const kit::DeviceFacts& device, kit::Tuner tuner) {
  const int64_t rows = in.rows;
  const int64_t cols = in.cols;
  const int64_t element_size = c10::elementSize(in.dtype);
  const bool backward = in.backward;
  // The longest row kept in registers; the fp64 backward holds two rows of 8-byte elements.
  const int64_t single_pass_limit = backward && in.dtype == c10::kDouble ? 16384 : 32768;
  SoftmaxPlan plan;
  plan.index64 = in.index64;
  // Forward rows past the single-pass limit (2-byte rows past 20480 columns, where the split
  // configs beat the persistent plan) go to the autotuned long-row kernel.
  if (!backward && tuner == kit::Tuner::Available &&
      kit::tuned_long_rows(rows, cols, in.dtype, device, element_size == 2 ? 20480 : 32768)) {
    plan.kind = SoftmaxPlan::Kind::TunedLongRows;
    plan.kernel = kSoftmaxFwdLongKernel;
    plan.programs = 0;
    plan.exchange_chunks = kit::ceil_div(cols, kit::kLongRowMinSplitBlock);
    plan.s_pow2 = kit::next_power_of_2(plan.exchange_chunks);
    plan.row_bucket = kit::long_row_bucket(rows);
    plan.align = split_alignment(in);
    return plan;
  }
  const auto one_program_per_row = [&](int64_t block_n, bool single_pass, int num_warps) {
    plan.kind = SoftmaxPlan::Kind::OneProgramPerRow;
    plan.kernel = backward ? kSoftmaxBwdKernel : kSoftmaxFwdKernel;
    plan.programs = kit::blocks_for(rows, 1, op_name(in));
    plan.block_n = block_n;
    plan.single_pass = single_pass;
    plan.num_warps = num_warps;
    return plan;
  };
  if (cols <= 256) {
    // BLOCK_M rows per program, enough programs to fill the GPU.
    plan.kind = SoftmaxPlan::Kind::ShortRows;
    plan.kernel = backward ? kSoftmaxBwdRowsKernel : kSoftmaxFwdRowsKernel;
    plan.block_n = kit::next_power_of_2(cols);
    plan.block_m = std::max<int64_t>(1, std::min(1024 / plan.block_n, kit::next_power_of_2(rows)));
    plan.programs = kit::blocks_for(rows, plan.block_m, op_name(in));
    return plan;
  }
  if (!backward && element_size == 2 && cols > 16384 && cols <= single_pass_limit) {
    // A 2-byte row of 16K-32K columns fills an SM, which one program a row leaves idle while it
    // reduces: persistent programs overlap the next row's loads, once the row fills enough of the
    // 32768-lane block; shorter rows go looped in 4096-column steps.
    if (cols > 20480) {
      plan.kind = SoftmaxPlan::Kind::Persistent;
      plan.kernel = kSoftmaxFwdPersistentKernel;
      plan.block_n = kit::next_power_of_2(cols);
      plan.programs = static_cast<uint32_t>(std::min<int64_t>(rows, device.multiprocessors));
      plan.num_warps = 32;
      return plan;
    }
    return one_program_per_row(4096, false, 16);
  }
  if (cols <= single_pass_limit) {
    const int64_t block_n = kit::next_power_of_2(cols);
    // The backward's 32768-column rows run best at 16 warps, the forward's at 32.
    return one_program_per_row(block_n, true,
                               block_n > 16384 && !backward
                                   ? 32
                                   : static_cast<int>(std::clamp<int64_t>(block_n / 512, 1, 16)));
  }
  // Long rows. The split kernels wait for each other, which only CUDA runs concurrently; they pay
  // off for 4-byte elements forward and for everything but fp64 backward.
  const int64_t chunks = kit::ceil_div(cols, kSplitBlock);
  const bool split_dtype = backward ? in.dtype != c10::kDouble : element_size == 4;
  if (device.is_cuda && split_dtype && chunks <= kMaxSplitChunks && rows * chunks < kit::kInt32Limit / 2) {
    plan.kind = SoftmaxPlan::Kind::SplitRows;
    plan.kernel = backward ? kSoftmaxBwdSplitKernel : kSoftmaxFwdSplitKernel;
    plan.block_n = kSplitBlock;
    plan.num_warps = 4;
    if (backward) {
      const bool two_byte = element_size == 2;
      if (chunks > (two_byte ? 32 : 48)) {
        // Fewer, larger chunks: less waiting per byte on long rows. Capped at 80 registers so that
        // 3 programs fit an SM (the rarely taken help path would take 95).
        plan.block_n = 2 * kSplitBlock;
        plan.num_warps = 8;
        plan.maxnreg = 80;
      } else {
        plan.reread = two_byte;  // re-reading a 2-byte chunk beats holding it; 4-byte chunks stay held
      }
    }
    plan.chunks = kit::ceil_div(cols, plan.block_n);
    plan.s_pow2 = kit::next_power_of_2(plan.chunks);
    plan.align = split_alignment(in);
    plan.exchange_chunks = plan.chunks;
    plan.programs = kit::blocks_for(rows * plan.chunks, 1, op_name(in));
    return plan;
  }
  if (device.is_cuda && rows < device.multiprocessors) {
    return one_program_per_row(16384, false, 16);  // few very long rows: bigger steps keep the SMs busy
  }
  return element_size == 2 ? one_program_per_row(8192, false, 32) : one_program_per_row(4096, false, 16);
}

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
  const SoftmaxPlan p = plan_softmax(in, q.device, tuner);
  using Kind = SoftmaxPlan::Kind;
  static const char* const kinds[] = {"long", "short_rows", "row", "split", "persistent"};
  kit::PlanWriter w(kinds[static_cast<int>(p.kind)]);
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
