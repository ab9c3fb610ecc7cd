// CPU tensors: the launch runs the kernel through Triton's interpreter, with the arguments read
// back from the pack's key (key_decoder.h) as the Python values the kernel receives.

#include "function/function_impl.h"
#include "function/key_decoder.h"

#include "binaries/manifest_recorder.h"
#include "python/python_bridge.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <variant>
#include <vector>

namespace tjit {

void TritonJitFunction::Impl::launch_interpreted(Grid grid, const LaunchOptions& options,
                                                 const detail::ArgumentPackBase& pack) {
  if (grid.size() == 0) {
    return;
  }
  std::vector<detail::InterpretedArg> args;
  args.reserve(pack.num_slots());
  for (const detail::KeySlot& s : detail::decode_key(pack)) {
    const KernelParam& p = fn.params_[s.path[0]];
    const uint64_t* slot = pack.value(s.index);
    if (s.constant) {
      std::visit([&args](const auto& value) { args.emplace_back(value); }, *s.constant);
      continue;
    }
    switch (s.kind) {
      case detail::ArgKind::Tuple: args.emplace_back(detail::InterpretedTuple{static_cast<size_t>(s.sub)}); break;
      case detail::ArgKind::TensorDescriptor: args.emplace_back(pack.descriptor_at(s.index)); break;
      case detail::ArgKind::Pointer:
        TORCH_CHECK(pack.tensor(s.index) != nullptr, "tjit: kernel ", fn.function_name_, ": argument '", p.name,
                    "' is a raw DevicePointer, which Triton's interpreter (CPU tensors) cannot take");
        args.emplace_back(pack.tensor(s.index));
        break;
      case detail::ArgKind::Int: {
        int64_t v = 0;
        std::memcpy(&v, slot, sizeof(v));
        if (s.sub == static_cast<uint64_t>(detail::IntType::I32)) {
          int32_t narrow = 0;
          std::memcpy(&narrow, slot, sizeof(narrow));
          v = narrow;
        }
        if (s.sub == static_cast<uint64_t>(detail::IntType::U64)) {
          args.emplace_back(static_cast<uint64_t>(v));
        } else {
          args.emplace_back(v);
        }
        break;
      }
      case detail::ArgKind::Bool: args.emplace_back((*slot & 0xff) != 0); break;
      case detail::ArgKind::Float:
        if (p.annotation_type == "fp64") {
          double d = 0;
          std::memcpy(&d, slot, sizeof(d));
          args.emplace_back(d);
        } else {
          float f = 0;
          std::memcpy(&f, slot, sizeof(f));
          args.emplace_back(static_cast<double>(f));
        }
        break;
      default: break;  // the constant kinds, above
    }
  }
  TORCH_CHECK(jit_enabled(), "tjit: kernel ", fn.function_name_, " from ", fn.kernel_file_,
              " got CPU tensors, which run through Triton's interpreter; that needs Python and Triton, and JIT is "
              "off (TJIT_JIT=0)");
  const Specialization spec = fn.specialization_of(pack);
  detail::note_launched_specialization(signature, spec, options);
  try {
    detail::python_bridge().run_interpreted(ensure_python(), grid, options, args);
  } catch (const c10::Error& e) {
    // The call's specialisation says what each parameter got (an int where a pointer is wanted
    // reads "x_ptr: i32"), as the compile path's message does.
    TORCH_CHECK(false, "tjit: running ", fn.function_name_, "(", spec.describe(parameter_names(fn.params_)),
                ") from ", fn.kernel_file_, " on CPU failed: ", none_arguments(spec), e.what_without_backtrace());
  }
}

}  // namespace tjit
