#include "binaries/source_fingerprint.h"

#include <c10/util/hash.h>

#include <fstream>
#include <iterator>
#include <mutex>
#include <unordered_map>

namespace tjit::detail {
namespace {

std::mutex& memo_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_map<std::string, std::string>& memo() {
  static std::unordered_map<std::string, std::string> fingerprints;
  return fingerprints;
}

}  // namespace

std::string git_blob_id(const std::string& bytes) {
  // The "blob <size>\0" prefix also keeps the input non-empty, which c10::sha1 needs.
  std::string blob = "blob " + std::to_string(bytes.size());
  blob.push_back('\0');
  blob += bytes;
  return c10::sha1(blob).str();
}

std::optional<std::string> source_fingerprint(const std::string& path) {
  {
    std::lock_guard lock(memo_mutex());
    if (auto it = memo().find(path); it != memo().end()) {
      return it->second;
    }
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return std::nullopt;  // not remembered: the file may appear later
  }
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) {
    return std::nullopt;
  }
  std::lock_guard lock(memo_mutex());
  return memo().emplace(path, git_blob_id(bytes)).first->second;  // another thread's first view wins
}

bool note_source_fingerprint(const std::string& path, const std::string& fingerprint) {
  std::lock_guard lock(memo_mutex());
  return memo().emplace(path, fingerprint).first->second == fingerprint;
}

}  // namespace tjit::detail
