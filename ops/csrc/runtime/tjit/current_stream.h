#pragma once
// torch's current stream on a device, as the opaque handle a launch takes (tjit::Stream).

#include <tjit/launch_types.h>

#include <c10/core/Device.h>

namespace tjit {

// torch's current stream on `device`, which a launch must use to be ordered with torch's work
// there: its CUstream for a CUDA device, nullptr for the CPU (the interpreter takes none). Needs no
// CUDA header, and works with torch releases older than c10::Stream::native_handle() (2.10).
Stream current_stream(const c10::Device& device);

// Whether `stream` (a CUDA stream, nullptr for the legacy default stream) is being captured into a
// CUDA graph: there a launch is recorded, not run, and TritonJitFunction::run() cannot tune a new
// key. Needs the CUDA driver.
bool stream_is_capturing(Stream stream);

}  // namespace tjit
