#pragma once
// torch.func.vmap batching rules for operators whose kernels can take the batch as one more leading
// dimension (elementwise operators; row operators over the last dimensions). Without a rule torch
// runs the operator once per sample, with a performance warning; with one, the kernel runs once.
// Register the rule at the FuncTorchBatched key (tjit's own operators register theirs in Python,
// ops/_vmap.py; this is for libraries that have no Python of their own):
//
//   at::Tensor scaled_silu_batched(const at::Tensor& x, double scale) {
//     tjit::kit::VmapCall vmap({&x});
//     if (!vmap.batched()) return scaled_silu(x, scale);  // batched only at an outer level
//     return vmap.batch(scaled_silu(vmap.front(x), scale));
//   }
//   TORCH_LIBRARY_IMPL(myops, FuncTorchBatched, m) { m.impl("scaled_silu", &scaled_silu_batched); }
//
// Nested vmap, and vmap inside grad / jacrev / hessian, work as for torch's own rules: each level
// calls the rule once.

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstdint>
#include <initializer_list>

namespace tjit::kit {

// One call of a batching rule: from its construction to its end the rule's own calls go below the
// batching key (as torch's rules do); it reads the innermost vmap level and its batch size.
class VmapCall {
 public:
  // `inputs`: the call's tensors (nullptr and undefined ones are skipped).
  explicit VmapCall(std::initializer_list<const at::Tensor*> inputs);

  // Whether any input is batched at the innermost level; if not, call the operator as is.
  bool batched() const { return batched_; }
  // `t` as a tensor of this level with the batch as dimension 0: a batched input's batch dimension
  // moved to the front, an unbatched one expanded over the batch (a view: no copy).
  at::Tensor front(const at::Tensor& t) const;
  // A result computed from front()'s tensors (the batch at dimension 0), as this level's batched
  // tensor: what the rule returns.
  at::Tensor batch(const at::Tensor& result) const;

 private:
  c10::impl::ExcludeDispatchKeyGuard below_batching_;
  int64_t level_ = 0;
  c10::SymInt batch_size_ = 1;
  bool batched_ = false;
};

}  // namespace tjit::kit
