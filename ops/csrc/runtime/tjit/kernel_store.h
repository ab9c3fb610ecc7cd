#pragma once
// tjit's persistent kernel store: compiled kernels on disk, shared by every process that uses the
// same folder, so a process launches kernels compiled earlier without starting Python or Triton.
// On a call the runtime looks a kernel up in memory, then in the store, and compiles only when
// both miss (then writes the store). Entries are checked against the kernel's sources (the file
// and every file it imports), the Triton version and Triton's code-generation environment, so a
// stale binary never launches; damaged files are detected and replaced. docs/design.md ("Kernel
// store") describes the key and the format; `python -m tjit cache {info,list,clear}` inspects it.

#include <cstdint>
#include <optional>
#include <string>

namespace tjit {

// The store's folder; nullopt when the store is off. Chosen on first use: off when TJIT_CACHE=0;
// else TJIT_CACHE_DIR; else $XDG_CACHE_HOME/tjit; else $HOME/.cache/tjit. A folder that cannot be
// written (a read-only image, a full disk) still serves lookups; writes then fail with one
// warning and kernels stay in memory.
std::optional<std::string> kernel_store_directory();

// Replaces that choice for the rest of this process; nullopt turns the store off. Kernels already
// in memory stay in use.
void set_kernel_store_directory(std::optional<std::string> directory);

// What the store did in this process, over all kernels.
struct KernelStoreCounters {
  uint64_t signature_hits = 0;  // kernels whose parameters were read from the store (no Python)
  uint64_t hits = 0;            // binaries read from the store
  uint64_t misses = 0;          // binary lookups that found no usable entry (a compile followed)
  uint64_t stale = 0;           // entries found but made from other sources or another Triton
  uint64_t corrupt = 0;         // damaged files found (each logged once, then replaced)
  uint64_t writes = 0;          // entries and signature records written
  uint64_t write_failures = 0;  // writes that failed (the first one is logged)
  uint64_t tuning_hits = 0;     // autotune choices and heuristic values read from the store
};
KernelStoreCounters kernel_store_counters();

}  // namespace tjit
