// Gate 3, inf: +-Inf and overflow are never masked or saturated: where the float64 oracle is +-Inf or beyond
// twice the output dtype's max, the kernel returns that Inf; where the oracle is comfortably finite (below
// half of max) and outside the allowed spread, the kernel stays finite. Where the oracle is NaN (Inf - Inf,
// 0 * Inf: the operator has no value, and evaluation order decides) nothing is judged. Tolerance-free.
#include <fmt/format.h>

#include "gates/gates.hpp"
#include "gates/nonfinite.hpp"

namespace kgate::gates {
namespace {

constexpr int kInfSites = 3;

class InfGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"inf", "+-Inf and overflow are never masked or saturated",
            "into one input at a time (so two overflowing terms never meet in one output): +-Inf at 3 sites, "
            "and one value in [max/2, max] of the input dtype of each sign where overflow = true; oracle +-Inf "
            "or |oracle| > 2 max must be that Inf (NaN only if inf_may_become_nan), oracle below max/2 and "
            "outside the spread must be finite, oracle NaN (an indeterminate form) is not judged",
            true, false};
  }

  std::optional<std::string> skip_reason(const GateContext& ctx) const override {
    if (!has_float_output(ctx.contract())) return "no float output can carry Inf";
    for (const TensorSpec& s : ctx.contract().inputs)
      if (injectable(s, Injection::infinity)) return std::nullopt;
    return "no float input accepts non-finite values (nonfinite = false or integer dtype)";
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    const Contract& c = ctx.contract();
    auto add = [&](std::size_t i, Injection kind, int sign, const std::string& label) {
      InjectionPlan plan;
      plan.input = i;
      plan.kind = kind;
      plan.count = kind == Injection::infinity ? kInfSites : 1;
      plan.sign = sign;
      plan.stream = ctx.gate_stream("inf").child(c.inputs[i].name).child(label);
      plan.mode = NonfiniteMode::inf;
      GateCase g;
      g.label = fmt::format("{} in {}", label, c.inputs[i].name);
      g.bindings = c.nominal();
      g.seed = plan.stream.key();
      g.run = [plan](GateContext& cx, const CaseInfo& info) { return run_injection(cx, info, plan); };
      out.push_back(std::move(g));
    };
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      if (!injectable(c.inputs[i], Injection::infinity)) continue;
      add(i, Injection::infinity, 0, "+-Inf");
      if (injectable(c.inputs[i], Injection::near_max)) {
        add(i, Injection::near_max, +1, "+near-max");
        add(i, Injection::near_max, -1, "-near-max");
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_inf_gate() { return std::make_unique<InfGate>(); }

}  // namespace kgate::gates
