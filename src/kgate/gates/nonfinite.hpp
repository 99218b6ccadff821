// The shared core of the nan and inf gates: plant values at chosen positions of one input of the nominal
// set, run, and hold every output to the oracle's non-finite pattern under the contract's spread rule.
#pragma once

#include "kgate/gate.hpp"

namespace kgate::gates {

// NaN and +-Inf go to an input's first element, its last, and one at random (injection_positions, drawn
// together so the three are distinct), one site per case: with several in one case the oracle's non-finite
// set and the allowed spread are their union, and a random site whose spread covers the first site's would
// hide a kernel that masks the first.
constexpr int kSites = 3;
const char* site_name(int site);  // "first", "last", "random"

struct InjectionPlan {
  std::size_t input = 0;  // contract index
  Injection kind = Injection::nan;
  int site = 0;           // NaN, +-Inf: which of the input's kSites drawn sites; near-max: one random site
  int sign = 0;           // near-max: +1 or -1
  Stream stream{0};       // the input's: every site of one input comes from the same draw
  NonfiniteMode mode = NonfiniteMode::nan;
};

// The case that plants `plan` in the nominal set; its label "`what` in INPUT at first site" or, for near-max,
// "`what` in INPUT". Each case has a seed of its own, derived from the plan's stream.
GateCase injection_case(GateContext& ctx, const InjectionPlan& plan, const std::string& what);

CaseOutcome run_injection(GateContext& ctx, const CaseInfo& info, const InjectionPlan& plan);

// Whether any output is a float (only floats can carry NaN or Inf).
bool has_float_output(const Contract& c);

}  // namespace kgate::gates
