// The compute-sanitizer pass's shared host code (kgate/sanitizer_log.hpp) on logs as the tool writes them,
// without a GPU: the tool's messages about itself are no findings and make the pass ERROR (the exact log of
// a correct row on the first GPU run, 2026-12-06, H100, where the tool timed out attaching to the worker and
// the parser had made both lines access findings: a FAIL); racecheck's real "Error: Race reported ..." stays
// a finding; a PASS needs the tool's summary line; the command carries --launch-timeout. A top-level line is a
// finding only in the shape of a report about the program; any other (the tool's hint about its own coverage
// that made correct_linear's racecheck a FAIL on the 2026-12-06 H100 sanitizer-check run, a line kgate does
// not know) is ERROR, and so is a summary counting errors kgate read no report of.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "../gpu/sanitizer_logs/read_log.hpp"
#include "kgate/sanitizer_log.hpp"

namespace kgate {
namespace {

using test::sanitizer_log;  // the logs in tests/gpu/sanitizer_logs (the GPU and Python tests read them too)

// The whole memcheck log of correct_tanh_scale on the first GPU run (2026-12-06, H100).
const std::string kTimedOutLog = sanitizer_log("memcheck_timed_out.log");

// The whole racecheck log of correct_linear on the 2026-12-06 H100 sanitizer-check run (one worker): the tool
// watched no process that made a CUDA call. The negative list of the time knew the first line only and took the
// hint for an access: a FAIL of a correct kernel.
const std::string kChildProcessLog = sanitizer_log("racecheck_child_process.log");

// The whole memcheck log of correct_linear on the 2026-12-07 H100 sanitizer-check run, the first under
// --target-processes all: the tool's word that a target ended before its first CUDA call, and no summary, while the
// bounds gate's 4 calls ran in that worker. What the tool watched is not known from it (scripts/sanitizer-probe).
const std::string kTargetProcessesAllLog = sanitizer_log("memcheck_target_processes_all.log");

const std::string kRaceLog = sanitizer_log("racecheck.log");

const char* kHazardLog = R"(========= COMPUTE-SANITIZER
========= ERROR: Potential WAR hazard detected at __shared__ 0x0 in block (0,0,0) :
=========     Write Thread (0,0,0) at 0x120 in tile.cu:9:tile_kernel(float*)
=========     Read Thread (31,0,0) at 0xf0 in tile.cu:8:tile_kernel(float*)
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
)";

GateResult bounds_pass() {
  GateResult b;
  b.gate = "bounds";
  b.verdict = Verdict::pass;
  b.cases = 4;
  return b;
}

// A worker the tool watched to its end, with one invalid write reported.
const char* kWatchedLog = R"(========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at add_kernel(float*, int)+0x70 in k.cu:12
=========     by thread (3,0,0) in block (255,0,0)
=========     Address 0x7f0a1c000400 is out of bounds
========= ERROR SUMMARY: 1 error
)";

using Logs = std::vector<std::pair<std::string, std::string>>;

TEST(SanitizerLogTool, TimedOutAttachIsTheToolsMessageNotAFinding) {
  const auto f = parse_sanitizer_log("memcheck", kTimedOutLog);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[0].tool_error) << f[0].kind;
  EXPECT_TRUE(f[1].tool_error) << f[1].kind;
  EXPECT_FALSE(sanitizer_log_has_summary(kTimedOutLog));
}

TEST(SanitizerLogTool, TimedOutAttachIsErrorNotFail) {
  const GateResult g = sanitizer_result("memcheck", Logs{{"kgate-tool-log.0.log", kTimedOutLog}}, bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
  EXPECT_EQ(g.gate, "bounds/memcheck");
  EXPECT_NE(g.summary.find("compute-sanitizer memcheck did not instrument the worker"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find(": Error: No attachable process found. compute-sanitizer timed-out. | Default timeout"),
            std::string::npos)
      << g.summary;
  EXPECT_FALSE(g.evidence.has_value());
  EXPECT_NE(g.output.find("Awaiting target completion"), std::string::npos) << "the log excerpt is kept";
  // whatever the bounds gate said under the uninstrumented worker
  GateResult failed = bounds_pass();
  failed.verdict = Verdict::fail;
  failed.finding = "guard";
  EXPECT_EQ(sanitizer_result("memcheck", Logs{{"a.log", kTimedOutLog}}, failed, 7).verdict, Verdict::error);
}

TEST(SanitizerLogTool, AnAccessReportStaysEvidenceBesideTheToolsMessage) {
  // Two workers' logs: one the tool watched and reported an invalid write in, one it never attached to.
  const GateResult g = sanitizer_result("memcheck", Logs{{"a.0.log", kWatchedLog}, {"a.1.log", kTimedOutLog}},
                                        bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::fail) << g.summary;
  EXPECT_EQ(g.finding, "sanitizer");
  ASSERT_TRUE(g.evidence.has_value());
  EXPECT_NE(g.evidence->detail.find("No attachable process found"), std::string::npos) << g.evidence->detail;
}

TEST(SanitizerLogTool, RacecheckRaceAndHazardStayFindings) {
  for (const std::string& log : {kRaceLog, std::string(kHazardLog)}) {
    const auto f = parse_sanitizer_log("racecheck", log);
    ASSERT_EQ(f.size(), 1u) << log;
    EXPECT_FALSE(f[0].tool_error) << f[0].kind;
    const GateResult g = sanitizer_result("racecheck", Logs{{"a.log", log}}, bounds_pass(), 7);
    EXPECT_EQ(g.verdict, Verdict::fail) << g.summary;
    EXPECT_EQ(g.finding, "sanitizer");
  }
  EXPECT_EQ(parse_sanitizer_log("racecheck", kRaceLog)[0].kernel, "reduce<float>(float const*, float*, int)");
}

TEST(SanitizerLogTool, InternalErrorAndRefusalsAreTheTools) {
  const std::string internal = "========= COMPUTE-SANITIZER\n========= Internal Sanitizer Error: The Sanitizer "
                               "failed to patch the module\n========= ERROR SUMMARY: 0 errors\n";
  const auto f = parse_sanitizer_log("memcheck", internal);
  ASSERT_EQ(f.size(), 1u) << "an internal error was silently skipped before";
  EXPECT_TRUE(f[0].tool_error);
  const GateResult g = sanitizer_result("memcheck", Logs{{"a.log", internal}}, bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
  EXPECT_NE(g.summary.find("Internal Sanitizer Error"), std::string::npos) << g.summary;
  for (const char* line : {"Error: Target application terminated before first instrumented API call",
                           "Tracking kernels launched by child processes requires the --target-processes all option.",
                           "Error: Unable to find injection library", "Error: Could not attach to the process",
                           "Error: Failed to initialize the tool", "Error: Device not supported"})
    EXPECT_TRUE(sanitizer_tool_message(line)) << line;
  for (const char* line : {"Error: Race reported between Write access at k()+0x10 in a.cu:1",
                           "ERROR: Potential RAW hazard detected at __shared__ 0x4 in block (0,0,0) :",
                           "Invalid __global__ write of size 4 bytes",
                           "Program hit cudaErrorLaunchFailure (error 719) on CUDA API call to cudaMemcpy."}) {
    EXPECT_FALSE(sanitizer_tool_message(line)) << line;
    EXPECT_TRUE(sanitizer_report_line(line)) << line;
  }
}

TEST(SanitizerLogTool, ChildProcessHintIsTheToolsMessageNotAFinding) {
  const auto f = parse_sanitizer_log("racecheck", kChildProcessLog);
  ASSERT_EQ(f.size(), 2u);
  for (const SanitizerFinding& r : f) {
    EXPECT_TRUE(r.tool_error) << r.kind;
    EXPECT_FALSE(r.api_error) << r.kind;
  }
  EXPECT_EQ(f[1].kind, "Tracking kernels launched by child processes requires the --target-processes all option.");
  EXPECT_TRUE(sanitizer_tool_message(f[1].kind));
  EXPECT_FALSE(sanitizer_report_line(f[1].kind));

  const GateResult g = sanitizer_result("racecheck", Logs{{"kgate-tool-log.0.log", kChildProcessLog}}, bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
  EXPECT_TRUE(g.finding.empty()) << g.finding;
  EXPECT_FALSE(g.evidence.has_value());
  EXPECT_NE(g.summary.find("compute-sanitizer racecheck did not instrument the worker"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find("Target application terminated before first instrumented API call"), std::string::npos)
      << g.summary;
  EXPECT_NE(g.summary.find("Tracking kernels launched by child processes requires the --target-processes all"),
            std::string::npos)
      << g.summary;
}

TEST(SanitizerLogTool, UnderTargetProcessesAllAnEndedTargetWithNoSummaryIsError) {
  // Neither PASS (the worker's calls may have run unwatched: the log holds no summary of any process) nor FAIL
  // (the tool reported no access): the pass could not judge, and says what the tool said.
  const auto f = parse_sanitizer_log("memcheck", kTargetProcessesAllLog);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].tool_error);
  EXPECT_FALSE(sanitizer_log_has_summary(kTargetProcessesAllLog));
  for (const GateResult& bounds : {bounds_pass(), [] {
                                     GateResult b = bounds_pass();
                                     b.verdict = Verdict::fail;
                                     b.finding = "guard overwritten";
                                     b.summary = "guards around every buffer: input x0[1] expected 0x58 got 0x00";
                                     return b;
                                   }()}) {
    const GateResult g =
        sanitizer_result("memcheck", Logs{{"kgate-tool-log.0.log", kTargetProcessesAllLog}}, bounds, 7);
    EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
    EXPECT_FALSE(g.evidence.has_value());
    EXPECT_NE(g.summary.find("did not instrument the worker"), std::string::npos) << g.summary;
    EXPECT_NE(g.summary.find("Target application terminated before first instrumented API call"), std::string::npos)
        << g.summary;
  }
}

TEST(SanitizerLogTool, AnAccessBesideTheChildProcessHintStaysFail) {
  const GateResult g = sanitizer_result("memcheck", Logs{{"a.0.log", kWatchedLog}, {"a.1.log", kChildProcessLog}},
                                        bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::fail) << g.summary;
  EXPECT_EQ(g.finding, "sanitizer");
  ASSERT_TRUE(g.evidence.has_value());
  EXPECT_EQ(g.evidence->got, "Invalid __global__ write of size 4 bytes");
  EXPECT_NE(g.evidence->detail.find("1 finding(s) in all"), std::string::npos) << g.evidence->detail;
  EXPECT_NE(g.evidence->detail.find("Tracking kernels launched by child processes"), std::string::npos)
      << g.evidence->detail;
}

TEST(SanitizerLogTool, AnUnknownTopLevelLineIsErrorNeitherFailNorPass) {
  const std::string log = "========= COMPUTE-SANITIZER\n========= Some new message the tool prints\n"
                          "========= ERROR SUMMARY: 0 errors\n";
  const auto f = parse_sanitizer_log("memcheck", log);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].tool_error);
  EXPECT_TRUE(sanitizer_tool_message("Some new message the tool prints"));
  const GateResult g = sanitizer_result("memcheck", Logs{{"a.log", log}}, bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
  EXPECT_NE(g.summary.find("Some new message the tool prints"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find("what kgate does not know as a report"), std::string::npos) << g.summary;
  // whatever the bounds gate said under it: its guards' FAIL is not this tool's verdict either
  GateResult failed = bounds_pass();
  failed.verdict = Verdict::fail;
  failed.finding = "guard";
  EXPECT_EQ(sanitizer_result("memcheck", Logs{{"a.log", log}}, failed, 7).verdict, Verdict::error);
}

// One report of each tool's shapes, as a whole log with its summary: each is a finding (FAIL), never a
// tool_error.
TEST(SanitizerLogTool, EachReportShapeIsAFinding) {
  const std::vector<std::pair<std::string, std::string>> reports{
      {"memcheck", "Invalid __global__ read of size 4 bytes"},
      {"memcheck", "Invalid __shared__ write of size 8 bytes"},
      {"memcheck", "Invalid __local__ read of size 4 bytes"},
      {"memcheck", "Warp Illegal Address"},
      {"memcheck", "Warp Misaligned Address"},
      {"memcheck", "Warp Out-of-range Address"},
      {"memcheck", "Warp Illegal Instruction"},
      {"memcheck", "Lane User Stack Overflow"},
      {"memcheck", "Malloc/Free error encountered : Double free"},
      {"memcheck", "Leaked 1024 bytes at 0x7f0a1c000000"},
      {"memcheck", "Fatal UVM GPU fault of type invalid pde due to invalid address"},
      {"racecheck", "Error: Race reported between Write access at k(float*)+0x130 in r.cu:13"},
      {"racecheck", "Warning: Race reported between Write access at k(float*)+0x130 in r.cu:13"},
      {"racecheck", "ERROR: Potential WAW hazard detected at __shared__ 0x4 in block (0,0,0) :"},
      {"racecheck", "WARNING: Potential RAW hazard detected at __shared__ 0x4 in block (0,0,0) :"},
      {"racecheck", "INFO: Potential WAR hazard detected at __shared__ 0x4 in block (0,0,0) :"},
      {"initcheck", "Uninitialized __global__ memory read of size 8 bytes"},
      {"initcheck", "Unused memory in allocation 0x7f00aa000000 of size 16 bytes"},
      {"initcheck", "Host API memory access error at host access to 0x7f00aa001000 of size 256 bytes"},
      {"synccheck", "Barrier error detected. Divergent thread(s) in warp"},
      {"synccheck", "Barrier error detected. Invalid arguments"},
  };
  for (const auto& [tool, line] : reports) {
    EXPECT_TRUE(sanitizer_report_line(line)) << line;
    EXPECT_FALSE(sanitizer_tool_message(line)) << line;
    const std::string summary = tool == "racecheck" ? "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
                                                    : "ERROR SUMMARY: 1 error";
    const std::string log = "========= COMPUTE-SANITIZER\n========= " + line +
                            "\n=========     by thread (3,0,0) in block (0,0,0)\n=========\n========= " + summary + "\n";
    const auto f = parse_sanitizer_log(tool, log);
    ASSERT_EQ(f.size(), 1u) << line;
    EXPECT_FALSE(f[0].tool_error) << line;
    EXPECT_FALSE(f[0].api_error) << line;
    EXPECT_EQ(f[0].kind, line);
    const GateResult g = sanitizer_result(tool, Logs{{"a.log", log}}, bounds_pass(), 7);
    EXPECT_EQ(g.verdict, Verdict::fail) << line << ": " << g.summary;
    EXPECT_EQ(g.finding, "sanitizer") << line;
  }
  EXPECT_EQ(parse_sanitizer_log("memcheck", "========= Leaked 1024 bytes at 0x7f0a1c000000\n")[0].kind,
            "Leaked 1024 bytes at 0x7f0a1c000000");
  // an API error is a report, but no access: the bounds gate's verdict stands
  const std::string api = "========= COMPUTE-SANITIZER\n========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "
                          "\"invalid argument\" on CUDA API call to cuMemFree_v2.\n========= ERROR SUMMARY: 1 error\n";
  const auto a = parse_sanitizer_log("memcheck", api);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].api_error);
  EXPECT_FALSE(a[0].tool_error);
  EXPECT_EQ(sanitizer_result("memcheck", Logs{{"a.log", api}}, bounds_pass(), 7).verdict, Verdict::pass)
      << "the summary's one error is the API error kgate read";
}

TEST(SanitizerLogTool, HarmlessLinesAreNoRecords) {
  // how the worker exited, and racecheck's summary wrapped onto a second line: no record, no tool_error
  const std::string log = "========= COMPUTE-SANITIZER\n========= Target application returned an error\n"
                          "========= RACECHECK SUMMARY: 0 hazards displayed\n========= (0 errors, 0 warnings)\n";
  EXPECT_TRUE(parse_sanitizer_log("racecheck", log).empty());
  EXPECT_EQ(sanitizer_result("racecheck", Logs{{"a.log", log}}, bounds_pass(), 7).verdict, Verdict::pass);
  EXPECT_FALSE(sanitizer_tool_message("Target application returned an error"));
  EXPECT_FALSE(sanitizer_tool_message("LEAK SUMMARY: 0 bytes leaked in 0 allocations"));
  // the tool's word that it instrumented nothing is not the harmless exit line
  EXPECT_TRUE(sanitizer_tool_message("Error: Target application terminated before first instrumented API call"));
}

TEST(SanitizerLogTool, AKilledProgramsLogHasNoRecordAndItsSummaryCountsNothing) {
  // the program the tool started killed by SIGKILL after its CUDA work (scripts/sanitizer-probe, 2026-12-07, H100):
  // how it ended, then a summary of 0 errors. The log reads clean; the pass's ERROR for such a run comes from the
  // run's own end (kernelbench/sanitizer.py), which tests/python/test_sanitizer.py checks with this log.
  const std::string log = sanitizer_log("memcheck_program_killed.log");
  EXPECT_TRUE(parse_sanitizer_log("memcheck", log).empty());
  EXPECT_EQ(sanitizer_result("memcheck", Logs{{"a.log", log}}, bounds_pass(), 7).verdict, Verdict::pass);
  EXPECT_FALSE(sanitizer_tool_message("Error: process didn't terminate successfully"));
}

TEST(SanitizerLogTool, ASummaryCountingErrorsWithNoReportReadIsError) {
  // two errors counted, no report read (here an indented line with no report above it): no PASS
  const std::string log = "========= COMPUTE-SANITIZER\n=========  Something indented the parser skips\n"
                          "========= ERROR SUMMARY: 2 errors\n";
  EXPECT_TRUE(parse_sanitizer_log("memcheck", log).empty());
  const GateResult g = sanitizer_result("memcheck", Logs{{"kgate-tool-log.0.log", log}}, bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
  EXPECT_NE(g.summary.find("counts 2 error(s)"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find("did not recognise as reports"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find("Something indented the parser skips"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find("kgate-tool-log.0.log"), std::string::npos) << g.summary;
  // racecheck's count of hazards likewise
  const GateResult race = sanitizer_result(
      "racecheck",
      Logs{{"a.log", "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 "
                     "warnings)\n"}},
      bounds_pass(), 7);
  EXPECT_EQ(race.verdict, Verdict::error) << race.summary;
  EXPECT_NE(race.summary.find("counts 3 error(s)"), std::string::npos) << race.summary;
  // memcheck's count includes the API errors it printed: one API error read, "2 errors", one left unread
  const std::string api = "========= COMPUTE-SANITIZER\n========= Program hit cudaErrorInvalidValue (error 1) due to "
                          "\"invalid argument\" on CUDA API call to cudaFree.\n========= ERROR SUMMARY: 2 errors\n";
  const GateResult one_left = sanitizer_result("memcheck", Logs{{"a.log", api}}, bounds_pass(), 7);
  EXPECT_EQ(one_left.verdict, Verdict::error) << one_left.summary;
  EXPECT_NE(one_left.summary.find("counts 1 error(s)"), std::string::npos) << one_left.summary;
}

// CONSTRUCTED logs, written here by hand, not captured on a GPU: with --target-processes all the tool prints one
// summary per process it watched, and how such a log really looks has not been seen on a GPU run yet. A child
// process of the worker's whose summary counts errors the log holds no report of, then the worker's own clean
// summary last: the errors are not lost behind the last line (the parser kept only the last summary before,
// and this was a PASS).
TEST(SanitizerLogTool, EverySummaryLineOfALogCounts) {
  const std::string constructed_two_processes = "========= COMPUTE-SANITIZER\n"
                                                "=========  Something indented the parser skips\n"
                                                "========= ERROR SUMMARY: 3 errors\n"
                                                "========= ERROR SUMMARY: 0 errors\n";
  EXPECT_TRUE(parse_sanitizer_log("memcheck", constructed_two_processes).empty());
  EXPECT_TRUE(sanitizer_log_has_summary(constructed_two_processes));
  const GateResult g =
      sanitizer_result("memcheck", Logs{{"kgate-tool-log.0.log", constructed_two_processes}}, bounds_pass(), 7);
  EXPECT_EQ(g.verdict, Verdict::error) << g.summary;
  EXPECT_NE(g.summary.find("counts 3 error(s)"), std::string::npos) << g.summary;
  EXPECT_NE(g.summary.find("(\"ERROR SUMMARY: 3 errors\", added up over its 2 summary lines"), std::string::npos)
      << g.summary;
  EXPECT_NE(g.summary.find("Something indented the parser skips"), std::string::npos) << g.summary;

  // Each process's summary counts its own reports: two summaries of one error each, one API error read in the
  // log, leave one unread (the last line alone would have been all read)
  const std::string constructed_api = "========= COMPUTE-SANITIZER\n"
                                      "========= ERROR SUMMARY: 1 error\n"
                                      "========= Program hit cudaErrorInvalidValue (error 1) due to \"invalid argument\" "
                                      "on CUDA API call to cudaFree.\n"
                                      "========= ERROR SUMMARY: 1 error\n";
  const GateResult api = sanitizer_result("memcheck", Logs{{"a.log", constructed_api}}, bounds_pass(), 7);
  EXPECT_EQ(api.verdict, Verdict::error) << api.summary;
  EXPECT_NE(api.summary.find("counts 1 error(s)"), std::string::npos) << api.summary;
  EXPECT_NE(api.summary.find("ERROR SUMMARY: 1 error | ERROR SUMMARY: 1 error"), std::string::npos) << api.summary;

  // racecheck's hazards likewise, its count wrapped onto a line of its own or not
  const std::string constructed_race = "========= COMPUTE-SANITIZER\n"
                                       "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n"
                                       "========= RACECHECK SUMMARY: 0 hazards displayed\n"
                                       "========= (0 errors, 0 warnings)\n";
  const GateResult race = sanitizer_result("racecheck", Logs{{"a.log", constructed_race}}, bounds_pass(), 7);
  EXPECT_EQ(race.verdict, Verdict::error) << race.summary;
  EXPECT_NE(race.summary.find("counts 2 error(s)"), std::string::npos) << race.summary;

  // every process clean: PASS
  const std::string constructed_clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
                                        "========= ERROR SUMMARY: 0 errors\n";
  EXPECT_EQ(sanitizer_result("memcheck", Logs{{"a.log", constructed_clean}}, bounds_pass(), 7).verdict, Verdict::pass);
}

TEST(SanitizerLogTool, PassNeedsTheSummaryLine) {
  const GateResult banner_only =
      sanitizer_result("memcheck", Logs{{"kgate-tool-log.0.log", "========= COMPUTE-SANITIZER\n"}}, bounds_pass(), 7);
  EXPECT_EQ(banner_only.verdict, Verdict::error) << banner_only.summary;
  EXPECT_NE(banner_only.summary.find("ends without its summary"), std::string::npos) << banner_only.summary;
  EXPECT_NE(banner_only.summary.find("kgate-tool-log.0.log"), std::string::npos) << banner_only.summary;

  const GateResult clean = sanitizer_result(
      "memcheck", Logs{{"a.log", "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"}}, bounds_pass(), 7);
  EXPECT_EQ(clean.verdict, Verdict::pass) << clean.summary;
  const GateResult race = sanitizer_result(
      "racecheck",
      Logs{{"a.log", "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 "
                     "warnings)\n"}},
      bounds_pass(), 7);
  EXPECT_EQ(race.verdict, Verdict::pass) << race.summary;
  // every worker's log: a second one cut short is no PASS
  const GateResult two = sanitizer_result(
      "memcheck",
      Logs{{"a.log", "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"},
           {"b.log", "========= COMPUTE-SANITIZER\n"}},
      bounds_pass(), 7);
  EXPECT_EQ(two.verdict, Verdict::error) << two.summary;
  // the application's own words in the log are no summary
  EXPECT_FALSE(sanitizer_log_has_summary("ERROR SUMMARY: 0 errors\n"));
}

TEST(SanitizerLogTool, LaunchPrefixCarriesTheLaunchTimeout) {
  const auto p = sanitizer_launch_prefix("/opt/cs", "memcheck", "/tmp/x.log", 180.0);
  EXPECT_EQ(p.front(), "/opt/cs");
  const auto at = std::find(p.begin(), p.end(), "--launch-timeout");
  ASSERT_NE(at, p.end());
  ASSERT_NE(at + 1, p.end());
  EXPECT_EQ(*(at + 1), "180");
  const auto rounded = sanitizer_launch_prefix("/opt/cs", "racecheck", "/tmp/x.log", 7.2);
  EXPECT_EQ(*(std::find(rounded.begin(), rounded.end(), "--launch-timeout") + 1), "8") << "whole seconds, up";
  const auto tiny = sanitizer_launch_prefix("/opt/cs", "racecheck", "/tmp/x.log", 0.0);
  EXPECT_EQ(*(std::find(tiny.begin(), tiny.end(), "--launch-timeout") + 1), "1") << "0 would mean no limit";
}

TEST(SanitizerLogTool, LaunchPrefixFollowsEveryProcessOfTheWorker) {
  // application-only left a candidate's kernels in a child process of the worker unwatched
  // (tests/gpu/sanitizer_logs/racecheck_child_process.log)
  const auto p = sanitizer_launch_prefix("/opt/cs", "racecheck", "/tmp/x.log", 180.0);
  const auto at = std::find(p.begin(), p.end(), "--target-processes");
  ASSERT_NE(at, p.end());
  ASSERT_NE(at + 1, p.end());
  EXPECT_EQ(*(at + 1), "all");
  EXPECT_EQ(std::count(p.begin(), p.end(), "--target-processes"), 1);
}

}  // namespace
}  // namespace kgate
