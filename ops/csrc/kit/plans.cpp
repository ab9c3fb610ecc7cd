#include <tjit/kit/plans.h>

#include <tjit/device_properties.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <sstream>

namespace tjit::kit {

DeviceFacts device_facts(const c10::Device& device) {
  DeviceFacts facts;
  if (device.is_cuda()) {
    facts.is_cuda = true;
    facts.multiprocessors = multiprocessor_count(device);
    facts.memory_gbps = memory_bandwidth_gbps(device);
    facts.dependent_launch = dependent_launch_supported(device);
  }
  return facts;
}

DeviceFacts device_facts(const at::Tensor& t) { return device_facts(t.device()); }

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
  launches_.back().constexprs.emplace_back(name, std::to_string(value));
  return *this;
}

PlanWriter& PlanWriter::constexpr_flag(const char* name, bool value) {
  TORCH_INTERNAL_ASSERT(!launches_.empty());
  launches_.back().constexprs.emplace_back(name, value ? "true" : "false");
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

namespace {

void write_list(std::ostringstream& s, const std::vector<int64_t>& v) {
  s << '[';
  for (size_t i = 0; i < v.size(); ++i) {
    s << (i ? ", " : "") << v[i];
  }
  s << ']';
}

}  // namespace

std::string PlanWriter::json() const {
  std::ostringstream s;
  s << "{\"kind\": \"" << kind_ << "\", \"needs_occupancy\": " << (needs_occupancy_ ? "true" : "false")
    << ", \"launches\": [";
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& l = launches_[i];
    s << (i ? ", " : "") << "{\"kernel\": \"" << l.kernel << "\", \"grid\": ";
    if (l.grid.empty()) {
      s << "null, \"num_warps\": null";
    } else {
      write_list(s, l.grid);
      s << ", \"num_warps\": " << l.num_warps;
    }
    s << ", \"maxnreg\": " << l.maxnreg << ", \"launch_pdl\": " << (l.launch_pdl ? "true" : "false")
      << ", \"constexprs\": {";
    for (size_t j = 0; j < l.constexprs.size(); ++j) {
      s << (j ? ", " : "") << '"' << l.constexprs[j].first << "\": " << l.constexprs[j].second;
    }
    s << "}, \"args\": {";
    for (size_t j = 0; j < l.args.size(); ++j) {
      s << (j ? ", " : "") << '"' << l.args[j].first << "\": " << l.args[j].second;
    }
    s << "}}";
  }
  s << "], \"workspace\": {";
  for (size_t i = 0; i < workspace_.size(); ++i) {
    s << (i ? ", " : "") << '"' << workspace_[i].first << "\": ";
    if (workspace_[i].second.size() == 1) {
      s << workspace_[i].second.front();
    } else {
      write_list(s, workspace_[i].second);
    }
  }
  s << "}}";
  return s.str();
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
