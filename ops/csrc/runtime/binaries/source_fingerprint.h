#pragma once
// Fingerprints of kernel source files: how the kernel store notices that a kernel file, or a
// file it imports, changed since a binary was compiled from it.

#include <optional>
#include <string>

namespace tjit::detail {

// The git blob id of `bytes` (SHA-1 of "blob <size>\0" + bytes): what the store records per
// source file. The embedded Triton adapter computes the same in Python.
std::string git_blob_id(const std::string& bytes);

// The fingerprint of `path` as this process first saw it; nullopt when it cannot be read. A
// process keeps its first view, as Python keeps a module it imported: the binaries it compiles
// and the entries it accepts then always refer to the same source.
std::optional<std::string> source_fingerprint(const std::string& path);

// Records the fingerprint of the source Python executed for `path`. Returns false when this
// process saw different content for it before (the file changed while the process ran).
bool note_source_fingerprint(const std::string& path, const std::string& fingerprint);

}  // namespace tjit::detail
