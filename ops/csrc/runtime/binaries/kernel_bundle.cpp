// Kernel bundles (tjit/kernel_bundle.h): the registry of bundles a process has, and lookups in
// them. Registration only records where the bytes are; a bundle's index is read on its first
// lookup, and an entry's binary (checked against its own SHA-1) when it is first used.

#include "binaries/kernel_bundle_detail.h"

#include "binaries/source_fingerprint.h"

#include <tjit/kernel_bundle.h>

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tjit {
namespace {

namespace fs = std::filesystem;
using detail::BundleIndex;
using detail::CorruptStoreFile;
using detail::KernelSignature;

std::string file_name_of(const std::string& path) { return fs::path(path).filename().string(); }

using detail::bundle_key;

struct Bundle {
  std::string name;
  bool embedded = false;
  std::string owned;  // the bytes of a loaded file; embedded bundles point into the program
  std::string_view bytes;

  // Set on first use (under the registry's mutex).
  bool indexed = false;
  std::string damage;  // why the bundle is unusable; empty when it is fine
  BundleIndex index;
  std::unordered_map<std::string, size_t> entries;  // bundle_key -> index.entries position
  // Per kernel and runtime file path: whether that file is the source the kernel was built from.
  std::unordered_map<std::string, bool> source_matches;

  void index_now() {
    indexed = true;
    try {
      index = detail::decode_bundle_index(bytes);
    } catch (const CorruptStoreFile& e) {
      damage = e.what();
      return;
    }
    entries.reserve(index.entries.size());
    for (size_t i = 0; i < index.entries.size(); ++i) {
      entries.emplace(index.entries[i].key, i);
    }
  }

  KernelBundleInfo info() const {
    KernelBundleInfo out;
    out.name = name;
    out.embedded = embedded;
    out.targets = index.targets;
    out.triton_version = index.triton_version;
    out.num_kernels = index.kernels.size();
    out.num_entries = index.entries.size();
    return out;
  }
};

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Bundle>> bundles;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string describe(const Bundle& b) {
  return b.embedded ? "the kernel bundle '" + b.name + "' embedded in this program" : "the kernel bundle " + b.name;
}

// Indexes `b` if needed; throws c10::Error if it is damaged. Call with the registry's mutex held.
void require_usable(Bundle& b) {
  if (!b.indexed) {
    b.index_now();
  }
  TORCH_CHECK(b.damage.empty(), "tjit: ", describe(b), " is damaged (", b.damage, "); ",
              b.embedded ? "rebuild the program" : "rebuild it with python -m tjit aot build");
}

// Whether kernel `k` of `b` was built from the sources `file` has: compared where they exist (the
// kernel file at the runtime's path, its imports at the paths they had when the bundle was built).
bool sources_match(Bundle& b, size_t k, const std::string& file) {
  const std::string key = std::to_string(k) + '\0' + file;
  if (auto it = b.source_matches.find(key); it != b.source_matches.end()) {
    return it->second;
  }
  const KernelSignature& sig = b.index.kernels[k].signature;
  bool match = true;
  std::string differing;
  for (size_t i = 0; i < sig.sources.size() && match; ++i) {
    const std::string& path = i == 0 ? file : sig.sources[i].path;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      continue;  // deployed without its sources: the bundle is all there is
    }
    const auto now = detail::source_fingerprint(path);
    if (now && *now != sig.sources[i].fingerprint) {
      match = false;
      differing = path;
    }
  }
  if (!match) {
    std::fprintf(stderr, "[tjit] %s: not using its %s: %s is not the source it was built from\n",
                 describe(b).c_str(), sig.function.c_str(), differing.c_str());
  }
  b.source_matches.emplace(key, match);
  return match;
}

// Positions of the kernels of `b` that are `function` from a file named like `file` and built
// from its sources.
std::vector<size_t> matching_kernels(Bundle& b, const std::string& file, const std::string& function) {
  std::vector<size_t> out;
  const std::string name = file_name_of(file);
  for (size_t k = 0; k < b.index.kernels.size(); ++k) {
    const BundleIndex::Kernel& kernel = b.index.kernels[k];
    if (kernel.signature.function == function && kernel.file_name == name && sources_match(b, k, file)) {
      out.push_back(k);
    }
  }
  return out;
}

}  // namespace

KernelBundleInfo load_bundle(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  const std::string name = (ec ? fs::path(path) : absolute).lexically_normal().string();
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    for (const auto& b : r.bundles) {
      if (!b->embedded && b->name == name) {
        return b->info();
      }
    }
  }
  std::ifstream in(name, std::ios::binary);
  TORCH_CHECK(in.good(), "tjit: cannot open the kernel bundle ", name, ": ", std::strerror(errno));
  auto bundle = std::make_unique<Bundle>();
  in.seekg(0, std::ios::end);
  bundle->owned.resize(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)));
  in.seekg(0, std::ios::beg);
  in.read(bundle->owned.data(), static_cast<std::streamsize>(bundle->owned.size()));
  TORCH_CHECK(!in.bad() && in.gcount() == static_cast<std::streamsize>(bundle->owned.size()),
              "tjit: cannot read the kernel bundle ", name);
  bundle->name = name;
  bundle->bytes = bundle->owned;
  bundle->index_now();
  TORCH_CHECK(bundle->damage.empty(), "tjit: cannot load the kernel bundle ", name, ": it is damaged (",
              bundle->damage, "); rebuild it with python -m tjit aot build");
  std::lock_guard lock(r.mutex);
  r.bundles.push_back(std::move(bundle));
  return r.bundles.back()->info();
}

bool register_embedded_bundle(const void* data, size_t size, const char* name) noexcept {
  try {
    auto bundle = std::make_unique<Bundle>();
    bundle->name = name != nullptr ? name : "unnamed";
    bundle->embedded = true;
    bundle->bytes = std::string_view(static_cast<const char*>(data), size);
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.bundles.push_back(std::move(bundle));
    return true;
  } catch (...) {
    std::fprintf(stderr, "[tjit] could not register the embedded kernel bundle '%s'\n", name ? name : "unnamed");
    return false;
  }
}

std::vector<KernelBundleInfo> loaded_bundles() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<KernelBundleInfo> out;
  for (const auto& b : r.bundles) {
    require_usable(*b);
    out.push_back(b->info());
  }
  return out;
}

namespace detail {

std::optional<KernelSignature> find_bundled_signature(const std::string& file, const std::string& function) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& b : r.bundles) {
    require_usable(*b);
    for (size_t k : matching_kernels(*b, file, function)) {
      KernelSignature sig = b->index.kernels[k].signature;
      sig.file = file;
      return sig;
    }
  }
  return std::nullopt;
}

std::optional<CompiledKernel> find_bundled_kernel(const std::string& file, const std::string& function,
                                                  const Specialization& spec, const LaunchOptions& options,
                                                  const CompileTarget& target) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string key = bundle_key(function, file_name_of(file), spec, options, target);
  for (const auto& b : r.bundles) {
    require_usable(*b);
    const auto it = b->entries.find(key);
    if (it == b->entries.end()) {
      continue;
    }
    const BundleIndex::Entry& record = b->index.entries[it->second];
    if (!sources_match(*b, record.kernel, file)) {
      continue;
    }
    const std::string_view bytes = b->bytes.substr(b->index.payload_offset + record.offset, record.size);
    KernelEntry entry;
    try {
      entry = decode_entry(std::string(bytes));
      if (!entry_matches_index(entry, record, b->index.kernels[record.kernel])) {
        throw CorruptStoreFile("the entry differs from its index record");
      }
    } catch (const CorruptStoreFile& e) {
      TORCH_CHECK(false, "tjit: ", describe(*b), " is damaged: its entry for ", function, " for ",
                  target.to_string(), " (", e.what(), "); ",
                  b->embedded ? "rebuild the program" : "rebuild it with python -m tjit aot build");
    }
    return std::move(entry.compiled);
  }
  return std::nullopt;
}

std::optional<std::string> find_bundled_decision(const std::string& file, const std::string& function,
                                                 const std::string& kind, const std::string& key) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string decision_key = bundle_decision_key(kind, key);
  for (const auto& b : r.bundles) {
    require_usable(*b);
    for (size_t k : matching_kernels(*b, file, function)) {
      const auto& decisions = b->index.kernels[k].decisions;
      if (const auto it = decisions.find(decision_key); it != decisions.end()) {
        return it->second;
      }
    }
  }
  return std::nullopt;
}

std::string describe_bundle_coverage(const std::string& file, const std::string& function,
                                     const Specialization& spec, const LaunchOptions& options,
                                     const CompileTarget& target) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.bundles.empty()) {
    return "no kernel bundle is loaded";
  }
  std::string names;
  std::vector<std::string> other_targets;
  bool has_kernel = false;
  for (const auto& b : r.bundles) {
    if (!b->indexed) {
      b->index_now();
    }
    names += (names.empty() ? "" : ", ") + (b->embedded ? "'" + b->name + "' (embedded)" : b->name);
    if (!b->damage.empty()) {
      names += " (damaged)";
      continue;
    }
    std::string targets;
    for (const std::string& t : b->index.targets) {
      targets += (targets.empty() ? "" : " ") + t;
    }
    names += " [" + targets + "]";
    if (matching_kernels(*b, file, function).empty()) {
      continue;
    }
    has_kernel = true;
    for (const std::string& t : b->index.targets) {
      const CompileTarget other = CompileTarget::parse(t);
      if (b->entries.count(bundle_key(function, file_name_of(file), spec, options, other)) != 0) {
        other_targets.push_back(t);
      }
    }
  }
  if (!other_targets.empty()) {
    std::string list;
    for (const std::string& t : other_targets) {
      list += (list.empty() ? "" : ", ") + t;
    }
    return "the kernel bundles (" + names + ") have this specialisation for " + list + " only, not for " +
           target.to_string() + " (rebuild them with --target " + target.backend + ":" + std::to_string(target.arch) +
           ")";
  }
  if (has_kernel) {
    return "the kernel bundles (" + names + ") have " + function + " but not this specialisation and options";
  }
  return "no kernel bundle (" + names + ") has " + function + " from a file named " + file_name_of(file) +
         " built from its current source";
}

}  // namespace detail
}  // namespace tjit
