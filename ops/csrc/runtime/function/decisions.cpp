// Callers' own decisions in the kernel store (TritonJitFunction::load_decision / store_decision),
// keyed like the autotune choices: the kernel, its sources and Triton, then what decided them.

#include "function/function_impl.h"

#include "binaries/kernel_store_detail.h"

namespace tjit {

std::optional<std::string> TritonJitFunction::load_decision(const std::string& what) const {
  auto record = detail::load_decision_record(impl_->signature, impl_->decision_key("caller") + what);
  return record ? std::optional<std::string>(std::move(record->value)) : std::nullopt;
}

void TritonJitFunction::store_decision(const std::string& what, const std::string& json_value) const {
  detail::store_decision_record(impl_->signature, {impl_->decision_key("caller") + what, json_value});
}

}  // namespace tjit
