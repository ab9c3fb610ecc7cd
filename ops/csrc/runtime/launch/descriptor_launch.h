#pragma once
// The launch parameters of a call with host tensor descriptors: each descriptor expanded the way
// its compiled kernel takes it (CompiledKernel::tensor_descriptors), a CUtensorMap encoded for it
// when Triton lowered it to TMA, as Python Triton's launcher does on every call. Lives on the
// caller's stack; built only for calls that pass descriptors.

#include <tjit/argument_pack.h>
#include <tjit/compiled_kernel.h>

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tjit::detail {

class DescriptorLaunchParams {
 public:
  // Room for every parameter of the largest call: the pack's own, and each descriptor's expansion
  // (at most 1 + 4 * rank + flags) plus the two scratch pointers.
  static constexpr size_t kMaxParams = 512;

  DescriptorLaunchParams() = default;  // left uninitialised: fill() writes what launch reads
  DescriptorLaunchParams(const DescriptorLaunchParams&) = delete;
  DescriptorLaunchParams& operator=(const DescriptorLaunchParams&) = delete;

  // Expands `pack`'s descriptors for `kernel`; throws c10::Error naming `what` (the kernel) and the
  // descriptor when the driver cannot encode one. Returns the number of kernel arguments; room
  // for the two scratch pointers follows them.
  size_t fill(const ArgumentPackBase& pack, const CompiledKernel& kernel, const std::string& what);
  void** params() { return params_.data(); }

 private:
  void push(const void* bytes, size_t size);

  std::array<void*, kMaxParams> params_;
  std::array<uint64_t, kMaxParams> values_;
  alignas(64) std::array<CUtensorMap, kMaxTensorDescriptors> maps_;
  size_t num_params_ = 0;
  size_t num_values_ = 0;
};

}  // namespace tjit::detail
