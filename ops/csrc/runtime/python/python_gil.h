#pragma once
// Releasing the GIL around waits, without loading Python: a thread that holds the GIL must not
// block on a lock that a compiling thread (which needs the GIL) holds.

namespace tjit::detail {

// Releases the calling thread's GIL for the object's lifetime if the thread holds it. Uses the
// Python symbols the process already has (a Python process, or one that loaded libpython to
// compile); in any other process it does nothing.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  void* thread_state_ = nullptr;
};

}  // namespace tjit::detail
