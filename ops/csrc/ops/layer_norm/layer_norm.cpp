// tjit::layer_norm and its backward over the trailing normalized_shape dims, as Triton row
// kernels (kernels_py/layer_norm.py). mean and rstd are kept (in fp32, fp64 for fp64 input) for
// the backward. Up to 8192 columns the backward is one fused pass (dx plus per-program dw/db
// partials); longer rows on CUDA one pass too, by teams of programs sharing each row; the rest a
// dx kernel and the column-block / row-group dw/db plan of layer_norm.py's header.

#include <tjit/ops/layer_norm.h>  // this folder's layer_norm.h, as installed

#include "../kernel_files.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/kit/kit.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::layer_norm";
constexpr const char* kBackwardOp = "tjit::layer_norm_backward";

// Checks shared by every kernel of the family; returns the number of leading dims (rows' shape).
template <typename Int>
int64_t check_layer_norm_inputs(const at::Tensor& input, c10::ArrayRef<Int> normalized_shape,
                                const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                c10::ArrayRef<Int> input_sizes, const char* op) {
  kit::check_defined(input, op, "input");
  kit::check_supported_device(input, op, "input");
  kit::check_dtype_in(input, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, op, "input");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(k >= 1, op, ": normalized_shape must name at least one dim, got []");
  TORCH_CHECK(input.dim() >= k, op, ": normalized_shape ", normalized_shape, " has ", k,
              " dims but input has only ", input.dim(), " (shape ", input_sizes, ")");
  const int64_t lead = input.dim() - k;
  for (int64_t i = 0; i < k; ++i) {
    TORCH_CHECK(input_sizes[lead + i] == normalized_shape[i], op, ": normalized_shape ", normalized_shape,
                " does not match the trailing dims of input of shape ", input_sizes,
                " (expected input.shape[-", k, ":] == normalized_shape)");
  }
  for (const auto& [param, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!param->has_value() || !(*param)->defined()) {
      continue;
    }
    const at::Tensor& p = **param;
    kit::check_same_device(p, name, input, "input", op);
    TORCH_CHECK(p.scalar_type() == input.scalar_type(), op, ": ", name, " has dtype ", p.scalar_type(),
                " but input has dtype ", input.scalar_type(), "; they must match");
    TORCH_CHECK(p.dim() == k, op, ": ", name, " has shape ", p.sizes(), " but normalized_shape is ",
                normalized_shape);
    for (int64_t i = 0; i < k; ++i) {
      TORCH_CHECK(p.sym_size(i) == normalized_shape[i], op, ": ", name, " has shape ", p.sym_sizes(),
                  " but normalized_shape is ", normalized_shape);
    }
  }
  return lead;
}

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

struct RowPlan {
  int64_t block_n;
  bool single_pass;
  int num_warps;
  int64_t block_tail = 0;  // forward, single pass: columns past block_n in a second block (0: none)
};

// One program per row: the backward's dx kernel past the fused limit, and fp64 forwards.
RowPlan plan_rows(int64_t cols) {
  if (cols <= 16384) {
    const int64_t block = kit::next_power_of_2(cols);
    return {block, true, static_cast<int>(std::clamp<int64_t>(block / 512, 1, 16))};
  }
  return {4096, false, 16};
}

// The forward keeps a row in registers up to kForwardSinglePassLimit columns (fp64: 16384, twice
// the registers per element); past it, CUDA rows go to the autotuned long-row kernel. Warps measured
// on an H200 (4096 rows, GB/s in layer_norm.py's header): 2-byte rows want fewer warps than 4-byte
// ones of the same length (bf16 16384: 3.6 TB/s with 8, 2.4 with 16).
constexpr int64_t kForwardSinglePassLimit = 32768;

// 2-byte rows just past a power of two take it as the block plus a small tail block rather than
// a block padded to the next power of two. H200, bf16, no mean/rstd, TB/s (padded with the
// warps before; head + tail, warps): 4608 3.12; 3.61 (4096 + 512, 4); 5120 3.33; 3.79
// (4096 + 1024, 4); 12288 3.36; 3.45 (8192 + 4096, 8); 20480 2.45; 2.97 (16384 + 4096, 4); fp16
// 5120 3.55; 3.89. Not taken where it measured no better: 6144 (3.78 padded, 4 warps; 3.67),
// 9216 (2.95; 2.89), 10240 (3.09; 3.09); 4-byte rows gain nothing (fp32 5120: 4.11; 4.06). The
// persistent plan below takes the same blocks past 4096 and 8192 on GPUs whose memory wants it
// (H200 5120: 3.84, 12288: 3.84).
// 2-byte rows padded to a 4096-column block run 4 warps, rows that fill it 8 (2560: 3.31 with 8,
// 3.79 with 4; 4096: 4.05 with 8, 4.01 with 4, and 1% on an H100 too).
RowPlan plan_forward_rows(int64_t cols, const at::Tensor& t) {
  if (t.element_size() == 8 || cols > kForwardSinglePassLimit) {
    return plan_rows(cols);
  }
  const int64_t block = kit::next_power_of_2(cols);
  if (t.element_size() != 2) {
    return {block, true, block <= 2048 ? 8 : block <= 8192 ? 16 : 32};
  }
  const int64_t head = block == cols ? cols : block / 2;
  const int64_t tail = kit::next_power_of_2(cols - head);
  // (Where the memory wants it, plan_persistent_forward takes the 4096- and 8192-column heads first.)
  if (head >= 4096 && cols > head && tail <= (head == 8192 ? head / 2 : head / 4)) {
    return {head, true, head == 8192 ? 8 : 4, tail};
  }
  const bool padded_to_4096 = block == 4096 && cols < block;
  return {block, true, block <= 2048 || padded_to_4096 ? 4 : block <= 16384 ? 8 : 16};
}

// 2-byte rows of 4097..5120 and 8193..12288 columns (hidden sizes 5120 and 12288; the head plus
// tail blocks of plan_forward_rows) run persistent programs whose row loop Triton pipelines
// (layer_norm_fwd_persistent_kernel), as many as the GPU holds at once. H200, bf16, rows x N with
// 256 MiB a tensor, TB/s (one program a row, as plan_forward_rows; persistent, 4 warps, 2 stages):
// 4608 3.32; 3.78, 5120 3.55; 3.84, 9216 2.83; 3.67, 10240 3.06; 3.74, 12288 3.46; 3.84 (fp16
// 3.41; 3.82). 8192-column heads cap registers at 168 so three programs fit an SM (bf16 12288
// compiles to 254 otherwise: two, 3.52). Not taken where one program a row measured faster:
// 7168 (3.96; 3.81 at best), 16384 (3.90; 3.81), 20480 (2.98; 2.67); 4-byte rows are at 0.97x copy.
struct PersistentForwardPlan {
  int64_t block_n;
  int64_t block_tail;
  int num_warps;
  int stages;
  int maxnreg;
};

// The persistent forward pays where the memory wants more bytes in flight per SM than one program
// a row keeps: the H200 (4.9 TB/s peak over 132 SMs, 37 GB/s an SM) gained as above; the H100
// (3.35 TB/s, 25 GB/s an SM) reaches 0.96-0.98x copy with one program a row and lost with it (bf16
// 26240 x 5120 2.95 -> 2.66 TB/s, 10944 x 12288 2.88 -> 2.70). CPU tensors take it (the
// interpreter runs either; tests cover both).
constexpr int kPersistentForwardMinGbpsPerSm = 30;

bool memory_wants_persistent_forward(const at::Tensor& t) {
  if (!t.is_cuda()) {
    return true;
  }
  return int64_t{memory_bandwidth_gbps(t.device())} >=
         int64_t{kPersistentForwardMinGbpsPerSm} * multiprocessor_count(t.device());
}

std::optional<PersistentForwardPlan> plan_persistent_forward(int64_t cols, const at::Tensor& t) {
  if (t.element_size() != 2) {
    return std::nullopt;
  }
  for (const int64_t head : {int64_t{4096}, int64_t{8192}}) {
    const int64_t tail_limit = head == 8192 ? head / 2 : head / 4;
    if (cols > head && cols <= head + tail_limit && memory_wants_persistent_forward(t)) {
      return PersistentForwardPlan{head, kit::next_power_of_2(cols - head), 4, 2, head == 8192 ? 168 : 0};
    }
  }
  return std::nullopt;
}

// Short rows forward: BLOCK_M rows per program (layer_norm_fwd_rows_kernel). H200, 4096 rows:
// fp32 128 columns 1.1 -> 2.0 TB/s, bf16 0.56 -> 1.1 TB/s; 1024 columns +15%.
constexpr int64_t kShortRowLimit = 1024;

struct ShortRowPlan {
  int64_t block_m;
  int64_t block_n;
  int num_warps;
};

ShortRowPlan plan_short_rows(int64_t cols, const at::Tensor& t) {
  const int64_t block_n = kit::next_power_of_2(cols);
  const int64_t tile = t.element_size() == 2 ? 2048 : 1024;
  return {std::max<int64_t>(4, tile / block_n), block_n, block_n <= 128 ? 8 : 4};
}

// The fused backward (layer_norm_bwd_fused_kernel) for rows of up to kFusedBackwardLimit columns:
// programs_per_sm * SMs programs of [block_m, block_n] tiles. Measured on an H200 (4096 rows):
// fewer, larger tiles for 4-byte elements; 2-byte rows want two programs per SM up to 2048 columns.
constexpr int64_t kFusedBackwardLimit = 8192;

struct FusedBackwardPlan {
  int64_t block_m;
  int64_t block_n;
  int num_warps;
  int programs_per_sm;
  int64_t block_tail = 0;  // columns past block_n in a second tile (0: none)
};

// Rows of 4609..5120 columns (hidden size 5120) go as 4096 columns plus a 1024-column tail rather
// than an 8192-column tile. H200, rows x 5120, 256 MiB a tensor, the fused kernel alone, TB/s
// (padded [1, 8192] 16 warps; tail): bf16 ~3.17; 3.83 (4 warps, 2 per SM), fp16 3.17; 3.78,
// fp32 3.40; 3.92 (16 warps). A 512-column tail measured no better (4608: bf16 2.94 padded, 2.65).
constexpr int64_t kTailBackwardHead = 4096;

FusedBackwardPlan plan_fused_backward(int64_t cols, const at::Tensor& t) {
  if (t.element_size() != 8 && cols > kTailBackwardHead + kTailBackwardHead / 8 &&
      cols <= kTailBackwardHead + kTailBackwardHead / 4) {
    return t.element_size() == 2 ? FusedBackwardPlan{1, kTailBackwardHead, 4, 2, kTailBackwardHead / 4}
                                 : FusedBackwardPlan{1, kTailBackwardHead, 16, 1, kTailBackwardHead / 4};
  }
  const int64_t block_n = kit::next_power_of_2(cols);
  int64_t tile = 0;
  int per_sm = 1;
  if (t.element_size() == 2) {
    tile = block_n <= 1024 ? 2048 : block_n <= 2048 ? 4096 : 8192;
    per_sm = block_n > 128 && block_n <= 2048 ? 2 : 1;
  } else {
    tile = block_n <= 512 ? 2048 : block_n <= 2048 ? 4096 : 8192;
    per_sm = block_n > 128 && block_n <= 512 ? 2 : 1;
    if (t.element_size() == 8) {
      tile /= 2;  // twice the registers per element
    }
  }
  tile = std::max(tile, block_n);
  return {tile / block_n, block_n, static_cast<int>(std::clamp<int64_t>(tile / 512, 4, 16)), per_sm};
}

// The long-row backward on CUDA (layer_norm_bwd_team_kernel): teams of `chunks` programs share
// rows, each program owning 4096 columns, 4 warps, two programs per SM, the row loop pipelined 3
// stages deep (the next two rows' dy and x copied into shared memory while a row waits on its team).
// Measured on an H100 (rows x 12288 and 16384 columns, 256 MiB a tensor, whole backward with the
// finalize, one-word exchange): 2048-column chunks with four programs per SM were slower (bf16
// 1.46-2.24, fp32 2.07-2.49 TB/s); the dx + dw/db kernels this replaces: 1.58-1.75 TB/s. H200, the
// kernel alone, bf16 / fp32, 10944 x 12288: 2.79 / 3.59 TB/s with the next row in registers (bf16)
// or nothing ahead (fp32), 3.38 / 3.88 with 3 stages; 8192 x 16384: 2.77 / 3.54 -> 3.29 / 3.91.
// 2 stages measured 2.53 / 3.65, 4 as 3; 8 warps or 2048-column chunks at 4 per SM 3-5% slower.
// 2-byte rows that want dx take layer_norm_bwd_team_lag_kernel instead (its comment has the
// measurements): a row's dx one iteration after its sums, 2048-column chunks capped at 128
// registers, as many programs as an SM holds (the driver's occupancy), 2 stages.
constexpr int64_t kTeamMaxChunks = 32;
constexpr int kTeamStages = 3;

struct TeamBackwardPlan {
  int64_t block_n;
  int64_t chunks;
  int num_warps;
  int programs_per_sm;  // the team kernel's (the lag kernel asks resident_programs_per_sm)
  int stages;
  bool lag = false;  // layer_norm_bwd_team_lag_kernel
  int maxnreg = 0;
};

std::optional<TeamBackwardPlan> plan_team_backward(int64_t rows, int64_t cols, const at::Tensor& t, bool want_dx) {
  if (!t.is_cuda() || t.scalar_type() == at::kDouble || cols <= kFusedBackwardLimit) {
    return std::nullopt;  // the team's programs wait for each other: only CUDA runs them at once
  }
  if (want_dx && t.element_size() == 2) {
    constexpr int64_t lag_block_n = 2048;
    const int64_t chunks = kit::ceil_div(cols, lag_block_n);
    if (chunks <= kTeamMaxChunks && rows * chunks * 2 < kit::kInt32Limit) {
      return TeamBackwardPlan{lag_block_n, chunks, 4, 0, 2, true, 128};
    }
  }
  constexpr int64_t block_n = 4096;
  const int64_t chunks = kit::ceil_div(cols, block_n);
  if (chunks > kTeamMaxChunks || rows * chunks * 2 >= kit::kInt32Limit) {
    return std::nullopt;
  }
  return TeamBackwardPlan{block_n, chunks, 4, 2, kTeamStages};
}

// dw = sum over the `groups` rows of dw_partial [groups, cols] (db likewise), in one launch. Narrow
// column blocks keep enough programs reading (N = 8192: 256 programs of 32 columns, not 64 of 128).
void finalize_dwdb(const Stream& stream, const at::Tensor& dw, const at::Tensor& db, const at::Tensor& dw_partial,
                   const at::Tensor& db_partial, int64_t groups, int64_t cols) {
  static auto& finalize =
      TritonJitFunction::get_instance(kernel_path("layer_norm/backward.py"), "layer_norm_bwd_dwdb_finalize_kernel");
  const int64_t block_n = std::clamp<int64_t>(kit::next_power_of_2(kit::ceil_div(cols, 256)), 16, 128);
  const int64_t block_g = std::min<int64_t>(kit::next_power_of_2(groups), std::max<int64_t>(32, 2048 / block_n));
  finalize(stream, Grid(kit::blocks_for(cols, block_n, kBackwardOp)), LaunchOptions{4}, dw, db, dw_partial,
           db_partial, groups, cols, dw.defined(), db.defined(), block_g, block_n, false);
}

// Where a backward's programs (or teams) put their dw/db sums: [groups, cols] buffers in the
// accumulator dtype that finish() adds up, or dw/db themselves when one group sums every row (its
// kernel casts to their dtype; nothing to add).
struct ColumnSums {
  at::Tensor dw_partial;
  at::Tensor db_partial;
  int64_t groups;

  ColumnSums(const at::Tensor& dw, const at::Tensor& db, int64_t groups, int64_t cols,
             const at::TensorOptions& partial_options)
      : dw_partial(dw.defined() && groups > 1 ? kit::empty_output({groups, cols}, partial_options) : dw),
        db_partial(db.defined() && groups > 1 ? kit::empty_output({groups, cols}, partial_options) : db),
        groups(groups) {}

  void finish(const Stream& stream, const at::Tensor& dw, const at::Tensor& db, int64_t cols) const {
    if ((dw.defined() || db.defined()) && groups > 1) {
      finalize_dwdb(stream, dw, db, dw_partial, db_partial, groups, cols);
    }
  }
};

template <typename Int>
std::vector<Int> leading_shape(c10::ArrayRef<Int> sizes, int64_t lead) {
  return std::vector<Int>(sizes.begin(), sizes.begin() + lead);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward_meta(const at::Tensor& input,
                                                                       c10::SymIntArrayRef normalized_shape,
                                                                       const std::optional<at::Tensor>& weight,
                                                                       const std::optional<at::Tensor>& bias,
                                                                       double /*eps*/) {
  const int64_t lead = check_layer_norm_inputs<c10::SymInt>(input, normalized_shape, weight, bias,
                                                            input.sym_sizes(), kOp);
  const auto stats_options = input.options().dtype(kit::accumulator_type(input.scalar_type()));
  return {at::empty_symint(input.sym_sizes(), input.options()),
          at::empty_symint(leading_shape(input.sym_sizes(), lead), stats_options),
          at::empty_symint(leading_shape(input.sym_sizes(), lead), stats_options)};
}

// The forward launch. Without `store_stats` (inference: tjit::layer_norm) mean and rstd are
// neither allocated nor written, and come back undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                       const std::optional<at::Tensor>& weight,
                                                       const std::optional<at::Tensor>& bias, double eps,
                                                       bool store_stats) {
  const int64_t lead = check_layer_norm_inputs<int64_t>(input, normalized_shape, weight, bias, input.sizes(), kOp);
  const auto stats_options = input.options().dtype(kit::accumulator_type(input.scalar_type()));
  at::Tensor out = kit::empty_output(input.sizes(), input.options());
  at::Tensor mean;
  at::Tensor rstd;
  if (store_stats) {
    mean = kit::empty_output(leading_shape(input.sizes(), lead), stats_options);
    rstd = kit::empty_output(leading_shape(input.sizes(), lead), stats_options);
  }
  const int64_t cols = c10::multiply_integers(normalized_shape);
  if (out.numel() == 0) {
    return {out, mean, rstd};
  }
  const auto [x, v] = kit::rows_of(input, cols);
  const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
  const at::Tensor b = present(bias) ? bias->contiguous() : at::Tensor();
  const bool index64 = kit::needs_index64(x) || kit::needs_index64(out);
  const Stream stream = current_stream(input.device());
  if (kit::tuned_long_rows(v.rows, cols, x, kForwardSinglePassLimit)) {
    static auto& long_kernel =
        TritonJitFunction::get_instance(kernel_path("layer_norm/forward.py"), "layer_norm_fwd_long_kernel");
    const at::Tensor sync = kit::row_exchange_workspace(v.rows, kit::ceil_div(cols, kit::kLongRowMinSplitBlock), x);
    const int64_t row_bucket = kit::long_row_bucket(v.rows);
    // While a CUDA graph is being captured nothing can be timed: a row length not tuned yet takes
    // the hand-written plan below.
    if (!stream_is_capturing(stream) || long_kernel.chosen_config(out, x, w, b, mean, rstd, sync, row_bucket, cols,
                                                                  v.row_stride, cols, eps, w.defined(), b.defined(),
                                                                  index64)) {
      long_kernel.run(stream, kit::long_row_grid(v.rows, cols, kOp), out, x, w, b, mean, rstd, sync, row_bucket,
                      cols, v.row_stride, cols, eps, w.defined(), b.defined(), index64);
      return {out, mean, rstd};
    }
  }
  if (cols <= kShortRowLimit) {
    const ShortRowPlan plan = plan_short_rows(cols, x);
    static auto& rows_kernel =
        TritonJitFunction::get_instance(kernel_path("layer_norm/forward.py"), "layer_norm_fwd_rows_kernel");
    rows_kernel(stream, Grid(kit::blocks_for(v.rows, plan.block_m, kOp)), LaunchOptions{plan.num_warps}, out, x, w,
                b, mean, rstd, v.rows, cols, v.row_stride, cols, eps, w.defined(), b.defined(), plan.block_m,
                plan.block_n, index64);
    return {out, mean, rstd};
  }
  if (const auto persistent = plan_persistent_forward(cols, x)) {
    static auto& persistent_kernel =
        TritonJitFunction::get_instance(kernel_path("layer_norm/forward.py"), "layer_norm_fwd_persistent_kernel");
    LaunchOptions options{persistent->num_warps};
    options.maxnreg = persistent->maxnreg;
    const auto with_arguments = [&](const auto& call) {
      return call(out, x, w, b, mean, rstd, v.rows, cols, v.row_stride, cols, eps, w.defined(), b.defined(),
                  persistent->block_n, persistent->block_tail, persistent->stages, index64);
    };
    const int per_sm = with_arguments(
        [&](const auto&... args) { return persistent_kernel.resident_programs_per_sm(options, args...); });
    const int64_t programs =
        std::min<int64_t>(v.rows, int64_t{std::max(per_sm, 1)} * kit::planning_multiprocessors(x));
    with_arguments([&](const auto&... args) {
      persistent_kernel(stream, Grid(static_cast<uint32_t>(programs)), options, args...);
    });
    return {out, mean, rstd};
  }
  const RowPlan plan = plan_forward_rows(cols, x);
  static auto& kernel = TritonJitFunction::get_instance(kernel_path("layer_norm/forward.py"), "layer_norm_fwd_kernel");
  // Undefined mean/rstd reach the kernel as None, which compiles their stores out. eps goes as the
  // double it is: the kernel annotates it tl.float64 (fp64 input uses it unrounded, as aten does).
  kernel(stream, Grid(kit::blocks_for(v.rows, 1, kOp)), LaunchOptions{plan.num_warps}, out, x, w, b, mean, rstd,
         v.rows, cols, v.row_stride, cols, eps, w.defined(), b.defined(), plan.block_n, plan.single_pass, index64,
         plan.block_tail);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward_triton(const at::Tensor& input,
                                                                         at::IntArrayRef normalized_shape,
                                                                         const std::optional<at::Tensor>& weight,
                                                                         const std::optional<at::Tensor>& bias,
                                                                         double eps) {
  return forward(input, normalized_shape, weight, bias, eps, /*store_stats=*/true);
}

at::Tensor layer_norm_meta(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                           const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                           double eps) {
  return std::get<0>(layer_norm_forward_meta(input, normalized_shape, weight, bias, eps));
}

at::Tensor layer_norm_triton(const at::Tensor& input, at::IntArrayRef normalized_shape,
                             const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                             double eps) {
  return std::get<0>(forward(input, normalized_shape, weight, bias, eps, /*store_stats=*/false));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& /*mean*/, const at::Tensor& /*rstd*/, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  check_layer_norm_inputs<c10::SymInt>(input, normalized_shape, weight, bias, input.sym_sizes(), kBackwardOp);
  at::Tensor dx = output_mask[0] ? at::empty_symint(input.sym_sizes(), input.options()) : at::Tensor();
  at::Tensor dw = output_mask[1] && present(weight) ? at::empty_symint(weight->sym_sizes(), weight->options())
                                                    : at::Tensor();
  at::Tensor db = output_mask[2] && present(bias) ? at::empty_symint(bias->sym_sizes(), bias->options())
                                                  : at::Tensor();
  (void)grad_out;
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_triton(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const int64_t lead =
      check_layer_norm_inputs<int64_t>(input, normalized_shape, weight, bias, input.sizes(), kBackwardOp);
  kit::check_defined(grad_out, kBackwardOp, "grad_out");
  kit::check_same_device(grad_out, "grad_out", input, "input", kBackwardOp);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), kBackwardOp, ": grad_out has shape ", grad_out.sizes(),
              " but input has shape ", input.sizes());
  TORCH_CHECK(grad_out.scalar_type() == input.scalar_type(), kBackwardOp, ": grad_out has dtype ",
              grad_out.scalar_type(), " but input has dtype ", input.scalar_type());
  const at::ScalarType acc = kit::accumulator_type(input.scalar_type());
  for (const auto& [stat, name] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    kit::check_defined(*stat, kBackwardOp, name);
    kit::check_same_device(*stat, name, input, "input", kBackwardOp);
    TORCH_CHECK(stat->scalar_type() == acc && stat->numel() == c10::multiply_integers(input.sizes().slice(0, lead)),
                kBackwardOp, ": ", name, " must be the ", acc, " tensor tjit::layer_norm_forward returned (",
                c10::multiply_integers(input.sizes().slice(0, lead)), " elements), got ", stat->scalar_type(), " ",
                stat->sizes());
  }
  const bool want_dw = output_mask[1] && present(weight);
  const bool want_db = output_mask[2] && present(bias);
  at::Tensor dx = output_mask[0] ? kit::empty_output(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = want_dw ? kit::empty_output(weight->sizes(), weight->options()) : at::Tensor();
  at::Tensor db = want_db ? kit::empty_output(bias->sizes(), bias->options()) : at::Tensor();
  const int64_t cols = c10::multiply_integers(normalized_shape);
  const int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  if (rows == 0 || cols == 0) {
    // No rows: parameter gradients are sums of nothing.
    if (want_dw) dw.zero_();
    if (want_db) db.zero_();
    return {dx, dw, db};
  }
  const Stream stream = current_stream(input.device());
  static const std::string file = kernel_path("layer_norm/backward.py");  // once: the hot path builds no paths
  const auto [x, xv] = kit::rows_of(input, cols);
  const auto [dy, dyv] = kit::rows_of(grad_out, cols);
  const at::Tensor mean_c = mean.contiguous();
  const at::Tensor rstd_c = rstd.contiguous();
  const bool index64 = kit::needs_index64(x) || kit::needs_index64(dy);

  const int sms = kit::planning_multiprocessors(input);
  const auto partial_options = input.options().dtype(acc);
  if (!dx.defined() && !want_dw && !want_db) {
    return {dx, dw, db};
  }
  if (cols <= kFusedBackwardLimit) {
    // One pass over dy and x for all three gradients; dw/db as per-program partial sums.
    const FusedBackwardPlan plan = plan_fused_backward(cols, input);
    const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
    int64_t programs = std::min<int64_t>(int64_t{plan.programs_per_sm} * sms, kit::ceil_div(rows, plan.block_m));
    const int64_t rows_per_program = kit::ceil_div(kit::ceil_div(rows, programs), plan.block_m) * plan.block_m;
    programs = kit::ceil_div(rows, rows_per_program);
    const ColumnSums sums(dw, db, programs, cols, partial_options);
    static auto& fused = TritonJitFunction::get_instance(file, "layer_norm_bwd_fused_kernel");
    fused(stream, Grid(static_cast<uint32_t>(programs)), LaunchOptions{plan.num_warps}, dx, sums.dw_partial,
          sums.db_partial, dy, x, w, mean_c, rstd_c, rows, cols, cols, dyv.row_stride, xv.row_stride, rows_per_program,
          w.defined(), dx.defined(), want_dw, want_db, plan.block_m, plan.block_n, index64, plan.block_tail);
    sums.finish(stream, dw, db, cols);
    return {dx, dw, db};
  }
  if (const auto team = plan_team_backward(rows, cols, input, dx.defined())) {
    const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
    const at::Tensor sync = kit::row_exchange_workspace(rows, team->chunks, input);
    // Rows split evenly over as many teams as run at once.
    const auto teams_for = [&](int64_t per_sm) {
      const int64_t capacity = std::max<int64_t>(1, per_sm * sms / team->chunks);
      const int64_t rows_per_team = kit::ceil_div(rows, std::min(capacity, rows));
      return std::pair{kit::ceil_div(rows, rows_per_team), rows_per_team};
    };
    if (team->lag) {
      static auto& lag_kernel = TritonJitFunction::get_instance(file, "layer_norm_bwd_team_lag_kernel");
      LaunchOptions options{team->num_warps};
      options.maxnreg = team->maxnreg;
      const auto with_arguments = [&](const at::Tensor& dw_partial, const at::Tensor& db_partial, int64_t per_team,
                                      const auto& call) {
        return call(dx, dw_partial, db_partial, dy, x, w, mean_c, rstd_c, sync, rows, cols, team->chunks, per_team,
                    cols, dyv.row_stride, xv.row_stride, w.defined(), want_dw, want_db, team->block_n,
                    kit::next_power_of_2(team->chunks), team->stages, index64);
      };
      // The team count follows the occupancy, and the partial sums' buffers the team count, so the
      // occupancy is asked of the same binary with mean_c (fp32, like the buffers) standing in for
      // them; the kernel does not specialise on rows_per_team. (One team stores into dw/db
      // directly, a binary of its own.)
      const int per_sm = with_arguments(want_dw ? mean_c : at::Tensor(), want_db ? mean_c : at::Tensor(), 1,
                                        [&](const auto&... args) {
                                          return lag_kernel.resident_programs_per_sm(options, args...);
                                        });
      const auto [teams, rows_per_team] = teams_for(std::max(per_sm, 1));
      const ColumnSums sums(dw, db, teams, cols, partial_options);
      with_arguments(sums.dw_partial, sums.db_partial, rows_per_team, [&](const auto&... args) {
        lag_kernel(stream, Grid(kit::blocks_for(teams * team->chunks, 1, kBackwardOp)), options, args...);
        return 0;
      });
      sums.finish(stream, dw, db, cols);
      return {dx, dw, db};
    }
    const auto [teams, rows_per_team] = teams_for(team->programs_per_sm);
    const ColumnSums sums(dw, db, teams, cols, partial_options);
    static auto& team_kernel = TritonJitFunction::get_instance(file, "layer_norm_bwd_team_kernel");
    team_kernel(stream, Grid(kit::blocks_for(teams * team->chunks, 1, kBackwardOp)), LaunchOptions{team->num_warps},
                dx, sums.dw_partial, sums.db_partial, dy, x, w, mean_c, rstd_c, sync, rows, cols, team->chunks,
                rows_per_team, cols, dyv.row_stride, xv.row_stride, w.defined(), dx.defined(), want_dw, want_db,
                team->block_n, kit::next_power_of_2(team->chunks), team->stages, index64);
    sums.finish(stream, dw, db, cols);
    return {dx, dw, db};
  }
  if (dx.defined()) {
    const at::Tensor w = present(weight) ? weight->contiguous() : at::Tensor();
    const RowPlan plan = plan_rows(cols);
    static auto& dx_kernel = TritonJitFunction::get_instance(file, "layer_norm_bwd_dx_kernel");
    dx_kernel(stream, Grid(kit::blocks_for(rows, 1, kBackwardOp)), LaunchOptions{plan.num_warps}, dx, dy, x, w,
              mean_c, rstd_c, rows, cols, cols, dyv.row_stride, xv.row_stride, w.defined(), plan.block_n,
              plan.single_pass, index64);
  }
  if (!want_dw && !want_db) {
    return {dx, dw, db};
  }
  // Weight/bias gradients: columns in blocks, rows split into groups when the column blocks
  // alone would leave the GPU idle; groups write partial sums that one more launch adds up.
  const int64_t block_n = std::min<int64_t>(kit::next_power_of_2(cols), 128);
  const int64_t block_m = input.scalar_type() == at::kDouble ? 16 : 32;
  const int64_t col_blocks = kit::ceil_div(cols, block_n);
  int64_t groups = std::min({kit::ceil_div(4 * sms, col_blocks), kit::ceil_div(rows, block_m), int64_t{65535}});
  groups = std::max<int64_t>(groups, 1);
  const int64_t rows_per_group = kit::ceil_div(kit::ceil_div(rows, groups), block_m) * block_m;
  groups = kit::ceil_div(rows, rows_per_group);
  if (groups == 1) {
    static auto& dwdb = TritonJitFunction::get_instance(file, "layer_norm_bwd_dwdb_kernel");
    dwdb(stream, Grid(kit::blocks_for(cols, block_n, kBackwardOp)), LaunchOptions{4}, dw, db, dy, x, mean_c, rstd_c,
         rows, cols, dyv.row_stride, xv.row_stride, want_dw, want_db, block_m, block_n, index64);
    return {dx, dw, db};
  }
  const at::Tensor dw_partial = want_dw ? kit::empty_output({groups, cols}, partial_options) : at::Tensor();
  const at::Tensor db_partial = want_db ? kit::empty_output({groups, cols}, partial_options) : at::Tensor();
  static auto& partial = TritonJitFunction::get_instance(file, "layer_norm_bwd_dwdb_partial_kernel");
  partial(stream, Grid(kit::blocks_for(cols, block_n, kBackwardOp), static_cast<uint32_t>(groups)),
          LaunchOptions{4}, dw_partial, db_partial, dy, x, mean_c, rstd_c, rows, cols, dyv.row_stride, xv.row_stride,
          rows_per_group, want_dw, want_db, block_m, block_n, index64);
  finalize_dwdb(stream, dw, db, dw_partial, db_partial, groups, cols);
  return {dx, dw, db};
}

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using LayerNormSignature = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                      const std::optional<at::Tensor>&, double);
using LayerNormForwardSignature = Tensor3(const at::Tensor&, c10::SymIntArrayRef, const std::optional<at::Tensor>&,
                                          const std::optional<at::Tensor>&, double);
using LayerNormBackwardSignature = Tensor3(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef,
                                           const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                           const std::optional<at::Tensor>&, std::array<bool, 3>);

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            c10::SymIntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, double eps) {
    static const auto forward_op = kit::typed_op<LayerNormForwardSignature>("tjit::layer_norm_forward");
    at::Tensor out;
    at::Tensor mean;
    at::Tensor rstd;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      std::tie(out, mean, rstd) = forward_op.call(input, normalized_shape, weight, bias, eps);
    }
    ctx->save_for_backward({input, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()), mean, rstd});
    ctx->saved_data["normalized_shape"] = normalized_shape;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static const auto backward_op = kit::typed_op<LayerNormBackwardSignature>(kBackwardOp);
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const std::optional<at::Tensor> weight = saved[1].defined() ? std::optional(saved[1]) : std::nullopt;
    const std::optional<at::Tensor> bias = saved[2].defined() ? std::optional(saved[2]) : std::nullopt;
    const auto shape = ctx->saved_data["normalized_shape"].toSymIntVector();
    // Edges exist only for tensor inputs that were given: weight and bias shift when absent.
    size_t next_edge = 1;
    const bool want_dw = weight.has_value() && ctx->needs_input_grad(next_edge++);
    const bool want_db = bias.has_value() && ctx->needs_input_grad(next_edge);
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), want_dw, want_db};
    auto [dx, dw, db] = backward_op.call(grads[0].contiguous(), input, shape, saved[3], saved[4], weight, bias, mask);
    return {dx, at::Tensor(), dw, db, at::Tensor()};
  }
};

at::Tensor layer_norm_autograd(c10::DispatchKeySet ks, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                               double eps) {
  kit::check_defined(input, kOp, "input");
  if (!kit::records_graph({&input, weight ? &*weight : nullptr, bias ? &*bias : nullptr})) {
    static const auto op = kit::typed_op<LayerNormSignature>(kOp);
    return op.redispatch(ks & c10::after_autograd_keyset, input, normalized_shape, weight, bias, eps);
  }
  return LayerNormFunction::apply(input, normalized_shape, weight, bias, eps);
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(
      m, "tjit",
      "layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor",
      "Layer normalisation over the trailing `normalized_shape` dims (`torch.ops.tjit.layer_norm`),\n"
      "as `torch.nn.functional.layer_norm`: (input - mean) / sqrt(var + eps) * weight + bias, biased\n"
      "variance.\n\n"
      "`input`, and `weight`/`bias` when given (shape `normalized_shape`), share one dtype (float32,\n"
      "float16, bfloat16, float64) and device. Statistics are computed in float32, in float64 for\n"
      "float64 input, which also uses `eps` unrounded. Differentiable with respect to input, weight and\n"
      "bias (the backward is `layer_norm_backward`).");
  tjit::kit::define(
      m, "tjit",
      "layer_norm_forward(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> (Tensor, Tensor, Tensor)",
      "`layer_norm` that also returns the statistics its backward needs: (out, mean, rstd)\n"
      "(`torch.ops.tjit.layer_norm_forward`; aten's `native_layer_norm`).\n\n"
      "mean and rstd = 1 / sqrt(var + eps) have the input's leading dims as shape (aten's keep a\n"
      "trailing 1 per normalized dim) and dtype float32, float64 for float64 input. Not differentiable.");
  tjit::kit::define(
      m, "tjit",
      "layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, "
      "Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      "Gradients of `layer_norm` for (input, weight, bias) (`torch.ops.tjit.layer_norm_backward`;\n"
      "aten's `native_layer_norm_backward`), from `mean` and `rstd` as `layer_norm_forward` returned\n"
      "them.\n\n"
      "`output_mask` (three bools) says which to compute; an entry is None where it is False or the\n"
      "parameter is absent. Tensors as for `layer_norm`; `grad_out` has the input's shape and dtype.");
}
// CUDA runs compiled kernels; CPU runs the same kernels through Triton's interpreter.
#define TJIT_LAYER_NORM_KERNELS(m)                                                \
  m.impl("layer_norm", &tjit::ops::layer_norm_triton);                            \
  m.impl("layer_norm_forward", &tjit::ops::layer_norm_forward_triton);            \
  m.impl("layer_norm_backward", &tjit::ops::layer_norm_backward_triton)
TORCH_LIBRARY_IMPL(tjit, CUDA, m) { TJIT_LAYER_NORM_KERNELS(m); }
TORCH_LIBRARY_IMPL(tjit, CPU, m) { TJIT_LAYER_NORM_KERNELS(m); }
TORCH_LIBRARY_IMPL(tjit, Meta, m) {
  m.impl("layer_norm", &tjit::ops::layer_norm_meta);
  m.impl("layer_norm_forward", &tjit::ops::layer_norm_forward_meta);
  m.impl("layer_norm_backward", &tjit::ops::layer_norm_backward_meta);
}
TORCH_LIBRARY_IMPL(tjit, Autograd, m) { m.impl("layer_norm", &tjit::ops::layer_norm_autograd); }

namespace tjit {

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  static const auto op = kit::typed_op<ops::LayerNormSignature>("tjit::layer_norm");
  return op.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& input,
                                                                  at::IntArrayRef normalized_shape,
                                                                  const std::optional<at::Tensor>& weight,
                                                                  const std::optional<at::Tensor>& bias, double eps) {
  static const auto op = kit::typed_op<ops::LayerNormForwardSignature>("tjit::layer_norm_forward");
  return op.call(input, c10::fromIntArrayRefSlow(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  static const auto op = kit::typed_op<ops::LayerNormBackwardSignature>("tjit::layer_norm_backward");
  return op.call(grad_out, input, c10::fromIntArrayRefSlow(normalized_shape), mean, rstd, weight, bias,
                 output_mask);
}

}  // namespace tjit
