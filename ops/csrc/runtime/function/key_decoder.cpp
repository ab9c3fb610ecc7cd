#include "function/key_decoder.h"

#include <tjit/dtype.h>

#include <cstring>

namespace tjit::detail {

std::vector<KeySlot> decode_key(const ArgumentPackBase& pack) {
  std::vector<KeySlot> slots(pack.num_slots());
  const uint64_t* key = pack.key();
  size_t param = 0;
  std::vector<int> path;             // of the next slot, with its own element index last
  std::vector<uint64_t> remaining;   // elements still to come in each open tuple
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint64_t w0 = key[kKeyHeaderWords + kKeyWordsPerArg * i];
    const uint64_t w1 = key[kKeyHeaderWords + kKeyWordsPerArg * i + 1];
    KeySlot& s = slots[i];
    s.index = i;
    s.kind = static_cast<ArgKind>(w0 & 0xff);
    s.sub = (w0 >> 8) & 0xff;
    s.divisible_by_16 = ((w0 >> 16) & 1) != 0;
    switch (s.kind) {
      case ArgKind::TensorDescriptor: {
        const int rank = static_cast<int>((w0 >> 24) & 0xff);
        for (int d = 0; d < rank; ++d) {
          s.block_shape.push_back(int64_t{1} << ((w1 >> (5 * d)) & 31));
        }
        break;
      }
      case ArgKind::None: s.constant = std::monostate{}; break;
      case ArgKind::SpecializedOne: s.constant = int64_t{1}; break;
      case ArgKind::ConstexprInt: s.constant = static_cast<int64_t>(w1); break;
      case ArgKind::ConstexprFloat: {
        double d = 0;
        std::memcpy(&d, &w1, sizeof(d));
        s.constant = d;
        break;
      }
      case ArgKind::ConstexprBool: s.constant = w1 != 0; break;
      case ArgKind::ConstexprString: s.constant = interned_constexpr_string(w1); break;
      case ArgKind::ConstexprDtype: s.constant = Dtype::from_index(static_cast<uint8_t>(w1)); break;
      case ArgKind::Pointer:
      case ArgKind::Int:
      case ArgKind::Bool:
      case ArgKind::Float:
      case ArgKind::Tuple: break;
    }
    // The path: the parameter, then the position in each open tuple.
    s.path.assign(1, static_cast<int>(param));
    s.path.insert(s.path.end(), path.begin(), path.end());
    // After an element (a leaf, or a tuple whose elements are done): the next position in its
    // tuple, or the next parameter.
    auto element_done = [&] {
      while (!remaining.empty()) {
        ++path.back();
        if (--remaining.back() > 0) {
          return;
        }
        remaining.pop_back();  // that tuple is complete: an element of its parent
        path.pop_back();
      }
      ++param;
    };
    if (s.kind == ArgKind::Tuple) {
      if (s.sub > 0) {
        remaining.push_back(s.sub);
        path.push_back(0);
      } else {
        element_done();
      }
      continue;
    }
    element_done();
  }
  return slots;
}

}  // namespace tjit::detail
