#pragma once
// Kernel bundles: compiled kernels built ahead of time (`python -m tjit aot build`, from a manifest
// that TJIT_RECORD writes; see tjit/kernel_manifest.h) for one or more GPU architectures, embedded
// in a program (CMake: tjit_add_kernel_bundle) or loaded from a file. A process whose kernels all
// come from bundles needs neither Python nor Triton.
//
// The runtime looks a kernel up in memory, then in the bundles (in the order they were
// registered), then in the kernel store, and compiles through Triton only when all miss and JIT is
// on (tjit::jit_enabled(); TJIT_JIT=0 turns it off). A bundle identifies a kernel by its function
// name and file name (not the folder: the program may run where the file is elsewhere or absent);
// where the file exists, a bundle kernel is used only if the file is the one it was built from.
// A bundle holds cubins for exact architectures: a device of another architecture (say sm_89 with
// a bundle built for cuda:80 and cuda:90) finds no entry there. docs/design.md ("Kernel bundles")
// describes the file format.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tjit {

// What a registered bundle holds.
struct KernelBundleInfo {
  std::string name;                  // the file's path, or the name given at embedding
  bool embedded = false;             // registered from the program's own data
  std::vector<std::string> targets;  // e.g. "cuda:90:32"
  std::string triton_version;        // of the Triton that built it
  size_t num_kernels = 0;            // @triton.jit functions
  size_t num_entries = 0;            // compiled specialisations, over all targets
};

// Reads a bundle file and registers it for this process. Loading the same path again returns
// the registered bundle. Throws c10::Error naming the file and the damage when it cannot be read,
// is not a tjit bundle, or is damaged; nothing is registered then.
KernelBundleInfo load_bundle(const std::string& path);

// Registers a bundle that lives in the program's memory for the whole process (what
// tjit_add_kernel_bundle generates: called while the program or library is being loaded). Neither
// copies nor reads anything then; the bundle is checked when a kernel is first looked up, and a
// damaged one then fails that lookup with an error naming it. Returns true (for use in a static
// initialiser).
bool register_embedded_bundle(const void* data, size_t size, const char* name) noexcept;

// Every registered bundle, in lookup order. Checks embedded bundles not yet checked (throws
// c10::Error for a damaged one).
std::vector<KernelBundleInfo> loaded_bundles();

}  // namespace tjit
