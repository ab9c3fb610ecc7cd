#pragma once
// Recording manifests: the list of specialisations a process launched, which
// `python -m tjit aot build` compiles into a kernel bundle (tjit/kernel_bundle.h). Run a test
// suite or a warm-up workload once with recording on, and the manifest holds what deployment
// needs. A manifest is a JSON file:
//
//   {"tjit_manifest": 1, "entries": [
//     {"file": "add.py", "function": "add_kernel",
//      "args": {"x_ptr": "*fp32:16", "n_elements": "i32", "BLOCK_SIZE": 1024},
//      "options": {"num_warps": 4, "num_stages": 3}}]}
//
// `args` gives each parameter its type as Triton writes it (":16": divisible by 16), or its value
// when it is a compile-time constant. `file` is relative to the manifest's folder when the kernel
// lies inside it, else absolute. Recording merges into what the file already holds (under a file
// lock, so processes may record into one file at once), writing it each time a new specialisation
// is launched, so nothing is lost if the process dies. CPU launches (Triton's interpreter) are
// recorded too: they specialise exactly as CUDA launches of the same arguments.

#include <optional>
#include <string>

namespace tjit {

// Writes every specialisation this process has launched into `path` (created when missing), and
// from then on each new one as it is first launched. TJIT_RECORD=<path> starts this when tjit is
// first used.
// Throws c10::Error when `path` exists and is not a manifest.
void start_recording_manifest(const std::string& path);

// Stops recording; the file keeps what was written.
void stop_recording_manifest();

// The file being recorded into, if any.
std::optional<std::string> recording_manifest();

}  // namespace tjit
