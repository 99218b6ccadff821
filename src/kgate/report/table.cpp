// The terminal form of a report: one row per gate, then the evidence of every failure, smallest case first.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kgate/report.hpp"

namespace kgate {
namespace {

const char* colour_of(Verdict v) {
  switch (v) {
    case Verdict::pass: return "\x1b[32m";
    case Verdict::fail: return "\x1b[1;31m";
    case Verdict::crash:
    case Verdict::timeout: return "\x1b[1;35m";
    case Verdict::refused:
    case Verdict::error: return "\x1b[33m";
    case Verdict::skip: return "\x1b[2m";
  }
  return "";
}

std::string verdict_cell(Verdict v, bool colour, std::size_t width) {
  const std::string text = to_string(v);
  const std::string pad(width > text.size() ? width - text.size() : 0, ' ');
  if (!colour) return text + pad;
  return fmt::format("{}{}\x1b[0m{}", colour_of(v), text, pad);
}

std::string seconds_cell(double s) {
  if (s < 10) return fmt::format("{:.3f}s", s);
  return fmt::format("{:.1f}s", s);
}

std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() || end != std::string::npos) out += prefix + line + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string evidence_block(const Evidence& e) {
  std::string s;
  s += fmt::format("  shape     {}\n", e.bindings.empty() ? "(no dims)" : to_string(e.bindings));
  s += fmt::format("  case      {} (case seed {})\n", e.variant, e.seed);
  if (!e.tensor.empty())
    s += fmt::format("  where     {}{}\n", e.tensor, e.index.empty() ? "" : shape_string(e.index));
  if (!e.expected.empty()) s += fmt::format("  expected  {}\n", e.expected);
  if (!e.got.empty()) s += fmt::format("  got       {}\n", e.got);
  if (!e.detail.empty()) s += indent(e.detail, "  | ");
  return s;
}

}  // namespace

std::string to_table(const Report& r, bool colour) {
  std::string s;
  s += fmt::format("kgate {}  op {}  contract {}\n", r.kgate_version, r.op.empty() ? "?" : r.op,
                   r.contract.empty() ? "(built in code)" : r.contract);
  s += fmt::format("candidate {}\noracle    {}\nseed      {}\n\n", r.candidate, r.oracle, r.seed);

  std::size_t name_w = 4;
  for (const GateResult& g : r.gates) name_w = std::max(name_w, g.gate.size());
  const std::size_t verdict_w = 7;
  s += fmt::format("{:<{}}  {:<{}}  {:>5}  {:>8}  {}\n", "gate", name_w, "verdict", verdict_w, "cases", "time",
                   "summary");
  for (const GateResult& g : r.gates) {
    s += fmt::format("{:<{}}  {}  {:>5}  {:>8}  {}\n", g.gate, name_w, verdict_cell(g.verdict, colour, verdict_w),
                     g.cases, seconds_cell(g.seconds), g.summary);
  }
  s += fmt::format("\nresult: {} (exit status {})\n", to_string(classify(r)), r.exit_code());

  for (const GateResult& g : r.gates) {
    if (g.verdict == Verdict::pass || g.verdict == Verdict::skip) continue;
    if (!g.evidence && g.output.empty() && g.verdict == Verdict::refused) continue;
    s += fmt::format("\n{} {}: {}\n", g.gate, verdict_cell(g.verdict, colour, 0), g.summary);
    if (g.evidence) s += evidence_block(*g.evidence);
    if (g.original)
      s += fmt::format("  shrunk from {} ({}{})\n", to_string(g.original->bindings), g.original->tensor,
                       g.original->index.empty() ? "" : shape_string(g.original->index));
    if (!g.output.empty()) s += indent(g.output, "  candidate printed> ");
    s += fmt::format("  reproduce with --gates {} --seed {}\n", g.gate, r.seed);
  }
  return s;
}

}  // namespace kgate
