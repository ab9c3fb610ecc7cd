#pragma once
// The runtime's settings from the environment, read here and nowhere else in ops/csrc/runtime, so
// one table says what a variable does. Nothing here caches a value unless the table says so:
// each caller reads a setting when it first needs it and keeps it as its own state says.
//
// | variable | read by | meaning |
// | --- | --- | --- |
// | TJIT_JIT | jit_enabled() (tjit/triton_jit_function.h), once | 0, off, OFF, false, no: never start Python and Triton |
// | TJIT_BUNDLED_TUNING | bundled_tuning_enabled(), once | the same values: ignore autotune choices bundles ship |
// | TJIT_TARGET | target_from_environment(), per call | the compile target when no GPU is asked ("cuda:90") |
// | TJIT_LOG_COMPILES | settings::log_compiles(), once | 0: no log line per compile, tuning or Python start |
// | TJIT_CACHE | settings::kernel_store_directory(), at the store's first use | 0, off, OFF, false, no: no kernel store |
// | TJIT_CACHE_DIR, XDG_CACHE_HOME, HOME | the same | the store's folder: TJIT_CACHE_DIR, else $XDG_CACHE_HOME/tjit, else ~/.cache/tjit |
// | TJIT_CACHE_MAX_BYTES | settings::kernel_store_max_bytes(), when the bound is first needed | the store's bound (K, M, G, T suffixes; 0: none) |
// | TJIT_CACHE_SHARED | settings::kernel_store_shared_group(), once | a group (name or number) whose members share the store (binaries/store_access.h) |
// | TJIT_RECORD | settings::record_manifest(), when recording is first consulted | the manifest file to record specialisations into |
// | TJIT_PYTHON_EXECUTABLE | settings::python_executable(), when Python is first loaded | the interpreter to start in a process without one |
// | TJIT_LIBPYTHON | settings::libpython(), the same | the libpython to load in a process without one |
// | TJIT_TRITON_DIR | settings::triton_dir(), once | the Triton package whose version entries are checked against |
// | TRITON_*, MLIR_*, LLVM_*, ... | settings::environment_entries(), once | Triton's code-generation variables, part of a store key (binaries/compiler_identity.cpp chooses them) |
//
// Outside this folder: TJIT_KERNEL_DIR (ops/csrc/ops, where the operators' kernels are); TJIT_TUNE
// and TJIT_PLAN_TABLES (ops/csrc/kit/plan_choice.cpp: first-call tuning of plans, the plan tables).

#include <optional>
#include <string>
#include <vector>

namespace tjit::detail::settings {

// TJIT_LOG_COMPILES: on unless "0". Read once per process.
bool log_compiles();

// The kernel store's folder, absolute and normalised; nullopt when TJIT_CACHE turns the store off
// or none of TJIT_CACHE_DIR, XDG_CACHE_HOME and HOME is set (then one log line says so).
std::optional<std::string> kernel_store_directory();

// TJIT_CACHE_MAX_BYTES as given; nullopt when unset or empty (binaries/kernel_store_bound.cpp
// parses it, and falls back to the default bound with one log line when it is not a size).
std::optional<std::string> kernel_store_max_bytes();

// TJIT_CACHE_SHARED as given: the group whose members may share the kernel store; nullopt when
// unset or empty (the store is private to the running user).
std::optional<std::string> kernel_store_shared_group();

// TJIT_RECORD as given (relative to the working directory); nullopt when unset or empty.
std::optional<std::string> record_manifest();

// TJIT_PYTHON_EXECUTABLE and TJIT_LIBPYTHON; nullopt when unset or empty.
std::optional<std::string> python_executable();
std::optional<std::string> libpython();

// TJIT_TRITON_DIR, else the Triton package tjit was built against.
std::string triton_dir();

// Every variable of the process's environment as "NAME=value", in the environment's order.
std::vector<std::string> environment_entries();

}  // namespace tjit::detail::settings
