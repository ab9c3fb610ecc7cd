#pragma once
// The runtime's side of the kernel store (tjit/kernel_store.h): lookups and writes of signature
// records and kernel entries. Every function is safe to call from any thread and never throws
// for store problems: a damaged, stale or missing file is a miss, a failed write a warning.

#include "binaries/kernel_entry.h"

#include <tjit/compiled_kernel.h>
#include <tjit/launch_types.h>

#include <optional>
#include <string>

namespace tjit::detail {

// The signature of `function` in `file`, if the store has one recorded from the file's current
// sources by the Triton this process would compile with.
std::optional<KernelSignature> load_stored_signature(const std::string& file, const std::string& function);
void store_signature(const KernelSignature& signature);

// The text of everything that decides a binary apart from the sources and the Triton version
// (which an entry records and a lookup checks): format version, kernel file and function,
// specialisation, launch options, target, and Triton's code-generation environment.
std::string kernel_store_key(const KernelSignature& kernel, const Specialization& spec,
                             const LaunchOptions& options, const CompileTarget& target);

// The entry for `key`, if it exists, is intact and was compiled from the current sources by this
// process's Triton.
std::optional<KernelEntry> load_stored_kernel(const KernelSignature& kernel, const std::string& key);
void store_kernel(const KernelEntry& entry);

// The decision recorded for `key` (an autotune choice or heuristic values; the runtime builds the
// key from the kernel, its sources, Triton and what decided it), if the store has an intact one.
std::optional<DecisionRecord> load_decision_record(const KernelSignature& kernel, const std::string& key);
void store_decision_record(const KernelSignature& kernel, const DecisionRecord& record);

// Reports an entry whose binary the driver rejected (logged once, counted as corrupt); the
// compile that follows replaces it.
void report_unusable_stored_kernel(const KernelSignature& kernel, const std::string& key, const std::string& reason);

}  // namespace tjit::detail
