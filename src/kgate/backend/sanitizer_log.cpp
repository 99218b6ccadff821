// The log, the executable and the verdict of the bounds gate's compute-sanitizer pass (see
// kgate/sanitizer_log.hpp). Host code only: the tool is a separate program that starts the worker.
#include "kgate/sanitizer_log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kgate {
namespace {

namespace fs = std::filesystem;

std::string ltrim(const std::string& s) {
  const std::size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? std::string() : s.substr(i);
}

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

// The function a location names: "add_kernel(cctl::Vec<float>, long)+0x70 in f.cu:12" or
// "0x130 in f.cu:13:sumKernel(int*, int*)" both give the name with its parameter list.
std::string function_in(std::string s) {
  // Kernels in an unnamed namespace print as "(anonymous namespace)::name(...)": drop the qualifier, whose
  // parenthesis would otherwise be taken for the parameter list.
  for (std::size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(at, 23);
  const std::size_t open = s.find('(');
  if (open == std::string::npos || open == 0) return {};
  std::size_t begin = open;
  while (begin > 0) {
    const char c = s[begin - 1];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '~') {
      --begin;
    } else if (c == ':' && begin >= 2 && s[begin - 2] == ':') {
      begin -= 2;
    } else if (c == '>') {  // template arguments: back to the matching '<'
      int depth = 0;
      std::size_t k = begin - 1;
      for (;; --k) {
        if (s[k] == '>') ++depth;
        if (s[k] == '<' && --depth == 0) break;
        if (k == 0) return {};
      }
      begin = k;
    } else {
      break;
    }
  }
  int depth = 0;
  std::size_t end = open;
  for (; end < s.size(); ++end) {
    if (s[end] == '(') ++depth;
    if (s[end] == ')' && --depth == 0) break;
  }
  if (begin == open) return {};
  return s.substr(begin, std::min(end + 1, s.size()) - begin);
}

std::string excerpt(const std::string& s, std::size_t limit) {
  return s.size() <= limit ? s : s.substr(0, limit) + fmt::format("\n... ({} more bytes)", s.size() - limit);
}

// The tool's messages about itself (and the lines kgate does not know as reports), joined into one line.
std::string said_of(const std::vector<SanitizerFinding>& tool_errors) {
  std::string said;
  for (const SanitizerFinding& f : tool_errors) said += (said.empty() ? "" : " | ") + f.kind;
  return said;
}

// One line of a log with its "\r" and compute-sanitizer's "=========" prefix (and the space after it) taken off;
// `prefixed` says whether the tool wrote it (a line without the prefix is the program's own output, when the log
// is mixed with it, or the rest of a record's text).
struct LogLine {
  std::string body;
  bool prefixed = false;
};
LogLine log_line(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!starts_with(line, "=========")) return {std::move(line), false};
  line = line.substr(9);
  if (!line.empty() && line[0] == ' ') line = line.substr(1);
  return {std::move(line), true};
}

// A top-level line of a log without the prefix, or nullopt for a line of the program's own output or a
// continuation line of a record (indented).
std::optional<std::string> top_line(const std::string& line) {
  LogLine l = log_line(line);
  if (!l.prefixed || l.body.empty() || l.body[0] == ' ') return std::nullopt;
  return std::move(l.body);
}

// The reports compute-sanitizer prints about the program, by how a top-level line of one begins (after the
// "========= " prefix; case-sensitive). Only these are reports: any other top-level line that is not the banner,
// a summary or a line in kHarmless below is the tool speaking about itself, or something kgate does not know,
// and makes the pass ERROR (tool_error), never FAIL and never PASS. A report shape missing here costs an ERROR,
// not a wrong verdict: add it here, with where it comes from.
// Where they come from: the names the NVIDIA Compute Sanitizer user guide gives each tool's reports (memcheck's
// memory access errors, hardware exceptions, malloc/free errors and leaks; racecheck's analysis and hazard report
// modes; initcheck; synccheck), not each checked against a log here; logs of the tools in other projects' tests (CMake's simulated cuda-memcheck/compute-sanitizer log for
// ctest_memcheck: initcheck's "Unused memory" and "Host API memory access error", synccheck's "Divergent
// thread(s) in warp", memcheck's "Fatal UVM ... fault", racecheck's "WARN:(Warp Level Programming) ..."), and
// our own (tests/gpu/sanitizer_logs/memcheck.log, from an H200 run). Not every one has been seen in a kgate run.
constexpr std::string_view kReportPrefixes[] = {
    // memcheck, memory access errors: "Invalid __global__ write of size 4 bytes" (also __shared__, __local__,
    // __generic__, atomics; a misaligned access is one of these too, its detail "Address ... is misaligned")
    "Invalid __",
    "Misaligned ",
    // memcheck, hardware exceptions (the GPU's own report, without a precise address)
    "Warp Illegal Address", "Warp Misaligned Address", "Warp Out-of-range Address", "Warp Illegal Instruction",
    "Warp Invalid PC", "Warp Invalid Address Space", "Warp Hardware Stack Overflow", "Warp Assert",
    "Lane Illegal Address", "Lane Misaligned Address", "Lane Invalid Address Space", "Lane User Stack Overflow",
    "Device Hardware Stack Overflow", "Device Illegal Address", "Device Illegal Instruction",
    "Device Misaligned Address", "Out-of-range Shared or Local Address",
    // memcheck, unified memory faults: "Fatal UVM GPU fault of type invalid pde due to invalid address"
    "Fatal UVM ",
    // memcheck, device-side malloc/free: "Malloc/Free error encountered : Double free" (also seen as "Error
    // encountered"); a host API call touching device memory wrongly, or (initcheck) reading uninitialised memory:
    // "Host API memory access error at host access to 0x... of size N bytes"
    "Malloc/Free error", "Malloc/Free Error", "Host API memory access error",
    // memcheck --leak-check full: "Leaked 1024 bytes at 0x7f0a1c000000" (its "LEAK SUMMARY" is a summary)
    "Leaked ",
    // initcheck: "Uninitialized __global__ memory read of size 8 bytes"; --track-unused-memory: "Unused memory
    // in allocation 0x7f... of size 16 bytes"
    "Uninitialized __", "Unused memory in allocation",
    // synccheck: "Barrier error detected. Divergent thread(s) in block" (or "in warp", "Invalid arguments",
    // "Missing wait", ...), and the older tool's bare "Invalid arguments ...", "Divergent thread(s) in warp"
    "Barrier error detected", "Invalid arguments", "Divergent thread(s) in",
    // every tool, a CUDA API call that failed: "Program hit cudaErrorLaunchFailure (error 719) due to ... on CUDA
    // API call to cudaEventSynchronize." (also "Program hit CUDA_ERROR_..."): a report about the program, but a
    // consequence rather than an access (SanitizerFinding::api_error)
    "Program hit ",
};
// racecheck, whose reports begin with a severity: analysis mode (the default) "Error: Race reported between
// Write access at ...", "Warning: Race reported ...", the older "WARN: Race reported ..."; hazard mode
// "ERROR: Potential WAR hazard detected at __shared__ 0x0 in block (0,0,0) :", "WARNING: Potential ...",
// "INFO: Potential ...", the older "WARN:(Warp Level Programming) Potential WAR hazard detected ...".
const std::regex& race_report() {
  static const std::regex re(
      R"(^(?:ERROR|Error|WARNING|Warning|WARN|Warn|INFO|Info):(?:\([^)]*\))? ?(?:Race reported|Potential \w+ hazard))");
  return re;
}

// Top-level lines that are neither reports nor the tool's word about its coverage, and are no records:
//   "Target application returned an error", "Error: process didn't terminate successfully", "Error: couldn't
//     find exit code": the tool on how the worker ended (a non-zero status, a signal), printed as it ends,
//     before the summary (another project's parser of compute-sanitizer 2025.2 logs lists them as no report). The
//     tool watched the worker to its end; how the worker ended is the bounds gate's own record's to judge (a
//     crash or a timeout there is the pass's ERROR already). Not "Error: Target application terminated before
//     first instrumented API call", the tool's word that it instrumented nothing: these are matched from the
//     line's start, so neither passes for the other.
//   "This tool is deprecated ..." / "Please use the compute-sanitizer utility ...": cuda-memcheck's notice, when
//     $KGATE_COMPUTE_SANITIZER names the old tool.
constexpr std::string_view kHarmless[] = {"Target application returned an error",
                                          "Error: process didn't terminate successfully",
                                          "Error: couldn't find exit code", "This tool is deprecated",
                                          "Please use the compute-sanitizer utility"};

// The banner, or a summary line: "ERROR SUMMARY: 0 errors", "RACECHECK SUMMARY: 0 hazards displayed (...)",
// "LEAK SUMMARY: 0 bytes leaked in 0 allocations".
bool banner_or_summary(const std::string& s) {
  if (starts_with(s, "COMPUTE-SANITIZER")) return true;
  std::size_t i = 0;
  while (i < s.size() && std::isupper(static_cast<unsigned char>(s[i]))) ++i;
  return i > 0 && s.compare(i, 9, " SUMMARY:") == 0;
}

// racecheck's summary, when it wraps its counts onto a line of their own: "(4528176 errors, 661824 warnings)".
bool summary_tail(const std::string& s) {
  static const std::regex re(R"(^\(\d+ errors?, \d+ warnings?\)$)");
  return std::regex_search(s, re);
}

bool harmless(const std::string& s) {
  return banner_or_summary(s) || summary_tail(s) ||
         std::any_of(std::begin(kHarmless), std::end(kHarmless), [&](std::string_view h) { return starts_with(s, h); });
}

// What a log's summaries count, added up over every summary line in it: memcheck, initcheck and synccheck print
// "ERROR SUMMARY: N errors" (`errors`), racecheck "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
// (`hazards`, N). The tool is taken to print one summary per process it watched, as that process exits, so with
// --target-processes all (sanitizer_launch_prefix) one log may hold several: the worker's and one for each process
// it started that the tool followed. Each counts its own process's reports, so the log's count is their sum;
// keeping only the last summary (the worker's, which usually exits last) would lose the errors an earlier process's
// summary counted. The two kinds are kept apart so that a log holding both is not counted twice (one tool writes
// one log, so it should hold one kind; the check takes the larger). `line` quotes the summary lines with a non-zero
// count ("ERROR SUMMARY: 2 errors", joined by " | "), `lines` says how many summary lines the log holds; nullopt
// for a log without one. (How a log with several processes looks has not been seen on a GPU run yet: see
// sanitizer_launch_prefix.)
struct SummaryCount {
  long long errors = 0;
  long long hazards = 0;
  int lines = 0;
  std::string line;
};
std::optional<SummaryCount> summary_count(const std::string& log) {
  static const std::regex count_re(R"(^(?:ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: (\d+) hazard))");
  std::istringstream lines(log);
  std::string line;
  std::optional<SummaryCount> c;
  while (std::getline(lines, line)) {
    const std::optional<std::string> top = top_line(line);
    std::smatch m;
    if (!top || !std::regex_search(*top, m, count_re)) continue;
    if (!c) c = SummaryCount{};
    const long long n = std::stoll(m[1].matched ? m[1].str() : m[2].str());
    (m[2].matched ? c->hazards : c->errors) += n;
    ++c->lines;
    if (n > 0) c->line += (c->line.empty() ? "" : " | ") + *top;
  }
  return c;
}

}  // namespace

bool sanitizer_report_line(const std::string& line) {
  const std::string s = ltrim(line);
  return std::any_of(std::begin(kReportPrefixes), std::end(kReportPrefixes),
                     [&](std::string_view p) { return starts_with(s, p); }) ||
         std::regex_search(s, race_report());
}

// The tool's messages about itself, and any top-level line kgate does not know as a report: whatever is neither
// a report (kReportPrefixes) nor the banner, a summary or a harmless line (kHarmless). Messages seen so far,
// each meaning that the tool did not watch the worker, or not all of it:
//   Error: No attachable process found. compute-sanitizer timed-out.
//   Default timeout can be adjusted with --launch-timeout. Awaiting target completion.
//     (the worker did not initialise CUDA within --launch-timeout; it then runs uninstrumented. Both lines
//     were the whole memcheck log of a correct row on the first GPU run, 2026-12-06, H100)
//   Error: Target application terminated before first instrumented API call
//   Tracking kernels launched by child processes requires the --target-processes all option.
//     (both lines, after the banner, were the whole racecheck log of correct_linear on the 2026-12-06 H100
//     sanitizer-check run: the negative list of the time knew the first and took the hint for an access, FAIL)
//   Internal Sanitizer Error: ...
//   Error: Unable to ... / Error: Could not ... / Error: Failed to ... / Error: Device not supported
bool sanitizer_tool_message(const std::string& line) {
  const std::string s = ltrim(line);
  return !s.empty() && !sanitizer_report_line(s) && !harmless(s);
}

namespace {

// The first line of the tool's in a log that the parser reads as part of no record and skips: a continuation
// line (indented) with no report above it. Empty when there is none. (A top-level line it does not know is a
// record of its own, tool_error.)
std::string first_unread_line(const std::string& log) {
  std::istringstream lines(log);
  std::string line;
  bool in_record = false;
  while (std::getline(lines, line)) {
    const LogLine l = log_line(line);
    const std::string trimmed = ltrim(l.body);
    if (!l.prefixed || trimmed.empty()) continue;
    if (l.body[0] != ' ') {
      in_record = !harmless(trimmed);
      continue;
    }
    if (!in_record) return trimmed;
  }
  return {};
}

}  // namespace

// At least one summary line, wherever it stands. With --target-processes all (sanitizer_launch_prefix) the tool is
// taken to print one summary per process it watched (not yet seen on a GPU run), each as that process exits: a log
// cut short while the worker ran (the tool killed, or the worker never reached its end under it) may still hold the
// summary of a process the worker started and that ended before, with none for the worker itself. Such a log passes
// this check; kgate does not know how many processes the tool watched, so a missing summary beside another is not
// detected (the summaries it does hold are all counted: summary_count).
bool sanitizer_log_has_summary(const std::string& log) {
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    const std::optional<std::string> top = top_line(line);
    if (top && (starts_with(*top, "ERROR SUMMARY:") || starts_with(*top, "RACECHECK SUMMARY:"))) return true;
  }
  return false;
}

std::vector<SanitizerFinding> parse_sanitizer_log(const std::string& tool, const std::string& log) {
  static const std::regex size_re(R"(of size (\d+) bytes?)");
  static const std::regex address_re(R"(Address (0x[0-9a-fA-F]+))");
  std::vector<SanitizerFinding> out;
  bool in_record = false, in_backtrace = false;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    const LogLine l = log_line(line);
    if (!l.prefixed && !in_record) continue;  // the application's own output, when the log is mixed with it
    const std::string& body = l.body;
    const std::string trimmed = ltrim(body);
    if (trimmed.empty()) continue;
    const bool top = body[0] != ' ';
    if (top) {
      in_backtrace = false;
      in_record = false;
      if (harmless(trimmed)) continue;  // the banner, a summary, a line known to say nothing of either
      if (!sanitizer_report_line(trimmed)) {  // the tool about itself, or a line kgate does not know: no verdict
        SanitizerFinding f;
        f.tool = tool;
        f.kind = trimmed;
        f.text = trimmed;
        f.tool_error = true;
        out.push_back(std::move(f));
        in_record = true;
        continue;
      }
      SanitizerFinding f;
      f.tool = tool;
      f.kind = trimmed;
      f.text = trimmed;
      f.api_error = starts_with(trimmed, "Program hit");
      std::smatch m;
      if (std::regex_search(trimmed, m, size_re)) f.size = std::stoll(m[1].str());
      if (const std::size_t at = trimmed.find(" at "); at != std::string::npos && !f.api_error)
        f.kernel = function_in(trimmed.substr(at + 4));
      out.push_back(std::move(f));
      in_record = true;
      continue;
    }
    if (!in_record || in_backtrace) continue;
    if (starts_with(trimmed, "Saved host backtrace") || starts_with(trimmed, "Host Frame")) {
      in_backtrace = true;
      continue;
    }
    SanitizerFinding& f = out.back();
    f.text += "\n" + trimmed;
    if (f.tool_error) continue;
    std::smatch m;
    if (f.kernel.empty() && (starts_with(trimmed, "at ") || starts_with(trimmed, "and ")))
      if (const std::size_t at = trimmed.find("at "); at != std::string::npos) f.kernel = function_in(trimmed.substr(at + 3));
    if (f.address.empty() && std::regex_search(trimmed, m, address_re)) f.address = m[1].str();
    if (starts_with(trimmed, "by thread") || trimmed.find("nearest allocation") != std::string::npos ||
        starts_with(trimmed, "Address"))
      f.where += (f.where.empty() ? "" : "; ") + trimmed;
  }
  return out;
}

std::optional<std::string> find_compute_sanitizer(std::string* looked) {
  std::vector<std::string> places;
  auto usable = [](const fs::path& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; };
  if (const char* env = std::getenv("KGATE_COMPUTE_SANITIZER"); env && *env) {
    places.push_back(env);
    if (usable(env)) return std::string(env);
  }
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::string d;
    while (std::getline(dirs, d, ':'))
      if (!d.empty() && usable(fs::path(d) / "compute-sanitizer")) return (fs::path(d) / "compute-sanitizer").string();
    places.push_back("$PATH");
  }
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  if (const char* path = std::getenv("PATH")) {  // the toolkit nvcc belongs to
    std::istringstream dirs(path);
    std::string d;
    while (std::getline(dirs, d, ':'))
      if (!d.empty() && usable(fs::path(d) / "nvcc")) roots.push_back(fs::path(d).parent_path());
  }
  for (const fs::path& r : roots) {
    for (const fs::path& p : {r / "bin" / "compute-sanitizer", r / "compute-sanitizer" / "compute-sanitizer"}) {
      places.push_back(p.string());
      if (usable(p)) return p.string();
    }
  }
  if (looked) *looked = fmt::format("{}", fmt::join(places, ", "));
  return std::nullopt;
}

std::vector<std::string> sanitizer_launch_prefix(const std::string& exe, const std::string& tool,
                                                 const std::string& log_file, double launch_timeout_seconds) {
  // Whole seconds, rounded up; at least 1 (0 would be the tool's "no limit"), at most a day.
  const double t = std::isfinite(launch_timeout_seconds) ? launch_timeout_seconds : 86400.0;
  const long seconds = static_cast<long>(std::clamp(std::ceil(t), 1.0, 86400.0));
  // --target-processes all: the tool follows every process the worker starts, not the worker alone. With
  // application-only a candidate that runs its CUDA work in a child process (subprocess, multiprocessing) went
  // unwatched: it escaped the pass (on the 2026-12-06 H100 sanitizer-check run correct_linear's racecheck log held
  // only "Error: Target application terminated before first instrumented API call" and "Tracking kernels launched
  // by child processes requires the --target-processes all option.", while the bounds gate ran its 4 calls:
  // tests/gpu/sanitizer_logs/racecheck_child_process.log). The first run under `all` (2026-12-07, H100,
  // results/h100-2026-12-07/sanitizer-check/) gave correct_linear a memcheck log of the banner and "Error: Target
  // application terminated before first instrumented API call" alone, no summary, its racecheck log a clean
  // summary; grid_nominal's memcheck log the same line beside its reports. The pass reads the line as the tool's
  // word about its watch: ERROR for a correct row, never PASS. Which process the line is about, and whether the
  // tool's watch ends there, is what scripts/sanitizer-probe asks the tool; until it has, the parser adds up every
  // summary line (summary_count) and reads nothing more into the line.
  return {exe, "--tool", tool, "--log-file", log_file, "--print-limit", "100", "--target-processes", "all",
          "--launch-timeout", std::to_string(seconds)};
}

GateResult sanitizer_missing(const std::string& tool, const std::string& looked) {
  GateResult g;
  g.gate = "bounds/" + tool;
  g.verdict = Verdict::skip;
  g.summary = fmt::format("compute-sanitizer is not installed here (looked at {})", looked);
  return g;
}

GateResult sanitizer_result(const std::string& tool, const std::vector<std::pair<std::string, std::string>>& logs,
                            const GateResult& bounds, std::uint64_t seed) {
  GateResult g;
  g.gate = "bounds/" + tool;
  std::string joined, names;
  for (const auto& [name, text] : logs) {
    joined += fmt::format("{}--- {} ---\n{}", joined.empty() ? "" : "\n", name, text);
    names += (names.empty() ? "" : ", ") + name;
  }
  g.output = excerpt(joined, 4000);
  g.cases = bounds.cases;
  std::vector<SanitizerFinding> all;
  std::vector<long long> api_errors_in;  // per log, the API errors read in it (the summary check below)
  for (const auto& [name, text] : logs) {
    api_errors_in.push_back(0);
    for (SanitizerFinding& f : parse_sanitizer_log(tool, text)) {
      api_errors_in.back() += f.api_error ? 1 : 0;
      all.push_back(std::move(f));
    }
  }
  std::vector<SanitizerFinding> accesses, tool_errors;
  for (const SanitizerFinding& f : all) {
    if (f.tool_error)
      tool_errors.push_back(f);
    else if (!f.api_error)
      accesses.push_back(f);
  }

  if (!accesses.empty()) {
    const SanitizerFinding& f = accesses.front();
    Evidence e;
    e.gate = "bounds";
    e.seed = bounds.evidence ? bounds.evidence->seed : seed;
    if (bounds.evidence) e.bindings = bounds.evidence->bindings;
    e.variant = fmt::format("compute-sanitizer --tool {} over the bounds gate's calls", tool);
    e.expected = fmt::format("no {} report", tool);
    e.got = f.kind;
    std::string detail = fmt::format("kernel {}; address {}; size {} bytes; {}", f.kernel.empty() ? "?" : f.kernel,
                                     f.address.empty() ? "?" : f.address, f.size, f.where.empty() ? "-" : f.where);
    detail += fmt::format("\n{} finding(s) in all (logs {}, one per worker):", accesses.size(), names);
    for (std::size_t i = 0; i < accesses.size() && i < 8; ++i)
      detail += fmt::format("\n  {}{}", accesses[i].kind, accesses[i].kernel.empty() ? "" : " in " + accesses[i].kernel);
    if (!tool_errors.empty())
      detail += fmt::format("\nthe tool also said of itself, or printed what kgate does not know as a report (part of "
                            "the run may have gone unwatched): {}",
                            excerpt(said_of(tool_errors), 600));
    e.detail = detail;
    g.evidence = e;
    g.verdict = Verdict::fail;
    g.finding = "sanitizer";  // the tool's own report, not a guard the gate checked
    g.summary = fmt::format("compute-sanitizer {}: {}{}", tool, f.kind, f.kernel.empty() ? "" : " in " + f.kernel);
    return g;
  }
  // The tool said it did not watch the worker (or not all of it), or printed a line kgate does not know as a
  // report, and reported no access kgate knows: whatever ran may have run uninstrumented, or been reported in
  // words kgate cannot read, so the bounds gate's PASS is not this tool's verdict, nor is its FAIL under the
  // worker. ERROR, with the tool's words; the bounds gate's own record stands apart. (An access the tool did
  // report, above, is evidence however the rest of its watch went.)
  if (!tool_errors.empty()) {
    g.verdict = Verdict::error;
    g.summary = fmt::format("compute-sanitizer {} did not instrument the worker, or printed what kgate does not know "
                            "as a report: {}",
                            tool, excerpt(said_of(tool_errors), 600));
    return g;
  }
  if (bounds.verdict == Verdict::pass && logs.empty()) {  // the tool always writes its banner: it did not run
    g.verdict = Verdict::error;
    g.summary = fmt::format("compute-sanitizer {} wrote no log over {} call(s): the tool did not run as asked (or "
                            "its log was removed)", tool, bounds.cases);
    return g;
  }
  if (bounds.verdict == Verdict::pass) {
    // A PASS needs the tool to have seen each worker to its end: it prints its summary as the worker exits.
    // A log without one was cut short (the tool killed, or still waiting for a worker it never attached to).
    for (const auto& [name, text] : logs)
      if (!sanitizer_log_has_summary(text)) {
        g.verdict = Verdict::error;
        g.summary = fmt::format("compute-sanitizer {}'s log {} ends without its summary line (\"ERROR SUMMARY: "
                                "...\" or \"RACECHECK SUMMARY: ...\"): the tool did not see the worker to its end",
                                tool, name);
        return g;
      }
    // Nor is a summary that counts errors kgate read no report of a PASS (the tool reported something in a
    // shape the parser skipped). memcheck's "ERROR SUMMARY" counts the API errors it printed ("Program hit
    // ...") beside the accesses (tests/gpu/sanitizer_logs/memcheck.log: one access and one API error, "2
    // errors"), and an API error alone does not fail the candidate, so those recognised here are taken off
    // its count (the same for initcheck's and synccheck's, the same summary); racecheck's "RACECHECK SUMMARY:
    // N hazards displayed" counts hazards alone. No access report reached this point, so any count left is
    // reports kgate did not read. Every summary line of a log counts (one per process the tool watched, with
    // --target-processes all: summary_count adds them up), less the API errors read anywhere in the log.
    for (std::size_t i = 0; i < logs.size(); ++i) {
      const auto& [name, text] = logs[i];
      const std::optional<SummaryCount> c = summary_count(text);
      if (!c) continue;
      const long long unread = std::max(c->hazards, c->errors - api_errors_in[i]);
      if (unread <= 0) continue;
      const std::string first = first_unread_line(text);
      const std::string quote = first.empty() ? std::string(" (it holds no other line of the tool's)")
                                              : fmt::format(" (the first line kgate did not read: \"{}\")", excerpt(first, 300));
      const std::string of_lines =
          c->lines > 1 ? fmt::format(", added up over its {} summary lines", c->lines)
                       : std::string();
      g.verdict = Verdict::error;
      g.summary = fmt::format("compute-sanitizer {}'s log {} counts {} error(s) (\"{}\"{}) that kgate did not recognise "
                              "as reports{}: the tool's verdict is not known",
                              tool, name, unread, excerpt(c->line, 300), of_lines, quote);
      return g;
    }
    g.verdict = Verdict::pass;
    g.summary = fmt::format("compute-sanitizer {} reported nothing over {} call(s)", tool, bounds.cases);
    return g;
  }
  // No access report, yet the gate did not pass: the guards caught something (the bounds gate's own finding,
  // which stands), or the call crashed or timed out under the tool (an API error in the log says which CUDA
  // call failed). A crash or hang with no record of the tool's is no evidence against the candidate (the
  // instrumentation may be its cause; the row's own run judged the candidate's crashes): the pass could not
  // run, ERROR.
  g.evidence = bounds.evidence;
  g.finding = bounds.finding;
  std::string why = bounds.summary;
  for (const SanitizerFinding& f : all)
    if (f.api_error) {
      why += "; the tool saw: " + f.kind;
      break;
    }
  const bool stopped = bounds.verdict == Verdict::crash || bounds.verdict == Verdict::timeout;
  g.verdict = stopped ? Verdict::error : bounds.verdict;
  g.summary = fmt::format("under compute-sanitizer {}{}: {}", tool,
                          stopped ? fmt::format(", the bounds gate's calls ended {} with no report of the tool's",
                                                to_string(bounds.verdict))
                                  : std::string(),
                          why);
  return g;
}

}  // namespace kgate
