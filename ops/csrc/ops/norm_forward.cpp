#include "norm_forward.h"

#include "kernel_files.h"

#include <string>

namespace tjit::ops::norm {

TritonJitFunction& forward_kernel() {
  static auto& kernel = TritonJitFunction::get_instance(kernel_path("norm_forward.py"), kForwardKernel);
  return kernel;
}

void launch_forward(Stream stream, uint32_t programs, const LaunchOptions& options, const ForwardArguments& a,
                    const ForwardSwitches& s) {
  forward_kernel()(stream, Grid(programs), options, a.y, a.sum, a.mean, a.rstd, a.x, a.residual, a.weight, a.bias,
                   a.rows, a.cols, a.y_row_stride, a.sum_row_stride, a.x_row_stride, a.residual_row_stride, a.eps,
                   s.has_residual, s.has_weight, s.has_bias, s.subtract_mean, s.block_m, s.block_n, s.single_pass,
                   s.index64, s.block_tail, s.keep_row, s.row_steps);
}

void describe_forward(kit::PlanWriter& w, uint32_t programs, int num_warps, int maxnreg, const ForwardSwitches& s) {
  w.launch(kForwardKernel, {programs}, num_warps, maxnreg)
      .constexpr_flag("HAS_RESIDUAL", s.has_residual)
      .constexpr_flag("HAS_WEIGHT", s.has_weight)
      .constexpr_flag("HAS_BIAS", s.has_bias)
      .constexpr_flag("SUBTRACT_MEAN", s.subtract_mean)
      .constexpr_value("BLOCK_M", s.block_m)
      .constexpr_value("BLOCK_N", s.block_n)
      .constexpr_flag("SINGLE_PASS", s.single_pass)
      .constexpr_flag("INDEX_64", s.index64)
      .constexpr_value("BLOCK_TAIL", s.block_tail)
      .constexpr_flag("KEEP_ROW", s.keep_row)
      .constexpr_value("ROW_STEPS", s.row_steps);
}

}  // namespace tjit::ops::norm
