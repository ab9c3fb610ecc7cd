#include <tjit/kit/plan_choice.h>

#include <tjit/dtype.h>
#include <tjit/environment.h>
#include <tjit/prepare.h>
#include <tjit/timing.h>
#include <tjit/triton_jit_function.h>

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_map>

// The tables of ops/plan_tables/, embedded at build time (cmake/EmbedText.cmake).
namespace tjit::detail {
extern const char* const kPlanTableTexts[];
extern const char* const kPlanTableNames[];
extern const std::size_t kPlanTableCount;
}  // namespace tjit::detail

namespace tjit::kit {
namespace {

constexpr const char* kTableFormat = "tjit plan table 1";
// A table serves a card of its capability and SM count whose peak bandwidth is within 10% of its own.
constexpr double kBandwidthTolerance = 0.10;
constexpr int64_t kMaxRowsClass = 65536;
// Time each candidate gets at a first call: the estimate runs, then this much warm-up and timing.
constexpr double kTuneWarmupMs = 5;
constexpr double kTuneRepMs = 20;
// Another candidate replaces the default rule's only when faster by more than this (the spread of
// repeated timings): a choice is not made by noise.
constexpr double kTuneNoise = 0.01;
// Candidates within this of the fastest are timed a second time, in reverse order, and ranked by
// the mean of both timings: one pass leaves a candidate's place in the order (clocks settling, a
// neighbour's work) in its time, and near-ties differ by less than that.
constexpr double kConfirmSpread = 0.05;

struct TableEntry {
  int64_t rows;
  int64_t cols;
  std::string candidate;
};

struct PlanTable {
  std::string origin;  // the file, or "embedded <name>"
  std::string text;
  int capability = 0;
  int multiprocessors = 0;
  int memory_gbps = 0;
  // "<plan>/<dtype>/<flags>" -> entries
  std::map<std::string, std::vector<TableEntry>> entries;

  bool serves(const DeviceFacts& d) const {
    return d.is_cuda && d.capability == capability && d.multiprocessors == multiprocessors &&
           std::abs(d.memory_gbps - memory_gbps) <= kBandwidthTolerance * memory_gbps;
  }
};

PlanTable parse_table(const std::string& text, const std::string& origin) {
  const nlohmann::json j = nlohmann::json::parse(text);
  TORCH_CHECK(j.value("format", std::string()) == kTableFormat, "tjit: plan table ", origin, " is not a '",
              kTableFormat, "' file (its \"format\" is ", j.value("format", std::string("missing")), ")");
  PlanTable table;
  table.origin = origin;
  table.text = text;
  const auto& card = j.at("card");
  table.capability = card.at("capability").get<int>();
  table.multiprocessors = card.at("multiprocessors").get<int>();
  table.memory_gbps = card.at("memory_gbps").get<int>();
  for (const auto& [plan, by_dtype] : j.at("plans").items()) {
    for (const auto& [dtype, by_flags] : by_dtype.items()) {
      for (const auto& [flags, rows] : by_flags.items()) {
        auto& list = table.entries[plan + "/" + dtype + "/" + flags];
        for (const auto& e : rows) {
          list.push_back({e.at(0).get<int64_t>(), e.at(1).get<int64_t>(), e.at(2).get<std::string>()});
        }
      }
    }
  }
  return table;
}

// Beside a table, the tuning command's timings (python -m tjit tune): evidence, never read here, so
// that a first call parses the choices only (every candidate's time outweighs the choice by far).
constexpr std::string_view kMeasurementsSuffix = ".measurements.json";

bool is_measurements_file(const std::string& name) {
  return name.size() >= kMeasurementsSuffix.size() &&
         name.compare(name.size() - kMeasurementsSuffix.size(), kMeasurementsSuffix.size(), kMeasurementsSuffix) == 0;
}

// Tables of one's own (TJIT_PLAN_TABLES: a folder of *.json, or one file) first, then the embedded
// ones; TJIT_PLAN_TABLES=0 (off, false, no): none at all, as on a card without a table.
std::vector<PlanTable> read_tables() {
  std::vector<PlanTable> tables;
  if (switched_off("TJIT_PLAN_TABLES")) {
    return tables;
  }
  if (const char* dir = std::getenv("TJIT_PLAN_TABLES"); dir != nullptr && *dir != '\0') {
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    std::error_code ec;
    if (fs::is_directory(dir, ec)) {
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.path().extension() == ".json" && !is_measurements_file(entry.path().filename().string())) {
          files.push_back(entry.path());
        }
      }
      std::sort(files.begin(), files.end());
    } else {
      TORCH_CHECK(!is_measurements_file(dir), "tjit: TJIT_PLAN_TABLES names ", dir,
                  ", the timings beside a plan table: name the table (or its folder) instead");
      files.emplace_back(dir);
    }
    for (const auto& file : files) {
      std::ifstream in(file);
      TORCH_CHECK(in.good(), "tjit: TJIT_PLAN_TABLES names ", file.string(), ", which cannot be read");
      std::stringstream text;
      text << in.rdbuf();
      tables.push_back(parse_table(text.str(), file.string()));
    }
  }
  for (size_t i = 0; i < detail::kPlanTableCount; ++i) {
    tables.push_back(parse_table(detail::kPlanTableTexts[i], std::string("embedded ") + detail::kPlanTableNames[i] + ".json"));
  }
  return tables;
}

struct Tables {
  std::shared_mutex mutex;
  std::vector<PlanTable> tables;
  bool loaded = false;
};

Tables& tables() {
  static Tables* t = new Tables();  // never destroyed: choices may be made during exit
  return *t;
}

template <typename Fn>
auto with_tables(Fn fn) {
  Tables& t = tables();
  {
    std::shared_lock lock(t.mutex);
    if (t.loaded) {
      return fn(t.tables);
    }
  }
  std::unique_lock lock(t.mutex);
  if (!t.loaded) {
    t.tables = read_tables();
    t.loaded = true;
  }
  return fn(t.tables);
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, PlanCandidates*> plans;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

int64_t rows_class(int64_t rows) {
  int64_t c = 1;
  while (c < rows && c < kMaxRowsClass) {
    c *= 2;
  }
  return c;
}

bool first_call_tuning_enabled() {
  static const bool on = !switched_off("TJIT_TUNE");
  return on;
}

const char* choice_source_name(ChoiceSource source) {
  switch (source) {
    case ChoiceSource::Forced: return "forced";
    case ChoiceSource::Remembered: return "remembered";
    case ChoiceSource::Table: return "table";
    case ChoiceSource::Stored: return "stored";
    case ChoiceSource::Tuned: return "tuned";
    case ChoiceSource::Default: return "default";
  }
  return "?";
}

struct PlanCandidates::Memory {
  using Key = std::tuple<int, int64_t, int64_t, int, int64_t>;
  struct Hash {
    size_t operator()(const Key& k) const {
      size_t h = std::hash<int64_t>()(std::get<2>(k));
      h = h * 1000003u ^ std::hash<int64_t>()(std::get<1>(k));
      h = h * 1000003u ^ std::hash<int64_t>()(std::get<4>(k));
      h = h * 1000003u ^ static_cast<size_t>(std::get<3>(k) * 131 + std::get<0>(k));
      return h;
    }
  };
  mutable std::shared_mutex mutex;
  // The class's candidate and where it came from (a table, a first call's tuning, the store, ...).
  std::unordered_map<Key, std::pair<int, ChoiceSource>, Hash> chosen;
  std::mutex tuning;  // one thread tunes a plan at a time; the others then find its choice

  static Key key_of(const ChoiceKey& k, const DeviceFacts& d) {
    return {d.device_index, rows_class(k.rows), k.cols, static_cast<int>(k.dtype), k.flags};
  }
};

PlanCandidates::PlanCandidates(std::string plan, std::vector<std::string> names)
    : plan_(std::move(plan)), names_(std::move(names)), memory_(std::make_unique<Memory>()) {
  std::lock_guard lock(registry().mutex);
  registry().plans[plan_] = this;
}

PlanCandidates::~PlanCandidates() {
  std::lock_guard lock(registry().mutex);
  registry().plans.erase(plan_);
}

int PlanCandidates::index_of(const std::string& name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  return it == names_.end() ? -1 : static_cast<int>(it - names_.begin());
}

std::optional<std::pair<int, ChoiceSource>> PlanCandidates::remembered(const ChoiceKey& key,
                                                                     const DeviceFacts& device) const {
  std::shared_lock lock(memory_->mutex);
  const auto it = memory_->chosen.find(Memory::key_of(key, device));
  return it == memory_->chosen.end() ? std::nullopt : std::optional(it->second);
}

void PlanCandidates::remember(const ChoiceKey& key, const DeviceFacts& device, int index, ChoiceSource source) const {
  std::unique_lock lock(memory_->mutex);
  memory_->chosen[Memory::key_of(key, device)] = {index, source};
}

void PlanCandidates::forget() const {
  std::unique_lock lock(memory_->mutex);
  memory_->chosen.clear();
}

int PlanCandidates::from_table(const ChoiceKey& key, const DeviceFacts& device,
                               c10::function_ref<bool(int)> fits) const {
  return with_tables([&](const std::vector<PlanTable>& all) {
    for (const PlanTable& table : all) {
      if (!table.serves(device)) {
        continue;
      }
      const auto it = table.entries.find(plan_ + "/" + Dtype(key.dtype).attribute_name() + "/" + std::to_string(key.flags));
      if (it == table.entries.end()) {
        return -1;  // the card's table does not cover this plan and dtype
      }
      // Nearest measured neighbour: the nearest measured row class, then the nearest columns, among
      // entries whose candidate fits this call.
      const double rows = std::log2(static_cast<double>(rows_class(key.rows)));
      std::pair<double, int64_t> best_distance{std::numeric_limits<double>::infinity(), 0};
      int best_index = -1;
      for (const TableEntry& e : it->second) {
        const int index = index_of(e.candidate);
        if (index < 0) {
          continue;  // a candidate this build no longer has
        }
        const std::pair<double, int64_t> distance{std::abs(std::log2(static_cast<double>(e.rows)) - rows),
                                                  std::abs(e.cols - key.cols)};
        if ((best_index < 0 || distance < best_distance) && fits(index)) {
          best_distance = distance;
          best_index = index;
        }
      }
      return best_index;
    }
    return -1;
  });
}

int PlanCandidates::peek(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits,
                         c10::function_ref<int()> default_index, ChoiceSource* source) const {
  auto say = [&](ChoiceSource s, int index) {
    if (source != nullptr) {
      *source = s;
    }
    return index;
  };
  if (const int f = forced(); f >= 0) {
    TORCH_CHECK(fits(f), "tjit: plan ", plan_, ": the forced candidate '", names_[f], "' does not fit this call (",
                Dtype(key.dtype).attribute_name(), ", ", key.rows, " rows of ", key.cols, " columns)");
    return say(ChoiceSource::Forced, f);
  }
  // A choice this process made for the class on this CUDA device, named by where it came from (a
  // first call's tuning, say), so that a description shows what the calls run. Made-up facts have
  // no device index; off CUDA nothing is measured, so the rule or table describes the calls.
  if (device.device_index >= 0) {
    if (const auto r = remembered(key, device); r && fits(r->first)) {
      return say(r->second, r->first);
    }
  }
  if (const int t = from_table(key, device, fits); t >= 0) {
    return say(ChoiceSource::Table, t);
  }
  return say(ChoiceSource::Default, default_index());
}

int PlanCandidates::choose(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits,
                           c10::function_ref<int()> default_index, const CandidateTimer* timer,
                           ChoiceSource* source) const {
  if (forced() < 0) {
    if (const auto r = remembered(key, device)) {
      if (fits(r->first)) {
        if (source != nullptr) {
          *source = ChoiceSource::Remembered;
        }
        return r->first;
      }
      // A size of the class that the class's choice does not fit (a rule of rows or columns within
      // the class): the table's or the default rule's, remembered for no one.
      return peek(key, device, fits, default_index, source);
    }
  }
  ChoiceSource s = ChoiceSource::Default;
  int index = peek(key, device, fits, default_index, &s);
  if (s == ChoiceSource::Default && device.is_cuda && timer != nullptr && first_call_tuning_enabled()) {
    if (!timer->may_time()) {
      // A stream being captured: the default now, tuned at a later call outside the capture.
      if (source != nullptr) {
        *source = ChoiceSource::Default;
      }
      return index;
    }
    const int default_choice = index;
    index = tune(key, device, fits, default_choice, *timer, &s);
    if (index < 0) {
      // No candidate could be timed (each failed): the default rule now, tuning again at a later call.
      if (source != nullptr) {
        *source = ChoiceSource::Default;
      }
      return default_choice;
    }
  }
  if (s != ChoiceSource::Forced) {
    remember(key, device, index, s);
  }
  if (source != nullptr) {
    *source = s;
  }
  return index;
}

int PlanCandidates::tune(const ChoiceKey& key, const DeviceFacts& device, c10::function_ref<bool(int)> fits,
                         int default_index, const CandidateTimer& timer, ChoiceSource* source) const {
  std::lock_guard tuning(memory_->tuning);
  if (const auto r = remembered(key, device)) {  // another thread tuned it meanwhile
    *source = ChoiceSource::Remembered;
    return r->first;
  }
  std::vector<int> fitting;
  for (int i = 0; i < size(); ++i) {
    if (fits(i)) {
      fitting.push_back(i);
    }
  }
  if (fitting.size() <= 1) {
    *source = ChoiceSource::Default;
    return fitting.empty() ? default_index : fitting[0];
  }
  std::string names_text;
  for (const auto& n : names_) {
    names_text += n + " ";
  }
  const std::string what = "plan " + plan_ + "\ncandidates " + names_text + "\ncard capability " +
                           std::to_string(device.capability) + " multiprocessors " +
                           std::to_string(device.multiprocessors) + " memory_gbps " +
                           std::to_string(device.memory_gbps) + "\ncall " + Dtype(key.dtype).attribute_name() + " rows_class " +
                           std::to_string(rows_class(key.rows)) + " cols " + std::to_string(key.cols) + " flags " +
                           std::to_string(key.flags) + "\n";
  const TritonJitFunction* store_with = timer.store_with();
  if (store_with != nullptr) {
    if (const auto stored = store_with->load_decision(what)) {
      const auto value = nlohmann::json::parse(*stored, nullptr, /*allow_exceptions=*/false);
      const int index = value.is_object() ? index_of(value.value("candidate", std::string())) : -1;
      if (index >= 0 && fits(index)) {
        *source = ChoiceSource::Stored;
        return index;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const auto time_one = [&](int i) {
    try {
      return timer.time_ms(i);
    } catch (const c10::Error& e) {
      std::fprintf(stderr, "[tjit] plan %s: candidate %s failed while tuning, skipped: %s\n", plan_.c_str(),
                   names_[i].c_str(), e.what_without_backtrace());
      return std::numeric_limits<double>::infinity();
    }
  };
  std::vector<double> ms(fitting.size());
  for (size_t k = 0; k < fitting.size(); ++k) {
    ms[k] = time_one(fitting[k]);
  }
  const double first_best = *std::min_element(ms.begin(), ms.end());
  if (!std::isfinite(first_best)) {
    return -1;
  }
  nlohmann::json timings = nlohmann::json::object();
  for (size_t k = fitting.size(); k-- > 0;) {
    const int i = fitting[k];
    const bool contender = ms[k] <= first_best * (1 + kConfirmSpread) || i == default_index;
    nlohmann::json times = nlohmann::json::array();
    times.push_back(std::isfinite(ms[k]) ? nlohmann::json(ms[k]) : nlohmann::json());
    if (contender && std::isfinite(ms[k])) {
      const double again = time_one(i);
      times.push_back(std::isfinite(again) ? nlohmann::json(again) : nlohmann::json());
      ms[k] = std::isfinite(again) ? (ms[k] + again) / 2 : again;
    }
    timings[names_[i]] = std::move(times);
  }
  int best = default_index;
  double best_ms = std::numeric_limits<double>::infinity();
  double default_ms = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < fitting.size(); ++k) {
    if (ms[k] < best_ms) {
      best_ms = ms[k];
      best = fitting[k];
    }
    if (fitting[k] == default_index) {
      default_ms = ms[k];
    }
  }
  if (!std::isfinite(best_ms)) {
    return -1;
  }
  if (default_ms <= best_ms * (1 + kTuneNoise)) {
    best = default_index;  // within the timings' spread: the default rule stands
    best_ms = default_ms;
  }
  if (store_with != nullptr) {
    store_with->store_decision(what, nlohmann::json{{"candidate", names_[best]}, {"timings_ms", timings}}.dump());
  }
  if (log_compiles()) {
    const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr,
                 "[tjit] tuned plan %s for %s, %lld rows (class %lld) of %lld columns, flags %lld: %zu candidates in "
                 "%.0f ms; best %s at %.4f ms\n",
                 plan_.c_str(), Dtype(key.dtype).attribute_name(), static_cast<long long>(key.rows),
                 static_cast<long long>(rows_class(key.rows)), static_cast<long long>(key.cols),
                 static_cast<long long>(key.flags), fitting.size(), took, names_[best].c_str(), best_ms);
    std::fprintf(stderr, "[tjit]   timings ms (second timing of near-ties): %s\n", timings.dump().c_str());
  }
  *source = ChoiceSource::Tuned;
  return best;
}

double time_candidate(Stream stream, const c10::Device& device, const std::function<void()>& run) {
  // tjit::prepare() holds launches back; a candidate's time is its launches', so they run (as an
  // autotuned kernel's configs do).
  PrepareOnlyScope timing_launches(false);
  return time_launches(stream, device, run, kTuneWarmupMs, kTuneRepMs);
}

PlanCandidates* find_plan_candidates(const std::string& plan) {
  std::lock_guard lock(registry().mutex);
  const auto it = registry().plans.find(plan);
  return it == registry().plans.end() ? nullptr : it->second;
}

std::vector<std::string> plans_with_candidates() {
  std::lock_guard lock(registry().mutex);
  std::vector<std::string> names;
  for (const auto& [name, plan] : registry().plans) {
    names.push_back(name);
  }
  return names;
}

std::string plan_table_for(const DeviceFacts& device, std::string* origin) {
  return with_tables([&](const std::vector<PlanTable>& all) {
    for (const PlanTable& table : all) {
      if (table.serves(device)) {
        if (origin != nullptr) {
          *origin = table.origin;
        }
        return table.text;
      }
    }
    return std::string();
  });
}

void reload_plan_tables() {
  {
    Tables& t = tables();
    std::unique_lock lock(t.mutex);
    t.tables = read_tables();
    t.loaded = true;
  }
  std::lock_guard lock(registry().mutex);
  for (const auto& [name, plan] : registry().plans) {
    plan->forget();
  }
}

}  // namespace tjit::kit
