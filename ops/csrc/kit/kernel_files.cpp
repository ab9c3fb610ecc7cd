#include <tjit/kit/kernel_files.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace tjit::kit {

namespace fs = std::filesystem;

std::string find_kernel_dir(const void* anchor, const KernelDirSearch& search) {
  std::vector<fs::path> candidates;
  if (search.env_override != nullptr) {
    if (const char* env = std::getenv(search.env_override); env != nullptr && *env != '\0') {
      candidates.emplace_back(env);
    }
  }
  Dl_info info{};
  if (dladdr(anchor, &info) != 0 && info.dli_fname != nullptr) {
    const fs::path lib_dir = fs::path(info.dli_fname).parent_path();
    for (std::string_view relative : search.next_to_library) {
      candidates.push_back((lib_dir / relative).lexically_normal());
    }
  }
  if (!search.source_dir.empty()) {
    candidates.emplace_back(search.source_dir);
  }
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::exists(dir / search.probe_file, ec)) {
      return fs::weakly_canonical(dir, ec).string();
    }
  }
  return candidates.empty() ? std::string() : candidates.front().string();
}

}  // namespace tjit::kit
