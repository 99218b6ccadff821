// baseline (not a gate): the field's standard test, mirrored so kgate can measure what it lets through.
// Five trials at the nominal shape, trial seeds drawn from a generator seeded with 42 (so, as in the public
// harnesses, the inputs are predictable whatever the run's seed), allclose(atol=1e-2, rtol=1e-2) against the
// oracle; the output shape is equal by construction under destination passing.
#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr int kTrials = 5;
constexpr double kAtol = 1e-2, kRtol = 1e-2;

class BaselineGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"baseline", "passes the field's standard test (not a gate)",
            "5 trials at nominal, trial seeds drawn from a generator seeded with 42, allclose(atol=1e-2, "
            "rtol=1e-2) against the oracle",
            false, true};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    Rng trial_seeds(Stream(42).child("baseline"));
    for (int t = 0; t < kTrials; ++t) {
      const std::uint64_t seed = trial_seeds.next_bits();
      GateCase g;
      g.label = fmt::format("trial {} (seed {})", t + 1, seed);
      g.bindings = ctx.contract().nominal();
      g.seed = seed;
      g.shrinkable = false;  // the field's test runs at one shape; so does its mirror
      g.run = [seed](GateContext& cx, const CaseInfo& info) {
        const InputSetPtr in = cx.inputs(info.bindings, Stream(seed), Distribution::contract, info.variant);
        DenseRun run = run_dense(cx, info, *in);
        if (run.problem) return *run.problem;
        const OracleResultPtr oracle = cx.oracle(*in);
        CaseOutcome o;
        o.error_ratio = 0.0;
        for (std::size_t k = 0; k < cx.contract().outputs.size(); ++k) {
          const Comparison cmp = compare_allclose(run.outputs[k], oracle->refs[k], kRtol, kAtol);
          o.error_ratio = std::max(o.error_ratio, cmp.max_ratio);
          if (cmp.ok) continue;
          Evidence e = mismatch_evidence(info, cx.contract().outputs[k].name, run.outputs[k], &oracle->refs[k],
                                         nullptr, cmp, nullptr);
          e.detail = fmt::format("not allclose(atol={}, rtol={})\n{}", kAtol, kRtol, e.detail);
          return failed(std::move(e), &run.call, cmp.max_ratio);
        }
        return o;
      };
      out.push_back(std::move(g));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_baseline_gate() { return std::make_unique<BaselineGate>(); }

}  // namespace kgate::gates
