#pragma once
// Getting kernels ready ahead of a CUDA graph capture without running them.

namespace tjit {

// While one is alive on this thread, TritonJitFunction launches compile (or read from a bundle or
// the kernel store), load and tune their kernels, and launch nothing. Calling an operator inside
// one prepares everything its call needs for these arguments, so that a capture afterwards records
// the tuned kernels and does no first-call work; the operator's outputs are left unwritten.
// Autotuning still times its configs (those launches run). Nests; `prepare_only = false` turns it
// off for a scope.
class PrepareOnlyScope {
 public:
  explicit PrepareOnlyScope(bool prepare_only = true);
  ~PrepareOnlyScope();
  PrepareOnlyScope(const PrepareOnlyScope&) = delete;
  PrepareOnlyScope& operator=(const PrepareOnlyScope&) = delete;

 private:
  bool previous_;
};

// Whether a PrepareOnlyScope is on for this thread.
bool preparing_only();

}  // namespace tjit
