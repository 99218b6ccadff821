// Gate 2, nan: a NaN in any float input is never masked: every output element the float64 oracle makes NaN
// comes out NaN (tolerance-free). A non-finite value outside the contract's allowed spread, where the
// working-precision reference run is finite, is a separate finding (spread): a violation, never broken.
#include <fmt/format.h>

#include "gates/gates.hpp"
#include "gates/nonfinite.hpp"

namespace kgate::gates {
namespace {

class NanGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"nan", "NaN is never masked",
            fmt::format("one NaN per case in the nominal set: at each of {} sites (the first, the last and a random "
                        "element) of each float input in turn; every output the oracle makes NaN must be NaN; a "
                        "non-finite value outside the contract's spread rule is a separate violation",
                        kSites),
            true, false};
  }

  std::optional<std::string> skip_reason(const GateContext& ctx) const override {
    if (!has_float_output(ctx.contract())) return "no float output can carry NaN";
    for (const TensorSpec& s : ctx.contract().inputs)
      if (injectable(s, Injection::nan)) return std::nullopt;
    return "no float input accepts non-finite values (nonfinite = false or integer dtype)";
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    const Contract& c = ctx.contract();
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      if (!injectable(c.inputs[i], Injection::nan)) continue;
      InjectionPlan plan;
      plan.input = i;
      plan.kind = Injection::nan;
      plan.stream = ctx.gate_stream("nan").child(c.inputs[i].name);
      plan.mode = NonfiniteMode::nan;
      for (plan.site = 0; plan.site < kSites; ++plan.site) out.push_back(injection_case(ctx, plan, "NaN"));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_nan_gate() { return std::make_unique<NanGate>(); }

}  // namespace kgate::gates
