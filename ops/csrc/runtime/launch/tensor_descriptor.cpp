// tjit::TensorDescriptor: the checks triton.tools.tensor_descriptor.TensorDescriptor makes, with
// errors that say which rule a descriptor breaks.

#include <tjit/dtype.h>
#include <tjit/tensor_descriptor.h>

#include <c10/util/Exception.h>

#include <algorithm>

namespace tjit {
namespace {

// Triton's TRITON_MAX_TENSOR_NUMEL: the most elements one block may hold.
constexpr int64_t kMaxBlockElements = int64_t{1} << 20;

}  // namespace

TensorDescriptor TensorDescriptor::from_tensor(const at::Tensor& base, c10::IntArrayRef block_shape,
                                               Padding padding) {
  TORCH_CHECK(base.defined(), "tjit: TensorDescriptor::from_tensor got an undefined tensor");
  return TensorDescriptor(base, base.sizes(), base.strides(), block_shape, padding);
}

namespace {

void check_block_shape(c10::IntArrayRef block_shape, int rank) {
  int64_t block_elements = 1;
  for (int i = 0; i < rank; ++i) {
    TORCH_CHECK(block_shape[i] > 0 && (block_shape[i] & (block_shape[i] - 1)) == 0,
                "tjit: TensorDescriptor: block dimension ", i, " must be a power of two, got block shape ", block_shape);
    block_elements *= block_shape[i];
  }
  TORCH_CHECK(block_elements <= kMaxBlockElements, "tjit: TensorDescriptor: block shape ", block_shape, " holds ",
              block_elements, " elements; Triton allows at most ", kMaxBlockElements);
}

}  // namespace

TensorDescriptor TensorDescriptor::with_block_shape(c10::IntArrayRef block_shape, Padding padding) const {
  TORCH_CHECK(static_cast<int>(block_shape.size()) == rank_, "tjit: TensorDescriptor: block shape ", block_shape,
              " for a descriptor of rank ", rank_);
  check_block_shape(block_shape, rank_);
  TORCH_CHECK(padding == Padding::Zero || at::isFloatingType(base_.scalar_type()),
              "tjit: TensorDescriptor: NaN padding needs a floating-point tensor, got ", base_.scalar_type());
  TensorDescriptor copy(*this);
  std::copy(block_shape.begin(), block_shape.end(), copy.block_shape_.begin());
  copy.padding_ = padding;
  return copy;
}

TensorDescriptor::TensorDescriptor(const at::Tensor& base, c10::IntArrayRef shape, c10::IntArrayRef strides,
                                   c10::IntArrayRef block_shape, Padding padding)
    : base_(base), rank_(static_cast<int>(shape.size())), padding_(padding) {
  TORCH_CHECK(base.defined(), "tjit: TensorDescriptor got an undefined tensor");
  TORCH_CHECK(rank_ >= 1 && rank_ <= kMaxRank, "tjit: TensorDescriptor: rank must be 1 to ", kMaxRank, ", got shape ",
              shape);
  TORCH_CHECK(strides.size() == shape.size() && block_shape.size() == shape.size(),
              "tjit: TensorDescriptor: shape ", shape, ", strides ", strides, " and block shape ", block_shape,
              " must have the same rank");
  TORCH_CHECK(triton_element_type(base.scalar_type()) != nullptr, "tjit: TensorDescriptor: Triton kernels cannot take ",
              base.scalar_type(), " tensors");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(base.const_data_ptr()) % 16 == 0,
              "tjit: TensorDescriptor: the base address must be 16-byte aligned (TMA reads from it)");
  const int64_t element_bytes = static_cast<int64_t>(base.element_size());
  int64_t block_elements = 1;
  for (int i = 0; i < rank_; ++i) {
    TORCH_CHECK(shape[i] > 0, "tjit: TensorDescriptor: every dimension must be positive, got shape ", shape);
    TORCH_CHECK(block_shape[i] > 0 && (block_shape[i] & (block_shape[i] - 1)) == 0,
                "tjit: TensorDescriptor: block dimension ", i, " must be a power of two, got block shape ", block_shape);
    TORCH_CHECK(i + 1 == rank_ || (strides[i] * element_bytes) % 16 == 0, "tjit: TensorDescriptor: stride ", i,
                " is ", strides[i] * element_bytes, " bytes; every stride but the last must be a multiple of 16 bytes");
    block_elements *= block_shape[i];
    shape_[i] = shape[i];
    strides_[i] = strides[i];
    block_shape_[i] = block_shape[i];
  }
  TORCH_CHECK(block_elements <= kMaxBlockElements, "tjit: TensorDescriptor: block shape ", block_shape, " holds ",
              block_elements, " elements; Triton allows at most ", kMaxBlockElements);
  TORCH_CHECK(strides[rank_ - 1] == 1, "tjit: TensorDescriptor: the last dimension must be contiguous (stride 1), "
              "got strides ", strides);
  TORCH_CHECK(padding == Padding::Zero || at::isFloatingType(base.scalar_type()),
              "tjit: TensorDescriptor: NaN padding needs a floating-point tensor, got ", base.scalar_type());
}

}  // namespace tjit
