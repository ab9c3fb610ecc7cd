#include "python/python_gil.h"

#include <dlfcn.h>

#include <atomic>

namespace tjit::detail {
namespace {

struct PythonGilApi {
  int (*is_initialized)() = nullptr;
  int (*gil_held)() = nullptr;
  void* (*save_thread)() = nullptr;
  void (*restore_thread)(void*) = nullptr;
};

// Resolved from the process on each use until found: a C++ program gets libpython only when it
// first compiles. Only cold paths (compiles, first loads) construct a GilRelease.
const PythonGilApi* python_gil_api() {
  static std::atomic<const PythonGilApi*> found{nullptr};
  if (const PythonGilApi* api = found.load(std::memory_order_acquire)) {
    return api;
  }
  PythonGilApi api;
  api.is_initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  api.gil_held = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_Check"));
  api.save_thread = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyEval_SaveThread"));
  api.restore_thread = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "PyEval_RestoreThread"));
  if (api.is_initialized == nullptr || api.gil_held == nullptr || api.save_thread == nullptr ||
      api.restore_thread == nullptr) {
    return nullptr;
  }
  static const PythonGilApi resolved = api;
  found.store(&resolved, std::memory_order_release);
  return &resolved;
}

}  // namespace

GilRelease::GilRelease() {
  const PythonGilApi* api = python_gil_api();
  if (api != nullptr && api->is_initialized() != 0 && api->gil_held() != 0) {
    thread_state_ = api->save_thread();
  }
}

GilRelease::~GilRelease() {
  if (thread_state_ != nullptr) {
    python_gil_api()->restore_thread(thread_state_);
  }
}

}  // namespace tjit::detail
