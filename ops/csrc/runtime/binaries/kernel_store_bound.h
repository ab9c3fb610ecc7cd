#pragma once
// The kernel store's size bound (tjit/kernel_store.h): recency marks, the bound's setting, and
// pruning. kernel_store.cpp calls note_store_write after each file it writes and mark_store_file_used
// after each hit; pruning is shared with `python -m tjit cache prune` only through the files (the
// same lock file and the same order: least recently modified first).

#include <tjit/kernel_store.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tjit::detail {

// "1073741824", "512M", "4G", "0": bytes, with an optional K, M, G or T suffix (powers of 1024,
// "KiB"/"KB" spellings too); nullopt for anything else.
std::optional<uint64_t> parse_byte_size(const std::string& text);

// Marks a store file as just used (its modification time: the order pruning removes files in).
// Best effort: a read-only store keeps its old times.
void mark_store_file_used(const std::filesystem::path& path);

// Accounts `bytes` just written under the store's format folder `root` and, when the store is past
// its bound, prunes it to 90% of the bound (unless another process is pruning it already).
void note_store_write(const std::filesystem::path& root, uint64_t bytes);

// prune_kernel_store for the format folder `root`; `wait`: wait for another process's prune to
// finish (else return at once with nothing removed).
KernelStorePruneResult prune_store_folder(const std::filesystem::path& root, uint64_t max_bytes, bool wait);

uint64_t store_evictions();

}  // namespace tjit::detail
