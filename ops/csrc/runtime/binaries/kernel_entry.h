#pragma once
// The kernel store's two file formats (docs/design.md, "Kernel store"; ops/kernel_store.py reads
// them too):
//   - a kernel entry: one compiled specialisation, self-describing: the binary, its symbol and
//     launch metadata, the specialisation and options it was compiled for, the kernel's static
//     signature, and the fingerprints of the sources it was compiled from;
//   - a signature record: the static signature of one @triton.jit function, so a process can
//     learn a kernel's parameters without Python.
// Both are framed the same way: magic, format version, lengths and a SHA-1 of the contents, then
// a JSON header and the binary. Any damage (truncation, flipped bytes, garbage) fails decoding.

#include <tjit/compiled_kernel.h>
#include <tjit/kernel_param.h>
#include <tjit/launch_types.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tjit::detail {

// Bumped whenever either format or the meaning of a key changes; old entries are then ignored.
inline constexpr uint32_t kStoreFormatVersion = 1;

// A source file a kernel was compiled from, with the git blob id of the content compiled.
struct SourceFile {
  std::string path;
  std::string fingerprint;
  bool operator==(const SourceFile& o) const { return path == o.path && fingerprint == o.fingerprint; }
};

// What the runtime needs to know about a @triton.jit function besides its binaries.
struct KernelSignature {
  std::string file;  // absolute path
  std::string function;
  std::vector<KernelParam> params;
  std::vector<SourceFile> sources;  // the kernel file first
  std::string triton_version;       // of the Triton that read the signature
  // What @triton.autotune / @triton.heuristics add, as JSON (triton_adapter.autotune.tuning_description);
  // empty for a plain @triton.jit kernel.
  std::string tuning;
};

// A decision the runtime makes once and keeps in the store: which config of an autotuned kernel
// won for a tuning key on an architecture, or the values @triton.heuristics computed for a set of
// argument values. `key` is the text of everything that decided it; `value` is JSON.
struct DecisionRecord {
  std::string key;
  std::string value;
};

// One compiled specialisation.
struct KernelEntry {
  std::string key;  // the store key's text (what decides the binary); see kernel_store_detail.h
  KernelSignature kernel;
  Specialization specialization;
  LaunchOptions options;
  CompiledKernel compiled;  // binary, symbol, launch metadata, target
};

// What is wrong with bytes that should have been an entry or a record.
class CorruptStoreFile : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An intact record written by an earlier tjit that lacks what this one needs (a signature record
// from before autotune support): a miss that is replaced without a warning.
class OutdatedStoreFile : public CorruptStoreFile {
 public:
  using CorruptStoreFile::CorruptStoreFile;
};

std::string encode_entry(const KernelEntry& entry);
KernelEntry decode_entry(const std::string& bytes);  // throws CorruptStoreFile
std::string encode_signature(const KernelSignature& signature);
KernelSignature decode_signature(const std::string& bytes);  // throws CorruptStoreFile
std::string encode_decision_record(const DecisionRecord& record);
DecisionRecord decode_decision_record(const std::string& bytes);  // throws CorruptStoreFile

// A kernel bundle (tjit/kernel_bundle.h; written by ops/aot/bundle_format.py): magic, bundle format, index and
// payload sizes, a SHA-1 of the index, the index (the kernels as JSON, then a binary table of
// entry records: kernel, lookup key, place in the payload), then the payload: kernel entries as
// encode_entry writes them, each checked by its own SHA-1 when it is read. The records are binary
// because a first call must not parse a JSON document of every entry (473 KB, 11-18 ms for tjit's
// operators).
inline constexpr uint32_t kBundleFormatVersion = 1;

struct BundleIndex {
  struct Kernel {
    std::string file_name;  // how the runtime matches it: with the function, by file name
    KernelSignature signature;
    // What a recorded run decided for this kernel (ops/aot/builder.py writes them from manifests and
    // kernel stores): bundle_decision_key(kind, key) -> the value as JSON text. Kinds:
    // "heuristics" (key: the config index the heuristics saw and the caller's arguments; value:
    // {parameter: value}) and "autotune" (key: the target and the tuning key; value: the config's
    // text). Absent in bundles built before tjit shipped decisions.
    std::unordered_map<std::string, std::string> decisions;
  };
  struct Entry {
    size_t kernel = 0;    // into `kernels`
    std::string key;      // bundle_key of the entry
    uint64_t offset = 0;  // into the payload
    uint64_t size = 0;
  };
  std::string triton_version;
  std::vector<std::string> targets;
  std::vector<Kernel> kernels;
  std::vector<Entry> entries;
  uint64_t payload_offset = 0;  // where the payload starts in the bundle's bytes
};

// Checks the frame and the index (every entry inside the payload); throws CorruptStoreFile.
BundleIndex decode_bundle_index(std::string_view bytes);

// What decides a binary within a bundle: the kernel (function and file name), the specialisation,
// the options and the target, as one string. ops/aot/keys.py builds the same string for each record.
std::string bundle_key(const std::string& function, const std::string& file_name, const Specialization& spec,
                       const LaunchOptions& options, const CompileTarget& target);

// How a bundle's decisions are keyed: the kind, a newline, the decision's key.
inline std::string bundle_decision_key(const std::string& kind, const std::string& key) { return kind + "\n" + key; }

// Whether an entry read from a bundle is the one its index record describes.
bool entry_matches_index(const KernelEntry& entry, const BundleIndex::Entry& record, const BundleIndex::Kernel& kernel);

}  // namespace tjit::detail
