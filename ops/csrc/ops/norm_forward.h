#pragma once
// The norm family's forward kernel (ops/kernels_py/norm_forward.py: norm_fwd_kernel): rms_norm's and
// add_rms_norm's every form, and layer_norm's short rows (a mean subtracted, a bias added).

#include <tjit/kit/plans.h>
#include <tjit/triton_jit_function.h>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tjit::ops::norm {

inline constexpr const char* kForwardKernel = "norm_fwd_kernel";

// Loaded at its first call.
TritonJitFunction& forward_kernel();

// The constexprs of one norm_fwd_kernel launch.
struct ForwardSwitches {
  bool has_residual = false;
  bool has_weight = true;
  bool has_bias = false;
  bool subtract_mean = false;  // layer_norm: one pass only
  int64_t block_m = 1;
  int64_t block_n = 1;
  bool single_pass = true;
  bool index64 = false;
  int64_t block_tail = 0;
  bool keep_row = false;
  int64_t row_steps = 0;
};

// The tensors and sizes of one launch. An undefined tensor reaches the kernel as None, which compiles
// its loads and stores out. eps goes as the double it is: the kernel annotates it tl.float64.
struct ForwardArguments {
  at::Tensor y, sum, mean, rstd, x, residual, weight, bias;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t y_row_stride = 0;
  int64_t sum_row_stride = 0;
  int64_t x_row_stride = 0;
  int64_t residual_row_stride = 0;
  double eps = 0.0;
};

// The one place the kernel's arguments are listed in order: the launch and its description
// (describe_forward) take the same switches, so what tjit.plans shows is what runs.
void launch_forward(Stream stream, uint32_t programs, const LaunchOptions& options, const ForwardArguments& a,
                    const ForwardSwitches& s);

// The launch in a plan's description (tjit.plans), every constexpr in the kernel's order.
void describe_forward(kit::PlanWriter& w, uint32_t programs, int num_warps, int maxnreg, const ForwardSwitches& s);

}  // namespace tjit::ops::norm
