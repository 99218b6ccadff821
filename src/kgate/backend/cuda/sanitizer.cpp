// The compute-sanitizer pass of the bounds gate (see sanitizer.hpp). Host code only: the tool is a
// separate program that starts the worker; its log and the verdict are kgate/sanitizer_log.hpp's.
#include "backend/cuda/sanitizer.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kgate/verify.hpp"

namespace kgate {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

}  // namespace

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
  if (!exe) return sanitizer_missing(options.tool, looked);

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
    std::vector<std::pair<std::string, std::string>> logs;
    for (int i = 0;; ++i) {
      const std::string path = fmt::format("{}.{}.log", stem, i);
      if (!fs::exists(path)) break;
      logs.emplace_back(path, read_text(path));
    }
    return logs;
  };
  TargetOptions to;
  to.timeout_seconds = options.timeout_seconds;
  if (options.tool == "memcheck") to.guard_bytes = 0;  // overruns must leave their allocation to be seen
  to.launch_prefix = sanitizer_launch_prefix(*exe, options.tool, log, options.timeout_seconds);

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
    GateResult seen = sanitizer_result(options.tool, read_logs(), GateResult{}, options.seed);
    if (seen.verdict == Verdict::fail) {  // an access the tool reported before the run ended is the evidence
      seen.summary += fmt::format("; the run under the tool then ended: {}", e.what());
      seen.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return seen;
    }
    g.output = seen.output;
    return finish(Verdict::error, fmt::format("the worker could not run under compute-sanitizer --tool {}: {} (log {})",
                                              options.tool, e.what(), stem + ".*.log"));
  }
  GateResult r = sanitizer_result(options.tool, read_logs(), bounds, options.seed);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kgate
