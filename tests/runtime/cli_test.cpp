// The kgate command as a user meets it: exit status 0 clean, 1 a violation, 2 bad usage or input with
// one line naming what is wrong; a candidate that crashes in one gate still gets every other verdict,
// on the terminal and in the JSON file.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kgate/verify.hpp"

extern char** environ;

namespace kgate {
namespace {

std::string fixture(const std::string& name) { return std::string(KGATE_FIXTURES) + "/" + name; }
const std::string kContract = std::string(KGATE_FIXTURE_SOURCES) + "/double.toml";

struct CliRun {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CliRun kgate(std::vector<std::string> args) {
  const std::string base = ::testing::TempDir() + "kgate_cli_" + std::to_string(getpid());
  const std::string out = base + ".out", err = base + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  args.insert(args.begin(), KGATE_CLI);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  CliRun r;
  if (posix_spawn(&pid, KGATE_CLI, &fa, nullptr, argv.data(), environ) != 0) return r;
  posix_spawn_file_actions_destroy(&fa);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

// Exit 2 with exactly one line on stderr, starting "kgate: error: " and containing `phrase`.
void expect_bad_input(const CliRun& r, const std::string& phrase) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("kgate: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
}

std::vector<std::string> verify_args(const std::string& kernel) {
  return {"verify", "--contract", kContract, "--kernel", fixture(kernel), "--seed", "12345"};
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string verdict_of(const nlohmann::json& report, const std::string& gate) {
  for (const auto& g : report.at("gates"))
    if (g.at("gate") == gate) return g.at("verdict");
  return "(absent)";
}

TEST(Cli, CleanKernelExitsZeroAndPrintsEveryGateAndTheSeed) {
  const CliRun r = kgate(verify_args("fx_behave.so"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result: clean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed      12345"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "colour codes in output that is not a terminal";
  for (const GateInfo& g : list_gates()) EXPECT_NE(r.out.find("\n" + g.name + " "), std::string::npos) << g.name;
  EXPECT_EQ(r.err, "");
}

TEST(Cli, CrashInOneGateLeavesEveryOtherVerdict) {
  const std::string json = ::testing::TempDir() + "kgate_cli_crash.json";
  std::vector<std::string> args = verify_args("fx_crash_on_nan.so");
  args.insert(args.end(), {"--oracle", fixture("fx_behave.so"), "--json", json});
  const CliRun r = kgate(args);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("SIGSEGV"), std::string::npos) << r.out;
  const nlohmann::json report = read_json(json);
  ASSERT_EQ(report.at("gates").size(), list_gates().size());
  EXPECT_EQ(verdict_of(report, "nan"), "CRASH");
  // The gates after the crash ran in a fresh worker and reached their own verdicts.
  for (const char* g : {"oracle", "determinism", "immutability", "coverage", "bounds", "freshness", "layout"})
    EXPECT_EQ(verdict_of(report, g), "PASS") << g;
  EXPECT_EQ(report.at("seed"), 12345u);
  std::remove(json.c_str());
}

TEST(Cli, JsonHoldsOnlyTheRequestedGatesInOrder) {
  const std::string json = ::testing::TempDir() + "kgate_cli_subset.json";
  std::vector<std::string> args = verify_args("fx_behave.so");
  args.insert(args.end(), {"--gates", "determinism,oracle", "--json", json});
  const CliRun r = kgate(args);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const nlohmann::json report = read_json(json);
  ASSERT_EQ(report.at("gates").size(), 2u);
  EXPECT_EQ(report.at("gates")[0].at("gate"), "determinism");
  EXPECT_EQ(report.at("gates")[1].at("gate"), "oracle");
  std::remove(json.c_str());
}

TEST(Cli, ConstructorCrashIsACrashVerdictForEveryGate) {
  const std::string json = ::testing::TempDir() + "kgate_cli_ctor.json";
  std::vector<std::string> args = verify_args("fx_ctor_crash.so");
  args.insert(args.end(), {"--oracle", fixture("fx_behave.so"), "--json", json, "--gates", "oracle,nan"});
  const CliRun r = kgate(args);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("crashed while loading: SIGSEGV"), std::string::npos) << r.out;
  const nlohmann::json report = read_json(json);
  EXPECT_EQ(verdict_of(report, "oracle"), "CRASH");
  EXPECT_EQ(verdict_of(report, "nan"), "CRASH");
  std::remove(json.c_str());
}

TEST(Cli, MalformedContractNamesFileLineAndField) {
  const std::string bad = ::testing::TempDir() + "kgate_cli_bad.toml";
  std::ofstream(bad) << "[op]\nname = \"t\"\n[dims.N]\nnominal = 4\n[[outputs]]\nname = \"y\"\ndtype = \"flaot32\"\n"
                        "shape = [\"N\"]\n";
  std::vector<std::string> args = verify_args("fx_behave.so");
  args[2] = bad;
  expect_bad_input(kgate(args), bad + ":7:9: field 'outputs[0].dtype': unknown dtype \"flaot32\"");
  std::remove(bad.c_str());
}

TEST(Cli, MissingLibraryWrongAbiAndMissingOracleAreBadInput) {
  expect_bad_input(kgate(verify_args("no_such_kernel.so")),
                   "kernel: " + fixture("no_such_kernel.so") + ": cannot open: No such file or directory");
  expect_bad_input(kgate(verify_args("fx_abi7.so")), "built against ABI 7, this kgate speaks ABI 1");
  expect_bad_input(kgate(verify_args("fx_no_entry.so")), "kernel: " + fixture("fx_no_entry.so") + ": does not export the entry kgate_run");
  std::vector<std::string> args = verify_args("fx_behave.so");
  args.insert(args.end(), {"--oracle", fixture("fx_behave.so") + ":no_such_oracle"});
  expect_bad_input(kgate(args), "oracle: " + fixture("fx_behave.so") + ": does not export the entry no_such_oracle");
  // Without --oracle the kernel's library is asked for kgate_oracle, and the message says so.
  args = verify_args("fx_abi7.so");
  args[4] = fixture("fx_bad_device.so");
  expect_bad_input(kgate(args), "kernel: " + fixture("fx_bad_device.so") + ": kgate_device() returned 9");
}

TEST(Cli, UnknownGateListsTheGates) {
  std::vector<std::string> args = verify_args("fx_behave.so");
  args.insert(args.end(), {"--gates", "oracle,nann"});
  expect_bad_input(kgate(args), "unknown gate \"nann\" (gates: oracle, nan, inf,");
}

TEST(Cli, UsageErrorsAreOneLine) {
  expect_bad_input(kgate({"verify", "--kernel", fixture("fx_behave.so")}), "--contract is required");
  expect_bad_input(kgate({"frobnicate"}), "unknown command \"frobnicate\" (commands: verify, list-gates, explain");
  std::vector<std::string> args = verify_args("fx_behave.so");
  args.insert(args.end(), {"--tolerance-scale", "-1"});
  expect_bad_input(kgate(args), "--tolerance-scale must be a positive number");
  args = verify_args("fx_behave.so");
  args.insert(args.end(), {"--json", "/nonexistent/dir/r.json"});
  expect_bad_input(kgate(args), "--json /nonexistent/dir/r.json");
}

TEST(Cli, ListGatesShowsTwelveGatesAndBaselineWithTFreeMarks) {
  const CliRun r = kgate({"list-gates"});
  EXPECT_EQ(r.status, 0) << r.err;
  int numbered = 0;
  for (const GateInfo& g : list_gates()) {
    const std::size_t at = r.out.find(" " + g.name + " ");
    ASSERT_NE(at, std::string::npos) << g.name;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_EQ(line.find("T-free") != std::string::npos, g.tolerance_free) << line;
    numbered += g.is_baseline ? 0 : 1;
  }
  EXPECT_EQ(numbered, 12);
  EXPECT_NE(r.out.find("\n    baseline"), std::string::npos) << "baseline carries no gate number";
}

TEST(Cli, ExplainKnownAndUnknownGates) {
  const CliRun r = kgate({"explain", "nan"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("property"), std::string::npos);
  EXPECT_NE(r.out.find("tolerance-free"), std::string::npos);
  EXPECT_NE(r.out.find("evidence"), std::string::npos);
  expect_bad_input(kgate({"explain", "nann"}), "unknown gate \"nann\" (gates: oracle, nan,");
}

}  // namespace
}  // namespace kgate
