#include "gates/nonfinite.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"

namespace kgate::gates {

bool has_float_output(const Contract& c) {
  for (const TensorSpec& o : c.outputs)
    if (is_float(o.dtype)) return true;
  return false;
}

namespace {

std::string spread_text(const SpreadRule& r) {
  if (r.exact || r.dim.empty()) return "spread rule: exactly the oracle's non-finite set";
  const char* dir = r.direction == SpreadRule::Direction::forward ? "forward"
                    : r.direction == SpreadRule::Direction::backward ? "backward" : "both ways";
  return fmt::format("spread rule: along {} {}{}{}", r.dim, dir, r.block > 0 ? fmt::format(", blocks of {}", r.block) : "",
                     r.segments.empty() ? "" : fmt::format(", within segments of {}", r.segments));
}

}  // namespace

CaseOutcome run_injection(GateContext& ctx, const CaseInfo& base_info, const InjectionPlan& plan) {
  const Contract& c = ctx.contract();
  const TensorSpec& spec = c.inputs.at(plan.input);
  std::vector<HostArray> arrays = ctx.standard_inputs(base_info.bindings, 0)->arrays;
  HostArray& target = arrays[plan.input];
  if (target.numel() == 0) return CaseOutcome{};  // nothing to plant at this shape
  std::vector<std::int64_t> sites;
  if (plan.kind == Injection::near_max) {
    sites.push_back(plan.stream.child("site").integer(0, 0, target.numel() - 1));
  } else {
    sites = injection_positions(target.numel(), plan.stream.child("site"), plan.count);
  }
  std::vector<double> values =
      injection_values(plan.kind, spec.dtype, sites.size(), plan.stream.child("value"), plan.sign);
  // Keep what every draw of the source shares: sites off structural zeros, a random Inf's sign to the
  // input's sign, the transposed partner of a symmetric input planted too.
  const InputStructure& st = ctx.structure(base_info.bindings).at(plan.input);
  for (std::size_t k = 0; k < sites.size(); ++k) {
    if (!st.zeros.empty()) {
      for (std::int64_t step = 0; step < target.numel() && st.zeros[static_cast<std::size_t>(sites[k])]; ++step)
        sites[k] = (sites[k] + 1) % target.numel();
    }
    if (plan.kind == Injection::infinity && plan.sign == 0) {
      if (st.sign == SignStructure::positive || st.sign == SignStructure::nonnegative) values[k] = std::fabs(values[k]);
      if (st.sign == SignStructure::negative || st.sign == SignStructure::nonpositive) values[k] = -std::fabs(values[k]);
    }
  }
  for (std::size_t k = 0; k < sites.size(); ++k) {
    target.set(sites[k], values[k]);
    if (st.symmetric) {
      Shape idx = unravel(sites[k], target.shape());
      std::swap(idx[idx.size() - 1], idx[idx.size() - 2]);
      target.set(ravel(idx, target.shape()), values[k]);
    }
  }

  CaseInfo info = base_info;
  std::vector<std::string> what;
  for (std::size_t k = 0; k < sites.size(); ++k)
    what.push_back(fmt::format("{}={}", shape_string(unravel(sites[k], target.shape())), format_value(target.get(sites[k]), spec.dtype)));
  info.variant = fmt::format("{} in {} at {}", to_string(plan.kind), spec.name, fmt::join(what, ", "));

  const InputSetPtr in = ctx.custom_inputs(info.bindings, plan.stream.key(), info.variant, std::move(arrays));
  DenseRun run = run_dense(ctx, info, *in);
  if (run.problem) return label_domain(ctx, *run.problem, *in);
  const OracleResultPtr oracle = ctx.oracle(*in);
  CaseOutcome pass;
  for (std::size_t o = 0; o < c.outputs.size(); ++o) {
    const TensorSpec& out = c.outputs[o];
    const Reference& ref = oracle->refs[o];
    const std::vector<std::uint8_t> allowed =
        allowed_spread(c, out, ref.shape, nonfinite_seeds(ref, plan.mode), in->arrays);
    const Comparison cmp = check_nonfinite(run.outputs[o], ref, allowed, plan.mode, c.spread.inf_may_become_nan);
    pass.add_excused(cmp);
    if (cmp.ok) continue;
    Evidence e = mismatch_evidence(info, out.name, run.outputs[o], &ref, nullptr, cmp, nullptr);
    e.detail = spread_text(c.spread) + "\n" + e.detail;
    if (cmp.kind == Mismatch::indeterminate)
      e.detail = "an ordinary number where the operator has no value (the oracle is NaN: Inf - Inf, 0 * Inf, "
                 "Inf / Inf under the injected Inf)\n" + e.detail;
    CaseOutcome f = failed(std::move(e), &run.call, std::numeric_limits<double>::quiet_NaN(), to_string(cmp.kind));
    for (std::size_t k = 0; k < kExcuseKinds; ++k) f.excused[k] = pass.excused[k];
    return label_domain(ctx, std::move(f), *in);
  }
  return pass;
}

}  // namespace kgate::gates
