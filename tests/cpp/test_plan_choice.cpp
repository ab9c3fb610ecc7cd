// kit::PlanCandidates' order of choices, without a GPU: a class's remembered choice serves the
// calls it fits; one it does not fit takes the default rule for that call alone; a tuning that
// could time no candidate is not remembered; near-ties are timed twice.

#include <tjit/kit/plan_choice.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace {

using tjit::kit::ChoiceKey;
using tjit::kit::ChoiceSource;
using tjit::kit::DeviceFacts;
using tjit::kit::PlanCandidates;

// A default rule that names candidate I.
template <int I>
int default_is() {
  return I;
}

// A CUDA card no table serves: first-call tuning, timed by each test's timer.
DeviceFacts untabled_cuda_card() {
  DeviceFacts card;
  card.is_cuda = true;
  card.multiprocessors = 7;
  card.capability = 75;
  card.device_index = 0;
  return card;
}
const auto every_candidate_fits = [](int) { return true; };
const auto may_time = [] { return true; };
const auto no_store = []() -> const tjit::TritonJitFunction* { return nullptr; };

TEST(PlanChoice, ARememberedChoiceServesOnlyTheCallsItFits) {
  const PlanCandidates candidates("test_remembered_fits", {"a", "b", "c"});
  const DeviceFacts cpu;  // not CUDA: no table serves it, nothing is tuned
  const ChoiceKey key{100, 4096, c10::kFloat, 0};
  const auto all = [](int) { return true; };
  ChoiceSource source = ChoiceSource::Forced;
  EXPECT_EQ(candidates.choose(key, cpu, all, default_is<1>, nullptr, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Default);
  // Another call of the class (rows 65..128) gets the class's choice, whatever its default rule says.
  EXPECT_EQ(candidates.choose(ChoiceKey{70, 4096, c10::kFloat, 0}, cpu, all, default_is<2>, nullptr, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Remembered);
  // A call of the class that "b" does not fit: its own default, and the class keeps "b".
  const auto not_b = [](int i) { return i != 1; };
  EXPECT_EQ(candidates.choose(key, cpu, not_b, default_is<2>, nullptr, &source), 2);
  EXPECT_EQ(source, ChoiceSource::Default);
  EXPECT_EQ(candidates.choose(key, cpu, all, default_is<0>, nullptr, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Remembered);
  // Other classes choose for themselves.
  EXPECT_EQ(candidates.choose(ChoiceKey{100, 8192, c10::kFloat, 0}, cpu, all, default_is<0>, nullptr, &source), 0);
  EXPECT_EQ(candidates.choose(ChoiceKey{100, 4096, c10::kHalf, 0}, cpu, all, default_is<2>, nullptr, &source), 2);
  EXPECT_EQ(candidates.choose(ChoiceKey{100, 4096, c10::kFloat, 1}, cpu, all, default_is<0>, nullptr, &source), 0);
}

TEST(PlanChoice, TheDefaultRuleIsAskedOnlyWhereNothingElseDecides) {
  PlanCandidates candidates("test_default_asked", {"a", "b"});
  const DeviceFacts cpu;
  const ChoiceKey key{100, 4096, c10::kFloat, 0};
  const auto all = [](int) { return true; };
  int asked = 0;
  const auto counted_default = [&] {
    ++asked;
    return 1;
  };
  EXPECT_EQ(candidates.choose(key, cpu, all, counted_default), 1);
  EXPECT_EQ(asked, 1);
  // The class's remembered choice serves: the default rule is not worked out again.
  EXPECT_EQ(candidates.choose(key, cpu, all, counted_default), 1);
  EXPECT_EQ(asked, 1);
  // Nor for a forced candidate.
  candidates.force(0);
  EXPECT_EQ(candidates.choose(key, cpu, all, counted_default), 0);
  EXPECT_EQ(candidates.peek(key, cpu, all, counted_default), 0);
  EXPECT_EQ(asked, 1);
  // A description off CUDA works the rule out (nothing there is measured).
  candidates.force(-1);
  EXPECT_EQ(candidates.peek(key, cpu, all, counted_default), 1);
  EXPECT_EQ(asked, 2);
}

TEST(PlanChoice, AForcedCandidateThatDoesNotFitIsAnError) {
  PlanCandidates candidates("test_forced_fits", {"a", "b"});
  const DeviceFacts cpu;
  candidates.force(1);
  const auto not_b = [](int i) { return i != 1; };
  try {
    candidates.choose(ChoiceKey{1, 64, c10::kFloat, 0}, cpu, not_b, default_is<0>);
    FAIL() << "a forced candidate that does not fit was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b' does not fit"), std::string::npos) << e.what();
  }
  candidates.force(-1);
  EXPECT_EQ(candidates.choose(ChoiceKey{1, 64, c10::kFloat, 0}, cpu, not_b, default_is<0>), 0);
}

TEST(PlanChoice, ATuningThatTimedNothingIsTriedAgain) {
  const PlanCandidates candidates("test_tuning_failed", {"a", "b", "c"});
  const DeviceFacts card = untabled_cuda_card();
  const ChoiceKey key{100, 4096, c10::kFloat, 0};
  const auto& all = every_candidate_fits;
  const auto every_run_fails = [](int) -> double { TORCH_CHECK(false, "the test's launch failed"); };
  const tjit::kit::CandidateTimer failing{may_time, every_run_fails, no_store};
  ChoiceSource source = ChoiceSource::Forced;
  EXPECT_EQ(candidates.choose(key, card, all, default_is<1>, &failing, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Default);
  // Not remembered: the next call tunes; a candidate that fails is skipped, the fastest wins.
  const auto c_is_fastest = [](int i) -> double {
    TORCH_CHECK(i != 0, "the test's launch failed");
    return i == 2 ? 1.0 : 2.0;
  };
  const tjit::kit::CandidateTimer timing{may_time, c_is_fastest, no_store};
  EXPECT_EQ(candidates.choose(key, card, all, default_is<1>, &timing, &source), 2);
  EXPECT_EQ(source, ChoiceSource::Tuned);
  EXPECT_EQ(candidates.choose(key, card, all, default_is<1>, &failing, &source), 2);
  EXPECT_EQ(source, ChoiceSource::Remembered);
}

TEST(PlanChoice, NearTiesAreTimedAgainAndRankedByTheirMean) {
  const PlanCandidates candidates("test_tuning_near_ties", {"a", "b", "far", "default"});
  const DeviceFacts card = untabled_cuda_card();
  const ChoiceKey key{100, 4096, c10::kFloat, 0};
  const auto& all = every_candidate_fits;
  // a is fastest once, slower the second time; b is the faster on average. "far" is not a near-tie
  // (timed once); the default rule's candidate is always timed again.
  const std::vector<std::vector<double>> times{{1.00, 1.10}, {1.02, 1.00}, {2.0}, {1.3, 1.3}};
  std::vector<size_t> calls(times.size(), 0);
  const auto timed = [&](int i) -> double {
    const auto& t = times.at(i);
    EXPECT_LT(calls[i], t.size()) << "candidate " << i << " timed too often";
    return t.at(std::min(calls[i]++, t.size() - 1));
  };
  const tjit::kit::CandidateTimer timer{may_time, timed, no_store};
  ChoiceSource source = ChoiceSource::Forced;
  EXPECT_EQ(candidates.choose(key, card, all, default_is<3>, &timer, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Tuned);
  EXPECT_EQ(calls, (std::vector<size_t>{2, 2, 1, 2}));
}

TEST(PlanChoice, ADescriptionShowsTheChoiceTheCallsMadeOnThatDevice) {
  const PlanCandidates candidates("test_described_choice", {"a", "b", "c"});
  const DeviceFacts card = untabled_cuda_card();
  const ChoiceKey key{100, 4096, c10::kFloat, 0};
  const auto& all = every_candidate_fits;
  const auto c_is_fastest = [](int i) -> double { return i == 2 ? 1.0 : 2.0; };
  const tjit::kit::CandidateTimer timer{may_time, c_is_fastest, no_store};
  ChoiceSource source = ChoiceSource::Forced;
  EXPECT_EQ(candidates.peek(key, card, all, default_is<0>, &source), 0);  // nothing chosen yet
  EXPECT_EQ(source, ChoiceSource::Default);
  EXPECT_EQ(candidates.choose(key, card, all, default_is<0>, &timer, &source), 2);
  EXPECT_EQ(source, ChoiceSource::Tuned);
  // The description names the tuned choice and where it came from, not the default rule.
  EXPECT_EQ(candidates.peek(key, card, all, default_is<0>, &source), 2);
  EXPECT_EQ(source, ChoiceSource::Tuned);
  // Where it does not fit a size of the class, the rule's; on another device (made-up facts), too.
  EXPECT_EQ(candidates.peek(key, card, [](int i) { return i != 2; }, default_is<1>, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Default);
  DeviceFacts other = card;
  other.device_index = -1;
  EXPECT_EQ(candidates.peek(key, other, all, default_is<0>, &source), 0);
  EXPECT_EQ(source, ChoiceSource::Default);
}

}  // namespace
