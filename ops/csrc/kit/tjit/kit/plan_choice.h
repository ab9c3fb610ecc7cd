#pragma once
// Plans as measured choices. An operator's plan declares its candidate launches (PlanCandidates)
// and the rules that only correctness and resources decide (which candidates fit a call); which
// fitting candidate runs is data, in this order:
//   1. a candidate forced by name (PlanCandidates::force: tests, and the tuning command);
//   2. the choice made earlier in this process for the call's class (ChoiceKey), where it fits the
//      call (else 3 or 5, for this call only);
//   3. the table of the card (ops/plan_tables/*.json, embedded; TJIT_PLAN_TABLES adds a folder of
//      one's own; TJIT_PLAN_TABLES=0 hides every table; the *.measurements.json timings beside a
//      table are never read): the nearest measured neighbour among entries whose candidate fits;
//   4. on a CUDA card without a table: tuned at the first call of the class, each fitting candidate
//      timed on the call's own tensors (also under tjit::prepare, which tunes ahead), the winner
//      kept in the kernel store (later processes read it); not while the stream is being captured,
//      nor with TJIT_TUNE=0;
//   5. the plan's default rule.

#include <tjit/kit/plans.h>
#include <tjit/current_stream.h>
#include <tjit/launch_types.h>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/FunctionRef.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tjit {
class TritonJitFunction;
}

namespace tjit::kit {

// The class of calls one choice serves: the rows as a power of two (what decides the grid's
// waves), the columns exactly (what decides the kernel's form), the dtype, and the plan's own
// switches (has_residual, want_dw, ...) as bits.
struct ChoiceKey {
  int64_t rows = 0;
  int64_t cols = 0;
  c10::ScalarType dtype = c10::kFloat;
  int64_t flags = 0;
};

// The power of two at or above `rows`, at most 65536: the rows a choice is measured at.
int64_t rows_class(int64_t rows);

// Whether first-call tuning is on: TJIT_TUNE unset or not 0/off/false/no. Read once.
bool first_call_tuning_enabled();

// Where a call's candidate came from.
enum class ChoiceSource { Forced, Remembered, Table, Stored, Tuned, Default };
const char* choice_source_name(ChoiceSource source);

// How a call lets its plan measure candidates: whether it may time now (a CUDA stream not being
// captured), and a function that runs candidate i as the call would and returns its time in ms.
struct CandidateTimer {
  c10::function_ref<bool()> may_time;
  c10::function_ref<double(int)> time_ms;
  // The kernel whose store entries a tuned choice is kept beside (its sources invalidate it), looked
  // up only when tuning (with JIT off, a kernel no bundle holds cannot be looked up).
  c10::function_ref<const TritonJitFunction*()> store_with;
};

class PlanCandidates {
 public:
  // `plan`: the plan's name (as its describer's); `names`: its candidates, each once.
  PlanCandidates(std::string plan, std::vector<std::string> names);
  ~PlanCandidates();
  PlanCandidates(const PlanCandidates&) = delete;
  PlanCandidates& operator=(const PlanCandidates&) = delete;

  const std::string& plan() const { return plan_; }
  int size() const { return static_cast<int>(names_.size()); }
  const std::string& name(int i) const { return names_.at(i); }
  int index_of(const std::string& name) const;  // -1 when it is not a candidate

  // The candidate for a call of class `key` on `device`: see the order at the top. `fits(i)` says
  // whether candidate i may serve it; `default_index()` gives the default rule's (which must fit),
  // asked only where nothing else decides. Thread-safe; a remembered choice costs a shared lock and
  // a hash lookup.
  int choose(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits,
             c10::function_ref<int()> default_index, const CandidateTimer* timer = nullptr,
             ChoiceSource* source = nullptr) const;

  // The same without measuring or remembering anything (describers, tools): forced, the class's
  // remembered choice on this CUDA device (its source where it came from: tuned, stored, table,
  // default), table or default.
  int peek(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits,
           c10::function_ref<int()> default_index, ChoiceSource* source = nullptr) const;

  // Every call takes candidate `index` (-1: none forced); a forced candidate that does not fit a
  // call is an error naming both. For tests and the tuning command; not for production use.
  void force(int index) { forced_.store(index, std::memory_order_relaxed); }
  int forced() const { return forced_.load(std::memory_order_relaxed); }
  // Forgets the choices remembered in this process (after force, or a new table).
  void forget() const;

 private:
  struct Memory;
  int from_table(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits) const;
  std::optional<std::pair<int, ChoiceSource>> remembered(const ChoiceKey& key, const DeviceFacts& device) const;
  void remember(const ChoiceKey& key, const DeviceFacts& device, int index, ChoiceSource source) const;
  // The fastest fitting candidate by timing each; -1 when none could be timed (each failed).
  int tune(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits,
           int default_index, const CandidateTimer& timer, ChoiceSource* source) const;

  std::string plan_;
  std::vector<std::string> names_;
  std::atomic<int> forced_{-1};
  std::unique_ptr<Memory> memory_;
};

// The GPU time in ms of one candidate's launches (`run`, on `stream`), as first-call tuning measures
// it: tjit::time_launches with a short budget (5 ms of warm-up, 20 ms timed).
double time_candidate(Stream stream, const c10::Device& device, const std::function<void()>& run);

// An operator call's CandidateTimer: it may time unless `stream` is being captured, and candidate
// i's time is that of launch(plan_of(i)) on the call's own tensors. It lives on the call's stack
// while the call plans (the timer refers to its members). The store's kernel is given, or looked up
// by `lookup` when tuning needs it.
template <typename PlanOf, typename Launch>
class CallTimer {
 public:
  CallTimer(Stream stream, const c10::Device& device, const TritonJitFunction& store_with, const PlanOf& plan_of,
            const Launch& launch)
      : stream_(stream), device_(device), plan_of_(plan_of), launch_(launch), kernel_(&store_with),
        timer_{may_time_, time_ms_, store_with_} {}
  CallTimer(Stream stream, const c10::Device& device, c10::function_ref<TritonJitFunction&()> lookup,
            const PlanOf& plan_of, const Launch& launch)
      : stream_(stream), device_(device), plan_of_(plan_of), launch_(launch), lookup_(lookup),
        timer_{may_time_, time_ms_, store_with_} {}
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;
  const CandidateTimer* get() const { return &timer_; }

 private:
  struct MayTime {
    const CallTimer* self;
    bool operator()() const { return !stream_is_capturing(self->stream_, self->device_); }
  };
  struct TimeMs {
    const CallTimer* self;
    double operator()(int candidate) const {
      const auto plan = self->plan_of_(candidate);
      return time_candidate(self->stream_, self->device_, [&] { self->launch_(plan); });
    }
  };

  struct StoreWith {
    const CallTimer* self;
    const TritonJitFunction* operator()() const {
      return self->kernel_ != nullptr ? self->kernel_ : &(*self->lookup_)();
    }
  };

  Stream stream_;
  c10::Device device_;
  const PlanOf& plan_of_;
  const Launch& launch_;
  const TritonJitFunction* kernel_ = nullptr;
  std::optional<c10::function_ref<TritonJitFunction&()>> lookup_;
  MayTime may_time_{this};
  TimeMs time_ms_{this};
  StoreWith store_with_{this};
  CandidateTimer timer_;
};

// The names of a plan's candidate forms (each with a `name`), in order: what PlanCandidates takes.
template <typename Form>
std::vector<std::string> form_names(const Form* forms, std::size_t count) {
  std::vector<std::string> names;
  names.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    names.emplace_back(forms[i].name);
  }
  return names;
}
template <typename Form, std::size_t N>
std::vector<std::string> form_names(const Form (&forms)[N]) {
  return form_names(forms, N);
}

// The names of the forms for which fits(form) holds, in order (describers' "fitting").
template <typename Form, typename Fits>
std::vector<std::string> fitting_names(const Form* forms, std::size_t count, const Fits& fits) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) {
    if (fits(forms[i])) {
      names.emplace_back(forms[i].name);
    }
  }
  return names;
}
template <typename Form, std::size_t N, typename Fits>
std::vector<std::string> fitting_names(const Form (&forms)[N], const Fits& fits) {
  return fitting_names(forms, N, fits);
}

// The plans' candidates by plan name (each PlanCandidates registers itself), for tools: nullptr
// for a plan without candidates.
PlanCandidates* find_plan_candidates(const std::string& plan);
std::vector<std::string> plans_with_candidates();

// The card's table, as JSON text ("" when there is none), and where it came from; for tools.
std::string plan_table_for(const DeviceFacts& device, std::string* origin = nullptr);
// Reads the tables again (after TJIT_PLAN_TABLES changed) and forgets remembered choices.
void reload_plan_tables();

}  // namespace tjit::kit
