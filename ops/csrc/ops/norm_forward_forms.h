#pragma once
// The normalisations' forward candidate forms (one plan for the norm family: rms_norm, add_rms_norm,
// layer_norm): what each form is, the rules that only registers and step counts decide, and the
// family's default rule. Each operator lists the forms its kernels have and makes its own plan
// struct of the chosen one; which form runs at a size is measured (tjit/kit/plan_choice.h).

#include <tjit/kit/plan_choice.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tjit::ops::norm {

enum class FormKind {
  ShortRows,   // several rows a program (up to kShortRowLimit columns)
  Row,         // the row in registers, one block (its power of two)
  Tail,        // the row in registers as a power-of-two head block and a smaller tail block
  Persistent,  // Tail's blocks in as many programs as the GPU holds, the row loop pipelined
  Looped,      // the row read twice in steps of `block` (0: one block of the row)
};

struct ForwardForm {
  const char* name;
  FormKind kind;
  int64_t block;     // Tail, Persistent: the head; Looped: the step (0: the row's block)
  int num_warps;     // ShortRows: 0 (by the block)
  bool preload;      // Row: weight and bias loaded with the row, not after its sums
  bool keep_row;     // Looped: the row kept in L2 between the passes, the second from its start
  bool const_steps;  // Looped: the step count a compile-time constant
  int maxnreg;
};

// Up to here a forward may take several rows a program.
inline constexpr int64_t kShortRowLimit = 1024;
// A row stays in registers up to this many columns (fp64: half, twice the registers an element).
inline constexpr int64_t kSinglePassLimit = 32768;

int64_t single_pass_limit(c10::ScalarType dtype);
// The tail block of a head-and-tail form: the rest of the row past `head`, as a power of two.
int64_t tail_block(int64_t cols, int64_t head);

// Whether `form` may serve rows of `cols` columns of `dtype`: blocks within 64 elements a thread
// (fp64: 32) and at least one; a tail block only past its head and smaller than it; steps only
// where the row takes two or more, at most 16 as a compile-time count.
bool fits(const ForwardForm& form, int64_t cols, c10::ScalarType dtype);

// The family's default rule, by the name of the form: short rows several a program, rows in
// registers with the fewest warps that hold at most 16 elements a thread, longer rows in
// 4096-column steps.
const char* default_form(int64_t cols, c10::ScalarType dtype);

// An operator's forms as the candidates of its plan `plan` (registered for tools at first use).
class FormList {
 public:
  FormList(const char* plan, const ForwardForm* forms, int count);
  const ForwardForm& operator[](int i) const { return forms_[i]; }
  int size() const { return count_; }
  int index_of(const char* name) const;  // asserts it is one of them
  const kit::PlanCandidates& candidates() const { return candidates_; }
  // The form chosen for a call (plan_choice.h's order), its default by default_form.
  int choose(const kit::ChoiceKey& key, int64_t cols, c10::ScalarType dtype, const kit::DeviceFacts& device,
             const kit::CandidateTimer* timer, kit::ChoiceSource* source) const;
  // The choice a call would make without measuring (for describe_plan).
  int peek(const kit::ChoiceKey& key, int64_t cols, c10::ScalarType dtype, const kit::DeviceFacts& device,
           kit::ChoiceSource* source) const;
  std::vector<std::string> fitting(int64_t cols, c10::ScalarType dtype) const;

 private:
  const ForwardForm* forms_;
  int count_;
  kit::PlanCandidates candidates_;
};

}  // namespace tjit::ops::norm
