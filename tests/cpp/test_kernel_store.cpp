// The kernel store in one process: its file formats (round trip, damage detection), its key, and
// compile() reading and writing it. Runs without a GPU (binaries for explicit targets). The
// multi-process behaviour (warm starts without Python, invalidation, concurrent writers) is
// tested from pytest with tjit_store_probe (tests/python/test_kernel_store.py).

#include "test_helpers.h"

#include "binaries/kernel_entry.h"
#include "binaries/kernel_store_bound.h"
#include "binaries/kernel_store_detail.h"
#include "binaries/source_fingerprint.h"

#include <tjit/kernel_store.h>
#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

// fsync(2) and renameat(2), interposed: this executable's definitions win symbol lookup over libc's
// for libtriton_jit's calls too. Each records what it did while `recording` is set, then calls
// libc's (KernelStoreTest.EntryIsOnDiskBeforeItIsRenamedIntoPlace).
namespace io_log {
std::mutex mutex;
bool recording = false;
std::vector<std::string> events;

void record(const std::string& event) {
  std::lock_guard lock(mutex);
  if (recording) {
    events.push_back(event);
  }
}
}  // namespace io_log

// The path an open descriptor names.
static std::string descriptor_path(int fd) {
  char path[4096] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), path, sizeof(path) - 1);
  return std::string(path, n > 0 ? static_cast<size_t>(n) : 0);
}

extern "C" int fsync(int fd) {
  static const auto real = reinterpret_cast<int (*)(int)>(::dlsym(RTLD_NEXT, "fsync"));
  io_log::record("fsync " + descriptor_path(fd));
  return real(fd);
}

// The store renames within a folder it opened (binaries/kernel_store.cpp: write_atomically).
extern "C" int renameat(int from_folder, const char* from, int to_folder, const char* to) noexcept {
  static const auto real =
      reinterpret_cast<int (*)(int, const char*, int, const char*)>(::dlsym(RTLD_NEXT, "renameat"));
  io_log::record("rename " + descriptor_path(from_folder) + "/" + from + " -> " + descriptor_path(to_folder) + "/" +
                 to);
  return real(from_folder, from, to_folder, to);
}

namespace {

namespace fs = std::filesystem;
using tjit::CompileTarget;
using tjit::LaunchOptions;
using tjit::TritonJitFunction;
using tjit::detail::CorruptStoreFile;
using tjit::detail::KernelEntry;

KernelEntry sample_entry() {
  KernelEntry e;
  e.kernel.file = "/kernels/k.py";
  e.kernel.function = "k";
  tjit::KernelParam ptr;
  ptr.name = "x_ptr";
  ptr.is_const = true;
  ptr.do_not_specialize_on_alignment = true;
  tjit::KernelParam n;
  n.name = "n";
  n.annotation_type = "i64";
  n.do_not_specialize = true;
  tjit::KernelParam block;
  block.name = "BLOCK";
  block.is_constexpr = true;
  tjit::KernelParam scale;
  scale.name = "SCALE";
  scale.is_constexpr = true;
  tjit::KernelParam flag;
  flag.name = "FLAG";
  flag.is_constexpr = true;
  tjit::KernelParam none;
  none.name = "NONE";
  none.is_constexpr = true;
  e.kernel.params = {ptr, n, block, scale, flag, none};
  e.kernel.sources = {{"/kernels/k.py", "0123456789abcdef0123456789abcdef01234567"},
                      {"/kernels/helpers.py", "89abcdef0123456789abcdef0123456789abcdef"}};
  e.kernel.triton_version = "3.6.0";
  e.specialization.types = {"*kfp32", "i64", "constexpr", "constexpr", "constexpr", "constexpr"};
  e.specialization.constexprs = {{2, int64_t{-1024}}, {3, 0.1}, {4, true}, {5, std::monostate{}}};
  e.specialization.divisible_by_16 = {0};
  e.options.num_warps = 8;
  e.options.num_stages = 2;
  e.options.num_ctas = 2;
  e.options.enable_fp_fusion = false;
  e.options.launch_pdl = true;
  e.key = "a key\nwith lines";
  e.compiled.name = "k_symbol";
  e.compiled.binary = std::string("\x7f" "ELF\0\1\2 binary", 14);
  e.compiled.target = CompileTarget::parse("cuda:80");
  e.compiled.shared_memory = 65536;
  e.compiled.num_warps = 8;
  e.compiled.num_ctas = 2;
  e.compiled.global_scratch_size = 128;
  e.compiled.global_scratch_align = 16;
  e.compiled.profile_scratch_size = 64;
  e.compiled.profile_scratch_align = 8;
  e.compiled.launch_cooperative_grid = true;
  e.compiled.launch_pdl = true;
  return e;
}

TEST(KernelStoreFormat, EntryRoundTrip) {
  const KernelEntry e = sample_entry();
  const KernelEntry d = tjit::detail::decode_entry(tjit::detail::encode_entry(e));
  EXPECT_EQ(d.key, e.key);
  EXPECT_EQ(d.kernel.file, e.kernel.file);
  EXPECT_EQ(d.kernel.function, e.kernel.function);
  EXPECT_EQ(d.kernel.params, e.kernel.params);
  EXPECT_EQ(d.kernel.sources, e.kernel.sources);
  EXPECT_EQ(d.kernel.triton_version, e.kernel.triton_version);
  EXPECT_EQ(d.specialization.types, e.specialization.types);
  EXPECT_EQ(d.specialization.constexprs, e.specialization.constexprs);  // 0.1 exactly, None, bool, int
  EXPECT_EQ(d.specialization.divisible_by_16, e.specialization.divisible_by_16);
  EXPECT_EQ(d.options.num_warps, 8);
  EXPECT_EQ(d.options.num_stages, 2);
  EXPECT_EQ(d.options.num_ctas, 2);
  EXPECT_FALSE(d.options.enable_fp_fusion);
  EXPECT_FALSE(d.options.launch_cooperative_grid);
  EXPECT_TRUE(d.options.launch_pdl);
  const tjit::CompiledKernel& c = d.compiled;
  EXPECT_EQ(c.name, "k_symbol");
  EXPECT_EQ(c.binary, e.compiled.binary);
  EXPECT_EQ(c.target.to_string(), "cuda:80:32");
  EXPECT_EQ(c.shared_memory, 65536);
  EXPECT_EQ(c.num_warps, 8);
  EXPECT_EQ(c.num_ctas, 2);
  EXPECT_EQ(c.global_scratch_size, 128);
  EXPECT_EQ(c.global_scratch_align, 16);
  EXPECT_EQ(c.profile_scratch_size, 64);
  EXPECT_EQ(c.profile_scratch_align, 8);
  EXPECT_TRUE(c.launch_cooperative_grid);
  EXPECT_TRUE(c.launch_pdl);
}

// How tensor descriptors launch travels with the binary: TMA metadata, or the decomposition's flags.
TEST(KernelStoreFormat, TensorDescriptorLaunchRoundTrip) {
  KernelEntry e = sample_entry();
  e.specialization.types[0] = "tensordesc<fp16[64, 32]>";
  e.specialization.types[1] = "tensordesc<bf16[8]>";
  tjit::DescriptorLaunch tma;
  tma.tma = true;
  tma.swizzle = 3;
  tma.elem_size = 2;
  tma.elem_type = 6;
  tma.block_size = {64, 32};
  tma.fp4_padded = true;
  tjit::DescriptorLaunch decomposed;
  decomposed.flags = 2;
  e.compiled.tensor_descriptors = {tma, decomposed};
  const KernelEntry d = tjit::detail::decode_entry(tjit::detail::encode_entry(e));
  EXPECT_EQ(d.compiled.tensor_descriptors, e.compiled.tensor_descriptors);
  EXPECT_TRUE(tjit::detail::decode_entry(tjit::detail::encode_entry(sample_entry())).compiled.tensor_descriptors.empty());
  // One descriptor too few for its signature: damaged, not launched with the wrong arguments.
  e.compiled.tensor_descriptors.pop_back();
  EXPECT_THROW(tjit::detail::decode_entry(tjit::detail::encode_entry(e)), std::exception);
}

TEST(KernelStoreFormat, SignatureRoundTrip) {
  const auto s = sample_entry().kernel;
  const auto d = tjit::detail::decode_signature(tjit::detail::encode_signature(s));
  EXPECT_EQ(d.file, s.file);
  EXPECT_EQ(d.function, s.function);
  EXPECT_EQ(d.params, s.params);
  EXPECT_EQ(d.sources, s.sources);
  EXPECT_EQ(d.triton_version, s.triton_version);
}

std::string decode_error(const std::string& bytes) {
  try {
    tjit::detail::decode_entry(bytes);
  } catch (const CorruptStoreFile& e) {
    return e.what();
  }
  return "(decoded)";
}

TEST(KernelStoreFormat, EveryTruncationIsDetected) {
  const std::string bytes = tjit::detail::encode_entry(sample_entry());
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_NE(decode_error(bytes.substr(0, size)), "(decoded)") << "cut to " << size << " bytes";
  }
  EXPECT_NE(decode_error(bytes + "x"), "(decoded)");
}

TEST(KernelStoreFormat, EveryFlippedByteIsDetected) {
  const std::string bytes = tjit::detail::encode_entry(sample_entry());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x20);
    EXPECT_NE(decode_error(damaged), "(decoded)") << "byte " << i;
  }
}

TEST(KernelStoreFormat, ErrorsSayWhatIsWrong) {
  const std::string bytes = tjit::detail::encode_entry(sample_entry());
  EXPECT_NE(decode_error("garbage").find("shorter"), std::string::npos);
  EXPECT_NE(decode_error("NOTTJITK" + bytes.substr(8)).find("wrong magic"), std::string::npos);
  std::string future = bytes;
  future[8] = 99;
  EXPECT_NE(decode_error(future).find("store format 99"), std::string::npos);
  std::string flipped = bytes;
  flipped.back() = static_cast<char>(flipped.back() ^ 1);
  EXPECT_NE(decode_error(flipped).find("checksum"), std::string::npos);
  // A signature record is not an entry, and the other way round.
  EXPECT_NE(decode_error(tjit::detail::encode_signature(sample_entry().kernel)).find("wrong magic"),
            std::string::npos);
  EXPECT_THROW(tjit::detail::decode_signature(bytes), CorruptStoreFile);
}

TEST(KernelStoreFormat, GitBlobIds) {
  EXPECT_EQ(tjit::detail::git_blob_id(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  EXPECT_EQ(tjit::detail::git_blob_id("hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
}

TEST(KernelStoreKey, EveryInputChangesTheKey) {
  const KernelEntry e = sample_entry();
  const auto key = [&](auto change) {
    KernelEntry c = e;
    change(c);
    return tjit::detail::kernel_store_key(c.kernel, c.specialization, c.options, c.compiled.target);
  };
  const std::string base = key([](KernelEntry&) {});
  EXPECT_EQ(base, key([](KernelEntry&) {}));
  EXPECT_NE(base, key([](KernelEntry& c) { c.kernel.file = "/elsewhere/k.py"; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.kernel.function = "k2"; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.specialization.types[1] = "i32"; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.specialization.divisible_by_16 = {}; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.specialization.constexprs[0].second = int64_t{1024}; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.specialization.constexprs[1].second = 0.2; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.options.num_warps = 4; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.options.num_stages = 3; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.options.num_ctas = 1; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.options.enable_fp_fusion = true; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.options.launch_cooperative_grid = true; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.options.launch_pdl = false; }));
  EXPECT_NE(base, key([](KernelEntry& c) { c.compiled.target.arch = 90; }));
  // The Triton version and the sources are checked inside an entry, not keyed: an upgrade or an
  // edit replaces the entry instead of leaving the old one behind.
  EXPECT_EQ(base, key([](KernelEntry& c) { c.kernel.triton_version = "3.7.0"; }));
  EXPECT_EQ(base, key([](KernelEntry& c) { c.kernel.sources.clear(); }));
}

// Every regular file under `dir`, and removing a tree, through POSIX nftw rather than
// std::filesystem: libtorch 2.11 exports copies of libstdc++'s std::filesystem functions that can
// win symbol lookup over libstdc++'s own, and its remove_all crashed (pytorch/pytorch#133437).
std::vector<fs::path> files_under(const fs::path& dir) {
  static thread_local std::vector<fs::path>* found = nullptr;
  std::vector<fs::path> files;
  found = &files;
  nftw(dir.c_str(), [](const char* path, const struct stat*, int type, struct FTW*) {
    if (type == FTW_F) {
      found->emplace_back(path);
    }
    return 0;
  }, 16, FTW_PHYS);
  return files;
}

void remove_tree(const fs::path& dir) {
  nftw(dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return std::remove(path); }, 16,
       FTW_DEPTH | FTW_PHYS);
}

// A folder of its own per test, and a copy of the test kernels in it: a path no other test used,
// so the registry hands out a fresh TritonJitFunction.
class KernelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tjit-store-test-" + std::to_string(::getpid()) + "-" + info->name());
    remove_tree(dir_);
    fs::create_directories(dir_);
    kernels_ = (dir_ / "kernels.py").string();
    fs::copy_file(tjit::testing::test_kernels(), kernels_);
    previous_ = tjit::kernel_store_directory();
  }
  void TearDown() override {
    tjit::set_kernel_store_directory(previous_);
    remove_tree(dir_);
  }

  tjit::CompiledKernel compile(TritonJitFunction& fn, int64_t block, int num_warps = 4) {
    const at::Tensor x = at::empty({1024}, at::kFloat);
    return fn.compile(CompileTarget::parse("cuda:90"), LaunchOptions{num_warps}, x, x, int64_t{1024}, 2.0f, block);
  }

  fs::path dir_;
  std::string kernels_;
  std::optional<std::string> previous_;
};

size_t count_files(const fs::path& dir, const std::string& extension) {
  size_t n = 0;
  for (const fs::path& f : files_under(dir)) {
    n += f.extension() == extension ? 1 : 0;
  }
  return n;
}

TEST_F(KernelStoreTest, CompileWritesAndThenReadsTheStore) {
  tjit::set_kernel_store_directory((dir_ / "store").string());
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");
  const auto first = compile(fn, 256);
  EXPECT_EQ(fn.num_compiled(), 1u);
  EXPECT_EQ(count_files(dir_ / "store", ".tjk"), 1u);
  EXPECT_EQ(count_files(dir_ / "store", ".tjs"), 1u);  // the signature, from the Python load
  const auto again = compile(fn, 256);
  EXPECT_EQ(fn.num_compiled(), 1u);
  EXPECT_EQ(fn.num_loaded_from_store(), 1u);
  EXPECT_EQ(again.binary, first.binary);
  EXPECT_EQ(again.name, first.name);
  EXPECT_EQ(again.num_warps, first.num_warps);
  EXPECT_EQ(again.shared_memory, first.shared_memory);
  // Another specialisation and other options are other entries.
  compile(fn, 512);
  compile(fn, 256, 8);
  EXPECT_EQ(fn.num_compiled(), 3u);
  EXPECT_EQ(count_files(dir_ / "store", ".tjk"), 3u);
  EXPECT_EQ(count_files(dir_ / "store", ".tmp"), 0u);
}

TEST_F(KernelStoreTest, StoreOffCompilesEveryTime) {
  tjit::set_kernel_store_directory(std::nullopt);
  EXPECT_FALSE(tjit::kernel_store_directory().has_value());
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");
  const auto before = tjit::kernel_store_counters();
  compile(fn, 256);
  compile(fn, 256);
  EXPECT_EQ(fn.num_compiled(), 2u);
  EXPECT_EQ(fn.num_loaded_from_store(), 0u);
  const auto after = tjit::kernel_store_counters();
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.writes, before.writes);
}

TEST_F(KernelStoreTest, UnwritableFolderWarnsOnceAndWorkGoesOn) {
  // A folder below a regular file can never be created, whoever runs the test (root included).
  std::ofstream(dir_ / "a-file") << "not a folder";
  tjit::set_kernel_store_directory((dir_ / "a-file" / "store").string());
  const auto before = tjit::kernel_store_counters();
  ::testing::internal::CaptureStderr();
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");  // writes the signature
  const auto a = compile(fn, 256);
  const auto b = compile(fn, 512);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(fn.num_compiled(), 2u);
  EXPECT_FALSE(a.binary.empty());
  EXPECT_FALSE(b.binary.empty());
  EXPECT_EQ(tjit::kernel_store_counters().write_failures - before.write_failures, 3u);  // signature, 2 entries
  const std::string warning = "[tjit] kernel store: cannot write";
  const size_t first = log.find(warning);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(warning, first + 1), std::string::npos) << "warned more than once:\n" << log;
  EXPECT_NE(log.find("Not a directory"), std::string::npos) << log;
}

TEST_F(KernelStoreTest, DamagedEntryIsReplaced) {
  tjit::set_kernel_store_directory((dir_ / "store").string());
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");
  const auto good = compile(fn, 256);
  fs::path entry;
  for (const fs::path& f : files_under(dir_ / "store")) {
    if (f.extension() == ".tjk") {
      entry = f;
    }
  }
  ASSERT_FALSE(entry.empty());
  struct stat info {};
  ASSERT_EQ(::stat(entry.c_str(), &info), 0);
  ASSERT_EQ(::truncate(entry.c_str(), info.st_size / 2), 0);
  ::testing::internal::CaptureStderr();
  const auto again = compile(fn, 256);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(again.binary, good.binary);  // Triton is deterministic for the same inputs
  EXPECT_EQ(fn.num_compiled(), 2u);
  EXPECT_NE(log.find("ignoring damaged " + entry.string()), std::string::npos) << log;
  // Replaced: the next lookup reads it.
  compile(fn, 256);
  EXPECT_EQ(fn.num_loaded_from_store(), 1u);
}

// --- Durable writes and the size bound ---

TEST_F(KernelStoreTest, EntryIsOnDiskBeforeItIsRenamedIntoPlace) {
  tjit::set_kernel_store_directory((dir_ / "store").string());
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");
  {
    std::lock_guard lock(io_log::mutex);
    io_log::events.clear();
    io_log::recording = true;
  }
  compile(fn, 256);
  std::vector<std::string> events;
  {
    std::lock_guard lock(io_log::mutex);
    io_log::recording = false;
    events = io_log::events;
  }
  std::string all;
  for (const std::string& e : events) {
    all += e + "\n";
  }
  // The entry's rename, and the temporary file it renames.
  size_t renamed = events.size();
  std::string temporary;
  std::string final_path;
  for (size_t i = 0; i < events.size(); ++i) {
    const size_t arrow = events[i].find(" -> ");
    if (events[i].rfind("rename ", 0) == 0 && arrow != std::string::npos &&
        fs::path(events[i].substr(arrow + 4)).extension() == ".tjk") {
      renamed = i;
      temporary = events[i].substr(7, arrow - 7);
      final_path = events[i].substr(arrow + 4);
    }
  }
  ASSERT_LT(renamed, events.size()) << "no entry was renamed into place:\n" << all;
  size_t file_synced = events.size();
  size_t folder_synced = events.size();
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] == "fsync " + temporary) {
      file_synced = i;
    } else if (events[i] == "fsync " + fs::path(final_path).parent_path().string() && i > renamed) {
      folder_synced = std::min(folder_synced, i);
    }
  }
  EXPECT_LT(file_synced, renamed) << "the entry's bytes were not flushed before the rename:\n" << all;
  EXPECT_LT(folder_synced, events.size()) << "the rename itself was not flushed:\n" << all;
}

TEST(KernelStoreBound, ParsesSizes) {
  using tjit::detail::parse_byte_size;
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("1048576"), 1048576u);
  EXPECT_EQ(parse_byte_size("512M"), uint64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("4g"), uint64_t{4} << 30);
  EXPECT_EQ(parse_byte_size("2KiB"), 2048u);
  EXPECT_EQ(parse_byte_size("3KB"), 3072u);
  EXPECT_EQ(parse_byte_size("1T"), uint64_t{1} << 40);
  for (const char* bad : {"", "M", "-1", "1.5G", "4X", "4 G", "12345678901234567890", "20000000T"}) {
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
  }
}

uint64_t bytes_of(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The store's files that count against its bound (the prune lock file does not).
uint64_t store_bytes(const fs::path& store) {
  uint64_t total = 0;
  for (const fs::path& f : files_under(store)) {
    total += f.filename() == ".prune.lock" ? 0 : bytes_of(f);
  }
  return total;
}

KernelEntry read_entry(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return tjit::detail::decode_entry(std::string(std::istreambuf_iterator<char>(in), {}));
}

// Each entry of the store, by the BLOCK it was compiled for.
std::map<int64_t, fs::path> entries_by_block(const fs::path& store, std::initializer_list<int64_t> blocks) {
  std::map<int64_t, fs::path> out;
  for (const fs::path& f : files_under(store)) {
    if (f.extension() != ".tjk") {
      continue;
    }
    const std::string key = read_entry(f).key;
    for (int64_t b : blocks) {
      if (key.find("BLOCK=" + std::to_string(b) + "\n") != std::string::npos) {
        out[b] = f;
      }
    }
  }
  return out;
}

void set_modified(const fs::path& path, time_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST_F(KernelStoreTest, PruneRemovesTheLeastRecentlyUsedFirst) {
  const fs::path store = dir_ / "store";
  tjit::set_kernel_store_directory(store.string());
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");
  for (int64_t block : {256, 512, 1024}) {
    compile(fn, block);
  }
  auto entries = entries_by_block(store, {256, 512, 1024});
  ASSERT_EQ(entries.size(), 3u);
  set_modified(entries[256], 1000000000);  // written first, then 512, then 1024
  set_modified(entries[512], 1000000100);
  set_modified(entries[1024], 1000000200);
  // A hit marks 256 used: now 512 is the least recently used.
  const KernelEntry e256 = read_entry(entries[256]);
  ASSERT_TRUE(tjit::detail::load_stored_kernel(e256.kernel, e256.key).has_value());
  const uint64_t total = store_bytes(store);
  const auto before = tjit::kernel_store_counters();
  const tjit::KernelStorePruneResult result = tjit::prune_kernel_store(total - 1);
  EXPECT_EQ(result.files_removed, 1u);
  EXPECT_EQ(result.bytes_removed, total - store_bytes(store));
  EXPECT_EQ(result.bytes_left, store_bytes(store));
  EXPECT_FALSE(fs::exists(entries[512]));
  EXPECT_TRUE(fs::exists(entries[256]));
  EXPECT_TRUE(fs::exists(entries[1024]));
  EXPECT_EQ(tjit::kernel_store_counters().evictions - before.evictions, 1u);
  // 0: every entry goes; the signature record stays, and the kernel is compiled again.
  tjit::prune_kernel_store(0);
  EXPECT_EQ(count_files(store, ".tjk"), 0u);
  EXPECT_EQ(count_files(store, ".tjs"), 1u);
}

TEST_F(KernelStoreTest, WritesPastTheBoundRemoveTheLeastRecentlyUsed) {
  const fs::path store = dir_ / "store";
  tjit::set_kernel_store_directory(store.string());
  auto& fn = TritonJitFunction::get_instance(kernels_, "scale_kernel");
  compile(fn, 128);
  const uint64_t one_entry = bytes_of(entries_by_block(store, {128})[128]);
  ASSERT_GT(one_entry, 0u);
  // Room for the signature and two and a half entries: the third prunes to 90%.
  const uint64_t bound = store_bytes(store) + one_entry * 3 / 2;
  const uint64_t previous = tjit::kernel_store_max_bytes();
  tjit::set_kernel_store_max_bytes(bound);
  const auto before = tjit::kernel_store_counters();
  ::testing::internal::CaptureStderr();
  for (int64_t block : {256, 512, 1024}) {
    compile(fn, block);
    EXPECT_LE(store_bytes(store), bound) << "after BLOCK=" << block;
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  tjit::set_kernel_store_max_bytes(previous);
  const auto entries = entries_by_block(store, {128, 256, 512, 1024});
  EXPECT_EQ(entries.count(128), 0u);
  EXPECT_EQ(entries.count(256), 0u);
  EXPECT_EQ(entries.count(1024), 1u);  // the newest stays
  EXPECT_GE(tjit::kernel_store_counters().evictions - before.evictions, 2u);
  EXPECT_NE(log.find("was over its bound of " + std::to_string(bound) + " bytes"), std::string::npos) << log;
  EXPECT_EQ(count_files(store, ".tmp"), 0u);
}

}  // namespace
