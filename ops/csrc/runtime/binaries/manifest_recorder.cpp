// Recording manifests (tjit/kernel_manifest.h): every specialisation the process launches is noted
// (once per kernel, specialisation and options); while a manifest is being recorded, each new one
// is merged into its file at once, under an flock, and the file is replaced atomically.

#include "binaries/manifest_recorder.h"

#include "binaries/constexpr_json.h"
#include "settings/settings.h"

#include <tjit/kernel_manifest.h>

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace tjit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct Launched {
  std::string file;  // absolute
  json entry;        // with "file" absolute
};

struct RecorderState {
  std::mutex mutex;
  bool environment_read = false;
  std::optional<std::string> path;
  std::unordered_set<std::string> seen;  // canonical text of every launched specialisation
  std::vector<Launched> launched;
};

RecorderState& state() {
  static RecorderState s;
  return s;
}

// A tuple parameter's manifest value: an array with, per element, its type (":16" when divisible),
// its constexpr value, or a nested array. `pos` walks the type text ("[*fp32,[i32,constexpr]]").
json tuple_json(const Specialization& spec, const std::string& type, size_t& pos, std::vector<int>& path) {
  if (type[pos] == '[') {
    ++pos;
    json elements = json::array();
    for (int e = 0; type[pos] != ']'; ++e) {
      if (e > 0) {
        ++pos;  // ','
      }
      path.push_back(e);
      elements.push_back(tuple_json(spec, type, pos, path));
      path.pop_back();
    }
    ++pos;
    return elements;
  }
  const size_t end = type.find_first_of(",]", pos);
  std::string leaf = type.substr(pos, end - pos);
  pos = end;
  if (leaf == "constexpr") {
    for (const auto& [p, v] : spec.tuple_constexprs) {
      if (p == path) {
        return detail::constexpr_value_json<json>(v);
      }
    }
    return nullptr;
  }
  for (const auto& p : spec.tuple_divisible_by_16) {
    if (p == path) {
      leaf += ":16";
    }
  }
  return leaf;
}

json entry_json(const std::string& file, const std::string& function, const std::vector<KernelParam>& params,
                const Specialization& spec, const LaunchOptions& o) {
  json args = json::object();
  for (size_t i = 0; i < spec.types.size() && i < params.size(); ++i) {
    const int index = static_cast<int>(i);
    if (!spec.types[i].empty() && spec.types[i][0] == '[') {
      size_t pos = 0;
      std::vector<int> path{index};
      args[params[i].name] = tuple_json(spec, spec.types[i], pos, path);
      continue;
    }
    if (spec.types[i] == "constexpr") {
      json value = nullptr;
      for (const auto& [j, v] : spec.constexprs) {
        if (j == index) {
          value = detail::constexpr_value_json<json>(v);
        }
      }
      args[params[i].name] = value;
      continue;
    }
    std::string type = spec.types[i];
    for (int d : spec.divisible_by_16) {
      if (d == index) {
        type += ":16";
      }
    }
    args[params[i].name] = type;
  }
  json options = {{"num_warps", o.num_warps}, {"num_stages", o.num_stages}};
  const LaunchOptions defaults;
  if (o.num_ctas != defaults.num_ctas) options["num_ctas"] = o.num_ctas;
  if (o.enable_fp_fusion != defaults.enable_fp_fusion) options["enable_fp_fusion"] = o.enable_fp_fusion;
  if (o.launch_cooperative_grid != defaults.launch_cooperative_grid)
    options["launch_cooperative_grid"] = o.launch_cooperative_grid;
  if (o.launch_pdl != defaults.launch_pdl) options["launch_pdl"] = o.launch_pdl;
  if (o.maxnreg != defaults.maxnreg) options["maxnreg"] = o.maxnreg;
  return {{"file", file}, {"function", function}, {"args", std::move(args)}, {"options", std::move(options)}};
}

// `file` as the manifest at `manifest` records it: relative to the manifest's folder when inside it.
std::string file_for_manifest(const std::string& file, const fs::path& manifest) {
  const fs::path folder = manifest.parent_path();
  const fs::path relative = fs::path(file).lexically_relative(folder);
  if (!relative.empty() && *relative.begin() != "..") {
    return relative.string();
  }
  return file;
}

// The entries of the manifest at `path` (none when it does not exist); throws std::runtime_error
// when the file is not a manifest.
std::vector<json> read_manifest_entries(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return {};
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return {};  // an empty file (e.g. made by mktemp): a manifest with nothing yet
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("it is not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("tjit_manifest") || j["tjit_manifest"] != 1 || !j.contains("entries") ||
      !j["entries"].is_array()) {
    throw std::runtime_error("it is not a version 1 tjit manifest ({\"tjit_manifest\": 1, \"entries\": [...]})");
  }
  return j["entries"].get<std::vector<json>>();
}

// Merges `launched` into the manifest at `path`: appends the entries it lacks. One line per entry,
// so manifests diff and merge well in version control.
void merge_into(const fs::path& path, const std::vector<Launched>& launched) {
  std::error_code ec;
  if (!path.parent_path().empty()) {
    fs::create_directories(path.parent_path(), ec);
  }
  // The manifest is replaced by a rename, so the lock is on its folder (flock works on folders).
  const std::string folder = path.parent_path().empty() ? std::string(".") : path.parent_path().string();
  const int lock_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd < 0) {
    throw std::runtime_error("cannot open the folder " + folder + ": " + std::strerror(errno));
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the flock
  } unlock{lock_fd};
  while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  std::vector<json> entries = read_manifest_entries(path);
  std::unordered_set<std::string> present;
  for (const json& e : entries) {
    present.insert(e.dump());
  }
  bool added = false;
  for (const Launched& l : launched) {
    json e = l.entry;
    e["file"] = file_for_manifest(l.file, path);
    if (present.insert(e.dump()).second) {
      entries.push_back(std::move(e));
      added = true;
    }
  }
  if (!added && fs::exists(path, ec)) {
    return;
  }
  std::string text = "{\"tjit_manifest\": 1, \"entries\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    text += i == 0 ? "\n  " : ",\n  ";
    text += entries[i].dump();
  }
  text += "\n]}\n";
  const fs::path temporary = path.string() + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      fs::remove(temporary, ec);
      throw std::runtime_error("cannot write " + temporary.string());
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    fs::remove(temporary, ec);
    throw std::runtime_error("cannot replace " + path.string() + ": " + ec.message());
  }
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  return (ec ? fs::path(path) : absolute).lexically_normal().string();
}

// Reads TJIT_RECORD on first use. Call with the mutex held.
void read_environment(RecorderState& s) {
  if (s.environment_read) {
    return;
  }
  s.environment_read = true;
  const std::optional<std::string> path = detail::settings::record_manifest();
  if (!path) {
    return;
  }
  try {
    merge_into(absolute_path(*path), {});
    s.path = absolute_path(*path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[tjit] TJIT_RECORD=%s: not recording a manifest: %s\n", path->c_str(), e.what());
  }
}

// Keeps `l` (once) and merges it into the manifest being recorded, if any. Throws only for `l`
// itself; a failed write stops recording with one log line.
void note(const Launched& l) {
  RecorderState& s = state();
  std::lock_guard lock(s.mutex);
  read_environment(s);
  if (!s.seen.insert(l.entry.dump()).second) {
    return;
  }
  s.launched.push_back(l);
  if (s.path) {
    try {
      merge_into(*s.path, {l});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[tjit] stopped recording the manifest %s: %s\n", s.path->c_str(), e.what());
      s.path.reset();
    }
  }
}

}  // namespace

void start_recording_manifest(const std::string& path) {
  RecorderState& s = state();
  std::lock_guard lock(s.mutex);
  s.environment_read = true;
  const std::string absolute = absolute_path(path);
  try {
    merge_into(absolute, s.launched);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "tjit: cannot record a manifest into ", absolute, ": ", e.what());
  }
  s.path = absolute;
}

void stop_recording_manifest() {
  RecorderState& s = state();
  std::lock_guard lock(s.mutex);
  s.environment_read = true;
  s.path.reset();
}

std::optional<std::string> recording_manifest() {
  RecorderState& s = state();
  std::lock_guard lock(s.mutex);
  read_environment(s);
  return s.path;
}

namespace detail {

std::string manifest_entry_json(const std::string& file, const std::string& function,
                                const std::vector<KernelParam>& params, const Specialization& spec,
                                const LaunchOptions& options) {
  return entry_json(file, function, params, spec, options).dump();
}

void note_launched_specialization(const KernelSignature& kernel, const Specialization& spec,
                                  const LaunchOptions& options) {
  try {
    note(Launched{kernel.file, entry_json(kernel.file, kernel.function, kernel.params, spec, options)});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[tjit] could not note a launched specialisation of %s: %s\n", kernel.function.c_str(),
                 e.what());
  }
}

void note_decision(const KernelSignature& kernel, const std::string& kind, const std::string& decision) {
  try {
    if (!recording_manifest()) {
      return;  // only a manifest keeps decisions (start_recording_manifest gets specialisations only)
    }
    json entry = {{"file", kernel.file}, {"function", kernel.function}};
    entry[kind] = json::parse(decision);
    note(Launched{kernel.file, std::move(entry)});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[tjit] could not note a decision of %s: %s\n", kernel.function.c_str(), e.what());
  }
}

}  // namespace detail
}  // namespace tjit
