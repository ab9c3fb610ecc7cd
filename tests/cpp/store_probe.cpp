// tjit_store_probe: one fresh process's use of the kernel store, for the multi-process tests in
// tests/python/test_kernel_store.py (warm starts without Python, invalidation, damaged entries,
// concurrent writers, unwritable folders).
//
//   tjit_store_probe KERNEL_FILE FUNCTION TARGET BLOCK...
//
// FUNCTION must take (x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr). For each BLOCK the probe asks
// TritonJitFunction::compile for TARGET's binary (no GPU needed) and prints one line
//   block=<BLOCK> store=<1 if read from the store, else 0> symbol=<name> binary=<git blob id>
// then `python=<1 if libpython is mapped into the process>` and the store's counters. Errors go
// to stderr as `error: <message>` with exit status 3.

#include "binaries/source_fingerprint.h"

#include <tjit/kernel_store.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

bool libpython_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libpython") != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s KERNEL_FILE FUNCTION TARGET BLOCK...\n", argv[0]);
    return 2;
  }
  try {
    auto& fn = tjit::TritonJitFunction::get_instance(argv[1], argv[2]);
    const auto target = tjit::CompileTarget::parse(argv[3]);
    const at::Tensor x = at::empty({4096}, at::kFloat);
    const at::Tensor out = at::empty({4096}, at::kFloat);
    for (int i = 4; i < argc; ++i) {
      const int64_t block = std::atoll(argv[i]);
      const size_t stored_before = fn.num_loaded_from_store();
      const tjit::CompiledKernel k = fn.compile(target, tjit::LaunchOptions{}, x, out, int64_t{4096}, 2.0f, block);
      std::printf("block=%lld store=%d symbol=%s binary=%s\n", static_cast<long long>(block),
                  fn.num_loaded_from_store() > stored_before ? 1 : 0, k.name.c_str(),
                  tjit::detail::git_blob_id(k.binary).c_str());
    }
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what_without_backtrace());
    return 3;
  }
  const tjit::KernelStoreCounters c = tjit::kernel_store_counters();
  std::printf("python=%d\n", libpython_mapped() ? 1 : 0);
  std::printf("counters signature_hits=%llu hits=%llu misses=%llu stale=%llu corrupt=%llu writes=%llu "
              "write_failures=%llu refused=%llu\n",
              static_cast<unsigned long long>(c.signature_hits), static_cast<unsigned long long>(c.hits),
              static_cast<unsigned long long>(c.misses), static_cast<unsigned long long>(c.stale),
              static_cast<unsigned long long>(c.corrupt), static_cast<unsigned long long>(c.writes),
              static_cast<unsigned long long>(c.write_failures), static_cast<unsigned long long>(c.refused));
  const auto dir = tjit::kernel_store_directory();
  std::printf("directory=%s\n", dir ? dir->c_str() : "(off)");
  return 0;
}
