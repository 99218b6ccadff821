// The shared core of the nan and inf gates: plant values at chosen positions of one input of the nominal
// set, run, and hold every output to the oracle's non-finite pattern under the contract's spread rule.
#pragma once

#include "kgate/gate.hpp"

namespace kgate::gates {

struct InjectionPlan {
  std::size_t input = 0;  // contract index
  Injection kind = Injection::nan;
  int count = 1;          // sites (first, last, then random); near-max uses one random site
  int sign = 0;           // near-max: +1 or -1
  Stream stream{0};
  NonfiniteMode mode = NonfiniteMode::nan;
};

CaseOutcome run_injection(GateContext& ctx, const CaseInfo& info, const InjectionPlan& plan);

// Whether any output is a float (only floats can carry NaN or Inf).
bool has_float_output(const Contract& c);

}  // namespace kgate::gates
