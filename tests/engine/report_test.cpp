// Reports: JSON that parses and carries everything, the terminal table, exit codes, classification, the
// atomic writer.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kgate/compare.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

GateResult result(const std::string& gate, Verdict v, double ratio = std::numeric_limits<double>::quiet_NaN()) {
  GateResult g;
  g.gate = gate;
  g.verdict = v;
  g.error_ratio = ratio;
  g.summary = "s";
  return g;
}

Report with(std::vector<GateResult> gates) {
  Report r;
  r.seed = 18446744073709551557ull;  // above 2^53: must survive JSON exactly
  r.gates = std::move(gates);
  return r;
}

TEST(ExitCode, CleanViolationAndErrorOnly) {
  EXPECT_EQ(with({result("oracle", Verdict::pass), result("accumulation", Verdict::skip)}).exit_code(), 0);
  EXPECT_EQ(with({result("shapes", Verdict::refused)}).exit_code(), 0);
  EXPECT_EQ(with({result("oracle", Verdict::pass), result("nan", Verdict::fail)}).exit_code(), 1);
  EXPECT_EQ(with({result("stream", Verdict::timeout), result("nan", Verdict::error)}).exit_code(), 1);
  EXPECT_EQ(with({result("oracle", Verdict::error), result("nan", Verdict::pass)}).exit_code(), 2);
  EXPECT_EQ(with({result("baseline", Verdict::fail)}).exit_code(), 0) << "baseline is not a gate";
}

TEST(Classify, BrokenViolationClean) {
  EXPECT_EQ(classify(with({result("oracle", Verdict::pass)})), Classification::clean);
  EXPECT_EQ(classify(with({result("oracle", Verdict::fail, 3.0)})), Classification::violation);
  EXPECT_EQ(classify(with({result("oracle", Verdict::fail, 100.0)})), Classification::broken);
  EXPECT_EQ(classify(with({result("nan", Verdict::fail)})), Classification::broken) << "tolerance-free";
  EXPECT_EQ(classify(with({result("stream", Verdict::crash)})), Classification::broken);
  EXPECT_EQ(classify(with({result("baseline", Verdict::fail, 1e9)})), Classification::clean);
  // The bounds gate's compute-sanitizer passes (kgate/sanitizer_log.hpp) are judged as the bounds gate.
  EXPECT_EQ(classify(with({result("bounds/memcheck", Verdict::fail)})), Classification::broken) << "tolerance-free";
}

TEST(Classify, ErrorMakesIncompleteNeverClean) {
  // A gate that could not run is not held against the candidate, and the kernel is not shown clean either.
  EXPECT_EQ(classify(with({result("oracle", Verdict::pass), result("coverage", Verdict::error)})),
            Classification::incomplete);
  EXPECT_STREQ(to_string(Classification::incomplete), "incomplete");
  // Any counted violation outranks it, whichever comes first.
  EXPECT_EQ(classify(with({result("coverage", Verdict::error), result("oracle", Verdict::fail, 3.0)})),
            Classification::violation);
  EXPECT_EQ(classify(with({result("coverage", Verdict::error), result("nan", Verdict::fail)})),
            Classification::broken);
  // Only gates that count: the baseline's error, or one out of the task's domain, leaves a clean kernel clean.
  GateResult ood = result("shapes", Verdict::error);
  ood.out_of_domain = true;
  EXPECT_EQ(classify(with({result("oracle", Verdict::pass), ood, result("baseline", Verdict::error)})),
            Classification::clean);
}

GateResult finding(std::string gate, double ratio, std::string kind) {
  GateResult g = result(std::move(gate), Verdict::fail, ratio);
  g.finding = std::move(kind);
  return g;
}

TEST(Classify, OneDefinitionOfBroken) {
  // TIMEOUT is a status: a violation at most, never broken.
  EXPECT_EQ(classify(with({result("oracle", Verdict::timeout)})), Classification::violation);
  EXPECT_TRUE(broken_reasons(with({result("oracle", Verdict::timeout)})).empty());
  // A FAIL of a tolerance gate outside oracle/shapes/accumulation is never broken by its ratio.
  EXPECT_EQ(classify(with({result("layout", Verdict::fail, 1e6)})), Classification::violation);
  EXPECT_EQ(classify(with({result("shapes", Verdict::fail, 1e6)})), Classification::broken);
  // An indeterminate form (finite where the oracle is NaN under injected Inf) is its own class: a violation.
  EXPECT_EQ(classify(with({finding("inf", std::numeric_limits<double>::quiet_NaN(), "indeterminate form")})),
            Classification::violation);
  EXPECT_EQ(classify(with({finding("inf", std::numeric_limits<double>::quiet_NaN(), "Inf not reproduced")})),
            Classification::broken);
  // NaN past the oracle's spread (nan gate) is "a separate, reported violation" (DESIGN.md); a non-finite value
  // where the oracle is finite in the inf gate stays tolerance-free.
  const double none = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(classify(with({finding("nan", none, to_string(Mismatch::spread))})), Classification::violation);
  EXPECT_EQ(classify(with({finding("nan", none, "NaN masked")})), Classification::broken);
  EXPECT_EQ(classify(with({finding("inf", none, "unexpected non-finite value")})), Classification::broken);
  EXPECT_EQ(classify(with({finding("nan", none, to_string(Mismatch::spread)), finding("inf", none, "NaN masked")})),
            Classification::broken);
  // The one predicate both the classification and the verify loop read.
  for (std::size_t k = 0; k < kMismatchKinds; ++k) {
    const auto m = static_cast<Mismatch>(k);
    EXPECT_EQ(violation_only(to_string(m)), m == Mismatch::indeterminate || m == Mismatch::spread) << to_string(m);
  }
  EXPECT_FALSE(violation_only("crash"));
  EXPECT_FALSE(violation_only(""));
  // Out-of-domain findings are reported, never counted.
  GateResult ood = result("coverage", Verdict::fail);
  ood.out_of_domain = true;
  EXPECT_EQ(classify(with({ood})), Classification::clean);
  EXPECT_EQ(with({ood}).exit_code(), 0);
}

TEST(Attribution, AToleranceErrorAtTheOraclesMagnitudeIsCountedOnceUnderOracle) {
  Report r = with({finding("oracle", 3.0, "error beyond the bound"), finding("stream", 20.0, "error beyond the bound"),
                   finding("layout", 40.0, "error beyond the bound"), finding("shapes", 300.0, "error beyond the bound"),
                   finding("freshness", std::numeric_limits<double>::quiet_NaN(), "stale result")});
  attribute_findings(r);
  EXPECT_FALSE(r.gates[1].counted) << "20x is within 10x of 3x";
  EXPECT_EQ(r.gates[1].attributed_to, "oracle");
  EXPECT_TRUE(r.gates[2].counted) << "40x is more than 10x the oracle's 3x: a finding of its own";
  EXPECT_TRUE(r.gates[3].counted) << "past the broken threshold where the oracle is not";
  EXPECT_TRUE(r.gates[4].counted) << "not a tolerance finding";
  EXPECT_TRUE(r.gates[0].counted);
  // Counting once never changes the class: the stream finding alone would be broken (tolerance-free gate)...
  Report alone = with({finding("oracle", 3.0, "error beyond the bound"), finding("stream", 20.0, "error beyond the bound")});
  EXPECT_EQ(classify(alone), Classification::broken);
  attribute_findings(alone);
  EXPECT_EQ(classify(alone), Classification::violation) << "...but it is the oracle's tolerance error, counted there";
}

TEST(Attribution, FreshnessSeeingTheSameInputsBitsChangeIsCountedUnderDeterminismWhenThatFailedToo) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  Report both = with({finding("determinism", none, "bits differ"), finding("freshness", none, kFindingRepeatChanged)});
  attribute_findings(both);
  EXPECT_TRUE(both.gates[0].counted);
  EXPECT_FALSE(both.gates[1].counted) << "one defect, the same input's bits differing: counted once";
  EXPECT_EQ(both.gates[1].attributed_to, "determinism");
  EXPECT_EQ(classify(both), Classification::broken) << "determinism is tolerance-free";
  // Determinism passed: freshness's finding is the only evidence, counted where it was found.
  Report alone = with({result("determinism", Verdict::pass), finding("freshness", none, kFindingRepeatChanged)});
  attribute_findings(alone);
  EXPECT_TRUE(alone.gates[1].counted);
  EXPECT_TRUE(alone.gates[1].attributed_to.empty());
  EXPECT_EQ(classify(alone), Classification::broken);
  // A stale result is freshness's own defect, whatever determinism said.
  Report stale = with({finding("determinism", none, "bits differ"), finding("freshness", none, "stale result")});
  attribute_findings(stale);
  EXPECT_TRUE(stale.gates[1].counted);
}

std::int32_t nan_dropping(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
    store(out(c, 0), i, std::fmax(static_cast<float>(load(in(c, 0), i)), 0.0f) * static_cast<float>(load(in(c, 1), i)));
  return KGATE_OK;
}

TEST(Json, CarriesEveryFieldAndParses) {
  Report r = run(elementwise(), nan_dropping, 18446744073709551557ull);
  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["schema"], "kgate.report/1");
  EXPECT_EQ(j["seed"].get<std::uint64_t>(), 18446744073709551557ull);
  EXPECT_EQ(j["seed_str"], "18446744073709551557");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["classification"], "broken");
  EXPECT_EQ(j["broken_reasons"].size(), 1u) << j["broken_reasons"];
  EXPECT_EQ(j["gates"][1]["finding"], "NaN masked");
  EXPECT_EQ(j["gates"][1]["counted"], true);
  EXPECT_TRUE(j["gates"][1]["attributed_to"].is_null());
  EXPECT_EQ(j["gates"][1]["out_of_domain"], false);
  EXPECT_TRUE(j["gates"][1]["excused"].is_array());
  EXPECT_EQ(j["op"], "relu_mul");
  ASSERT_EQ(j["gates"].size(), 13u);
  const auto& nan = j["gates"][1];
  EXPECT_EQ(nan["gate"], "nan");
  EXPECT_EQ(nan["verdict"], "FAIL");
  EXPECT_TRUE(nan["error_ratio"].is_null()) << "tolerance-free";
  EXPECT_EQ(nan["evidence"]["gate"], "nan");
  EXPECT_TRUE(nan["evidence"]["index"].is_array());
  EXPECT_TRUE(nan["evidence"]["bindings"].contains("N"));
  EXPECT_EQ(nan["evidence"]["expected"].get<std::string>().substr(0, 3), "nan");
  EXPECT_TRUE(j["gates"][0]["error_ratio"].is_number());
  EXPECT_TRUE(j["gates"][0]["evidence"].is_null());
  r.gates[0].error_ratio = std::numeric_limits<double>::infinity();
  r.gates[0].output = std::string("bad utf8 \xff here");
  const nlohmann::json k = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(k["gates"][0]["error_ratio"], "inf");
}

TEST(Table, OneRowPerGateThenEvidenceAndHowToReproduce) {
  const Report r = run(elementwise(), nan_dropping, 77);
  const std::string t = to_table(r, false);
  for (const GateInfo& g : list_gates()) EXPECT_NE(t.find("\n" + g.name + " "), std::string::npos) << g.name << "\n" << t;
  EXPECT_NE(t.find("reproduce with --gates nan --seed 77"), std::string::npos) << t;
  EXPECT_NE(t.find("expected  nan"), std::string::npos) << t;
  EXPECT_NE(t.find("result: broken"), std::string::npos) << t;
  EXPECT_EQ(t.find("\x1b["), std::string::npos) << "no colour unless asked";
  EXPECT_NE(to_table(r, true).find("\x1b[1;31mFAIL"), std::string::npos);
}

TEST(WriteFileAtomic, WritesReplacesAndNamesThePathOnFailure) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kgate_engine_atomic";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  write_file_atomic(path, "first");
  write_file_atomic(path, "second");
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s, "second");
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "r.json") << "no temporary left behind";
  try {
    write_file_atomic((dir / "no" / "such" / "dir.json").string(), "x");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Verdicts, Names) {
  EXPECT_STREQ(to_string(Verdict::refused), "REFUSED");
  EXPECT_STREQ(to_string(Verdict::timeout), "TIMEOUT");
  EXPECT_STREQ(to_string(Classification::violation), "violation");
}

}  // namespace
}  // namespace kgate::test
