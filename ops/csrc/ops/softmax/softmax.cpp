// tjit::softmax and its backward over any dim, as Triton row kernels (kernels_py/softmax.py):
// the dim is moved last, rows are normalised in one pass when they fit a block, in an online
// (looped) pass otherwise.

#include <tjit/ops/softmax.h>  // this folder's softmax.h, as installed

#include "../kernel_files.h"

#include <tjit/current_stream.h>
#include <tjit/device_properties.h>
#include <tjit/kit/kit.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace tjit::ops {
namespace {

constexpr const char* kOp = "tjit::softmax";
constexpr const char* kBackwardOp = "tjit::softmax_backward";

void check_floating(const at::Tensor& t, const char* op, const char* arg) {
  kit::check_defined(t, op, arg);
  kit::check_supported_device(t, op, arg);
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": argument '", arg, "' has dtype ", t.scalar_type(),
              "; softmax needs a floating-point tensor (convert with .float(), or pass dtype=)");
  kit::check_dtype_in(t, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}, op, arg);
}

// How one softmax call covers its rows (softmax.py's header has the measurements behind it).
struct RowPlan {
  enum class Kind { ShortRows, OneProgramPerRow, SplitRows, Persistent };
  Kind kind = Kind::OneProgramPerRow;
  int64_t block_m = 1;     // ShortRows: rows per program
  int64_t block_n = 1;     // columns per program (per chunk for SplitRows, per step when looped)
  bool single_pass = true;  // OneProgramPerRow: the row stays in registers
  int64_t chunks = 1;      // SplitRows: programs per row
  int64_t programs = 1;    // Persistent: programs, each walking every programs-th row
  bool reread = false;     // SplitRows, backward: read the chunk again after the wait (softmax.py)
  int num_warps = 4;
  int maxnreg = 0;         // a register cap for the compiler (0: none)
};

constexpr int kPersistentStages = 3;  // row-loop buffers: 2 x 64 KB of shared memory in flight

constexpr int64_t kSplitBlock = 4096;
constexpr int64_t kMaxSplitChunks = 128;  // programs of one row must fit on the GPU at once

// `single_pass_limit`: the longest row kept in registers (32768 columns; the fp64 backward holds
// two rows of 8-byte elements, so 16384).
RowPlan plan_rows(int64_t rows, int64_t cols, const at::Tensor& t, int64_t single_pass_limit, bool backward) {
  RowPlan plan;
  if (cols <= 256) {
    // BLOCK_M rows per program, enough programs to fill the GPU (4096 x 128: 512 programs).
    plan.kind = RowPlan::Kind::ShortRows;
    plan.block_n = kit::next_power_of_2(cols);
    plan.block_m = std::max<int64_t>(1, std::min(1024 / plan.block_n, kit::next_power_of_2(rows)));
    return plan;
  }
  // (On CUDA the forward's 2-byte rows past 20480 columns are tuned before this plan is asked for:
  // it serves them on the CPU and in CUDA graph captures of row lengths not tuned yet.)
  if (!backward && t.element_size() == 2 && cols > 16384 && cols <= single_pass_limit) {
    // A 2-byte row of 16K-32K columns fills an SM; one program per row leaves the SM idle while
    // it reduces. Persistent programs overlap the next row's loads with that (softmax.py), once
    // the row fills enough of the 32768-lane block; shorter rows go looped in 4096-column steps.
    if (cols > 20480) {
      plan.kind = RowPlan::Kind::Persistent;
      plan.block_n = kit::next_power_of_2(cols);
      plan.programs = std::min<int64_t>(rows, kit::planning_multiprocessors(t));
      plan.num_warps = 32;
    } else {
      plan.single_pass = false;
      plan.block_n = 4096;
      plan.num_warps = 16;
    }
    return plan;
  }
  if (cols <= single_pass_limit) {
    plan.block_n = kit::next_power_of_2(cols);
    // The backward's 32768-column rows: 16 warps beat 32 (H200 bf16: 4.2 vs 4.0 TB/s; split: 3.4).
    plan.num_warps = plan.block_n > 16384 && !backward
                         ? 32
                         : static_cast<int>(std::clamp<int64_t>(plan.block_n / 512, 1, 16));
    return plan;
  }
  // Long rows. The split kernels wait for each other, which only CUDA runs concurrently; they
  // pay off for 4-byte elements forward and for everything but fp64 backward.
  const int64_t chunks = kit::ceil_div(cols, kSplitBlock);
  const bool split_dtype = backward ? t.scalar_type() != at::kDouble : t.element_size() == 4;
  if (t.is_cuda() && split_dtype && chunks <= kMaxSplitChunks && rows * chunks < kit::kInt32Limit / 2) {
    plan.kind = RowPlan::Kind::SplitRows;
    plan.block_n = kSplitBlock;
    plan.num_warps = 4;
    if (backward) {
      // H200, one run, TB/s (4096/4 held, re-read; 8192/8 held), bf16: 50257 3.47, 3.64; 2.93,
      // 128256 3.70, 3.77; 3.66, 151936 3.48, 3.60; 3.68, 262144 3.03, 3.14; 3.47. fp32 (4096/4 held,
      // 8192/8 held): 151936 4.13, 4.04; 262144 3.68, 3.85; re-reading costs fp32 1-3%. On an H100
      // no vocabulary-size row got slower with this plan (bf16 262144: 2.62 -> 2.91 TB/s).
      const bool two_byte = t.element_size() == 2;
      if (chunks > (two_byte ? 32 : 48)) {
        plan.block_n = 2 * kSplitBlock;  // fewer, larger chunks: less waiting per byte on long rows
        plan.num_warps = 8;
        // Left alone the compiler takes 95 registers (86 fp32) for the rarely taken help path, and
        // 2 programs fit an SM instead of 3 (H100, bf16 512 x 262144: 2.32 TB/s; at 80: 2.95, no
        // spills).
        plan.maxnreg = 80;
      } else {
        plan.reread = two_byte;
      }
    }
    plan.chunks = kit::ceil_div(cols, plan.block_n);
    return plan;
  }
  plan.single_pass = false;
  if (t.is_cuda() && rows < multiprocessor_count(t.device())) {
    plan.block_n = 16384;  // few very long rows: bigger steps keep the SMs busy
    plan.num_warps = 16;
  } else if (t.element_size() == 2) {
    plan.block_n = 8192;
    plan.num_warps = 32;
  } else {
    plan.block_n = 4096;
    plan.num_warps = 16;
  }
  return plan;
}

// One tensor's rows as a split kernel sees them.
struct RowsOf {
  const at::Tensor& rows;
  int64_t row_stride;
};

// The split kernels' ALIGN (softmax.py): the elements in 16 bytes when rows start off 16-byte
// boundaries yet can all be cut at the same columns into whole vectors (every base 16-byte aligned,
// every row stride the same modulo a vector, one element size), else 1.
int64_t split_alignment(int64_t cols, std::initializer_list<RowsOf> tensors) {
  const int64_t element_size = tensors.begin()->rows.element_size();
  const int64_t per_vector = 16 / element_size;
  const int64_t offset = tensors.begin()->row_stride % per_vector;
  bool aligned_already = cols % per_vector == 0;
  for (const RowsOf& t : tensors) {
    if (t.rows.element_size() != element_size || reinterpret_cast<uintptr_t>(t.rows.data_ptr()) % 16 != 0 ||
        t.row_stride % per_vector != offset) {
      return 1;
    }
    aligned_already = aligned_already && t.row_stride % per_vector == 0;
  }
  return aligned_already ? 1 : per_vector;
}

// `t` with `dim` moved last: a view, or `t` itself when `dim` is already last (the common case;
// movedim would still make a view, a dispatcher round trip on every call).
at::Tensor dim_last(const at::Tensor& t, int64_t dim) {
  if (t.dim() == 0) {
    return t.reshape({1});
  }
  return dim == t.dim() - 1 ? t : t.movedim(dim, -1);
}

// Output laid out contiguously with `dim` last, returned with `dim` back in place: the layout
// the Meta kernel reproduces.
template <typename Shape>
Shape moved_shape(Shape shape, int64_t dim) {
  if (shape.empty()) {
    return shape;
  }
  auto value = shape[dim];
  shape.erase(shape.begin() + dim);
  shape.push_back(value);
  return shape;
}

at::Tensor restore_dim(const at::Tensor& moved_out, const at::Tensor& like, int64_t dim) {
  if (like.dim() == 0) {
    return moved_out.reshape({});
  }
  return dim == like.dim() - 1 ? moved_out : moved_out.movedim(-1, dim);
}

at::Tensor softmax_meta(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  check_floating(self, kOp, "self");
  dim = kit::wrap_dim(dim, self.dim(), kOp, "dim");
  const at::ScalarType out_dtype = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(out_dtype), kOp, ": dtype=", out_dtype, " is not a floating-point type");
  std::vector<c10::SymInt> shape(self.sym_sizes().begin(), self.sym_sizes().end());
  at::Tensor out = at::empty_symint(moved_shape(shape, dim), self.options().dtype(out_dtype));
  return restore_dim(out, self, dim);
}

at::Tensor softmax_triton(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  check_floating(self, kOp, "self");
  dim = kit::wrap_dim(dim, self.dim(), kOp, "dim");
  const at::ScalarType out_dtype = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(out_dtype), kOp, ": dtype=", out_dtype, " is not a floating-point type");
  // As torch.softmax: the input is converted to `dtype` first.
  const at::Tensor x = out_dtype == self.scalar_type() ? self : self.to(out_dtype);
  c10::SmallVector<int64_t, 6> shape(x.sizes().begin(), x.sizes().end());
  at::Tensor out_moved = kit::empty_output(moved_shape(shape, dim), x.options());
  const int64_t cols = x.dim() == 0 ? 1 : x.size(dim);
  if (out_moved.numel() == 0) {
    return restore_dim(out_moved, x, dim);
  }
  const auto [in, v] = kit::rows_of(dim_last(x, dim), cols);
  const bool index64 = kit::needs_index64(in) || kit::needs_index64(out_moved);
  const Stream stream = current_stream(x.device());
  // 2-byte rows from 20481 columns: the split configs beat the persistent plan below (softmax.py).
  if (kit::tuned_long_rows(v.rows, cols, x, x.element_size() == 2 ? 20480 : 32768)) {
    static auto& long_kernel =
        TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_fwd_long_kernel");
    const int64_t chunks = kit::ceil_div(cols, kit::kLongRowMinSplitBlock);
    const at::Tensor sync = kit::row_exchange_workspace(v.rows, chunks, x);
    const int64_t chunks_pow2 = kit::next_power_of_2(chunks);
    const int64_t row_bucket = kit::long_row_bucket(v.rows);
    const int64_t align = split_alignment(cols, {{in, v.row_stride}, {out_moved, cols}});
    // While a CUDA graph is being captured nothing can be timed: a row length not tuned yet takes
    // the hand-written plan below.
    if (!stream_is_capturing(stream) ||
        long_kernel.chosen_config(out_moved, in, sync, row_bucket, cols, v.row_stride, cols, chunks_pow2, align,
                                  index64)) {
      long_kernel.run(stream, kit::long_row_grid(v.rows, cols, kOp), out_moved, in, sync, row_bucket, cols,
                      v.row_stride, cols, chunks_pow2, align, index64);
      return restore_dim(out_moved, x, dim);
    }
  }
  const RowPlan plan = plan_rows(v.rows, cols, x, 32768, /*backward=*/false);
  switch (plan.kind) {
    case RowPlan::Kind::ShortRows: {
      static auto& rows_kernel =
          TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_fwd_rows_kernel");
      rows_kernel(stream, Grid(kit::blocks_for(v.rows, plan.block_m, kOp)), LaunchOptions{plan.num_warps}, out_moved,
                  in, v.rows, cols, v.row_stride, cols, plan.block_m, plan.block_n, index64);
      break;
    }
    case RowPlan::Kind::SplitRows: {
      static auto& split_kernel =
          TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_fwd_split_kernel");
      split_kernel(stream, Grid(kit::blocks_for(v.rows * plan.chunks, 1, kOp)), LaunchOptions{plan.num_warps},
                   out_moved, in, kit::row_exchange_workspace(v.rows, plan.chunks, x), v.rows, cols, plan.chunks, v.row_stride,
                   cols, plan.block_n, kit::next_power_of_2(plan.chunks),
                   split_alignment(cols, {{in, v.row_stride}, {out_moved, cols}}), index64);
      break;
    }
    case RowPlan::Kind::Persistent: {
      static auto& persistent_kernel =
          TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_fwd_persistent_kernel");
      persistent_kernel(stream, Grid(static_cast<uint32_t>(plan.programs)), LaunchOptions{plan.num_warps}, out_moved,
                        in, v.rows, cols, v.row_stride, cols, plan.block_n, kPersistentStages, index64);
      break;
    }
    case RowPlan::Kind::OneProgramPerRow: {
      static auto& kernel = TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_fwd_kernel");
      kernel(stream, Grid(kit::blocks_for(v.rows, 1, kOp)), LaunchOptions{plan.num_warps}, out_moved, in, v.rows,
             cols, v.row_stride, cols, plan.block_n, plan.single_pass, index64);
      break;
    }
  }
  return restore_dim(out_moved, x, dim);
}

at::Tensor softmax_backward_meta(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype) {
  check_floating(grad_output, kBackwardOp, "grad_output");
  check_floating(output, kBackwardOp, "output");
  dim = kit::wrap_dim(dim, output.dim(), kBackwardOp, "dim");
  std::vector<c10::SymInt> shape(output.sym_sizes().begin(), output.sym_sizes().end());
  at::Tensor out = at::empty_symint(moved_shape(shape, dim), output.options().dtype(input_dtype));
  return restore_dim(out, output, dim);
}

at::Tensor softmax_backward_triton(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                   at::ScalarType input_dtype) {
  check_floating(grad_output, kBackwardOp, "grad_output");
  check_floating(output, kBackwardOp, "output");
  kit::check_same_device(grad_output, "grad_output", output, "output", kBackwardOp);
  TORCH_CHECK(grad_output.sizes() == output.sizes(), kBackwardOp, ": grad_output has shape ", grad_output.sizes(),
              " but output has shape ", output.sizes());
  TORCH_CHECK(at::isFloatingType(input_dtype), kBackwardOp, ": input_dtype=", input_dtype,
              " is not a floating-point type");
  dim = kit::wrap_dim(dim, output.dim(), kBackwardOp, "dim");
  c10::SmallVector<int64_t, 6> shape(output.sizes().begin(), output.sizes().end());
  at::Tensor grad_in_moved = kit::empty_output(moved_shape(shape, dim), output.options().dtype(input_dtype));
  if (grad_in_moved.numel() == 0) {
    return restore_dim(grad_in_moved, output, dim);
  }
  const int64_t cols = output.dim() == 0 ? 1 : output.size(dim);
  const auto [g, gv] = kit::rows_of(dim_last(grad_output, dim), cols);
  const auto [y, yv] = kit::rows_of(dim_last(output, dim), cols);
  const bool index64 = kit::needs_index64(g) || kit::needs_index64(y) || kit::needs_index64(grad_in_moved);
  const Stream stream = current_stream(output.device());
  // A whole row in registers up to 32768 columns (fp64: 16384), one read of each input.
  const RowPlan plan = plan_rows(yv.rows, cols, grad_in_moved, grad_in_moved.scalar_type() == at::kDouble ? 16384 : 32768,
                                 /*backward=*/true);
  switch (plan.kind) {
    case RowPlan::Kind::ShortRows: {
      static auto& rows_kernel =
          TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_bwd_rows_kernel");
      rows_kernel(stream, Grid(kit::blocks_for(yv.rows, plan.block_m, kBackwardOp)), LaunchOptions{plan.num_warps},
                  grad_in_moved, g, y, yv.rows, cols, cols, gv.row_stride, yv.row_stride, plan.block_m, plan.block_n,
                  index64);
      break;
    }
    case RowPlan::Kind::SplitRows: {
      static auto& split_kernel =
          TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_bwd_split_kernel");
      LaunchOptions options{plan.num_warps};
      options.maxnreg = plan.maxnreg;
      split_kernel(stream, Grid(kit::blocks_for(yv.rows * plan.chunks, 1, kBackwardOp)), options, grad_in_moved,
                   g, y, kit::row_exchange_workspace(yv.rows, plan.chunks, y),
                   yv.rows, cols, plan.chunks, cols, gv.row_stride, yv.row_stride, plan.block_n,
                   kit::next_power_of_2(plan.chunks),
                   split_alignment(cols, {{grad_in_moved, cols}, {g, gv.row_stride}, {y, yv.row_stride}}), index64,
                   plan.reread);
      break;
    }
    case RowPlan::Kind::OneProgramPerRow: {
      static auto& kernel = TritonJitFunction::get_instance(kernel_path("softmax.py"), "softmax_bwd_kernel");
      kernel(stream, Grid(kit::blocks_for(yv.rows, 1, kBackwardOp)), LaunchOptions{plan.num_warps}, grad_in_moved,
             g, y, yv.rows, cols, cols, gv.row_stride, yv.row_stride, plan.block_n, plan.single_pass, index64);
      break;
    }
    case RowPlan::Kind::Persistent:
      TORCH_INTERNAL_ASSERT(false, kBackwardOp, ": no persistent plan for the backward");
  }
  return restore_dim(grad_in_moved, output, dim);
}

class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& self, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = tjit::softmax(self, dim, dtype);
    }
    ctx->save_for_backward({out});
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["input_dtype"] = self.scalar_type();
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor out = ctx->get_saved_variables()[0];
    const auto input_dtype = static_cast<at::ScalarType>(ctx->saved_data["input_dtype"].toInt());
    at::Tensor grad_in = tjit::softmax_backward(grads[0].to(out.scalar_type()), out,
                                                ctx->saved_data["dim"].toInt(), input_dtype);
    return {grad_in, at::Tensor(), at::Tensor()};
  }
};

using SoftmaxSignature = at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>);
using SoftmaxBackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType);

at::Tensor softmax_autograd(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
  kit::check_defined(self, kOp, "self");
  if (!kit::records_graph({&self})) {
    static const auto op = kit::typed_op<SoftmaxSignature>(kOp);
    return op.redispatch(ks & c10::after_autograd_keyset, self, dim, dtype);
  }
  return SoftmaxFunction::apply(self, dim, dtype);
}

}  // namespace
}  // namespace tjit::ops

TORCH_LIBRARY_FRAGMENT(tjit, m) {
  tjit::kit::define(m, "tjit", "softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
                    "Softmax of `self` along `dim` (`torch.ops.tjit.softmax`), as `torch.softmax`.\n\n"
                    "`self`: float32, float16, bfloat16 or float64; with `dtype` (a floating type) the input is\n"
                    "converted to it first and the result has it. Rows of any length. Differentiable with respect\n"
                    "to `self` (the backward is `softmax_backward`).");
  tjit::kit::define(m, "tjit", "softmax_backward(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
                    "Gradient of `softmax` with respect to its input, from its output and the output's gradient\n"
                    "(`torch.ops.tjit.softmax_backward`; aten's `_softmax_backward_data`).\n\n"
                    "`grad_output` and `output`: the same shape and device, float32, float16, bfloat16 or float64;\n"
                    "`input_dtype` (a floating type) is the dtype of softmax's input, which the result has.");
}
// CUDA runs compiled kernels; CPU runs the same kernels through Triton's interpreter.
TORCH_LIBRARY_IMPL(tjit, CUDA, m) {
  m.impl("softmax", &tjit::ops::softmax_triton);
  m.impl("softmax_backward", &tjit::ops::softmax_backward_triton);
}
TORCH_LIBRARY_IMPL(tjit, CPU, m) {
  m.impl("softmax", &tjit::ops::softmax_triton);
  m.impl("softmax_backward", &tjit::ops::softmax_backward_triton);
}
TORCH_LIBRARY_IMPL(tjit, Meta, m) {
  m.impl("softmax", &tjit::ops::softmax_meta);
  m.impl("softmax_backward", &tjit::ops::softmax_backward_meta);
}
TORCH_LIBRARY_IMPL(tjit, Autograd, m) { m.impl("softmax", &tjit::ops::softmax_autograd); }

namespace tjit {

at::Tensor softmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  static const auto op = kit::typed_op<ops::SoftmaxSignature>("tjit::softmax");
  return op.call(self, dim, dtype);
}

at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  static const auto op = kit::typed_op<ops::SoftmaxBackwardSignature>("tjit::softmax_backward");
  return op.call(grad_output, output, dim, input_dtype);
}

}  // namespace tjit
