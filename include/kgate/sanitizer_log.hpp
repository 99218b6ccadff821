// The bounds gate's compute-sanitizer pass, the parts every front-end shares: the tools, where the
// executable is, the command a worker starts under, the log's records, and the bounds/<tool> result drawn
// from them. Host code only, so the Python module (kgate._core) uses the same parser and verdict as the C++
// CLI; the C++ pass that starts the worker is backend/cuda/sanitizer.hpp, the Python one
// kgate/kernelbench/sanitizer.py.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kgate/report.hpp"

namespace kgate {

inline const std::vector<std::string> kSanitizerTools{"memcheck", "racecheck", "initcheck", "synccheck"};

// One record of a compute-sanitizer report.
struct SanitizerFinding {
  std::string tool;     // memcheck, racecheck, ...
  std::string kind;     // "Invalid __global__ write of size 4 bytes", "Race reported between ...", ...
  std::string kernel;   // "add_kernel(cctl::Vec<const float>, ...)" where the report names one
  std::string address;  // "0x7f0a1c000400" where given
  std::int64_t size = 0;  // access size in bytes where given
  std::string where;    // "by thread (3,0,0) in block (255,0,0)" and the nearest-allocation line
  bool api_error = false;  // "Program hit cudaError... on CUDA API call": a consequence, not an access
  // Not a report about the program: the tool's message about itself (it could not attach to the worker, timed
  // out waiting for it, watched no process that made a CUDA call, failed inside: "Internal Sanitizer Error"),
  // or any other top-level line kgate does not know as a report (sanitizer_tool_message). The worker may then
  // have run uninstrumented, or been reported on in words kgate cannot read: no verdict can be drawn from it.
  bool tool_error = false;
  std::string text;     // the record as printed
};

// Parses a compute-sanitizer log (with or without the "========= " prefix). Host backtraces are dropped.
// A top-level line (after the prefix, not indented) starts a record when it is a report about the program
// (sanitizer_report_line: an access or hazard, or an API error with api_error set); the banner, the summaries
// and a few lines known to say nothing of either (how the worker exited) are no records; every other top-level
// line is a record with tool_error set: the tool's messages about itself, and any line kgate does not know as
// a report.
std::vector<SanitizerFinding> parse_sanitizer_log(const std::string& tool, const std::string& log);

// Whether one top-level line of a log (without the "========= " prefix) has the shape of a report compute-
// sanitizer prints about the program: memcheck's "Invalid __global__ write of size 4 bytes", "Warp Illegal
// Address", "Leaked N bytes at ...", racecheck's "Error: Race reported between ...", "ERROR: Potential WAR
// hazard detected ...", initcheck's "Uninitialized __global__ memory read ...", synccheck's "Barrier error
// detected. ...", and every tool's "Program hit cudaError..." (the table, with where each shape comes from, is
// in sanitizer_log.cpp).
bool sanitizer_report_line(const std::string& line);

// Whether one top-level line of a log (without the "========= " prefix) is not a report about the program:
// the tool's message about itself ("Error: No attachable process found. ...", "Tracking kernels launched by
// child processes requires the --target-processes all option.", "Internal Sanitizer Error: ..."), or any line
// kgate does not know as a report. False for reports, the banner, the summaries and the known harmless lines.
bool sanitizer_tool_message(const std::string& line);

// Whether a log holds the summary the tool prints when the program it watched exits ("ERROR SUMMARY: ..."
// for memcheck, initcheck and synccheck, "RACECHECK SUMMARY: ..." for racecheck): the tool saw the worker
// to its end. A log without one was cut (the tool was killed, or is still waiting for a target it never
// attached to). The tool is taken to print one summary per process it watched (--target-processes all): at
// least one is asked, so a log cut short during the worker that holds the summary of a child process that ended
// before it is not detected here (sanitizer_log.cpp says more).
bool sanitizer_log_has_summary(const std::string& log);

// The compute-sanitizer executable: $KGATE_COMPUTE_SANITIZER, then PATH, then $CUDA_HOME/bin,
// /usr/local/cuda/bin and the folder of nvcc. nullopt (and where it looked, in `looked`) when absent.
std::optional<std::string> find_compute_sanitizer(std::string* looked = nullptr);

// The words a worker starts under: the tool, writing its report to `log_file` (not to the worker's output,
// which the candidate writes too), about the worker and every process it starts (--target-processes all: a
// candidate's kernels in a child process are watched too), waiting up to `launch_timeout_seconds` (the pass's
// per-request timeout, rounded up to whole seconds, at least 1) for the worker to initialise CUDA: the
// tool's own default, 10 s, is shorter than a Python worker's imports on a busy machine, and a tool that
// gives up lets the worker run uninstrumented.
std::vector<std::string> sanitizer_launch_prefix(const std::string& exe, const std::string& tool,
                                                 const std::string& log_file, double launch_timeout_seconds);

// The result named "bounds/<tool>" of the bounds gate's calls run under the tool: `logs` (name, text) are
// the tool's logs, one per worker it started, `bounds` the bounds gate's own result in that run. FAIL with
// the first access the tool reported as evidence (every one listed in the detail). After an access report and
// before all else: a log holding a tool_error record (the tool's message about itself, or a top-level line
// kgate does not know as a report) is ERROR whatever the bounds gate said ("compute-sanitizer <tool> did not
// instrument the worker, or printed what kgate does not know as a report: <the lines>"), never PASS or FAIL;
// an access the tool did report stays FAIL (those lines are then in the detail). Else the bounds gate's verdict
// under the tool: PASS when it passed, the tool reported nothing, every log ends with the tool's summary and
// no summary counts errors that are not API errors kgate read; ERROR when it passed and the tool left no log
// at all, a log without its summary, or a summary counting errors kgate recognised no report of; FAIL when its
// guards caught a write; a CRASH or TIMEOUT with no record of the tool's is ERROR (the pass could not run),
// saying what the tool saw of it. `seed` is the run seed, for evidence the bounds gate did not give. The
// caller sets `seconds`.
GateResult sanitizer_result(const std::string& tool, const std::vector<std::pair<std::string, std::string>>& logs,
                            const GateResult& bounds, std::uint64_t seed);

// The result when compute-sanitizer is not installed: SKIP, saying where it looked.
GateResult sanitizer_missing(const std::string& tool, const std::string& looked);

}  // namespace kgate
