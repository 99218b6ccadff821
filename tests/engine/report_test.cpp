// Reports: JSON that parses and carries everything, the terminal table, exit codes, classification, the
// atomic writer.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  EXPECT_EQ(j["classification"], "broken beyond tolerance");
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
  EXPECT_NE(t.find("broken beyond tolerance"), std::string::npos) << t;
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
