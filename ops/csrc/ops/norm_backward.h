#pragma once
// The norm family's backward: the fused pass, the two steps and the sum of partial rows
// (ops/kernels_py/norm_backward.py). One set of kernels serves layer_norm, rms_norm and add_rms_norm;
// their arguments are listed there (a mean of None makes them rms_norm's, a ds add_rms_norm's).

#include "norm_backward_forms.h"

#include <tjit/triton_jit_function.h>

#include <ATen/core/Tensor.h>

#include <cstdint>

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

// Where a backward's programs (or teams) put their dw/db sums: [groups, cols] buffers in the
// accumulator dtype that finish() adds up, or dw/db themselves when one group sums every row (its
// kernel casts to their dtype; nothing to add). An undefined dw or db has no buffer.
struct ColumnSums {
  ColumnSums(const at::Tensor& dw, const at::Tensor& db, int64_t groups, int64_t cols,
             const at::TensorOptions& partial_options);
  // dw/db = the sums of the partial rows, one sums_finalize_kernel launch (none for one group).
  void finish(Stream stream, const FinalizePlan& plan, const at::Tensor& dw, const at::Tensor& db, int64_t cols,
              bool index64) const;

  at::Tensor dw_partial;
  at::Tensor db_partial;
  int64_t groups;
};

}  // namespace tjit::ops::norm
