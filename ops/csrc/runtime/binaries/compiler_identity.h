#pragma once
// What decides a compiled binary besides the kernel, its arguments and launch options: the Triton
// that compiles it and the environment variables that change Triton's output. Learned without
// Python, so a process can check stored kernels before (or instead of) starting an interpreter.

#include <string>

namespace tjit::detail {

struct CompilerIdentity {
  // __version__ of the Triton package a compile in this process would use (TJIT_TRITON_DIR, else
  // the one tjit was built against); empty when there is none, e.g. on a host deployed without it.
  std::string triton_version;
  // "NAME=value" lines, sorted, of the set environment variables that change what Triton
  // generates (TRITON_*, MLIR_*, LLVM_*, ... except those naming folders or logging).
  std::string environment;
};

// Read once per process.
const CompilerIdentity& compiler_identity();

// The __version__ assigned in <package_dir>/__init__.py; empty if none can be read.
std::string read_package_version(const std::string& package_dir);

}  // namespace tjit::detail
