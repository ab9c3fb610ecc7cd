#pragma once
// Plain value types of the runtime's public API: what a launch needs besides the kernel
// arguments. No CUDA header is needed: streams travel as opaque handles.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace tjit {

// A CUstream (or cudaStream_t, the same handle), or nullptr for the legacy default stream.
using Stream = void*;

// Number of programs along each axis, as Triton's grid tuple. A grid with a zero extent
// launches nothing.
struct Grid {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;
  constexpr Grid() = default;
  constexpr Grid(uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) : x(gx), y(gy), z(gz) {}
  constexpr uint64_t size() const { return uint64_t(x) * y * z; }
};

// The launch options Triton takes as keyword arguments (`kernel[grid](..., num_warps=8)`),
// with Triton's CUDA defaults. Each one is part of the compiled-kernel cache key.
struct LaunchOptions {
  int num_warps = 4;
  int num_stages = 3;
  int num_ctas = 1;
  bool enable_fp_fusion = true;
  bool launch_cooperative_grid = false;
  bool launch_pdl = false;
  int maxnreg = 0;  // registers per thread the compiler may use (ptx .maxnreg); 0: no limit
};

// A raw device pointer with the element type Triton should see (`*fp32`, ...). Use it for
// memory that is not an at::Tensor.
struct DevicePointer {
  const void* ptr = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// What to compile for: Triton's GPUTarget. `arch` is the compute capability as major*10 +
// minor (90 for compute capability 9.0).
struct CompileTarget {
  std::string backend = "cuda";
  int arch = 90;
  int warp_size = 32;

  // Parses "cuda:90" or "cuda:80:32"; throws c10::Error on anything else.
  static CompileTarget parse(const std::string& text);
  std::string to_string() const;
};

}  // namespace tjit
