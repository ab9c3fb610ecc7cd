#include "binaries/store_access.h"

#include "settings/settings.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace tjit::detail {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNameBuffer = 1 << 16;  // getpwuid_r / getgrgid_r: large groups list many members

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::optional<std::string> user_name(uid_t uid, gid_t* primary_group = nullptr) {
  std::vector<char> buffer(kNameBuffer);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  if (primary_group != nullptr) {
    *primary_group = found->pw_gid;
  }
  return std::string(found->pw_name);
}

// The group's listed members (not those for whom it is the primary group); nullopt if unknown.
std::optional<std::vector<std::string>> group_members(gid_t gid) {
  std::vector<char> buffer(kNameBuffer);
  struct group entry {};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> members;
  for (char** m = found->gr_mem; m != nullptr && *m != nullptr; ++m) {
    members.emplace_back(*m);
  }
  return members;
}

bool is_member(uid_t uid, gid_t gid) {
  gid_t primary = 0;
  const auto name = user_name(uid, &primary);
  if (!name) {
    return false;
  }
  if (primary == gid) {
    return true;
  }
  const auto members = group_members(gid);
  return members && std::find(members->begin(), members->end(), *name) != members->end();
}

// A user-private group (the owner's primary group, with no other member listed): writable by its
// group means writable by the owner alone, as a umask of 002 makes it.
bool private_group_of(gid_t gid, uid_t owner) {
  gid_t primary = 0;
  const auto name = user_name(owner, &primary);
  if (!name || primary != gid) {
    return false;
  }
  const auto members = group_members(gid);
  return members && std::all_of(members->begin(), members->end(), [&](const std::string& m) { return m == *name; });
}

StorePolicy make_policy() {
  StorePolicy policy;
  policy.user = ::geteuid();
  const std::optional<std::string> shared = settings::kernel_store_shared_group();
  if (!shared) {
    return policy;
  }
  std::vector<char> buffer(kNameBuffer);
  struct group entry {};
  struct group* found = nullptr;
  if (::getgrnam_r(shared->c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    policy.group = found->gr_gid;
    policy.group_name = found->gr_name;
    return policy;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long gid = std::strtoul(shared->c_str(), &end, 10);
  if (!shared->empty() && *end == '\0' && errno == 0) {
    policy.group = static_cast<gid_t>(gid);
    policy.group_name = *shared;
    return policy;
  }
  std::fprintf(stderr,
               "[tjit] kernel store: TJIT_CACHE_SHARED=%s names no group of this machine (getent group %s); the "
               "store stays private to you\n",
               shared->c_str(), shared->c_str());
  return policy;
}

std::string describe_owner(uid_t uid) {
  const auto name = user_name(uid);
  return "uid " + std::to_string(uid) + (name ? " (" + *name + ")" : std::string());
}

struct RefusalLog {
  std::mutex mutex;
  std::unordered_set<std::string> said;
  std::atomic<uint64_t> count{0};
};

RefusalLog& refusal_log() {
  static RefusalLog log;
  return log;
}

mode_t folder_mode(const StorePolicy& policy) { return policy.group ? 02770 : 0700; }
mode_t file_mode(const StorePolicy& policy) { return policy.group ? 0660 : 0600; }

// Gives what this process just created the shared group and its group-writable mode (the umask
// may have taken the group's write bit); nothing to do for a private store.
void share_with_group(int fd, mode_t mode, const StorePolicy& policy) {
  if (policy.group) {
    (void)::fchown(fd, static_cast<uid_t>(-1), *policy.group);
    (void)::fchmod(fd, mode);
  }
}

std::optional<std::string> check_open(int fd, const fs::path& path, bool folder) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return path.string() + ": cannot be examined";
  }
  if (folder ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return path.string() + (folder ? ": not a folder" : ": not a regular file");
  }
  if (auto reason = distrust_reason(st, store_policy())) {
    return path.string() + ": " + *reason;
  }
  return std::nullopt;
}

// What openat's failure means: nothing there (nullopt), or something the store must not follow.
std::optional<std::string> open_failure(int error, const fs::path& path, bool folder) {
  if (error == ELOOP) {
    return path.string() + ": a symbolic link";
  }
  if (folder && error == ENOTDIR) {
    return path.string() + ": not a folder (a file or a link)";
  }
  return std::nullopt;
}

}  // namespace

const StorePolicy& store_policy() {
  static const StorePolicy policy = make_policy();
  return policy;
}

std::optional<std::string> distrust_reason(const struct stat& st, const StorePolicy& policy) {
  const bool shared_group = policy.group && st.st_gid == *policy.group;
  const bool owner_trusted = st.st_uid == policy.user || st.st_uid == 0 ||
                             (shared_group && is_member(st.st_uid, *policy.group));
  if (!owner_trusted) {
    std::string reason = "owned by " + describe_owner(st.st_uid) + ", not by you (" + describe_owner(policy.user) +
                         ") or root";
    if (policy.group) {
      reason += " or a member of TJIT_CACHE_SHARED's group " + policy.group_name;
    }
    return reason;
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return "writable by every user (mode " + octal_mode(st.st_mode) + ")";
  }
  if ((st.st_mode & S_IWGRP) != 0 && !shared_group && !private_group_of(st.st_gid, st.st_uid)) {
    return "writable by group " + std::to_string(st.st_gid) + " (mode " + octal_mode(st.st_mode) + "), which " +
           (policy.group ? "is not TJIT_CACHE_SHARED's group " + policy.group_name
                         : std::string("TJIT_CACHE_SHARED does not name"));
  }
  return std::nullopt;
}

Descriptor::~Descriptor() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = other.release();
  }
  return *this;
}

namespace {

// Opens folder `name` in `parent` (AT_FDCWD for a path) with `flags`; with `create`, a missing one is
// made first with the policy's mode (and group), and one another process made meanwhile is opened.
Descriptor open_or_make_folder(int parent, const char* name, int flags, bool create, const StorePolicy& policy) {
  Descriptor folder(::openat(parent, name, flags));
  if (folder || errno != ENOENT || !create) {
    return folder;
  }
  if (::mkdirat(parent, name, folder_mode(policy)) == 0) {
    folder = Descriptor(::openat(parent, name, flags));
    if (folder) {
      share_with_group(folder.get(), folder_mode(policy), policy);
    }
  } else if (errno == EEXIST) {
    folder = Descriptor(::openat(parent, name, flags));
  }
  return folder;
}

}  // namespace

StoreOpen open_store_folder(const fs::path& root, const std::vector<std::string>& components, bool create) {
  const StorePolicy& policy = store_policy();
  StoreOpen out;
  if (create) {  // the folders above the store's own are the user's: made as any program makes them
    std::error_code ec;
    if (!fs::exists(root, ec)) {
      fs::create_directories(root.parent_path(), ec);
    }
  }
  // The root as the user named it (links in its path are theirs to choose), then checked.
  Descriptor folder = open_or_make_folder(AT_FDCWD, root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, create, policy);
  if (!folder) {
    return out;
  }
  if ((out.refused = check_open(folder.get(), root, /*folder=*/true))) {
    return out;
  }
  fs::path path = root;
  for (const std::string& name : components) {
    path /= name;
    Descriptor next = open_or_make_folder(folder.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                          create, policy);
    if (!next) {
      out.refused = open_failure(errno, path, /*folder=*/true);
      return out;
    }
    if ((out.refused = check_open(next.get(), path, /*folder=*/true))) {
      return out;
    }
    folder = std::move(next);
  }
  out.fd = std::move(folder);
  return out;
}

StoreOpen open_store_file(const Descriptor& folder, const fs::path& folder_path, const std::string& name) {
  StoreOpen out;
  // O_NONBLOCK: a FIFO planted in the store must not block the open.
  Descriptor file(::openat(folder.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file) {
    out.refused = open_failure(errno, folder_path / name, /*folder=*/false);
    return out;
  }
  if ((out.refused = check_open(file.get(), folder_path / name, /*folder=*/false))) {
    return out;
  }
  out.fd = std::move(file);
  return out;
}

Descriptor create_store_file(const Descriptor& folder, const std::string& name) {
  const StorePolicy& policy = store_policy();
  Descriptor file(::openat(folder.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           file_mode(policy)));
  if (file) {
    share_with_group(file.get(), file_mode(policy), policy);
  }
  return file;
}

void report_refusal(const std::string& refusal) {
  RefusalLog& log = refusal_log();
  log.count.fetch_add(1);
  std::lock_guard lock(log.mutex);
  if (!log.said.insert(refusal).second) {
    return;
  }
  std::fprintf(stderr,
               "[tjit] kernel store: not using %s. A stored kernel runs with all of the process's GPU data, so tjit "
               "reads only what you (or root) own and only you can write. Remove it or `chmod go-w` it, or set "
               "TJIT_CACHE_DIR to a folder of your own; TJIT_CACHE_SHARED=<group> shares a store within a group "
               "(docs/deploying.md, \"Sharing a store\"). It is treated as absent.\n",
               refusal.c_str());
}

uint64_t store_refusals() { return refusal_log().count.load(); }

}  // namespace tjit::detail
