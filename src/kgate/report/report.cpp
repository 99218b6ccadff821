// Verdict names, the exit status, the audit's classification and the atomic writer.
#include "kgate/report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "kgate/compare.hpp"
#include "kgate/verify.hpp"

namespace kgate {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::pass: return "PASS";
    case Verdict::fail: return "FAIL";
    case Verdict::refused: return "REFUSED";
    case Verdict::skip: return "SKIP";
    case Verdict::crash: return "CRASH";
    case Verdict::timeout: return "TIMEOUT";
    case Verdict::error: return "ERROR";
  }
  return "?";
}

const char* to_string(Classification c) {
  switch (c) {
    case Classification::clean: return "clean";
    case Classification::incomplete: return "incomplete";
    case Classification::violation: return "violation";
    case Classification::broken: return "broken";
  }
  return "?";
}

bool violation_only(const std::string& finding) {
  for (std::size_t k = 0; k < kMismatchKinds; ++k) {
    const auto m = static_cast<Mismatch>(k);
    if (finding == to_string(m)) return violation_only(m);
  }
  return false;
}

namespace {

bool is_violation(Verdict v) { return v == Verdict::fail || v == Verdict::crash || v == Verdict::timeout; }

// Whether a gate result takes part in the classification at all.
bool counts(const GateResult& g) { return g.gate != "baseline" && g.counted && !g.out_of_domain; }

// "bounds/memcheck" and the other compute-sanitizer passes (kgate/sanitizer_log.hpp) are the bounds gate's
// deeper pass: judged as the bounds gate is.
bool tolerance_free(const std::string& gate) {
  const std::string base = gate.substr(0, gate.find('/'));
  for (const GateInfo& g : list_gates())
    if (g.name == base) return g.tolerance_free;
  return false;
}

bool ratio_gate(const std::string& gate) { return gate == "oracle" || gate == "shapes" || gate == "accumulation"; }

// Why this counted result makes the kernel broken, or empty.
std::string broken_reason(const GateResult& g) {
  if (!counts(g)) return {};
  if (g.verdict == Verdict::crash) return fmt::format("{}: CRASH (no tolerance explains a dead process)", g.gate);
  if (g.verdict != Verdict::fail) return {};
  if (tolerance_free(g.gate)) {
    // An indeterminate form (a finite value where the oracle is NaN under an injected Inf: some limit values
    // are defensible) and NaN past the oracle's spread (DESIGN.md: "a separate, reported violation") are
    // violations, never broken.
    if (violation_only(g.finding)) return {};
    return fmt::format("{}: FAIL of a tolerance-free gate ({})", g.gate, g.finding.empty() ? "failed" : g.finding);
  }
  if (!ratio_gate(g.gate)) return {};
  if (std::isnan(g.error_ratio)) return fmt::format("{}: FAIL with no bound behind it ({})", g.gate, g.finding);
  if (g.error_ratio >= kBrokenRatio)
    return fmt::format("{}: FAIL at {:.3g}x its bound (>= {:g}x)", g.gate, g.error_ratio, kBrokenRatio);
  return {};
}

bool is_tolerance_finding(const GateResult& g) {
  return g.verdict == Verdict::fail && std::isfinite(g.error_ratio) && g.finding == to_string(Mismatch::value);
}

bool same_magnitude(double a, double b) {
  if (!(a > 0) || !(b > 0)) return false;
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi <= kSameMagnitude * lo && (a >= kBrokenRatio) == (b >= kBrokenRatio);
}

}  // namespace

int Report::exit_code() const {
  bool error = false;
  for (const GateResult& g : gates) {
    if (g.gate == "baseline") continue;
    if (counts(g) && is_violation(g.verdict)) return 1;
    if (g.verdict == Verdict::error) error = true;
  }
  return error ? 2 : 0;
}

Classification classify(const Report& r) {
  Classification c = Classification::clean;
  for (const GateResult& g : r.gates) {
    // A gate that could not run (ERROR) is never held against the candidate, but nor can the kernel be
    // called clean without it: the class says so, below any violation.
    if (counts(g) && g.verdict == Verdict::error && c == Classification::clean) c = Classification::incomplete;
    if (!counts(g) || !is_violation(g.verdict)) continue;
    if (!broken_reason(g).empty()) return Classification::broken;
    c = Classification::violation;
  }
  return c;
}

std::vector<std::string> broken_reasons(const Report& r) {
  std::vector<std::string> out;
  for (const GateResult& g : r.gates)
    if (std::string why = broken_reason(g); !why.empty()) out.push_back(std::move(why));
  return out;
}

void attribute_findings(Report& r) {
  const GateResult* oracle = nullptr;
  const GateResult* determinism = nullptr;
  for (const GateResult& g : r.gates) {
    if (g.gate == "oracle") oracle = &g;
    if (g.gate == "determinism") determinism = &g;
  }
  if (determinism && determinism->verdict == Verdict::fail && determinism->counted)
    for (GateResult& g : r.gates)
      if (g.gate == "freshness" && g.verdict == Verdict::fail && g.finding == kFindingRepeatChanged) {
        g.counted = false;
        g.attributed_to = "determinism";
      }
  if (!oracle || !is_tolerance_finding(*oracle) || oracle->out_of_domain) return;
  for (GateResult& g : r.gates) {
    if (&g == oracle || g.gate == "baseline" || !is_tolerance_finding(g)) continue;
    if (!same_magnitude(g.error_ratio, oracle->error_ratio)) continue;
    g.counted = false;
    g.attributed_to = "oracle";
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(e)));
    }
    done += static_cast<std::size_t>(n);
  }
  // fsync before rename: after a crash the reader sees the old file or the new one, never a torn one.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(e)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot replace {}: {}", path, std::strerror(e)));
  }
}

}  // namespace kgate
