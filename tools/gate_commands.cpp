// `kgate list-gates` and `kgate explain GATE`.
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "commands.hpp"
#include "kgate/verify.hpp"

namespace kgate::cli {
namespace {

// What a FAIL of each gate shows, in the words of the report's evidence block.
const std::map<std::string, std::string>& evidence_text() {
  static const std::map<std::string, std::string> text = {
      {"oracle", "the input distribution and case seed, the shape, the output element whose error is the largest "
                 "multiple of its bound, the float64 oracle's value (rounded to the output dtype) as expected, the "
                 "candidate's as got, and the error as a multiple of the bound"},
      {"nan", "which input received the NaN and where, then the first output element the oracle makes NaN that "
              "came out finite (masking), or a NaN outside the contract's allowed spread; values with raw bits"},
      {"inf", "the injected +-Inf or near-max value and where it went, then the first output whose non-finite class "
              "or sign differs from the oracle cast to the output dtype (an Inf saturated to max, a sign lost)"},
      {"determinism", "which repeat (fresh buffers, other addresses) differed from the first run, the first differing "
                      "element, and both values with their raw bits"},
      {"shapes", "the shape that failed, shrunk to the smallest admissible one that still fails (the shape first "
                 "found is shown too), with the first wrong element, or the crash and what the kernel printed"},
      {"accumulation", "the accumulation pattern and the sizes of the reduced dims, the output element with the "
                       "largest error, and that error against the rigorous bound for the promised precision"},
      {"immutability", "the input that changed, the first changed element, and its bytes before and after"},
      {"coverage", "which poison pattern survived in the output (an element never written), or the first element "
                   "that differs between the two poisoned runs (an element read before it was written), with raw bits"},
      {"bounds", "the buffer and the byte offset of the first overwritten guard byte (negative: before the buffer, "
                 ">= size: after it), with the byte expected and the byte found"},
      {"freshness", "which step (A; B in A's buffers; A's values in new buffers) produced an output that follows the "
                    "other step's inputs, and the first such element"},
      {"stream", "the staged-input or concurrent call whose output was wrong, and its first wrong element"},
      {"layout", "the base offset or strided view the inputs were given, and the first wrong element (a clean "
                 "refusal is REFUSED, not FAIL)"},
      {"baseline", "the trial (seeds derived from 42) and the first element outside allclose(atol=1e-2, "
                   "rtol=1e-2), or the shape mismatch; informational, it never fails a verification"},
  };
  return text;
}

}  // namespace

int run_list_gates() {
  const std::vector<GateInfo> gates = list_gates();
  std::size_t w = 4;
  for (const GateInfo& g : gates) w = std::max(w, g.name.size());
  std::string out = fmt::format("{:>2}  {:<{}}  {:<6}  {}\n", "#", "gate", w, "T-free", "property");
  int number = 0;
  for (const GateInfo& g : gates) {
    const std::string index = g.is_baseline ? "" : std::to_string(++number);
    out += fmt::format("{:>2}  {:<{}}  {:<6}  {}\n", index, g.name, w, g.tolerance_free ? "T-free" : "", g.property);
  }
  out += "\nT-free: tolerance-free (a bitwise or non-finite-pattern comparison; no threshold can explain a failure\n"
         "away). baseline is the field's standard test, kept to measure what it lets through; it is not a gate.\n";
  std::fputs(out.c_str(), stdout);
  return kClean;
}

int run_explain(const std::string& name) {
  const std::vector<GateInfo> gates = list_gates();
  for (const GateInfo& g : gates) {
    if (g.name != name) continue;
    const auto& ev = evidence_text();
    const auto it = ev.find(g.name);
    std::string out = fmt::format("{}{}\n\n", g.name, g.is_baseline ? " (baseline: not a gate)" : "");
    out += fmt::format("property   {}\n", g.property);
    out += fmt::format("method     {}\n", g.method);
    out += fmt::format("tolerance  {}\n",
                       g.tolerance_free ? "tolerance-free: the comparison is bitwise or a non-finite pattern"
                                        : "judged against an error bound derived from the dtypes and the contract "
                                          "(scaled by --tolerance-scale)");
    out += fmt::format("evidence   {}\n",
                       it != ev.end() ? it->second : "gate, case seed, shape, first offending index, expected, got");
    out += fmt::format("\nEvery verdict names the run's seed: kgate verify ... --gates {} --seed SEED reruns it.\n", g.name);
    std::fputs(out.c_str(), stdout);
    return kClean;
  }
  std::vector<std::string> names;
  for (const GateInfo& g : gates) names.push_back(g.name);
  print_error(fmt::format("unknown gate \"{}\" (gates: {})", name, fmt::join(names, ", ")));
  return kBadInput;
}

}  // namespace kgate::cli
