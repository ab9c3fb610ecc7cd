// A TritonJitFunction's Python side: the kernel imported in the embedded interpreter, loaded on
// the first compile, interpreted run or Python decision (never, with a warm store or a bundle),
// and checked against the signature the process took from a bundle or the store.

#include "function/function_impl.h"

#include "binaries/source_fingerprint.h"
#include "python/python_bridge.h"
#include "python/python_gil.h"

#include <c10/util/Exception.h>

namespace tjit {

void TritonJitFunction::Impl::load_python(bool known) {
  detail::KernelDefinition def = detail::python_bridge().load_kernel(signature.file, signature.function);
  detail::KernelSignature loaded{signature.file, signature.function, std::move(def.params), {},
                                 std::move(def.triton_version), std::move(def.tuning)};
  for (auto& [path, fingerprint] : def.sources) {
    TORCH_CHECK(detail::note_source_fingerprint(path, fingerprint), "tjit: ", path,
                " changed while this process was using kernel ", signature.function,
                " (it read the earlier version first); restart the process to use the new source");
    loaded.sources.push_back({path, fingerprint});
  }
  if (known) {
    TORCH_CHECK(loaded.params == signature.params && loaded.tuning == signature.tuning, "tjit: the parameters of ",
                signature.function, " in ", signature.file,
                " (or its autotune configs) changed while this process was using it; restart the process");
  } else {
    signature = loaded;
    detail::store_signature(loaded);
  }
  compiled_signature = std::move(loaded);
  python_handle = def.handle;
  python_loaded.store(true, std::memory_order_release);
}

int64_t TritonJitFunction::Impl::ensure_python() {
  if (!python_loaded.load(std::memory_order_acquire)) {
    detail::GilRelease released;  // the thread loading it may need the GIL this one holds
    std::lock_guard lock(python_mutex);
    if (!python_loaded.load(std::memory_order_acquire)) {
      load_python(/*known=*/true);
    }
  }
  return python_handle;
}

}  // namespace tjit
