// The one TritonJitFunction per (kernel file, function): the process-wide registry, the
// constructor that learns the kernel's signature (a bundle, else the kernel store, else Python),
// and the accessors of what an instance knows and counts.

#include "function/function_impl.h"

#include "binaries/kernel_bundle_detail.h"
#include "python/python_gil.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tjit {

TritonJitFunction& TritonJitFunction::get_instance(std::string_view kernel_file,
                                                   std::string_view function_name) {
  static std::mutex registry_mutex;
  static std::unordered_map<std::string, std::unique_ptr<TritonJitFunction>> registry;
  std::error_code ec;
  std::string path = std::filesystem::weakly_canonical(std::filesystem::path(kernel_file), ec).string();
  if (ec) {
    path = std::string(kernel_file);
  }
  std::string key = path + '\0' + std::string(function_name);
  detail::GilRelease released;  // another thread may hold the registry while it needs the GIL
  std::lock_guard lock(registry_mutex);
  auto it = registry.find(key);
  if (it != registry.end()) {
    return *it->second;
  }
  // Not make_unique: the constructor is private.
  std::unique_ptr<TritonJitFunction> fn(new TritonJitFunction(path, std::string(function_name)));
  return *registry.emplace(std::move(key), std::move(fn)).first->second;
}

TritonJitFunction::TritonJitFunction(std::string kernel_file, std::string function_name)
    : kernel_file_(std::move(kernel_file)),
      function_name_(std::move(function_name)),
      impl_(std::make_unique<Impl>(*this)) {
  if (auto bundled = detail::find_bundled_signature(kernel_file_, function_name_)) {
    impl_->signature = std::move(*bundled);
  } else if (auto stored = detail::load_stored_signature(kernel_file_, function_name_)) {
    impl_->signature = std::move(*stored);
  } else {
    impl_->signature.file = kernel_file_;
    impl_->signature.function = function_name_;
    const std::string without_python =
        "; the kernel store has no record of it either, so its parameters can only be read by Python. Build a "
        "kernel bundle that contains it (python -m tjit aot build) and embed or load it";
    TORCH_CHECK(jit_enabled(), "tjit: kernel ", function_name_, " from ", kernel_file_, ": ",
                detail::describe_bundle_coverage(kernel_file_, function_name_, {}, {}, {}),
                ", and JIT is off (TJIT_JIT=0)", without_python);
    std::error_code error;
    const bool exists = std::filesystem::exists(kernel_file_, error);
    TORCH_CHECK(exists, "tjit: kernel file ", kernel_file_, " does not exist",
                std::filesystem::path(kernel_file_).is_relative()
                    ? " (a relative path is resolved against the working directory, " +
                          std::filesystem::current_path(error).string() + ")"
                    : std::string(),
                "; no kernel bundle or kernel store record names ", function_name_, " from it either");
    try {
      impl_->load_python(/*known=*/false);
    } catch (const c10::Error& e) {
      // The file exists and Python read it: the cause is in the file (no such function, a syntax
      // error), not a missing bundle, so nothing else is said.
      TORCH_CHECK(false, "tjit: loading kernel ", function_name_, " from ", kernel_file_, " failed: ",
                  e.what_without_backtrace());
    }
  }
  params_ = impl_->signature.params;
  impl_->tuning = detail::parse_tuning_spec(impl_->signature.tuning, params_, function_name_);
}

TritonJitFunction::~TritonJitFunction() = default;

size_t TritonJitFunction::num_compiled() const { return impl_->num_compiled.load(); }
size_t TritonJitFunction::num_loaded_from_store() const { return impl_->num_loaded_from_store.load(); }
size_t TritonJitFunction::num_loaded_from_bundles() const { return impl_->num_loaded_from_bundles.load(); }
bool TritonJitFunction::autotuned() const { return impl_->tuning.autotuned; }
const std::vector<KernelConfig>& TritonJitFunction::configs() const { return impl_->tuning.configs; }
size_t TritonJitFunction::num_tunings() const { return impl_->num_tunings.load(); }
size_t TritonJitFunction::num_tuning_runs() const { return impl_->num_tuning_runs.load(); }
size_t TritonJitFunction::num_tunings_loaded() const { return impl_->num_tunings_loaded.load(); }

std::vector<std::string> TritonJitFunction::caller_parameters() const {
  std::vector<std::string> names;
  for (int i : impl_->tuning.caller_params) {
    names.push_back(params_[i].name);
  }
  return names;
}

}  // namespace tjit
