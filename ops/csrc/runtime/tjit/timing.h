#pragma once
// GPU time of a caller's own launches, measured as the runtime times an autotuned kernel's configs
// (triton.testing.do_bench): for callers that choose among launch plans by measurement (an
// operator's plan candidates, tjit/kit/plan_choice.h).

#include <tjit/launch_types.h>

#include <c10/core/Device.h>

#include <functional>

namespace tjit {

// The median time in ms of `run`, whose launches go to `stream` on `device`: a few runs to
// estimate, then warmup_ms worth of warm-up runs and rep_ms worth of timed runs, each timed with
// CUDA events after the L2 cache is cleared. `run` must be repeatable: it writes only what it owns.
// On the CPU (Triton's interpreter): the median wall time of 3 runs after one. Must not be called
// while `stream` is being captured into a CUDA graph; another thread's capture (in any mode) is
// left intact, as the autotuner leaves it.
double time_launches(Stream stream, const c10::Device& device, const std::function<void()>& run, double warmup_ms,
                     double rep_ms);

}  // namespace tjit
