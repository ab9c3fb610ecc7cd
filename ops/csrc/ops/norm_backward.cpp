#include "norm_backward.h"

#include "kernel_files.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/outputs.h>

#include <string>

namespace tjit::ops::norm {
namespace {

const std::string& backward_file() {
  static const std::string file = kernel_path("norm_backward.py");
  return file;
}

}  // namespace

TritonJitFunction& fused_kernel() {
  static auto& kernel = TritonJitFunction::get_instance(backward_file(), kFusedKernel);
  return kernel;
}

TritonJitFunction& dx_kernel() {
  static auto& kernel = TritonJitFunction::get_instance(backward_file(), kDxKernel);
  return kernel;
}

TritonJitFunction& column_sums_kernel() {
  static auto& kernel = TritonJitFunction::get_instance(backward_file(), kColumnSumsKernel);
  return kernel;
}

TritonJitFunction& sums_finalize_kernel() {
  static auto& kernel = TritonJitFunction::get_instance(backward_file(), kSumsFinalizeKernel);
  return kernel;
}

ColumnSums::ColumnSums(const at::Tensor& dw, const at::Tensor& db, int64_t groups, int64_t cols,
                       const at::TensorOptions& partial_options)
    : dw_partial(dw.defined() && groups > 1 ? kit::empty_output({groups, cols}, partial_options) : dw),
      db_partial(db.defined() && groups > 1 ? kit::empty_output({groups, cols}, partial_options) : db),
      groups(groups) {}

void ColumnSums::finish(Stream stream, const FinalizePlan& plan, const at::Tensor& dw, const at::Tensor& db,
                        int64_t cols, bool index64) const {
  if ((dw.defined() || db.defined()) && groups > 1) {
    sums_finalize_kernel()(stream, Grid(plan.programs), LaunchOptions{4}, dw, db, dw_partial, db_partial, groups, cols,
                           dw.defined(), db.defined(), plan.block_g, plan.block_n, index64);
  }
}

}  // namespace tjit::ops::norm
