#pragma once
// What run() does with the arguments it captured (CapturedArg, tjit/detail/run_arguments.h):
// place them in a pack, key the tuning and the heuristics by them, hand them to Python, describe
// them, find their device. Tuples are walked element by element (ArgumentVisitor), as operator()
// packs them.

#include "python/python_bridge.h"

#include <tjit/compiled_kernel.h>
#include <tjit/detail/run_arguments.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tjit::detail {

void add_captured(ArgumentPackBase& pack, const CapturedArg& a);

// Appends an argument's key words to words[n..capacity): its kind and its value (a scalar), its
// dtype (a tensor, a pointer, a descriptor), and for a tuple its size and its elements' words.
// Throws c10::Error when they do not fit.
void append_argument_words(const CapturedArg& a, uint64_t* words, size_t& n, size_t capacity);

// Whether Python's autotuner keys on the argument's dtype (it has `.dtype`): tensors and pointers;
// not tuples, nor descriptors.
bool has_dtype(const CapturedArg& a);
uint64_t dtype_word(const CapturedArg& a);
// A tensor argument's identity (its TensorImpl), what Python's autotuner keys on for a tensor named
// in `key`.
uint64_t tensor_identity(const CapturedArg& a);

// A caller's scalar as the grid and the heuristics see it; nullopt for tensors, tuples, descriptors.
std::optional<ConstexprValue> scalar_value(const CapturedArg& a);

// The arguments as Python values, for heuristics and prune_configs_by.
std::vector<InterpretedArg> python_arguments(const CapturedArg* args, size_t n);

// For keys of the kernel store and logs: a tensor's dtype, a scalar's value, "(fp32, 2)" for a tuple.
std::string describe_argument(const CapturedArg& a);

// The device of the first tensor among the arguments (in tuples and descriptors too): its CUDA
// index, -1 for CPU, -2 when there is none and no pointer either; a DevicePointer: the current
// CUDA device (-3, for the caller to resolve).
int device_of_arguments(const CapturedArg* args, size_t n);
inline constexpr int kNoDevice = -2;
inline constexpr int kCurrentDevice = -3;

}  // namespace tjit::detail
