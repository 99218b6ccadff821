// Gate 6, accumulation: the kernel accumulates at the precision it promises. Long reductions of constant or
// same-sign terms (an fp16 partial sum overflows, a bf16 one stalls, an fp32 one is exact or nearly) judged
// against the rigorous bound for a sum of N positive terms, gamma_N |ref| plus a few output ulps (plus
// gamma_r(u_op) for an output that declares r operand roundings, `operands`). Not tolerance-free, but the bound
// is a proof, not a guess. SKIP when no output reduces over any dim.
#include <cmath>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

class AccumulationGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"accumulation", "accumulates at the promised precision",
            "the contract's accumulation patterns (default: every float input constant 1) with reduced dims at "
            "their large size; each element within gamma_{N+4}(u_w) |ref| + 4 ulps of the output dtype (an output "
            "declaring `operands`: (gamma_r(u_op) + gamma_{N+4}(u_w) + their product) |ref| + 4 ulps)",
            false, false};
  }

  std::optional<std::string> skip_reason(const GateContext& ctx) const override {
    for (const TensorSpec& o : ctx.contract().outputs)
      if (!o.reduced.empty()) return std::nullopt;
    return "no output reduces over a dim (no `reduced` in the contract)";
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    GateCase g;
    g.bindings = accumulation_bindings(ctx.contract());
    const Stream stream = ctx.gate_stream("accumulation");
    g.seed = stream.key();
    g.label = ctx.contract().accumulation.inputs.empty() ? "every float input constant 1" : "the contract's patterns";
    g.run = [stream](GateContext& cx, const CaseInfo& info) { return run_case(cx, info, stream); };
    return {std::move(g)};
  }

 private:
  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& base, Stream stream) {
    const Contract& c = ctx.contract();
    CaseInfo info = base;
    info.variant = fmt::format("{} at {}", base.variant, to_string(base.bindings));
    std::vector<Tolerance> tol;
    for (const TensorSpec& o : c.outputs) {
      const DType op = o.operands ? o.operands->precision : DType::f32;
      const int r = o.operands ? o.operands->roundings : 0;
      tol.push_back(accumulation_tolerance(o.dtype, c.working_precision, reduction_size(o, info.bindings),
                                           ctx.tolerance_scale() * o.tolerance_scale, op, r));
      if (!o.reduced.empty() && std::isinf(tol.back().rel)) {
        CaseOutcome skip;
        skip.verdict = Verdict::skip;
        skip.message =
            r > 0 ? fmt::format("{}: N = {} terms at {} working precision, {} operand roundings at {}: (N+4) u_w >= 1 "
                                "or r u_op >= 1, no rigorous bound exists",
                                o.name, reduction_size(o, info.bindings), name_of(c.working_precision), r, name_of(op))
                  : fmt::format("N = {} terms at {} working precision: (N+4) u_w >= 1, no rigorous bound exists",
                                reduction_size(o, info.bindings), name_of(c.working_precision));
        return skip;
      }
    }
    const InputSetPtr in = ctx.custom_inputs(info.bindings, stream.key(), info.variant,
                                             accumulation_inputs(c, info.bindings, stream));
    DenseRun run = run_dense(ctx, info, *in);
    if (run.problem) return label_domain(ctx, *run.problem, *in);
    const OracleResultPtr oracle = ctx.oracle(*in);
    return label_domain(ctx, judge_within(ctx, info, run.outputs, *in, *oracle, tol, &run.call), *in);
  }
};

}  // namespace

std::unique_ptr<Gate> make_accumulation_gate() { return std::make_unique<AccumulationGate>(); }

}  // namespace kgate::gates
