// Verdict names, the exit status, the audit's classification and the atomic writer.
#include "kgate/report.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

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
    case Classification::violation: return "violation";
    case Classification::broken: return "broken beyond tolerance";
  }
  return "?";
}

namespace {
bool is_violation(Verdict v) { return v == Verdict::fail || v == Verdict::crash || v == Verdict::timeout; }
bool counts(const GateResult& g) { return g.gate != "baseline"; }
}  // namespace

int Report::exit_code() const {
  bool error = false;
  for (const GateResult& g : gates) {
    if (!counts(g)) continue;
    if (is_violation(g.verdict)) return 1;
    if (g.verdict == Verdict::error) error = true;
  }
  return error ? 2 : 0;
}

Classification classify(const Report& r) {
  Classification c = Classification::clean;
  for (const GateResult& g : r.gates) {
    if (!counts(g) || !is_violation(g.verdict)) continue;
    // A failure with no bound behind it (NaN ratio: a tolerance-free check, a crash, a refusal of the
    // nominal shape) or far past its bound cannot be explained away by any threshold.
    if (g.verdict != Verdict::fail || std::isnan(g.error_ratio) || g.error_ratio >= kBrokenRatio)
      return Classification::broken;
    c = Classification::violation;
  }
  return c;
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
