// The kernel store's size bound: what is least recently used, how big the store is, and removing
// files so that processes sharing a store never see a half-written or half-removed file.
//
// Recency is a file's modification time: a write sets it, a hit refreshes it. Removal is
// unlink(2), which is atomic: a reader that opened the file reads all of it, a later lookup
// misses. Writes go to hidden temporary files renamed into place, so a prune never touches a
// write in progress (only temporary files an hour old, whose writer died). One process prunes at
// a time: an flock(2) on <store>/v<format>/.prune.lock, also taken by ops/kernel_store.py.

#include "binaries/kernel_store_bound.h"

#include "binaries/store_access.h"
#include "settings/settings.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <vector>

namespace tjit {
namespace {

namespace fs = std::filesystem;

constexpr auto kRescanInterval = std::chrono::seconds(30);  // other processes write too
constexpr time_t kDeadWriteSeconds = 3600;
constexpr const char* kLockName = ".prune.lock";

struct BoundState {
  std::mutex mutex;
  std::optional<uint64_t> max_bytes;    // chosen on first use
  std::optional<uint64_t> known_bytes;  // this process's estimate of the store's size
  std::string known_root;
  std::chrono::steady_clock::time_point last_scan;
  std::atomic<uint64_t> evictions{0};
};

BoundState& bound_state() {
  static BoundState s;
  return s;
}

uint64_t bound_from_environment() {
  const std::optional<std::string> text = detail::settings::kernel_store_max_bytes();
  if (!text) {
    return kDefaultKernelStoreMaxBytes;
  }
  if (const auto bytes = detail::parse_byte_size(*text)) {
    return *bytes;
  }
  std::fprintf(stderr,
               "[tjit] kernel store: TJIT_CACHE_MAX_BYTES=%s is not a size (bytes, or with a K, M, G or T suffix "
               "such as 4G; 0 for no bound); using the default bound, %llu bytes\n",
               text->c_str(), static_cast<unsigned long long>(kDefaultKernelStoreMaxBytes));
  return kDefaultKernelStoreMaxBytes;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

struct EvictableFile {
  std::string path;
  uint64_t size = 0;
  int64_t modified_ns = 0;
};

struct Scan {
  uint64_t total = 0;  // every file under the kernel folders, writes in progress included
  std::vector<EvictableFile> evictable;  // kernel entries and decision records
  uint64_t dead_removed = 0;
  uint64_t dead_bytes = 0;
};

// The names in folder `dir` (not . and ..), through POSIX: libtorch exports copies of some of
// libstdc++'s std::filesystem functions that can win symbol lookup (tests/cpp/test_kernel_store.cpp).
std::vector<std::string> folder_names(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        names.emplace_back(e->d_name);
      }
    }
    ::closedir(d);
  }
  return names;
}

// The kernel folders' files under `root`. Files may appear and vanish while this runs (other
// processes): whatever cannot be stat'ed is skipped. `remove_dead`: unlink temporary files whose
// writer died (an hour old).
Scan scan_store(const fs::path& root, bool remove_dead) {
  Scan scan;
  const time_t now = std::time(nullptr);
  for (const std::string& kernel_dir : folder_names(root.string())) {
    const std::string dir = (root / kernel_dir).string();
    struct stat dir_st {};
    if (::lstat(dir.c_str(), &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)) {
      continue;
    }
    for (const std::string& name : folder_names(dir)) {
      const std::string path = dir + "/" + name;
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        continue;
      }
      const auto size = static_cast<uint64_t>(st.st_size);
      if (name[0] == '.') {  // a write in progress, or left by one that died
        if (remove_dead && ends_with(name, ".tmp") && now - st.st_mtime > kDeadWriteSeconds &&
            ::unlink(path.c_str()) == 0) {
          scan.dead_removed += 1;
          scan.dead_bytes += size;
          continue;
        }
        scan.total += size;
        continue;
      }
      scan.total += size;
      if (ends_with(name, ".tjk") || ends_with(name, ".tjd")) {
        scan.evictable.push_back({path, size, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
      }
    }
  }
  return scan;
}

// An flock on the store's lock file, released when destroyed (closing the descriptor).
class PruneLock {
 public:
  PruneLock(const fs::path& root, bool wait) {
    // Group members of a shared store take the same lock (store_access.h).
    fd_ = ::open((root / kLockName).c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                 detail::store_policy().group ? 0660 : 0600);
    held_ = fd_ >= 0 && ::flock(fd_, LOCK_EX | (wait ? 0 : LOCK_NB)) == 0;
  }
  ~PruneLock() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  PruneLock(const PruneLock&) = delete;
  PruneLock& operator=(const PruneLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

// Prunes `root` to `max_bytes` under the lock; nullopt when another process holds it (and not
// `wait`), or the lock file cannot be made (a read-only store, which cannot be pruned anyway).
std::optional<KernelStorePruneResult> prune_locked(const fs::path& root, uint64_t max_bytes, bool wait) {
  const PruneLock lock(root, wait);
  if (!lock.held()) {
    return std::nullopt;
  }
  Scan scan = scan_store(root, /*remove_dead=*/true);
  KernelStorePruneResult result;
  result.files_removed = scan.dead_removed;
  result.bytes_removed = scan.dead_bytes;
  std::sort(scan.evictable.begin(), scan.evictable.end(),
            [](const EvictableFile& a, const EvictableFile& b) { return a.modified_ns < b.modified_ns; });
  uint64_t total = scan.total;
  for (const EvictableFile& f : scan.evictable) {
    if (total <= max_bytes) {
      break;
    }
    if (::unlink(f.path.c_str()) == 0) {
      result.files_removed += 1;
      result.bytes_removed += f.size;
      total -= f.size;
    } else if (errno == ENOENT) {
      total -= f.size;  // gone already (clear, or a process before the lock)
    }
  }
  result.bytes_left = total;
  bound_state().evictions.fetch_add(result.files_removed);
  return result;
}

}  // namespace

uint64_t kernel_store_max_bytes() {
  BoundState& s = bound_state();
  std::lock_guard lock(s.mutex);
  if (!s.max_bytes) {
    s.max_bytes = bound_from_environment();
  }
  return *s.max_bytes;
}

void set_kernel_store_max_bytes(uint64_t max_bytes) {
  BoundState& s = bound_state();
  std::lock_guard lock(s.mutex);
  s.max_bytes = max_bytes;
}

namespace detail {

std::optional<uint64_t> parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) {
    ++digits;
  }
  if (digits == 0 || digits > 19) {
    return std::nullopt;
  }
  std::string unit = text.substr(digits);
  for (char& c : unit) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  int shift = 0;
  if (!unit.empty()) {
    static const char* const kUnits = "KMGT";
    const char* found = std::char_traits<char>::find(kUnits, 4, unit[0]);
    const std::string rest = unit.substr(1);
    if (found == nullptr || !(rest.empty() || rest == "B" || rest == "IB")) {
      return std::nullopt;
    }
    shift = 10 * static_cast<int>(found - kUnits + 1);
  }
  const uint64_t value = std::strtoull(text.substr(0, digits).c_str(), nullptr, 10);
  if (shift > 0 && value > (UINT64_MAX >> shift)) {
    return std::nullopt;
  }
  return value << shift;
}

void mark_store_file_used(const fs::path& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW); }

void note_store_write(const fs::path& root, uint64_t bytes) {
  const uint64_t bound = kernel_store_max_bytes();
  if (bound == 0) {
    return;
  }
  BoundState& s = bound_state();
  const auto now = std::chrono::steady_clock::now();
  bool rescan = false;
  bool over = false;
  {
    std::lock_guard lock(s.mutex);
    rescan = !s.known_bytes || s.known_root != root.string() || now - s.last_scan > kRescanInterval;
    if (!rescan) {
      *s.known_bytes += bytes;
      over = *s.known_bytes > bound;
    }
  }
  if (rescan) {
    const uint64_t total = scan_store(root, /*remove_dead=*/false).total;
    std::lock_guard lock(s.mutex);
    s.known_bytes = total;
    s.known_root = root.string();
    s.last_scan = now;
    over = total > bound;
  }
  if (!over) {
    return;
  }
  // To 90%, so that the next writes do not each prune again.
  const auto result = prune_locked(root, bound / 10 * 9, /*wait=*/false);
  if (!result) {
    return;  // another process is pruning
  }
  {
    std::lock_guard lock(s.mutex);
    s.known_bytes = result->bytes_left;
    s.last_scan = now;
  }
  std::fprintf(stderr,
               "[tjit] kernel store %s was over its bound of %llu bytes (TJIT_CACHE_MAX_BYTES): removed the %llu "
               "least recently used files (%llu bytes)\n",
               root.parent_path().c_str(), static_cast<unsigned long long>(bound),
               static_cast<unsigned long long>(result->files_removed),
               static_cast<unsigned long long>(result->bytes_removed));
}

KernelStorePruneResult prune_store_folder(const fs::path& root, uint64_t max_bytes, bool wait) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return {};
  }
  if (auto result = prune_locked(root, max_bytes, wait)) {
    return *result;
  }
  KernelStorePruneResult untouched;
  untouched.bytes_left = scan_store(root, /*remove_dead=*/false).total;
  return untouched;
}

uint64_t store_evictions() { return bound_state().evictions.load(); }

}  // namespace detail
}  // namespace tjit
