// The kernel store's folder: where it is, how keys map to files, and reading and writing them
// atomically. Layout (docs/design.md, "Kernel store"):
//   <folder>/v<format>/<function>-<16 hex of SHA-1(kernel file path)>/signature.tjs
//   <folder>/v<format>/<function>-<...>/<32 hex of SHA-1(key)>.tjk
//   <folder>/v<format>/<function>-<...>/decision-<32 hex of SHA-1(key)>.tjd  (autotune, heuristics)

#include "binaries/kernel_store_detail.h"

#include "binaries/compiler_identity.h"
#include "binaries/kernel_store_bound.h"
#include "binaries/source_fingerprint.h"
#include "binaries/store_access.h"
#include "settings/settings.h"

#include <tjit/kernel_store.h>

#include <c10/util/hash.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace tjit {
namespace {

namespace fs = std::filesystem;
using detail::CorruptStoreFile;
using detail::KernelEntry;
using detail::KernelSignature;
using detail::DecisionRecord;

struct Counters {
  std::atomic<uint64_t> signature_hits{0};
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
  std::atomic<uint64_t> stale{0};
  std::atomic<uint64_t> corrupt{0};
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> write_failures{0};
  std::atomic<uint64_t> tuning_hits{0};
};

struct StoreState {
  std::mutex mutex;
  bool resolved = false;
  std::optional<std::string> directory;
  bool write_failure_logged = false;
  std::unordered_set<std::string> logged_damage;
  Counters counters;
};

StoreState& state() {
  static StoreState s;
  return s;
}

// The store's folder (chosen from the environment on first use), or nullopt when it is off.
std::optional<std::string> store_directory() {
  StoreState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.resolved) {
    s.directory = detail::settings::kernel_store_directory();
    s.resolved = true;
  }
  return s.directory;
}

// <folder>/v<format>, or nullopt when the store is off.
std::optional<fs::path> store_root() {
  const auto directory = store_directory();
  if (!directory) {
    return std::nullopt;
  }
  std::string version(1, 'v');  // appended, not "v" + ...: GCC 12 warns falsely (-Wrestrict) there
  version += std::to_string(detail::kStoreFormatVersion);
  return fs::path(*directory) / version;
}

std::string sha1_hex(const std::string& text) { return c10::sha1(text.empty() ? std::string(1, '\0') : text).str(); }

fs::path kernel_folder(const fs::path& root, const std::string& file, const std::string& function) {
  return root / (function + "-" + sha1_hex(file).substr(0, 16));
}

fs::path entry_path(const fs::path& root, const KernelSignature& kernel, const std::string& key) {
  return kernel_folder(root, kernel.file, kernel.function) / (sha1_hex(key).substr(0, 32) + ".tjk");
}

// Named by the key's hash; the key holds the sources' fingerprints and the Triton version, so an
// edited kernel looks up another file.
fs::path decision_record_path(const fs::path& root, const KernelSignature& kernel, const std::string& key) {
  return kernel_folder(root, kernel.file, kernel.function) / ("decision-" + sha1_hex(key).substr(0, 32) + ".tjd");
}

// The folders from the store's folder down to `path`'s folder ("v1", "<function>-<hash>"), and its
// file name; nullopt when `path` is not inside the store's folder.
struct StorePlace {
  fs::path directory;
  std::vector<std::string> folders;
  std::string name;
};

std::optional<StorePlace> place_of(const fs::path& path) {
  const auto directory = store_directory();
  if (!directory) {
    return std::nullopt;
  }
  StorePlace place{fs::path(*directory), {}, path.filename().string()};
  for (const fs::path& part : path.parent_path().lexically_relative(place.directory)) {
    if (part == ".." || part.empty()) {
      return std::nullopt;
    }
    if (part != ".") {
      place.folders.push_back(part.string());
    }
  }
  return place;
}

// Opens `path`'s folder through detail::open_store_folder: nullopt when it is missing, or refused
// (reported once).
std::optional<detail::Descriptor> open_folder_of(const StorePlace& place, bool create) {
  detail::StoreOpen folder = detail::open_store_folder(place.directory, place.folders, create);
  if (folder.refused) {
    detail::report_refusal(*folder.refused);
  }
  if (!folder.fd) {
    return std::nullopt;
  }
  return std::move(folder.fd);
}

// The bytes of store file `path`, read from a descriptor that was checked (store_access.h); nullopt
// when it is missing, unreadable or refused.
std::optional<std::string> read_file(const fs::path& path) {
  const auto place = place_of(path);
  if (!place) {
    return std::nullopt;
  }
  const auto folder = open_folder_of(*place, /*create=*/false);
  if (!folder) {
    return std::nullopt;
  }
  detail::StoreOpen file = detail::open_store_file(*folder, path.parent_path(), place->name);
  if (file.refused) {
    detail::report_refusal(*file.refused);
  }
  if (!file.fd) {
    return std::nullopt;
  }
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(file.fd.get(), buffer, sizeof(buffer));
    if (n == 0) {
      return bytes;
    }
    if (n < 0 && errno != EINTR) {
      return std::nullopt;
    }
    if (n > 0) {
      bytes.append(buffer, static_cast<size_t>(n));
    }
  }
}

void report_damage(const fs::path& path, const std::string& reason) {
  StoreState& s = state();
  s.counters.corrupt.fetch_add(1);
  std::lock_guard lock(s.mutex);
  if (s.logged_damage.insert(path.string()).second) {
    std::fprintf(stderr, "[tjit] kernel store: ignoring damaged %s (%s); it is recompiled and replaced\n",
                 path.c_str(), reason.c_str());
  }
}

// The decoded store file at `path`; nullopt when it is missing or damaged (damage is reported).
template <typename T>
std::optional<T> read_store_file(const fs::path& path, T (*decode)(const std::string&)) {
  const auto bytes = read_file(path);
  if (!bytes) {
    return std::nullopt;
  }
  try {
    return decode(*bytes);
  } catch (const detail::OutdatedStoreFile&) {
    state().counters.stale.fetch_add(1);
    return std::nullopt;
  } catch (const CorruptStoreFile& e) {
    report_damage(path, e.what());
    return std::nullopt;
  }
}

// Writes `bytes` to a new temporary file in `path`'s folder (made with the store's private or
// group modes, store_access.h), flushes it to disk, then renames it into place: a reader sees the
// old file or the whole new one, never a part, and a power cut after the rename leaves the whole
// file, not a truncated one. False on failure (after one warning per process) or when the folder
// is refused (reported once per path).
bool write_atomically(const fs::path& path, const std::string& bytes) {
  static std::atomic<uint64_t> sequence{0};
  StoreState& s = state();
  const auto place = place_of(path);
  if (!place) {
    return false;
  }
  errno = 0;
  const auto failure = [] { return errno != 0 ? errno : EIO; };
  int error = 0;
  detail::StoreOpen opened = detail::open_store_folder(place->directory, place->folders, /*create=*/true);
  if (opened.refused) {
    detail::report_refusal(*opened.refused);
    return false;
  }
  if (!opened.fd) {
    error = failure();
  } else {
    const int folder = opened.fd.get();
    std::string name(1, '.');  // hidden, unique per process and write, renamed into place
    name += place->name;
    name += '.';
    name += std::to_string(::getpid());
    name += '.';
    name += std::to_string(sequence.fetch_add(1));
    name += ".tmp";
    detail::Descriptor file = detail::create_store_file(opened.fd, name);
    if (!file) {
      error = failure();
    } else {
      for (size_t done = 0; done < bytes.size() && error == 0;) {
        const ssize_t n = ::write(file.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno != EINTR) {
          error = failure();
        } else if (n > 0) {
          done += static_cast<size_t>(n);
        }
      }
      if (error == 0 && ::fsync(file.get()) != 0) {
        error = failure();
      }
      if (::close(file.release()) != 0 && error == 0) {
        error = failure();
      }
      if (error == 0 && ::renameat(folder, name.c_str(), folder, place->name.c_str()) != 0) {
        error = failure();
      }
      if (error != 0) {
        ::unlinkat(folder, name.c_str(), 0);
      }
    }
    if (error == 0) {
      ::fsync(folder);  // the rename is on disk, not only in the page cache
    }
  }
  if (error == 0) {
    s.counters.writes.fetch_add(1);
    return true;
  }
  s.counters.write_failures.fetch_add(1);
  std::lock_guard lock(s.mutex);
  if (!s.write_failure_logged) {
    s.write_failure_logged = true;
    std::fprintf(stderr,
                 "[tjit] kernel store: cannot write %s (%s); compiled kernels stay in memory only. Set "
                 "TJIT_CACHE_DIR to a writable folder, or TJIT_CACHE=0 to turn the store off.\n",
                 path.c_str(), std::strerror(error));
  }
  return false;
}

// write_atomically, then keeps the store under its bound.
void write_to_store(const fs::path& root, const fs::path& path, const std::string& bytes) {
  if (write_atomically(path, bytes)) {
    detail::note_store_write(root, bytes.size());
  }
}

// Whether `recorded` was made by the Triton this process compiles with (any, when none is
// installed: then the store is all there is).
bool same_triton(const std::string& recorded) {
  const std::string& current = detail::compiler_identity().triton_version;
  return current.empty() || recorded == current;
}

bool sources_current(const std::vector<detail::SourceFile>& sources) {
  for (const detail::SourceFile& f : sources) {
    const auto now = detail::source_fingerprint(f.path);
    if (!now || *now != f.fingerprint) {
      return false;
    }
  }
  return !sources.empty();
}

}  // namespace

std::optional<std::string> kernel_store_directory() { return store_directory(); }

void set_kernel_store_directory(std::optional<std::string> directory) {
  StoreState& s = state();
  std::lock_guard lock(s.mutex);
  if (directory) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(*directory, ec);
    directory = (ec ? fs::path(*directory) : absolute).lexically_normal().string();
  }
  s.directory = std::move(directory);
  s.resolved = true;
  s.write_failure_logged = false;
}

KernelStoreCounters kernel_store_counters() {
  const Counters& c = state().counters;
  KernelStoreCounters out;
  out.signature_hits = c.signature_hits.load();
  out.hits = c.hits.load();
  out.misses = c.misses.load();
  out.stale = c.stale.load();
  out.corrupt = c.corrupt.load();
  out.writes = c.writes.load();
  out.tuning_hits = c.tuning_hits.load();
  out.write_failures = c.write_failures.load();
  out.evictions = detail::store_evictions();
  out.refused = detail::store_refusals();
  return out;
}

KernelStorePruneResult prune_kernel_store(uint64_t max_bytes) {
  const auto root = store_root();
  return root ? detail::prune_store_folder(*root, max_bytes, /*wait=*/true) : KernelStorePruneResult{};
}

namespace detail {

std::optional<KernelSignature> load_stored_signature(const std::string& file, const std::string& function) {
  const auto root = store_root();
  if (!root) {
    return std::nullopt;
  }
  const fs::path path = kernel_folder(*root, file, function) / "signature.tjs";
  auto signature = read_store_file(path, &decode_signature);
  if (!signature) {
    return std::nullopt;
  }
  if (signature->file != file || signature->function != function) {
    report_damage(path, "it records " + signature->function + " from " + signature->file);
    return std::nullopt;
  }
  if (!same_triton(signature->triton_version) || !sources_current(signature->sources)) {
    return std::nullopt;
  }
  state().counters.signature_hits.fetch_add(1);
  return signature;
}

void store_signature(const KernelSignature& signature) {
  const auto root = store_root();
  if (root) {
    write_to_store(*root, kernel_folder(*root, signature.file, signature.function) / "signature.tjs",
                   encode_signature(signature));
  }
}

std::string kernel_store_key(const KernelSignature& kernel, const Specialization& spec,
                             const LaunchOptions& options, const CompileTarget& target) {
  std::string environment = compiler_identity().environment;
  for (char& c : environment) {
    c = c == '\n' ? ';' : c;
  }
  return "tjit kernel store v" + std::to_string(kStoreFormatVersion) + "\nfile " + kernel.file + "\nfunction " +
         kernel.function + "\nsignature " + spec.describe(parameter_names(kernel.params)) +
         "\noptions num_warps=" + std::to_string(options.num_warps) +
         " num_stages=" + std::to_string(options.num_stages) + " num_ctas=" + std::to_string(options.num_ctas) +
         " enable_fp_fusion=" + std::to_string(options.enable_fp_fusion) +
         " launch_cooperative_grid=" + std::to_string(options.launch_cooperative_grid) +
         " launch_pdl=" + std::to_string(options.launch_pdl) +
         // Only when set, so keys of kernels without a register limit stay those of earlier tjits.
         (options.maxnreg != 0 ? " maxnreg=" + std::to_string(options.maxnreg) : std::string()) +
         "\ntarget " + target.to_string() +
         "\nenvironment " + environment + "\n";
}

std::optional<KernelEntry> load_stored_kernel(const KernelSignature& kernel, const std::string& key) {
  const auto root = store_root();
  if (!root) {
    return std::nullopt;
  }
  Counters& counters = state().counters;
  const fs::path path = entry_path(*root, kernel, key);
  auto entry = read_store_file(path, &decode_entry);
  if (entry && entry->key != key) {
    report_damage(path, "it holds the entry of another key");
    entry.reset();
  }
  if (entry && (!same_triton(entry->kernel.triton_version) || !sources_current(entry->kernel.sources))) {
    counters.stale.fetch_add(1);
    entry.reset();
  }
  (entry ? counters.hits : counters.misses).fetch_add(1);
  if (entry) {
    detail::mark_store_file_used(path);
  }
  return entry;
}

void store_kernel(const KernelEntry& entry) {
  const auto root = store_root();
  if (root) {
    write_to_store(*root, entry_path(*root, entry.kernel, entry.key), encode_entry(entry));
  }
}

std::optional<DecisionRecord> load_decision_record(const KernelSignature& kernel, const std::string& key) {
  const auto root = store_root();
  if (!root) {
    return std::nullopt;
  }
  const fs::path path = decision_record_path(*root, kernel, key);
  auto record = read_store_file(path, &decode_decision_record);
  if (record && record->key != key) {
    report_damage(path, "it holds the decision of another key");
    record.reset();
  }
  if (record) {
    state().counters.tuning_hits.fetch_add(1);
    detail::mark_store_file_used(path);
  }
  return record;
}

void store_decision_record(const KernelSignature& kernel, const DecisionRecord& record) {
  if (const auto root = store_root()) {
    write_to_store(*root, decision_record_path(*root, kernel, record.key), encode_decision_record(record));
  }
}

void report_unusable_stored_kernel(const KernelSignature& kernel, const std::string& key, const std::string& reason) {
  if (const auto root = store_root()) {
    report_damage(entry_path(*root, kernel, key), reason);
  }
}

}  // namespace detail
}  // namespace tjit
