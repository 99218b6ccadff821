// Gate 3, inf: +-Inf and overflow are never masked or saturated: where the float64 oracle is +-Inf or beyond
// twice the output dtype's max, the kernel returns that Inf; where the oracle is comfortably finite (below
// half of max) and outside the allowed spread, the kernel stays finite (or is non-finite as the working-precision
// reference run is: the operator's own overflow at that precision). Where the oracle is NaN (Inf - Inf,
// 0 * Inf: the operator has no value, and evaluation order decides) nothing is judged. Tolerance-free.
#include <fmt/format.h>

#include "gates/gates.hpp"
#include "gates/nonfinite.hpp"

namespace kgate::gates {
namespace {

class InfGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"inf", "+-Inf and overflow are never masked or saturated",
            fmt::format("one value per case, into one input at a time (so two overflowing terms never meet in one "
                        "output): an Inf at each of {} sites (+Inf at the first element, -Inf at the last, either "
                        "sign at a random one; an input of one sign gets that sign), and one value in [max/2, max] "
                        "of the input dtype of each sign where overflow = true; oracle +-Inf or |oracle| > 2 max must be that Inf (NaN only if inf_may_become_nan), "
                        "oracle below max/2 and outside the spread must be finite, oracle NaN (an indeterminate "
                        "form) is not judged",
                        kSites),
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
    auto add = [&](std::size_t i, Injection kind, int sign, const std::string& label, int site) {
      InjectionPlan plan;
      plan.input = i;
      plan.kind = kind;
      plan.site = site;
      plan.sign = sign;
      plan.stream = ctx.gate_stream("inf").child(c.inputs[i].name).child(label);
      plan.mode = NonfiniteMode::inf;
      out.push_back(injection_case(ctx, plan, label));
    };
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      if (!injectable(c.inputs[i], Injection::infinity)) continue;
      for (int site = 0; site < kSites; ++site) add(i, Injection::infinity, 0, "+-Inf", site);
      if (injectable(c.inputs[i], Injection::near_max)) {
        add(i, Injection::near_max, +1, "+near-max", 0);
        add(i, Injection::near_max, -1, "-near-max", 0);
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_inf_gate() { return std::make_unique<InfGate>(); }

}  // namespace kgate::gates
