#include <tjit/kit/plans.h>

#include <tjit/device_properties.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <mutex>

namespace tjit::kit {

DeviceFacts device_facts(const c10::Device& device) {
  DeviceFacts facts;
  if (device.is_cuda()) {
    facts.is_cuda = true;
    facts.multiprocessors = multiprocessor_count(device);
    facts.memory_gbps = memory_bandwidth_gbps(device);
    facts.dependent_launch = dependent_launch_supported(device);
    facts.capability = compute_capability(device);
    facts.device_index = device.has_index() ? device.index() : 0;
  }
  return facts;
}

DeviceFacts device_facts(const at::Tensor& t) { return device_facts(t.device()); }

bool memory_wants_more_in_flight(const DeviceFacts& device) {
  constexpr int64_t kMinGbpsPerSm = 30;
  return int64_t{device.memory_gbps} >= kMinGbpsPerSm * device.multiprocessors;
}

int64_t PlanQuery::get(const char* key, int64_t fallback) const {
  const auto it = values.find(key);
  return it == values.end() || it->second.empty() ? fallback : it->second.front();
}

int64_t PlanQuery::require(const char* key) const {
  const auto it = values.find(key);
  TORCH_CHECK(it != values.end() && !it->second.empty(), "describe_plan: input '", key, "' is required");
  return it->second.front();
}

std::vector<int64_t> PlanQuery::list(const char* key) const {
  const auto it = values.find(key);
  return it == values.end() ? std::vector<int64_t>{} : it->second;
}

PlanWriter& PlanWriter::launch(const char* kernel, std::initializer_list<int64_t> grid, int num_warps, int maxnreg,
                               bool launch_pdl) {
  Launch l;
  l.kernel = kernel;
  l.grid.assign(grid.begin(), grid.end());
  while (l.grid.size() < 3) {
    l.grid.push_back(1);
  }
  l.num_warps = num_warps;
  l.maxnreg = maxnreg;
  l.launch_pdl = launch_pdl;
  launches_.push_back(std::move(l));
  return *this;
}

PlanWriter& PlanWriter::tuned_launch(const char* kernel) {
  Launch l;
  l.kernel = kernel;
  launches_.push_back(std::move(l));
  return *this;
}

PlanWriter& PlanWriter::constexpr_value(const char* name, int64_t value) {
  TORCH_INTERNAL_ASSERT(!launches_.empty());
  launches_.back().constexprs.push_back({name, value, false});
  return *this;
}

PlanWriter& PlanWriter::constexpr_flag(const char* name, bool value) {
  TORCH_INTERNAL_ASSERT(!launches_.empty());
  launches_.back().constexprs.push_back({name, int64_t{value}, true});
  return *this;
}

PlanWriter& PlanWriter::arg(const char* name, int64_t value) {
  TORCH_INTERNAL_ASSERT(!launches_.empty());
  launches_.back().args.emplace_back(name, value);
  return *this;
}

PlanWriter& PlanWriter::workspace(const char* name, std::initializer_list<int64_t> value) {
  workspace_.emplace_back(name, std::vector<int64_t>(value));
  return *this;
}

std::string PlanWriter::json() const {
  // ordered_json keeps the fields in the order written here, which reads best.
  using Json = nlohmann::ordered_json;
  Json launches = Json::array();
  for (const Launch& l : launches_) {
    Json launch = {{"kernel", l.kernel}};
    launch["grid"] = l.grid.empty() ? Json(nullptr) : Json(l.grid);  // empty: the tuner's config decides
    launch["num_warps"] = l.grid.empty() ? Json(nullptr) : Json(l.num_warps);
    launch["maxnreg"] = l.maxnreg;
    launch["launch_pdl"] = l.launch_pdl;
    Json constexprs = Json::object();
    for (const Launch::Constexpr& c : l.constexprs) {
      constexprs[c.name] = c.is_flag ? Json(c.value != 0) : Json(c.value);
    }
    launch["constexprs"] = std::move(constexprs);
    Json args = Json::object();
    for (const auto& [name, value] : l.args) {
      args[name] = value;
    }
    launch["args"] = std::move(args);
    launches.push_back(std::move(launch));
  }
  Json workspace = Json::object();
  for (const auto& [name, value] : workspace_) {
    workspace[name] = value.size() == 1 ? Json(value.front()) : Json(value);
  }
  Json plan = {{"kind", kind_},
               {"needs_occupancy", needs_occupancy_},
               {"launches", std::move(launches)},
               {"workspace", std::move(workspace)}};
  if (!candidate_.empty()) {
    plan["candidate"] = candidate_;
    plan["source"] = source_;
    plan["fitting"] = fitting_;
  }
  return plan.dump();
}

namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, PlanDescriber>& registry() {
  static std::map<std::string, PlanDescriber> r;
  return r;
}

}  // namespace

RegisterPlan::RegisterPlan(const char* name, PlanDescriber describer) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[name] = describer;
}

std::string describe_plan(const std::string& name, const PlanQuery& query) {
  PlanDescriber describer = nullptr;
  {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    const auto it = registry().find(name);
    TORCH_CHECK(it != registry().end(), "describe_plan: no plan named '", name, "'");
    describer = it->second;
  }
  return describer(query).json();
}

std::vector<std::string> plan_names() {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, describer] : registry()) {
    names.push_back(name);
  }
  return names;
}

}  // namespace tjit::kit
