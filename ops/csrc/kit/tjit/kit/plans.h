#pragma once
// Launch plans: the device facts an operator's plan functions take, and how a plan is described to
// Python (tjit._C.describe_plan), so that Python launches what the C++ wrapper launches.
//
// A plan function is pure: (shape, strides, dtype, device facts, tuned choice) -> a small typed
// plan on the stack. The wrapper fills the inputs from the tensors and the runtime, then executes
// the plan. Each operator folder registers a describer (RegisterPlan) that runs the same function
// for inputs given by name and writes the plan out with the kernels' parameter names.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace tjit::kit {

// What plans may depend on about a device.
struct DeviceFacts {
  bool is_cuda = false;
  // Multiprocessors to plan grids for. Triton's interpreter runs programs one after another, so a
  // CPU device is planned as 4: grids stay small while every multi-stage path is still taken.
  int multiprocessors = 4;
  int memory_gbps = 0;            // peak DRAM bandwidth; 0 off CUDA
  bool dependent_launch = false;  // programmatic dependent launch (tjit::dependent_launch_supported)
  int capability = 0;             // compute capability, 10 * major + minor; 0 off CUDA
  int device_index = -1;          // the CUDA device; -1 off CUDA
};

// The facts of `device` from the runtime (tjit/device_properties.h), cached there.
DeviceFacts device_facts(const c10::Device& device);
DeviceFacts device_facts(const at::Tensor& t);

// Whether the memory wants more bytes in flight an SM than one program a row of registers keeps:
// peak DRAM bandwidth of at least 30 GB/s an SM. Plans measured only where it holds are gated by
// it, so cards below it keep the plans they were measured with.
bool memory_wants_more_in_flight(const DeviceFacts& device);

// Whether an autotuned kernel may serve the call: Available unless the stream is being captured
// into a CUDA graph and the tuner has no config for these inputs yet (nothing can be timed then).
enum class Tuner { Available, Unavailable };

// ------------------------------------------------------------------------------ described to Python

// A describer's inputs: named integers (bools as 0/1, lists for per-tensor facts), the dtype the
// plan is for, and the device facts.
struct PlanQuery {
  std::map<std::string, std::vector<int64_t>> values;
  c10::ScalarType dtype = c10::kFloat;
  DeviceFacts device;

  int64_t get(const char* key, int64_t fallback) const;
  int64_t require(const char* key) const;  // throws naming the key when absent
  std::vector<int64_t> list(const char* key) const;
};

// A plan written out as JSON: {"kind", "needs_occupancy", "launches": [{"kernel", "grid", "num_warps", "maxnreg",
// "launch_pdl", "constexprs", "args"}], "workspace"}, and for a measured choice "candidate", "source", "fitting". A launch whose grid the tuner's config decides
// has "grid": null and "num_warps": null; "args" holds runtime arguments the plan decides.
class PlanWriter {
 public:
  explicit PlanWriter(const char* kind) : kind_(kind) {}
  PlanWriter& launch(const char* kernel, std::initializer_list<int64_t> grid, int num_warps, int maxnreg = 0,
                     bool launch_pdl = false);
  PlanWriter& tuned_launch(const char* kernel);
  PlanWriter& constexpr_value(const char* name, int64_t value);
  PlanWriter& constexpr_flag(const char* name, bool value);
  PlanWriter& arg(const char* name, int64_t value);
  PlanWriter& workspace(const char* name, std::initializer_list<int64_t> value);
  // The grid needs the occupancy of the launch's binary: ask again with resident_programs_per_sm.
  PlanWriter& needs_occupancy() {
    needs_occupancy_ = true;
    return *this;
  }
  // A plan made of measured choices (plan_choice.h): which candidate, where the choice came from,
  // and every candidate that fits the call.
  PlanWriter& choice(std::string candidate, std::string source, std::vector<std::string> fitting) {
    candidate_ = std::move(candidate);
    source_ = std::move(source);
    fitting_ = std::move(fitting);
    return *this;
  }
  std::string json() const;

 private:
  std::string candidate_;
  std::string source_;
  std::vector<std::string> fitting_;
  struct Launch {
    std::string kernel;
    std::vector<int64_t> grid;  // empty: tuned
    int num_warps = 0;
    int maxnreg = 0;
    bool launch_pdl = false;
    struct Constexpr {
      std::string name;
      int64_t value;
      bool is_flag;  // written as a JSON bool
    };
    std::vector<Constexpr> constexprs;
    std::vector<std::pair<std::string, int64_t>> args;
  };
  std::string kind_;
  bool needs_occupancy_ = false;
  std::vector<Launch> launches_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> workspace_;
};

using PlanDescriber = PlanWriter (*)(const PlanQuery& query);

// Registers the describer of plan `name` (a namespace-scope static in the operator's plan.cpp).
struct RegisterPlan {
  RegisterPlan(const char* name, PlanDescriber describer);
};

// The JSON of plan `name` for `query`; throws for an unknown name.
std::string describe_plan(const std::string& name, const PlanQuery& query);
std::vector<std::string> plan_names();

}  // namespace tjit::kit
