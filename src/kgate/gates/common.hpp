// Helpers every gate uses: calling the candidate, turning a call that produced nothing into a verdict, and
// judging outputs against the oracle with evidence a person can check.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kgate/gate.hpp"

namespace kgate::gates {

bool is_nominal(const GateContext& ctx, const Bindings& b);

// A failing (or crashing) outcome on perturbed inputs that leave the source's structure: labelled
// out_of_domain with why in its evidence. Passes and errors are returned unchanged.
CaseOutcome label_domain(GateContext& ctx, CaseOutcome o, const InputSet& perturbed);

// One invocation through the candidate target.
CallResult call_once(GateContext& ctx, const PlacedCall& p, std::vector<std::byte> poison = {},
                     StreamMode mode = StreamMode::own_stream);

// A call that did not complete with KGATE_OK as a case outcome: CRASH, TIMEOUT, REFUSED (a clean refusal of
// something optional: any shape but the nominal one, or an optional variant such as a misaligned base), or
// FAIL (a refusal of what the contract requires, KGATE_ERROR, an unknown status). nullopt when it is fine.
std::optional<CaseOutcome> call_problem(const GateContext& ctx, const CallResult& r, std::size_t k,
                                        const CaseInfo& info, bool optional_variant = false);

// finding: what kind of failure (GateResult::finding), e.g. "guard overwritten".
CaseOutcome failed(Evidence e, const CallResult* r = nullptr, double ratio = std::numeric_limits<double>::quiet_NaN(),
                   std::string finding = {});

// Evidence for the first offending element of one output: expected and got as their dtype prints them, the
// bound and ratio where a bound applies, how many elements offend, and the neighbourhood.
Evidence mismatch_evidence(const CaseInfo& info, const std::string& tensor, const HostArray& got,
                           const Reference* ref, const HostArray* expected_bits, const Comparison& c,
                           const Tolerance* tol);

// Every output against the oracle within its bound (compare_within); PASS carries the worst ratio. Where the
// oracle has reference runs (of `in`), the working-precision run adds its reference term to every bound and
// excuses non-finite values it shares; a FAIL is labelled with the lower precision it matches.
CaseOutcome judge_within(GateContext& ctx, const CaseInfo& info, const std::vector<HostArray>& got, const InputSet& in,
                         const OracleResult& oracle, const std::vector<Tolerance>& tol, const CallResult* r = nullptr);

// The nearest lower precision (reference runs after the first) whose run output k matches, or empty: the
// kernel's output is as close to that run as the run is to the oracle (max |got - run| <= e_run + floor, the
// same non-finite classes); the closest relative to e_run wins.
std::string precision_label(const ReferenceResult& refs, std::size_t k, const HostArray& got, const Reference& ref);

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
