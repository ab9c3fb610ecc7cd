#pragma once
// tjit::TensorDescriptor: a host-side tensor descriptor argument, what Python passes as
// triton.tools.tensor_descriptor.TensorDescriptor. The kernel reads and writes blocks of
// `block_shape` through it (`desc.load([m, n])`); on sm_90 and newer Triton lowers that to TMA,
// and the runtime encodes a CUtensorMap for every launch, as Python Triton's launcher does.
//
//   auto a_desc = tjit::TensorDescriptor::from_tensor(a, {128, 64});
//   kernel(stream, grid, options, a_desc, ...);
//
// Specialised as Triton specialises one: `tensordesc<fp16[128, 64]>` (element type and block
// shape; the shape, strides and padding are launch values).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <array>
#include <cstdint>

namespace tjit {

// What a read outside the tensor returns: zeros, or NaN (floating-point tensors only).
enum class Padding : uint8_t { Zero = 0, Nan = 1 };

class TensorDescriptor {
 public:
  static constexpr int kMaxRank = 5;

  // The descriptor of `base` with its own shape and strides (TensorDescriptor.from_tensor).
  static TensorDescriptor from_tensor(const at::Tensor& base, c10::IntArrayRef block_shape,
                                      Padding padding = Padding::Zero);
  // A descriptor over `base`'s memory with an explicit shape and strides (in elements). Checks
  // what Triton's TensorDescriptor checks, and throws c10::Error naming the rule broken: rank 1 to
  // 5, a 16-byte-aligned base, power-of-two block dims, strides but the last a multiple of 16
  // bytes, a last stride of 1, positive dims, NaN padding only for floating-point tensors.
  TensorDescriptor(const at::Tensor& base, c10::IntArrayRef shape, c10::IntArrayRef strides,
                   c10::IntArrayRef block_shape, Padding padding = Padding::Zero);

  const at::Tensor& base() const { return base_; }
  int rank() const { return rank_; }
  c10::IntArrayRef shape() const { return {shape_.data(), static_cast<size_t>(rank_)}; }
  c10::IntArrayRef strides() const { return {strides_.data(), static_cast<size_t>(rank_)}; }
  c10::IntArrayRef block_shape() const { return {block_shape_.data(), static_cast<size_t>(rank_)}; }
  Padding padding() const { return padding_; }
  // This descriptor with another block shape and padding (what a config pre_hook sets), checked as
  // the constructor checks them; the copy shares the base tensor.
  TensorDescriptor with_block_shape(c10::IntArrayRef block_shape, Padding padding) const;

 private:
  at::Tensor base_;
  int rank_ = 0;
  std::array<int64_t, kMaxRank> shape_{};
  std::array<int64_t, kMaxRank> strides_{};
  std::array<int64_t, kMaxRank> block_shape_{};
  Padding padding_ = Padding::Zero;
};

}  // namespace tjit
