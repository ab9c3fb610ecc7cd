#pragma once
// The norm family's backward: the fused pass, the two steps and the sum of partial rows
// (ops/kernels_py/norm_backward.py). One set of kernels serves layer_norm, rms_norm and add_rms_norm;
// their arguments are listed there (a mean of None makes them rms_norm's, a ds add_rms_norm's).

#include <tjit/triton_jit_function.h>

namespace tjit::ops::norm {

inline constexpr const char* kFusedKernel = "norm_bwd_fused_kernel";
inline constexpr const char* kDxKernel = "norm_bwd_dx_kernel";
inline constexpr const char* kColumnSumsKernel = "norm_bwd_column_sums_kernel";
inline constexpr const char* kSumsFinalizeKernel = "norm_bwd_sums_finalize_kernel";

// The kernels, each loaded at its first call.
TritonJitFunction& fused_kernel();
TritonJitFunction& dx_kernel();
TritonJitFunction& column_sums_kernel();
TritonJitFunction& sums_finalize_kernel();

}  // namespace tjit::ops::norm
