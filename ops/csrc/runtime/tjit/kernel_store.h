#pragma once
// tjit's persistent kernel store: compiled kernels on disk, shared by every process that uses the
// same folder, so a process launches kernels compiled earlier without starting Python or Triton.
// On a call the runtime looks a kernel up in memory, then in the store, and compiles only when
// both miss (then writes the store). Entries are checked against the kernel's sources (the file
// and every file it imports), the Triton version and Triton's code-generation environment, so a
// stale binary never launches; damaged files are detected and replaced. The store stays under a
// size bound (least recently used entries go first) and every file is on disk before it is renamed
// into place. docs/design.md ("Kernel store") describes the key and the format;
// `python -m tjit cache {info,list,clear,prune}` inspects and trims it.

#include <cstdint>
#include <optional>
#include <string>

namespace tjit {

// The store's folder; nullopt when the store is off. Chosen on first use: off when TJIT_CACHE=0;
// else TJIT_CACHE_DIR; else $XDG_CACHE_HOME/tjit; else $HOME/.cache/tjit. A folder that cannot be
// written (a read-only image, a full disk) still serves lookups; writes then fail with one
// warning and kernels stay in memory. Only what the running user or root owns, and nobody else
// can write, is read (a folder or file another user could have planted is refused with one
// warning, and treated as absent); what the store creates is private (0700 folders, 0600 files),
// or shared with one group by TJIT_CACHE_SHARED=<group> (docs/deploying.md, "Sharing a store").
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
  uint64_t evictions = 0;       // files this process removed to keep the store under its bound
  uint64_t refused = 0;         // folders and files not read or written: another user could have
                                // planted them (each path logged once; TJIT_CACHE_SHARED to share)
};
KernelStoreCounters kernel_store_counters();

// The bound, when none is set: 4 GiB (tens of thousands of compiled kernels; a CUDA entry is tens of KB).
inline constexpr uint64_t kDefaultKernelStoreMaxBytes = uint64_t{4} << 30;

// The store's size bound in bytes; 0 means none. Chosen on first use: TJIT_CACHE_MAX_BYTES (bytes,
// or with a K, M, G or T suffix in powers of 1024, e.g. "512M"; 0 for no bound), else
// kDefaultKernelStoreMaxBytes. After a write takes the store past it, the writing process removes
// the least recently used kernel entries and decision records (a lookup that hits marks a file
// used) until the store is at 90% of it. Signature records stay (a few KB a kernel).
uint64_t kernel_store_max_bytes();

// Replaces that choice for the rest of this process (0: no bound).
void set_kernel_store_max_bytes(uint64_t max_bytes);

// What prune_kernel_store did.
struct KernelStorePruneResult {
  uint64_t files_removed = 0;  // entries and decision records (and temporary files of dead writes)
  uint64_t bytes_removed = 0;
  uint64_t bytes_left = 0;     // what the store's current format folder holds afterwards
};

// Removes the least recently used entries and decision records until the store holds at most
// `max_bytes` (0: every entry and record goes; signature records stay), and temporary files older than an hour (left by writers that died). Safe while
// other processes read, write and prune the same store: files are unlinked whole (a reader that
// opened one still reads all of it; a later lookup misses and recompiles), only one process
// prunes at a time (a lock file in the store), and a write in progress is never touched. Does
// nothing when the store is off. `python -m tjit cache prune` does the same from Python.
KernelStorePruneResult prune_kernel_store(uint64_t max_bytes);

}  // namespace tjit
