// Helpers every gate uses: calling the candidate, turning a call that produced nothing into a verdict, and
// judging outputs against the oracle with evidence a person can check.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kgate/gate.hpp"

namespace kgate::gates {

bool is_nominal(const GateContext& ctx, const Bindings& b);

// One invocation through the candidate target.
CallResult call_once(GateContext& ctx, const PlacedCall& p, std::vector<std::byte> poison = {},
                     StreamMode mode = StreamMode::own_stream);

// A call that did not complete with KGATE_OK as a case outcome: CRASH, TIMEOUT, REFUSED (a clean refusal of
// something optional: any shape but the nominal one, or an optional variant such as a misaligned base), or
// FAIL (a refusal of what the contract requires, KGATE_ERROR, an unknown status). nullopt when it is fine.
std::optional<CaseOutcome> call_problem(const GateContext& ctx, const CallResult& r, std::size_t k,
                                        const CaseInfo& info, bool optional_variant = false);

CaseOutcome failed(Evidence e, const CallResult* r = nullptr, double ratio = std::numeric_limits<double>::quiet_NaN());

// Evidence for the first offending element of one output: expected and got as their dtype prints them, the
// bound and ratio where a bound applies, how many elements offend, and the neighbourhood.
Evidence mismatch_evidence(const CaseInfo& info, const std::string& tensor, const HostArray& got,
                           const Reference* ref, const HostArray* expected_bits, const Comparison& c,
                           const Tolerance* tol);

// Every output against the oracle within its bound (compare_within); PASS carries the worst ratio.
CaseOutcome judge_within(GateContext& ctx, const CaseInfo& info, const std::vector<HostArray>& got,
                         const OracleResult& oracle, const std::vector<Tolerance>& tol, const CallResult* r = nullptr);

// Places `in` as the placements say, calls once, and judges every output against the oracle of the values.
CaseOutcome run_and_judge(GateContext& ctx, const CaseInfo& info, const InputSet& in, const std::vector<Placement>& pin,
                          const std::vector<Placement>& pout, bool optional_variant = false);

// Places `in` densely, calls once; outputs, or the outcome that ended the case.
struct DenseRun {
  std::optional<CaseOutcome> problem;
  CallResult call;
  std::vector<HostArray> outputs;
};
DenseRun run_dense(GateContext& ctx, const CaseInfo& info, const InputSet& in, std::vector<std::byte> poison = {});

}  // namespace kgate::gates
