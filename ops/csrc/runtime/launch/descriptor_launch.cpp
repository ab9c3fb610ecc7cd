#include "launch/descriptor_launch.h"

#include "launch/cuda_driver.h"

#include <tjit/tensor_descriptor.h>

#include <c10/util/Exception.h>

#include <cstring>
#include <sstream>

namespace tjit::detail {
namespace {

// The CUtensorMap for one descriptor, encoded as Triton's fill_tma_descriptor does: dimensions
// innermost first, strides in bytes without the innermost, the box from the compiled kernel's
// metadata, NaN padding as CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA.
void encode(const TensorDescriptor& d, const DescriptorLaunch& launch, CUtensorMap& map, const std::string& what,
            size_t index) {
  const auto& cu = cuda_driver();
  TORCH_CHECK(cu.cuTensorMapEncodeTiled != nullptr, "tjit: ", what, ": tensor descriptor ", index,
              " needs cuTensorMapEncodeTiled, which this NVIDIA driver lacks (a CUDA 12 driver or newer has it)");
  const int rank = d.rank();
  TORCH_CHECK(static_cast<int>(launch.block_size.size()) == rank, "tjit: ", what, ": tensor descriptor ", index,
              " has rank ", rank, " but the kernel was compiled for a ", launch.block_size.size(),
              "-d descriptor");
  cuuint64_t dims[TensorDescriptor::kMaxRank];
  cuuint64_t strides[TensorDescriptor::kMaxRank];
  cuuint32_t box[TensorDescriptor::kMaxRank];
  cuuint32_t element_strides[TensorDescriptor::kMaxRank] = {1, 1, 1, 1, 1};
  for (int i = 0; i < rank; ++i) {
    dims[rank - 1 - i] = static_cast<cuuint64_t>(d.shape()[i]);
    box[rank - 1 - i] = static_cast<cuuint32_t>(launch.block_size[i]);
  }
  if (launch.fp4_padded) {
    dims[0] *= 2;
  }
  for (int i = 0; i + 1 < rank; ++i) {
    strides[rank - 2 - i] = static_cast<cuuint64_t>(d.strides()[i]) * launch.elem_size;
  }
  const CUresult result = cu.cuTensorMapEncodeTiled(
      &map, static_cast<CUtensorMapDataType>(launch.elem_type), static_cast<cuuint32_t>(rank),
      const_cast<void*>(d.base().const_data_ptr()), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, static_cast<CUtensorMapSwizzle>(launch.swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      d.padding() == Padding::Nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    std::ostringstream context;
    context << what << ", tensor descriptor " << index << " (shape " << d.shape() << ", strides " << d.strides()
            << ", block " << d.block_shape() << ", " << d.base().scalar_type() << ")";
    check_cuda(result, "cuTensorMapEncodeTiled", context.str());
  }
}

}  // namespace

void DescriptorLaunchParams::push(const void* bytes, size_t size) {
  uint64_t* slot = &values_[num_values_++];
  *slot = 0;
  std::memcpy(slot, bytes, size);
  params_[num_params_++] = slot;
}

size_t DescriptorLaunchParams::fill(const ArgumentPackBase& pack, const CompiledKernel& kernel,
                                    const std::string& what) {
  TORCH_CHECK(kernel.tensor_descriptors.size() == pack.num_descriptors(), "tjit: ", what, " was compiled for ",
              kernel.tensor_descriptors.size(), " tensor descriptors but the call passes ", pack.num_descriptors(),
              "; its binary's metadata is stale: clear the kernel store (python -m tjit cache clear)");
  num_params_ = 0;
  num_values_ = 0;
  void* const* own = pack.launch_params();
  size_t next_own = 0;
  for (size_t i = 0; i < pack.num_descriptors(); ++i) {
    const PackedDescriptor& packed = pack.descriptor(i);
    for (; next_own < packed.launch_index; ++next_own) {
      params_[num_params_++] = own[next_own];
    }
    const TensorDescriptor& d = *packed.descriptor;
    const DescriptorLaunch& launch = kernel.tensor_descriptors[i];
    const int rank = d.rank();
    TORCH_CHECK(num_params_ + 4 * rank + launch.flags + 3 + (pack.num_launch_args() - next_own) <= kMaxParams,
                "tjit: ", what, ": too many launch parameters");
    if (launch.tma) {
      encode(d, launch, maps_[i], what, i);
      params_[num_params_++] = &maps_[i];
    } else {
      const void* base = d.base().const_data_ptr();
      push(&base, sizeof(base));
      for (const int64_t v : d.shape()) {
        push(&v, sizeof(v));
      }
      for (const int64_t v : d.strides()) {
        push(&v, sizeof(v));
      }
      for (int f = 0; f < launch.flags; ++f) {
        const uint8_t flag = f == 0 && d.padding() == Padding::Nan;  // then round_f32_to_tf32: false
        push(&flag, sizeof(flag));
      }
    }
    for (const int64_t v : d.shape()) {
      const int32_t narrow = static_cast<int32_t>(v);
      push(&narrow, sizeof(narrow));
    }
    for (const int64_t v : d.strides()) {
      push(&v, sizeof(v));
    }
  }
  for (; next_own < pack.num_launch_args(); ++next_own) {
    params_[num_params_++] = own[next_own];
  }
  return num_params_;
}

}  // namespace tjit::detail
