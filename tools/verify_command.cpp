// `kgate verify`: one contract, one candidate, one oracle, every requested gate.
//
// Input problems (contract, libraries, gate names, the seed, the JSON path) are found before any gate runs
// and end with exit 2 and one line naming what is wrong. The JSON report is written once, atomically, when
// the verification is complete; until then a stale report at that path is removed and the verdicts reached
// so far live in FILE.partial, marked "complete": false. A kgate killed mid-run (by anything) therefore
// never leaves a report that looks finished.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "kgate/contract.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/rng.hpp"
#include "kgate/targets.hpp"
#include "kgate/verify.hpp"
#include "frontend/contract_source.hpp"
#include "worker/guard_seed.hpp"
#ifdef KGATE_HAVE_CUDA
#include "backend/cuda/sanitizer.hpp"
#endif

namespace kgate::cli {
namespace {

// Not a result of the candidate: refuse to start, with the reason.
struct BadInput {
  std::string message;
};

std::vector<std::string> checked_gates(const std::vector<std::string>& requested) {
  const std::vector<GateInfo> all = list_gates();
  std::set<std::string> known;
  std::vector<std::string> names;
  for (const GateInfo& g : all) known.insert(g.name), names.push_back(g.name);
  for (const std::string& g : requested)
    if (!known.count(g)) throw BadInput{fmt::format("unknown gate \"{}\" (gates: {})", g, fmt::join(names, ", "))};
  return requested;
}

// A candidate that crashes or hangs while it loads cannot be run by any gate: each gate gets that
// verdict, so the report says what happened instead of exiting as if the input were malformed.
Report load_crash_report(Report r, const LoadCrash& e, const std::vector<std::string>& gates) {
  const Verdict v = e.outcome() == CallOutcome::timed_out ? Verdict::timeout : Verdict::crash;
  std::vector<std::string> names = gates;
  if (names.empty())
    for (const GateInfo& g : list_gates()) names.push_back(g.name);
  for (const std::string& name : names) {
    GateResult g;
    g.gate = name;
    g.verdict = v;
    g.summary = e.what();
    g.output = e.output();
    r.gates.push_back(std::move(g));
  }
  return r;
}

std::unique_ptr<Target> start_target(const EntrySpec& spec, const TargetOptions& o, const char* role) {
  try {
    return make_worker_target(spec, o);
  } catch (const LoadCrash&) {
    throw;
  } catch (const std::exception& e) {
    throw BadInput{fmt::format("{}: {}", role, e.what())};
  }
}

void write_json(const std::string& path, const Report& r) {
  if (path.empty()) return;
  try {
    write_file_atomic(path, to_json(r));
    std::remove((path + ".partial").c_str());
  } catch (const std::exception& e) {
    throw BadInput{fmt::format("--json {}: {}", path, e.what())};
  }
}

// The verdicts so far, in FILE.partial, never in FILE: a reader of FILE sees only finished reports.
void write_partial(const std::string& path, const Report& r) {
  if (path.empty()) return;
  nlohmann::json j = nlohmann::json::parse(to_json(r));
  j["complete"] = false;
  j["classification"] = "incomplete";
  j["exit_code"] = nullptr;
  try {
    write_file_atomic(path + ".partial", j.dump(2) + "\n");
  } catch (const std::exception& e) {
    throw BadInput{fmt::format("--json {}: {}", path, e.what())};
  }
}

// Decimal or 0x-hexadecimal, within 64 bits; nothing else (no sign, no spaces, no empty string).
std::uint64_t parse_seed(const std::string& text) {
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string_view digits = hex ? std::string_view(text).substr(2) : std::string_view(text);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, hex ? 16 : 10);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      !(std::isdigit(static_cast<unsigned char>(digits[0])) || (hex && std::isxdigit(static_cast<unsigned char>(digits[0])))))
    throw BadInput{fmt::format("--seed \"{}\": {}", text,
                               ec == std::errc::result_out_of_range
                                   ? "out of range (0 to 18446744073709551615)"
                                   : "expected a decimal or 0x-hexadecimal integer from 0 to 18446744073709551615")};
  return v;
}

int verify_or_throw(const VerifyArgs& a) {
  Contract contract;
  try {
    contract = load_contract(a.contract);
  } catch (const ContractError& e) {
    throw BadInput{e.what()};
  }
  const std::vector<std::string> gates = checked_gates(a.gates);
  for (const std::string& tool : a.sanitizers) {
#ifdef KGATE_HAVE_CUDA
    if (std::find(kSanitizerTools.begin(), kSanitizerTools.end(), tool) == kSanitizerTools.end())
      throw BadInput{fmt::format("--sanitizer: unknown tool \"{}\" (expected {})", tool, fmt::join(kSanitizerTools, ", "))};
#else
    throw BadInput{fmt::format("--sanitizer {}: this kgate was built without CUDA", tool)};
#endif
  }
  if (!(a.tolerance_scale > 0) || !std::isfinite(a.tolerance_scale))
    throw BadInput{fmt::format("--tolerance-scale must be a positive number, got {}", a.tolerance_scale)};
  const double timeout = a.timeout.value_or(contract.timeout_seconds);
  if (!(timeout >= kMinTimeoutSeconds && timeout <= kMaxTimeoutSeconds))
    throw BadInput{fmt::format("--timeout must be from {} to {} seconds, got {}", kMinTimeoutSeconds, kMaxTimeoutSeconds, timeout)};

  EntrySpec kernel, oracle;
  try {
    kernel = parse_entry(a.kernel, "kgate_run");
    // Without --oracle the kernel's own library is asked for its oracle (abi.h allows both in one).
    oracle = parse_entry(a.oracle.empty() ? parse_entry(a.kernel, "kgate_run").library : a.oracle, "kgate_oracle");
  } catch (const LoadError& e) {
    throw BadInput{e.what()};
  }

  const std::uint64_t seed = a.seed ? parse_seed(*a.seed) : fresh_seed();
  TargetOptions options;
  options.timeout_seconds = timeout;
  // Guards the candidate cannot predict, from which it cannot compute the seed either (guard_seed.hpp).
  options.guard_seed = derive_guard_seed(seed);
  if (!(a.memory_limit_mb >= 0) || !std::isfinite(a.memory_limit_mb) || a.memory_limit_mb > 1 << 30)
    throw BadInput{fmt::format("--memory-limit must be a number of megabytes from 0 to {}, got {}", 1 << 30,
                               a.memory_limit_mb)};
  if (!a.json.empty()) {
    // A report left by an earlier run would read as this run's verdict if this one is killed.
    if (std::remove(a.json.c_str()) != 0 && errno != ENOENT)
      throw BadInput{fmt::format("--json {}: cannot replace it: {}", a.json, std::strerror(errno))};
  }
  options.memory_limit_bytes = static_cast<std::size_t>(a.memory_limit_mb * 1048576.0);

  Report report;
  report.contract = contract.path;
  report.op = contract.name;
  report.seed = seed;
  report.candidate = a.kernel;
  report.oracle = a.oracle.empty() ? oracle.library + ":" + oracle.symbol : a.oracle;

  // The kernel first, so a missing kernel is named as such; but a broken oracle is bad input even when
  // the kernel crashed while loading, so that crash is reported only once the oracle has started.
  std::unique_ptr<Target> candidate;
  std::optional<LoadCrash> kernel_crash;
  try {
    candidate = start_target(kernel, options, "kernel");
  } catch (const LoadCrash& e) {
    kernel_crash = e;
  }
  std::unique_ptr<Target> oracle_target;
  try {
    oracle_target = start_target(oracle, options, a.oracle.empty() ? "oracle (no --oracle given, so the kernel's library)" : "oracle");
  } catch (const LoadCrash& e) {
    throw BadInput{fmt::format("oracle: {}", e.what())};
  }
  report.oracle = oracle_target->describe();
  std::unique_ptr<Oracle> oracle_fn = make_target_oracle(std::move(oracle_target), contract);
  if (kernel_crash) {
    const Report r = load_crash_report(report, *kernel_crash, gates);
    write_json(a.json, r);
    std::fputs(to_table(r, use_color(STDOUT_FILENO)).c_str(), stdout);
    return r.exit_code();
  }
  report.candidate = candidate->describe();
  write_partial(a.json, report);  // an unwritable path fails now, before any gate has run

  const bool progress = isatty(STDERR_FILENO);
  Report partial = report;
  VerifyOptions vo;
  vo.seed = seed;
  vo.gates = gates;
  vo.tolerance_scale = a.tolerance_scale;
  vo.shrink = a.shrink;
  vo.on_result = [&](const GateResult& g) {
    partial.gates.push_back(g);
    write_partial(a.json, partial);
    if (progress) std::fprintf(stderr, "kgate: %-12s %s (%.2f s)\n", g.gate.c_str(), to_string(g.verdict), g.seconds);
  };
  Report final_report;
  try {
    final_report = verify(contract, *candidate, *oracle_fn, vo);
  } catch (const std::invalid_argument& e) {
    throw BadInput{e.what()};
  }
#ifdef KGATE_HAVE_CUDA
  for (const std::string& tool : a.sanitizers) {  // the deeper pass of the bounds gate, one worker per tool
    SanitizerOptions so;
    so.tool = tool;
    so.seed = seed;
    so.timeout_seconds = std::max(timeout, 120.0);  // instrumented kernels run many times slower
    final_report.gates.push_back(run_sanitizer_pass(contract, kernel, *oracle_fn, so));
    if (progress) std::fprintf(stderr, "kgate: %-12s %s (%.2f s)\n", final_report.gates.back().gate.c_str(),
                               to_string(final_report.gates.back().verdict), final_report.gates.back().seconds);
  }
#endif
  write_json(a.json, final_report);
  std::fputs(to_table(final_report, use_color(STDOUT_FILENO)).c_str(), stdout);
  return final_report.exit_code();
}

}  // namespace

void print_error(const std::string& message) { std::fprintf(stderr, "kgate: error: %s\n", message.c_str()); }

bool use_color(int fd) { return isatty(fd) && !std::getenv("NO_COLOR"); }

int run_verify(const VerifyArgs& args) {
  try {
    return verify_or_throw(args);
  } catch (const BadInput& e) {
    print_error(e.message);
    return kBadInput;
  }
}

}  // namespace kgate::cli
