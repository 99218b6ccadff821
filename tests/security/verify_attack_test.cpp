// `kgate verify` against candidates that attack their judge (issue 15, C++ path). Every test runs the real
// command on tests/runtime/fixtures/double.toml with one hostile fixture (tests/security/fixtures).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "support.hpp"

namespace kgate::security {
namespace {

constexpr const char* kSeed = "1592614637";  // 0x5eed5eed: distinctive enough to search for

std::vector<std::string> verify(const std::string& kernel, const std::vector<std::string>& more = {}) {
  std::vector<std::string> a = {kgate_cli(), "verify", "--contract", double_contract(), "--kernel",
                                fixture(kernel + ".so"), "--seed", kSeed};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

nlohmann::json report_at(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

std::string verdict_of(const nlohmann::json& report, const std::string& gate) {
  for (const auto& g : report.at("gates"))
    if (g.at("gate") == gate) return g.at("verdict");
  return "(absent)";
}

std::string everything_said(const nlohmann::json& report) { return report.dump(); }

TEST(VerifyAttack, KillingTheJudgeOnNanIsAFindingAndTheReportIsComplete) {
  const std::string json = temp_path("kill_judge.json");
  const ProcessRun r = run(verify("sec_kill_judge_on_nan", {"--json", json}), 300);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 0) << "kgate was killed by its candidate";
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  ASSERT_TRUE(std::filesystem::exists(json)) << r.err;
  const nlohmann::json rep = report_at(json);
  EXPECT_NE(rep.at("classification"), "clean");
  EXPECT_EQ(rep.at("exit_code"), 1);
  EXPECT_EQ(verdict_of(rep, "nan"), "CRASH");
  EXPECT_NE(everything_said(rep).find("attack on the judge"), std::string::npos) << rep.dump(1);
  EXPECT_FALSE(std::filesystem::exists(json + ".partial"));
  std::filesystem::remove(json);
}

TEST(VerifyAttack, KillingTheJudgeWhileLoadingIsAFindingInEveryGate) {
  const ProcessRun r = run(verify("sec_ctor_kill_judge", {"--oracle", fixture("sec_kill_other_workers.so"),
                                                         "--gates", "oracle,nan"}), 120);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 0) << "kgate was killed by its candidate's constructor";
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("crashed while loading: attack on the judge"), std::string::npos) << r.out;
}

TEST(VerifyAttack, StoppingTheJudgeCannotHangIt) {
  const ProcessRun r = run(verify("sec_stop_judge", {"--gates", "oracle,determinism"}), 120);
  ASSERT_FALSE(r.timed_out) << "kgate hung: its candidate stopped it";
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("attack on the judge"), std::string::npos) << r.out;
}

TEST(VerifyAttack, KillingTheOraclesWorkerLeavesNoGateInError) {
  const ProcessRun r = run(verify("sec_kill_other_workers", {"--gates", "oracle,inf,freshness,baseline"}), 300);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.out.find("ERROR"), std::string::npos) << r.out;
  EXPECT_EQ(r.status, 0) << "no other worker could be found, so every gate judged a correct kernel: " << r.out << r.err;
}

TEST(VerifyAttack, NoSecretInAnythingTheWorkerCanRead) {
  const std::string json = temp_path("secret_report_path.json");
  const ProcessRun r = run(verify("sec_read_secrets", {"--json", json, "--gates", "oracle"}), 120);
  ASSERT_FALSE(r.timed_out);
  // Only what the candidate printed (the report itself names the seed, as it must).
  std::string seen;
  const nlohmann::json rep = report_at(json);
  for (const auto& g : rep.at("gates")) seen += g.value("output", "");
  EXPECT_NE(seen.find("read /proc/self/cmdline"), std::string::npos) << "the fixture did not report: " << r.out << r.err;
  EXPECT_EQ(seen.find(kSeed), std::string::npos) << "the run seed was readable";
  EXPECT_EQ(seen.find("5eed5eed"), std::string::npos) << "the run seed was readable";
  EXPECT_EQ(seen.find("guard-seed"), std::string::npos) << "the guard seed was in an argv";
  EXPECT_EQ(seen.find("secret_report_path"), std::string::npos) << "the results path was readable";
  std::filesystem::remove(json);
}

TEST(VerifyAttack, ASetsidDoubleForkDoesNotOutliveKgate) {
  kill_processes_named("kgate-escapee");
  const ProcessRun r = run(verify("sec_escape_setsid", {"--gates", "oracle"}), 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(kill_processes_named("kgate-escapee"), 0u) << "a candidate's grandchild outlived kgate";
}

TEST(VerifyAttack, NothingLeftInDevShmOrTmp) {
  std::filesystem::remove("/dev/shm/kgate-security-leftover");
  std::filesystem::remove("/tmp/kgate-security-leftover");
  const ProcessRun r = run(verify("sec_leave_shm", {"--gates", "oracle"}), 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/kgate-security-leftover"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/kgate-security-leftover"));
}

TEST(VerifyAttack, AKilledKgateLeavesNoVerdictNoScratchAndNoWorker) {
  const std::string tmp = temp_path("tmpdir");
  std::filesystem::create_directories(tmp);
  const std::string json = temp_path("killed.json");
  std::filesystem::remove(json);
  // The candidate hangs in every call (2 s timeout each; after two timeouts it is not called again, so the
  // run lasts about two timeouts); kgate is SIGKILLed 3 s in, while the run is still going.
  const ProcessRun r = run(verify("sec_hang", {"--json", json}), 60, {"TMPDIR=" + tmp}, 3.0);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_FALSE(std::filesystem::exists(json)) << "a killed kgate left a report that looks finished";
  if (std::filesystem::exists(json + ".partial")) {
    const nlohmann::json partial = report_at(json + ".partial");
    EXPECT_EQ(partial.at("complete"), false);
    EXPECT_EQ(partial.at("classification"), "incomplete");
    std::filesystem::remove(json + ".partial");
  }
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "kgate-worker scratch directories were left behind";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(kill_processes_named("kgate-hanging"), 0u) << "a worker outlived its killed kgate";
  std::filesystem::remove_all(tmp);
}

TEST(VerifyAttack, AWorkerThatKeepsTheCallersUidSaysSoInTheReport) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become nobody";
  // kgate run by a user who is not root: the worker is root of its own user namespace, that user outside
  // it, and reads what kgate may read. Never silent: the report's candidate line says it.
  const ProcessRun r = run_handicapped(verify("sec_honest", {"--gates", "oracle"}), false, true);
  if (r.status == 2) {  // no unprivileged user namespaces here: a clear refusal is the contract
    EXPECT_NE(r.out.find("cannot isolate the worker"), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("(cpu, isolated, as the caller's uid)"), std::string::npos) << r.out;
}

TEST(VerifyAttack, ACandidateUnderAClosedDirectoryIsJudgedByAnUnprivilegedWorker) {
  if (geteuid() != 0) GTEST_SKIP() << "as non-root the worker keeps the caller's uid (its own user namespace)";
  // A candidate kept where only root may enter (a home of mode 0700): the worker, uid 65534, reaches it
  // through its own mount namespace rather than failing to load it (the Python front-end used to keep
  // uid 0 in this situation instead).
  const std::filesystem::path dir = std::filesystem::path(fixture("sec_honest.so")).parent_path() /
                                    ("closed-verify-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path lib = dir / "candidate.so";
  std::filesystem::copy_file(fixture("sec_honest.so"), lib);
  chmod(dir.c_str(), 0700);
  const ProcessRun r = run({kgate_cli(), "verify", "--contract", double_contract(), "--kernel", lib.string(),
                            "--seed", kSeed, "--gates", "oracle"}, 120);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kgate::security
