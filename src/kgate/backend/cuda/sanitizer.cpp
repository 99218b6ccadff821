// The compute-sanitizer pass of the bounds gate (see sanitizer.hpp). Host code only: the tool is a
// separate program that starts the worker, and its log is parsed here.
#include "backend/cuda/sanitizer.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "kgate/verify.hpp"

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

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

}  // namespace

std::vector<SanitizerFinding> parse_sanitizer_log(const std::string& tool, const std::string& log) {
  static const std::regex size_re(R"(of size (\d+) bytes?)");
  static const std::regex address_re(R"(Address (0x[0-9a-fA-F]+))");
  std::vector<SanitizerFinding> out;
  bool in_record = false, in_backtrace = false;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string body = line;
    if (starts_with(body, "=========")) {
      body = body.substr(9);
      if (!body.empty() && body[0] == ' ') body = body.substr(1);
    } else if (!in_record) {
      continue;  // the application's own output, when the log is mixed with it
    }
    const std::string trimmed = ltrim(body);
    if (trimmed.empty()) continue;
    const bool top = body[0] != ' ';
    if (top) {
      in_backtrace = false;
      in_record = false;
      if (starts_with(trimmed, "COMPUTE-SANITIZER") || trimmed.find("SUMMARY") != std::string::npos ||
          starts_with(trimmed, "Target application") || starts_with(trimmed, "This tool") ||
          starts_with(trimmed, "Internal Sanitizer"))
        continue;
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

GateResult run_sanitizer_pass(const Contract& contract, const EntrySpec& kernel, Oracle& oracle,
                              const SanitizerOptions& options) {
  GateResult g;
  g.gate = "bounds/" + options.tool;
  const auto t0 = std::chrono::steady_clock::now();
  auto finish = [&](Verdict v, std::string summary) {
    g.verdict = v;
    g.summary = std::move(summary);
    g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return g;
  };
  if (std::find(kSanitizerTools.begin(), kSanitizerTools.end(), options.tool) == kSanitizerTools.end())
    return finish(Verdict::error, fmt::format("unknown compute-sanitizer tool \"{}\" (expected one of {})", options.tool,
                                              fmt::join(kSanitizerTools, ", ")));
  std::string looked;
  const std::optional<std::string> exe = find_compute_sanitizer(&looked);
  if (!exe) return finish(Verdict::skip, fmt::format("compute-sanitizer is not installed here (looked at {})", looked));

  static std::atomic<int> counter{0};
  std::string dir = options.log_dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp && *tmp ? tmp : "/tmp";
  }
  // One log per worker the pass starts: a worker that crashed under the tool is replaced, and the
  // replacement must not truncate the log that holds the crash's record.
  const std::string stem = (fs::absolute(dir) / fmt::format("kgate-sanitizer-{}-{}-{}", options.tool, getpid(),
                                                            counter.fetch_add(1)))
                               .string();
  const std::string log = stem + ".{start}.log";
  const auto read_logs = [&stem] {
    std::vector<std::string> logs;
    for (int i = 0;; ++i) {
      const std::string path = fmt::format("{}.{}.log", stem, i);
      if (!fs::exists(path)) break;
      logs.push_back(read_text(path));
    }
    return logs;
  };
  const auto joined = [&stem](const std::vector<std::string>& logs) {
    std::string all;
    for (std::size_t i = 0; i < logs.size(); ++i)
      all += fmt::format("{}--- {}.{}.log ---\n{}", i ? "\n" : "", stem, i, logs[i]);
    return all;
  };
  TargetOptions to;
  to.timeout_seconds = options.timeout_seconds;
  if (options.tool == "memcheck") to.guard_bytes = 0;  // overruns must leave their allocation to be seen
  to.launch_prefix = {*exe, "--tool", options.tool, "--log-file", log, "--print-limit", "100",
                      "--target-processes", "application-only"};

  GateResult bounds;
  try {
    std::unique_ptr<Target> target = make_worker_target(kernel, to);
    VerifyOptions vo;
    vo.seed = options.seed;
    vo.gates = {"bounds"};
    vo.shrink = false;
    const Report r = verify(contract, *target, oracle, vo);
    if (!r.gates.empty()) bounds = r.gates.front();
    target.reset();  // the worker quits, and the tool finishes its log
  } catch (const std::exception& e) {
    g.output = excerpt(joined(read_logs()), 4000);
    return finish(Verdict::error, fmt::format("the worker could not run under compute-sanitizer --tool {}: {} (log {})",
                                              options.tool, e.what(), stem + ".*.log"));
  }
  const std::vector<std::string> logs = read_logs();
  g.output = excerpt(joined(logs), 4000);
  g.cases = bounds.cases;
  std::vector<SanitizerFinding> all;
  for (const std::string& text : logs)
    for (SanitizerFinding& f : parse_sanitizer_log(options.tool, text)) all.push_back(std::move(f));
  std::vector<SanitizerFinding> accesses;
  for (const SanitizerFinding& f : all)
    if (!f.api_error) accesses.push_back(f);

  if (!accesses.empty()) {
    const SanitizerFinding& f = accesses.front();
    Evidence e;
    e.gate = "bounds";
    e.seed = bounds.evidence ? bounds.evidence->seed : options.seed;
    if (bounds.evidence) e.bindings = bounds.evidence->bindings;
    e.variant = fmt::format("compute-sanitizer --tool {} over the bounds gate's calls", options.tool);
    e.expected = fmt::format("no {} report", options.tool);
    e.got = f.kind;
    std::string detail = fmt::format("kernel {}; address {}; size {} bytes; {}", f.kernel.empty() ? "?" : f.kernel,
                                     f.address.empty() ? "?" : f.address, f.size, f.where.empty() ? "-" : f.where);
    detail += fmt::format("\n{} finding(s) in all (logs {}.*.log, one per worker):", accesses.size(), stem);
    for (std::size_t i = 0; i < accesses.size() && i < 8; ++i)
      detail += fmt::format("\n  {}{}", accesses[i].kind, accesses[i].kernel.empty() ? "" : " in " + accesses[i].kernel);
    e.detail = detail;
    g.evidence = e;
    return finish(Verdict::fail, fmt::format("compute-sanitizer {}: {}{}", options.tool, f.kind,
                                             f.kernel.empty() ? "" : " in " + f.kernel));
  }
  if (bounds.verdict == Verdict::pass)
    return finish(Verdict::pass, fmt::format("compute-sanitizer {} reported nothing over {} call(s)", options.tool, bounds.cases));
  // No access report, yet the gate did not pass: the guards caught something, or the call crashed or timed
  // out under the tool (an API error in the log says which CUDA call failed).
  g.evidence = bounds.evidence;
  std::string why = bounds.summary;
  for (const SanitizerFinding& f : all)
    if (f.api_error) {
      why += "; the tool saw: " + f.kind;
      break;
    }
  return finish(bounds.verdict, fmt::format("under compute-sanitizer {}: {}", options.tool, why));
}

}  // namespace kgate
