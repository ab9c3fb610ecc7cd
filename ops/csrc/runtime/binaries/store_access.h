#pragma once
// Who may feed the kernel store. A store entry is machine code loaded into the caller's CUDA
// context, so only what the running user (or root) owns and only they can write is read: a folder
// or file that another user owns, that others can write, or that is a symbolic link is refused
// (said once on stderr with the remedy, then treated as absent). TJIT_CACHE_SHARED=<group> shares a
// store within one group: folders and files are made group-writable for it, and what that group's
// members own is accepted. Nothing is ever world-writable.
//
// Every folder from the store's root down and the file itself are opened without following links
// and checked on the open descriptor, and the file is read from that descriptor, so nobody can swap
// a path between the check and the read.

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tjit::detail {

struct StorePolicy {
  uid_t user = 0;
  std::optional<gid_t> group;  // TJIT_CACHE_SHARED's group
  std::string group_name;
};

// From the environment, once per process.
const StorePolicy& store_policy();

// Why a store folder or file with status `st` must not be read under `policy`; nullopt when it may.
std::optional<std::string> distrust_reason(const struct stat& st, const StorePolicy& policy);

// A descriptor, closed when destroyed.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept : fd_(other.release()) {}
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The outcome of opening something in the store: a descriptor, or why not. `refused` is set when
// the store held something it must not read (as opposed to nothing at all).
struct StoreOpen {
  Descriptor fd;
  std::optional<std::string> refused;  // "<path>: <reason>"
};

// Opens the folder `root/components...` (root is the store's folder, TJIT_CACHE_DIR), checking
// root and each folder below it. With `create`, missing folders are made with the policy's modes.
StoreOpen open_store_folder(const std::filesystem::path& root, const std::vector<std::string>& components,
                            bool create);

// Opens the regular file `name` in an open store folder, checked.
StoreOpen open_store_file(const Descriptor& folder, const std::filesystem::path& folder_path, const std::string& name);

// Creates a new file `name` in an open store folder (O_EXCL) with the policy's mode.
Descriptor create_store_file(const Descriptor& folder, const std::string& name);

// Says once per path, on stderr, that a store path was refused and what to do about it.
void report_refusal(const std::string& refusal);

// The refusals reported in this process.
uint64_t store_refusals();

}  // namespace tjit::detail
