// The lookup chain: where a TritonJitFunction's binary for a specialisation, options and target
// comes from, in order: kernel bundles, the kernel store, a compile through the embedded
// Python half (which writes the store). With JIT off a miss is an error that says what the
// bundles and the store have and the manifest entry that would cover it.

#include "function/function_impl.h"

#include "binaries/kernel_bundle_detail.h"
#include "binaries/kernel_entry.h"
#include "binaries/manifest_recorder.h"
#include "python/python_bridge.h"

#include <tjit/kernel_store.h>

#include <c10/util/Exception.h>

#include <string>
#include <variant>

namespace tjit {

CompiledKernel TritonJitFunction::compile_packed(const CompileTarget& target, const LaunchOptions& options,
                                                 detail::ArgumentPackBase& pack) const {
  pack.complete();
  detail::launch_options_word(options);  // validates
  const Specialization spec = specialization_of(pack);
  std::string key;
  Impl::Origin origin = Impl::Origin::Compiled;
  return impl_->obtain(spec, target, options, impl_->describe(spec, target), /*use_store=*/true, key, origin);
}

CompiledKernel TritonJitFunction::Impl::obtain(const Specialization& spec, const CompileTarget& target,
                                               const LaunchOptions& options, const std::string& description,
                                               bool use_store, std::string& key, Origin& origin) {
  key = detail::kernel_store_key(signature, spec, options, target);
  if (use_store) {
    if (auto bundled = detail::find_bundled_kernel(fn.kernel_file_, fn.function_name_, spec, options, target)) {
      num_loaded_from_bundles.fetch_add(1);
      origin = Origin::Bundle;
      return std::move(*bundled);
    }
    if (auto entry = detail::load_stored_kernel(signature, key)) {
      num_loaded_from_store.fetch_add(1);
      origin = Origin::Store;
      return std::move(entry->compiled);
    }
  }
  origin = Origin::Compiled;
  if (!jit_enabled()) {
    fail_without_compile(spec, target, options, description, "JIT compiles are off (TJIT_JIT=0)");
  }
  int64_t handle = -1;
  try {
    handle = ensure_python();
  } catch (const c10::Error& e) {
    fail_without_compile(spec, target, options, description,
                         std::string("compiling it needs Python and Triton, which failed: ") + e.what_without_backtrace());
  }
  CompiledKernel compiled;
  try {
    compiled = detail::python_bridge().compile(handle, spec, target, options);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "tjit: compiling ", description, " failed: ", none_arguments(spec),
                e.what_without_backtrace());
  }
  num_compiled.fetch_add(1);
  detail::store_kernel(detail::KernelEntry{key, compiled_signature, spec, options, compiled});
  return compiled;
}

void TritonJitFunction::Impl::fail_without_compile(const Specialization& spec, const CompileTarget& target,
                                                   const LaunchOptions& options, const std::string& description,
                                                   const std::string& why) const {
  const auto store = kernel_store_directory();
  TORCH_CHECK(false, "tjit: no compiled kernel for ", description, " with num_warps=", options.num_warps,
              ", num_stages=", options.num_stages, ": ",
              detail::describe_bundle_coverage(fn.kernel_file_, fn.function_name_, spec, options, target), "; ",
              store ? "the kernel store (" + *store + ") has none" : std::string("the kernel store is off"), "; and ",
              why, ". To ship it, add this entry to the manifest the bundle is built from (or record one with "
              "TJIT_RECORD=<file> where Python and Triton are installed) and rebuild the bundle with "
              "python -m tjit aot build --target ", target.backend, ":", target.arch, ":\n  ",
              detail::manifest_entry_json(fn.kernel_file_, fn.function_name_, fn.params_, spec, options));
}

std::string TritonJitFunction::Impl::none_arguments(const Specialization& spec) const {
  std::string names;
  for (const auto& [index, value] : spec.constexprs) {
    if (!fn.params_[index].is_constexpr && std::holds_alternative<std::monostate>(value)) {
      names += (names.empty() ? "" : ", ") + fn.params_[index].name;
    }
  }
  return names.empty() ? std::string()
                       : "argument(s) " + names + " got None (an undefined at::Tensor or std::nullopt); if the kernel "
                         "reads them, pass defined tensors. ";
}

std::string TritonJitFunction::Impl::describe(const Specialization& spec, const CompileTarget& target) const {
  return fn.function_name_ + "(" + spec.describe(parameter_names(fn.params_)) + ") from " + fn.kernel_file_ +
         " for " + target.to_string();
}

}  // namespace tjit
