// Callers' own decisions (TritonJitFunction::load_decision / store_decision: an operator's plan
// choice), keyed like the autotune choices: the kernel, its sources and Triton, then what decided
// them. Read from bundles first (kind "caller", key `what`; unless TJIT_BUNDLED_TUNING=0), then the
// kernel store; while recording, each one read or made becomes a manifest entry, so `aot build`
// carries it into a bundle as it carries autotune choices.

#include "function/function_impl.h"

#include "binaries/kernel_bundle_detail.h"
#include "binaries/kernel_store_detail.h"
#include "binaries/manifest_recorder.h"

#include <nlohmann/json.hpp>

namespace tjit {
namespace {

constexpr const char* kCallerKind = "caller";

// The manifest entry {"caller": {"what", "value"}}; a value that is not JSON is not recorded.
void note_caller_decision(const detail::KernelSignature& signature, const std::string& what,
                          const std::string& json_value) {
  const auto value = nlohmann::json::parse(json_value, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) {
    detail::note_decision(signature, kCallerKind, nlohmann::ordered_json{{"what", what}, {"value", value}}.dump());
  }
}

}  // namespace

std::optional<std::string> TritonJitFunction::load_decision(const std::string& what) const {
  std::optional<std::string> value;
  if (bundled_tuning_enabled()) {
    value = detail::find_bundled_decision(kernel_file_, function_name_, kCallerKind, what);
  }
  if (!value) {
    if (auto record = detail::load_decision_record(impl_->signature, impl_->decision_key(kCallerKind) + what)) {
      value = std::move(record->value);
    }
  }
  if (value) {
    note_caller_decision(impl_->signature, what, *value);
  }
  return value;
}

void TritonJitFunction::store_decision(const std::string& what, const std::string& json_value) const {
  note_caller_decision(impl_->signature, what, json_value);
  detail::store_decision_record(impl_->signature, {impl_->decision_key(kCallerKind) + what, json_value});
}

}  // namespace tjit
