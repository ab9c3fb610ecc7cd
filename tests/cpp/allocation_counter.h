#pragma once
// Counts operator new calls while armed, so a test can show a launch path allocates nothing.
// It replaces the global operator new and delete: include it from exactly one source file of a
// test program.

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace tjit::testing {
inline std::atomic<bool> count_allocations{false};
inline std::atomic<size_t> allocations{0};
}  // namespace tjit::testing

void* operator new(std::size_t size) {
  if (tjit::testing::count_allocations.load(std::memory_order_relaxed)) {
    tjit::testing::allocations.fetch_add(1, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
