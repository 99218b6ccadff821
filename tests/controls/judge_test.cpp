// The judgement of a detection matrix: what counts as caught, as flagged and as unproven. Built on
// hand-made counts, so every rule is shown to fail where it must.
#include <gtest/gtest.h>

#include "kgate/matrix.hpp"

namespace kgate {
namespace {

constexpr int kSeeds = 20;

MatrixRow row(std::string name, bool broken, std::vector<std::string> intended, std::size_t gates) {
  MatrixRow r;
  r.control.name = std::move(name);
  r.control.broken = broken;
  r.control.gates = std::move(intended);
  r.cells.resize(gates);
  r.runs = kSeeds;
  return r;
}

void put(MatrixRow& r, std::size_t gate, Verdict v, int n) { r.cells[gate].by_verdict[static_cast<std::size_t>(v)] += n; }

// Columns oracle, nan, baseline; a broken control caught by nan on every seed and a clean correct one.
MatrixResult holding() {
  MatrixResult m;
  m.gates = {"oracle", "nan", "baseline"};
  m.seeds = kSeeds;
  m.first_seed = 7;
  MatrixRow broken = row("drops_nan", true, {"nan"}, 3);
  put(broken, 0, Verdict::pass, kSeeds);
  put(broken, 1, Verdict::fail, kSeeds);
  put(broken, 2, Verdict::pass, kSeeds);
  MatrixRow correct = row("good", false, {}, 3);
  for (std::size_t g = 0; g < 3; ++g) put(correct, g, Verdict::pass, kSeeds);
  m.rows = {broken, correct};
  return m;
}

TEST(Judge, HoldsWhenEveryIntendedCellFailsAndCorrectControlsPass) {
  const MatrixJudgement j = judge(holding());
  EXPECT_TRUE(j.holds);
  EXPECT_TRUE(j.problems.empty());
  EXPECT_NE(j.summary.find("MATRIX HOLDS"), std::string::npos);
}

TEST(Judge, OneMissedSeedBreaksIt) {
  MatrixResult m = holding();
  m.rows[0].cells[1] = {};
  put(m.rows[0], 1, Verdict::fail, kSeeds - 1);
  put(m.rows[0], 1, Verdict::pass, 1);
  m.rows[0].notes.push_back({"nan", 12, Verdict::pass, "3 cases"});
  const MatrixJudgement j = judge(m);
  EXPECT_FALSE(j.holds);
  ASSERT_EQ(j.problems.size(), 1u);
  EXPECT_NE(j.problems[0].find("drops_nan"), std::string::npos);
  EXPECT_NE(j.problems[0].find("19 of 20"), std::string::npos);
  EXPECT_NE(j.problems[0].find("seed 12"), std::string::npos);  // where to look first
  EXPECT_NE(j.summary.find("DOES NOT HOLD"), std::string::npos);
}

TEST(Judge, CrashAndTimeoutCountAsCaught) {
  MatrixResult m = holding();
  m.rows[0].cells[1] = {};
  put(m.rows[0], 1, Verdict::crash, 10);
  put(m.rows[0], 1, Verdict::timeout, 10);
  EXPECT_TRUE(judge(m).holds);
}

TEST(Judge, ErrorIsNeverCaught) {
  MatrixResult m = holding();
  m.rows[0].cells[1] = {};
  put(m.rows[0], 1, Verdict::fail, kSeeds - 1);
  put(m.rows[0], 1, Verdict::error, 1);
  EXPECT_FALSE(judge(m).holds);
}

TEST(Judge, SkipOfAnIntendedGateIsAMiss) {
  MatrixResult m = holding();
  m.rows[0].cells[1] = {};
  put(m.rows[0], 1, Verdict::skip, kSeeds);
  EXPECT_FALSE(judge(m).holds);
}

TEST(Judge, CorrectControlFlaggedOnceBreaksIt) {
  MatrixResult m = holding();
  m.rows[1].cells[0] = {};
  put(m.rows[1], 0, Verdict::pass, kSeeds - 1);
  put(m.rows[1], 0, Verdict::fail, 1);
  const MatrixJudgement j = judge(m);
  EXPECT_FALSE(j.holds);
  ASSERT_EQ(j.problems.size(), 1u);
  EXPECT_NE(j.problems[0].find("good"), std::string::npos);
  EXPECT_NE(j.problems[0].find("oracle"), std::string::npos);
}

TEST(Judge, CorrectControlWithAnErrorIsNotProvenClean) {
  MatrixResult m = holding();
  m.rows[1].cells[1] = {};
  put(m.rows[1], 1, Verdict::pass, kSeeds - 1);
  put(m.rows[1], 1, Verdict::error, 1);
  EXPECT_FALSE(judge(m).holds);
}

TEST(Judge, RefusalAndSkipAreNoFindingOnACorrectControl) {
  MatrixResult m = holding();
  m.rows[1].cells[0] = {};
  put(m.rows[1], 0, Verdict::refused, 5);
  put(m.rows[1], 0, Verdict::skip, 15);
  EXPECT_TRUE(judge(m).holds);
}

TEST(Judge, BaselineIsNotAGate) {
  MatrixResult m = holding();
  m.rows[1].cells[2] = {};
  put(m.rows[1], 2, Verdict::fail, kSeeds);  // the field's test rejecting a correct kernel is its problem
  EXPECT_TRUE(judge(m).holds);
}

TEST(Judge, UnintendedFailuresOfABrokenControlAreShownNotRequired) {
  MatrixResult m = holding();
  m.rows[0].cells[0] = {};
  put(m.rows[0], 0, Verdict::fail, 3);
  put(m.rows[0], 0, Verdict::pass, kSeeds - 3);
  EXPECT_TRUE(judge(m).holds);
}

TEST(Judge, IntendedGateNotRunIsAProblem) {
  MatrixResult m = holding();
  m.rows[0].control.gates = {"nan", "stream"};
  const MatrixJudgement j = judge(m);
  EXPECT_FALSE(j.holds);
  ASSERT_EQ(j.problems.size(), 1u);
  EXPECT_NE(j.problems[0].find("stream"), std::string::npos);
}

TEST(Judge, MissingRunsAndLoadErrorsAreProblems) {
  MatrixResult m = holding();
  m.rows[1].runs = kSeeds - 1;
  EXPECT_FALSE(judge(m).holds);
  m = holding();
  m.rows[0].errors.push_back("seed 3: cannot load lib/ctl_x.so");
  EXPECT_FALSE(judge(m).holds);
}

TEST(Judge, EmptyMatrixDoesNotHold) { EXPECT_FALSE(judge(MatrixResult{}).holds); }

TEST(Format, MarksIntendedCellsAndEndsWithTheJudgement) {
  const std::string t = format_matrix(holding(), false);
  EXPECT_NE(t.find("[20F]"), std::string::npos);
  EXPECT_NE(t.find("drops_nan"), std::string::npos);
  EXPECT_NE(t.find("seeds 7..26"), std::string::npos);
  const std::string last = t.substr(t.rfind('\n', t.size() - 2) + 1);
  EXPECT_EQ(last.rfind("MATRIX HOLDS", 0), 0u) << last;
}

TEST(Format, CountsEveryVerdictKindInACell) {
  MatrixResult m = holding();
  m.rows[1].cells[0] = {};
  put(m.rows[1], 0, Verdict::fail, 2);
  put(m.rows[1], 0, Verdict::pass, 15);
  put(m.rows[1], 0, Verdict::skip, 2);
  put(m.rows[1], 0, Verdict::error, 1);
  const std::string t = format_matrix(m, false);
  EXPECT_NE(t.find("2F15P2S1E"), std::string::npos) << t;
  EXPECT_NE(t.find("problems:"), std::string::npos);
}

TEST(Format, JsonCarriesCountsAndTheJudgement) {
  const std::string j = matrix_json(holding());
  EXPECT_NE(j.find("\"holds\": true"), std::string::npos);
  EXPECT_NE(j.find("\"FAIL\": 20"), std::string::npos);
  EXPECT_NE(j.find("\"first_seed\": 7"), std::string::npos);
}

}  // namespace
}  // namespace kgate
