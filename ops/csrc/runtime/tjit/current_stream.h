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
// key. Needs the CUDA driver, and a context current on the calling thread (the legacy default
// stream is resolved through it): prefer the overload below.
bool stream_is_capturing(Stream stream);

// The same for a stream of `device` (false for a device that is not CUDA), from any thread: where
// the thread has no current context (autograd's backward threads, a new std::thread), the device's
// primary context is made current for the query.
bool stream_is_capturing(Stream stream, const c10::Device& device);

}  // namespace tjit
