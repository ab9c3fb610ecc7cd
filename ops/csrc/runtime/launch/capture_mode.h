#pragma once
// Driver work that a CUDA graph capture elsewhere in the process must not fail: loading a module,
// asking a function's attributes, tuning's events and syncs on a stream nobody captures. None of
// tjit's calls in such a scope touch a captured stream (tjit/relaxed_capture.h says why it is safe).

#include <tjit/relaxed_capture.h>

namespace tjit::detail {

using RelaxedCaptureScope = tjit::RelaxedCaptureMode;

}  // namespace tjit::detail
