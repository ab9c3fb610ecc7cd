#pragma once
// The runtime's side of manifest recording (tjit/kernel_manifest.h).

#include "binaries/kernel_entry.h"

#include <tjit/compiled_kernel.h>
#include <tjit/launch_types.h>

#include <string>

namespace tjit::detail {

// Notes that `kernel` (its file, function and parameters) was launched with this specialisation
// and these options; writes it to the manifest being recorded, if any and if it is new there.
// Never throws: a failed write is logged once and recording stops.
void note_launched_specialization(const KernelSignature& kernel, const Specialization& spec,
                                  const LaunchOptions& options);

// Notes a decision `kernel` made (kind "heuristics" or "autotune", `decision` its JSON object as
// text: see ops/aot/manifest.py) for the manifest being recorded, if any and if it is new there. Never throws.
void note_decision(const KernelSignature& kernel, const std::string& kind, const std::string& decision);

// The manifest entry (one line of JSON) of that launch, with `file` as given: the form an error
// shows for adding a missing specialisation to a manifest by hand.
std::string manifest_entry_json(const std::string& file, const std::string& function,
                                const std::vector<KernelParam>& params, const Specialization& spec,
                                const LaunchOptions& options);

}  // namespace tjit::detail
