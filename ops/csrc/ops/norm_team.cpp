#include "norm_team.h"

#include "kernel_files.h"

namespace tjit::ops::norm {

TritonJitFunction& team_lag_kernel() {
  static auto& kernel = TritonJitFunction::get_instance(kernel_path("norm_team.py"), kTeamLagKernel);
  return kernel;
}

}  // namespace tjit::ops::norm
