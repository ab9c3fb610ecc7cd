// kit::PlanCandidates' order of choices, without a GPU: a class's remembered choice serves the
// calls it fits; one it does not fit takes the default rule for that call alone.

#include <tjit/kit/plan_choice.h>

#include <gtest/gtest.h>

namespace {

using tjit::kit::ChoiceKey;
using tjit::kit::ChoiceSource;
using tjit::kit::DeviceFacts;
using tjit::kit::PlanCandidates;

TEST(PlanChoice, ARememberedChoiceServesOnlyTheCallsItFits) {
  const PlanCandidates candidates("test_remembered_fits", {"a", "b", "c"});
  const DeviceFacts cpu;  // not CUDA: no table serves it, nothing is tuned
  const ChoiceKey key{100, 4096, c10::kFloat, 0};
  const auto all = [](int) { return true; };
  ChoiceSource source = ChoiceSource::Forced;
  EXPECT_EQ(candidates.choose(key, cpu, all, 1, nullptr, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Default);
  // Another call of the class (rows 65..128) gets the class's choice, whatever its default rule says.
  EXPECT_EQ(candidates.choose(ChoiceKey{70, 4096, c10::kFloat, 0}, cpu, all, 2, nullptr, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Remembered);
  // A call of the class that "b" does not fit: its own default, and the class keeps "b".
  const auto not_b = [](int i) { return i != 1; };
  EXPECT_EQ(candidates.choose(key, cpu, not_b, 2, nullptr, &source), 2);
  EXPECT_EQ(source, ChoiceSource::Default);
  EXPECT_EQ(candidates.choose(key, cpu, all, 0, nullptr, &source), 1);
  EXPECT_EQ(source, ChoiceSource::Remembered);
  // Other classes choose for themselves.
  EXPECT_EQ(candidates.choose(ChoiceKey{100, 8192, c10::kFloat, 0}, cpu, all, 0, nullptr, &source), 0);
  EXPECT_EQ(candidates.choose(ChoiceKey{100, 4096, c10::kHalf, 0}, cpu, all, 2, nullptr, &source), 2);
  EXPECT_EQ(candidates.choose(ChoiceKey{100, 4096, c10::kFloat, 1}, cpu, all, 0, nullptr, &source), 0);
}

TEST(PlanChoice, AForcedCandidateThatDoesNotFitIsAnError) {
  PlanCandidates candidates("test_forced_fits", {"a", "b"});
  const DeviceFacts cpu;
  candidates.force(1);
  const auto not_b = [](int i) { return i != 1; };
  try {
    candidates.choose(ChoiceKey{1, 64, c10::kFloat, 0}, cpu, not_b, 0);
    FAIL() << "a forced candidate that does not fit was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b' does not fit"), std::string::npos) << e.what();
  }
  candidates.force(-1);
  EXPECT_EQ(candidates.choose(ChoiceKey{1, 64, c10::kFloat, 0}, cpu, not_b, 0), 0);
}

}  // namespace
