#include "gates/nonfinite.hpp"

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
  const std::vector<double> values =
      injection_values(plan.kind, spec.dtype, sites.size(), plan.stream.child("value"), plan.sign);
  for (std::size_t k = 0; k < sites.size(); ++k) target.set(sites[k], values[k]);

  CaseInfo info = base_info;
  std::vector<std::string> what;
  for (std::size_t k = 0; k < sites.size(); ++k)
    what.push_back(fmt::format("{}={}", shape_string(unravel(sites[k], target.shape())), format_value(target.get(sites[k]), spec.dtype)));
  info.variant = fmt::format("{} in {} at {}", to_string(plan.kind), spec.name, fmt::join(what, ", "));

  const InputSetPtr in = ctx.custom_inputs(info.bindings, plan.stream.key(), info.variant, std::move(arrays));
  DenseRun run = run_dense(ctx, info, *in);
  if (run.problem) return *run.problem;
  const OracleResultPtr oracle = ctx.oracle(*in);
  for (std::size_t o = 0; o < c.outputs.size(); ++o) {
    const TensorSpec& out = c.outputs[o];
    const Reference& ref = oracle->refs[o];
    const std::vector<std::uint8_t> allowed =
        allowed_spread(c, out, ref.shape, nonfinite_seeds(ref, plan.mode), in->arrays);
    const Comparison cmp = check_nonfinite(run.outputs[o], ref, allowed, plan.mode, c.spread.inf_may_become_nan);
    if (cmp.ok) continue;
    Evidence e = mismatch_evidence(info, out.name, run.outputs[o], &ref, nullptr, cmp, nullptr);
    e.detail = spread_text(c.spread) + "\n" + e.detail;
    return failed(std::move(e), &run.call);
  }
  return CaseOutcome{};
}

}  // namespace kgate::gates
