#pragma once
// The norm family's team backward in lag form (ops/kernels_py/norm_team.py): one kernel serves
// layer_norm, rms_norm and add_rms_norm; its arguments are listed there (a mean of None makes it
// rms_norm's).

#include <tjit/triton_jit_function.h>

namespace tjit::ops::norm {

inline constexpr const char* kTeamLagKernel = "norm_bwd_team_lag_kernel";

// The kernel, loaded at the first call.
TritonJitFunction& team_lag_kernel();

}  // namespace tjit::ops::norm
