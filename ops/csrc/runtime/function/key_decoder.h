#pragma once
// Reading a completed pack's key back, slot by slot: the one decoder of the key's words
// (tjit/argument_pack.h says how add_* writes them). The specialisation handed to a compile
// (specialization.cpp) and the arguments of an interpreted run (interpreted_launch.cpp) are both
// built from it, so the two cannot disagree about what a slot holds. Not on the cached launch's
// path: it allocates.

#include <tjit/argument_pack.h>
#include <tjit/compiled_kernel.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace tjit::detail {

struct KeySlot {
  size_t index = 0;       // the slot in the pack: pack.value(index), pack.tensor(index), ...
  std::vector<int> path;  // parameter index, then the element index in each enclosing tuple
  ArgKind kind = ArgKind::None;
  // Pointer, TensorDescriptor: the element c10::ScalarType; Int: the IntType; Tuple: its size
  // (its elements are the slots that follow, depth first).
  uint64_t sub = 0;
  bool divisible_by_16 = false;
  std::vector<int64_t> block_shape;  // TensorDescriptor
  // The value of a slot Triton passes as a constant: None, an integer specialised to 1, and
  // every tl.constexpr kind. Empty for the others.
  std::optional<ConstexprValue> constant;
};

// Every slot of a completed pack, in order.
std::vector<KeySlot> decode_key(const ArgumentPackBase& pack);

}  // namespace tjit::detail
