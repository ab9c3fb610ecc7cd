#include "norm_backward.h"

#include "kernel_files.h"

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

}  // namespace tjit::ops::norm
