#pragma once
// What a compile produces: the binary and the metadata a launch needs. Also the
// description of a specialisation, i.e. the exact inputs handed to triton.compile.

#include <tjit/dtype.h>
#include <tjit/launch_types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tjit {

// A compile-time value: None, bool, integer, float, string or tl.dtype, as Python Triton would pass it.
using ConstexprValue = std::variant<std::monostate, bool, int64_t, double, std::string, Dtype>;

// A compile-time value as Python's repr writes it: None, True, 1024, 0.5, 1.0 (a float never reads
// as an integer; the shortest text that reads back as the same double), 'leaky_relu', tl.bfloat16.
// Logs, errors and the kernel store's keys use it, so values that compile differently never share a text.
std::string constexpr_text(const ConstexprValue& value);

// The specialisation of one call: the signature Triton compiles, derived from the
// arguments exactly as Python Triton 3.6 derives it.
struct Specialization {
  std::vector<std::string> types;                          // per parameter: "*fp32", "i32", "constexpr", ...
  std::vector<std::pair<int, ConstexprValue>> constexprs;  // parameter index -> value
  std::vector<int> divisible_by_16;                        // parameter indices given tt.divisibility=16
  // Inside tuple parameters (typed as Triton writes a tuple: "[*fp32,i32]", nested "[[*fp32,i32],u1]"):
  // constexpr elements and elements given tt.divisibility=16, by path (parameter index, element
  // index, ...) as Triton keys them. Empty for a kernel called without tuples.
  std::vector<std::pair<std::vector<int>, ConstexprValue>> tuple_constexprs;
  std::vector<std::vector<int>> tuple_divisible_by_16;

  // Human-readable form for logs and errors, e.g. "*fp32:16, *fp32:16, i32, BLOCK=1024".
  std::string describe(const std::vector<std::string>& param_names) const;
};

// How one host tensor-descriptor parameter reaches the compiled kernel, from Triton's tensordesc_meta:
// on sm_90+ a CUtensorMap the launch encodes (then the shape as i32 and the strides as i64), else
// decomposed into the base pointer, shape and strides (i64), `flags` i1 flags (padding == nan, and
// from Triton 3.9 round_f32_to_tf32: Triton 3.4 has none), then the shape (i32) and strides (i64).
struct DescriptorLaunch {
  bool tma = false;
  int swizzle = 0;              // CUtensorMapSwizzle
  int elem_size = 0;            // bytes per element
  int elem_type = 0;            // CUtensorMapDataType (the host enum)
  std::vector<int> block_size;  // the box, outermost dimension first
  bool fp4_padded = false;      // the innermost dimension counts packed fp4 pairs: encoded doubled
  int flags = 0;                // decomposed only

  bool operator==(const DescriptorLaunch& o) const {
    return tma == o.tma && swizzle == o.swizzle && elem_size == o.elem_size && elem_type == o.elem_type &&
           block_size == o.block_size && fp4_padded == o.fp4_padded && flags == o.flags;
  }
};

struct CompiledKernel {
  std::string name;    // the kernel's symbol in the binary
  std::string binary;  // cubin bytes
  CompileTarget target;
  int shared_memory = 0;  // bytes of dynamic shared memory
  int num_warps = 4;
  int num_ctas = 1;
  int64_t global_scratch_size = 0;  // bytes per program; 0: none
  int64_t global_scratch_align = 1;
  int64_t profile_scratch_size = 0;
  int64_t profile_scratch_align = 1;
  bool launch_cooperative_grid = false;
  bool launch_pdl = false;
  std::vector<DescriptorLaunch> tensor_descriptors;  // one per tensor-descriptor parameter, in order
};

}  // namespace tjit
