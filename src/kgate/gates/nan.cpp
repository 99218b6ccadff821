// Gate 2, nan: a NaN in any float input is never masked: every output element the float64 oracle makes NaN
// comes out NaN, and no non-finite value appears outside the contract's allowed spread. Tolerance-free.
#include <fmt/format.h>

#include "gates/gates.hpp"
#include "gates/nonfinite.hpp"

namespace kgate::gates {
namespace {

constexpr int kSites = 3;

class NanGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"nan", "NaN is never masked",
            fmt::format("NaN planted at {} sites (first, last, random) of one float input at a time in the nominal "
                        "set; every output the oracle makes NaN must be NaN; a non-finite value outside the "
                        "contract's spread rule is a separate violation",
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
      plan.count = kSites;
      plan.stream = ctx.gate_stream("nan").child(c.inputs[i].name);
      plan.mode = NonfiniteMode::nan;
      GateCase g;
      g.label = fmt::format("NaN in {}", c.inputs[i].name);
      g.bindings = c.nominal();
      g.seed = plan.stream.key();
      g.run = [plan](GateContext& cx, const CaseInfo& info) { return run_injection(cx, info, plan); };
      out.push_back(std::move(g));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_nan_gate() { return std::make_unique<NanGate>(); }

}  // namespace kgate::gates
