#pragma once
// The calling thread's CUDA graph capture mode, relaxed for a scope.
//
// While any thread captures in the global mode (torch.cuda.graph's default), CUDA refuses
// "potentially unsafe" calls on every other thread: cudaMalloc in torch's caching allocator, module
// loads, the syncs and events of autotuning. An operator call on a stream that nobody captures
// makes such calls safely; in this scope the thread makes them as torch's allocator does its own
// cudaMalloc during a capture (relaxed mode). Work on a stream that is being captured is unchanged:
// tjit defers tuning there, and CUDA still refuses what would break that capture.

namespace tjit {

class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();  // needs the CUDA driver: construct it only for work on a CUDA device
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int previous_mode_;  // a CUstreamCaptureMode
};

}  // namespace tjit
