#include <tjit/kit/vmap.h>

#include <ATen/functorch/BatchRulesHelper.h>  // ensure_has_bdim
#include <ATen/functorch/BatchedTensorImpl.h>
#include <ATen/functorch/DynamicLayer.h>
#include <ATen/functorch/PlumbingHelper.h>
#include <c10/util/Exception.h>

namespace tjit::kit {

VmapCall::VmapCall(std::initializer_list<const at::Tensor*> inputs)
    : below_batching_(c10::DispatchKey::FuncTorchBatched) {
  const std::optional<at::functorch::DynamicLayer> layer = at::functorch::maybeCurrentDynamicLayer();
  TORCH_CHECK(layer.has_value(), "tjit::kit::VmapCall: called outside torch.vmap (register the rule at the "
              "FuncTorchBatched key only)");
  level_ = layer->layerId();
  for (const at::Tensor* t : inputs) {
    if (t != nullptr && t->defined() && at::functorch::isBatchedAtLevel(*t, level_)) {
      batched_ = true;
    }
  }
  if (batched_) {
    batch_size_ = layer->batchSize();
  }
}

at::Tensor VmapCall::front(const at::Tensor& t) const {
  if (!t.defined()) {
    return t;
  }
  auto [value, dim] = at::functorch::unwrapTensorAtLevel(t, level_);
  if (dim.has_value()) {
    return value.movedim(*dim, 0);
  }
  return at::functorch::ensure_has_bdim(value, /*has_bdim=*/false, batch_size_);
}

at::Tensor VmapCall::batch(const at::Tensor& result) const { return at::functorch::makeBatched(result, 0, level_); }

}  // namespace tjit::kit
