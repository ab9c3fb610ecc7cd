#pragma once
// The runtime's side of kernel bundles (tjit/kernel_bundle.h): lookups of signatures and binaries
// by kernel function and file name. Safe from any thread.

#include "binaries/kernel_entry.h"

#include <tjit/compiled_kernel.h>
#include <tjit/launch_types.h>

#include <optional>
#include <string>

namespace tjit::detail {

// The signature of `function` from a bundle kernel whose file name is that of `file` (and whose
// sources match `file` where it exists). Its `file` is set to `file`.
std::optional<KernelSignature> find_bundled_signature(const std::string& file, const std::string& function);

// The binary for this specialisation, options and target from the first bundle that has it.
// Throws c10::Error when the entry is damaged (an embedded bundle cannot be replaced at run time).
std::optional<CompiledKernel> find_bundled_kernel(const std::string& file, const std::string& function,
                                                  const Specialization& spec, const LaunchOptions& options,
                                                  const CompileTarget& target);

// The value (JSON text) of a decision of kind `kind` ("heuristics", "autotune") and key `key` for
// `function` of `file`, from the first bundle that has one (bundle_decision_key).
std::optional<std::string> find_bundled_decision(const std::string& file, const std::string& function,
                                                 const std::string& kind, const std::string& key);

// For an error after a miss: what the registered bundles hold of this kernel, in a sentence.
std::string describe_bundle_coverage(const std::string& file, const std::string& function,
                                     const Specialization& spec, const LaunchOptions& options,
                                     const CompileTarget& target);

}  // namespace tjit::detail
