// Gate 4, determinism: the same inputs give the same bits, whatever the buffers' addresses. Repeated runs in
// fresh allocations (earlier ones kept alive, so addresses really differ; one at a 256-byte offset, an
// alignment any kernel accepts) must be bitwise equal. Tolerance-free. SKIP if deterministic = false.
#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr int kRuns = 3;

class DeterminismGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"determinism", "same inputs, same bits",
            fmt::format("{} runs of the nominal set (and 2 of an odd shape) in fresh buffers at different addresses, "
                        "one 256 bytes into its buffer; outputs bitwise equal",
                        kRuns),
            true, false};
  }

  std::optional<std::string> skip_reason(const GateContext& ctx) const override {
    if (!ctx.contract().deterministic) return "the contract declares deterministic = false";
    return std::nullopt;
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    auto add = [&](const Bindings& b, int runs, const std::string& label) {
      GateCase g;
      g.label = label;
      g.bindings = b;
      g.seed = ctx.standard_stream(0).key();
      g.run = [runs](GateContext& cx, const CaseInfo& info) { return run_case(cx, info, runs); };
      out.push_back(std::move(g));
    };
    add(ctx.contract().nominal(), kRuns, fmt::format("{} runs of the nominal set", kRuns));
    const std::vector<Bindings> odd = odd_shapes(ctx.contract());
    if (!odd.empty()) add(odd.front(), 2, "2 runs at an odd shape");
    return out;
  }

 private:
  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& info, int runs) {
    const InputSetPtr in = ctx.standard_inputs(info.bindings, 0);
    const Contract& c = ctx.contract();
    std::vector<std::unique_ptr<PlacedCall>> alive;  // held so every run gets new addresses
    std::vector<std::vector<HostArray>> results;
    for (int r = 0; r < runs; ++r) {
      const bool shifted = r == runs - 1 && r > 0;
      // Every tensor 256 bytes in: a new address in the same alignment class as a fresh allocation.
      std::vector<Placement> pin = ctx.dense_inputs(info.bindings), pout = ctx.dense_outputs(info.bindings);
      for (auto* list : {&pin, &pout})
        for (Placement& p : *list)
          p.layout.offset = shifted ? static_cast<std::int64_t>(256 / size_of(p.layout.dtype)) : 0;
      alive.push_back(std::make_unique<PlacedCall>(ctx.candidate(), in->arrays, pin, pout, ctx.attrs()));
      CallResult res = call_once(ctx, *alive.back());
      CaseInfo run_info = info;
      run_info.variant = fmt::format("{}: run {}{}", info.variant, r + 1, shifted ? " (256 bytes into its buffers)" : "");
      // A refusal of the offset run is a refusal of an optional placement, not of the shape.
      if (auto bad = call_problem(ctx, res, 0, run_info, shifted)) {
        if (bad->verdict == Verdict::refused) continue;
        return *bad;
      }
      results.push_back(std::move(res.results[0].outputs));
      if (results.size() < 2) continue;
      for (std::size_t o = 0; o < c.outputs.size(); ++o) {
        const Comparison cmp = compare_bitwise(results.front()[o], results.back()[o]);
        if (cmp.ok) continue;
        Evidence e = mismatch_evidence(run_info, c.outputs[o].name, results.back()[o], nullptr, &results.front()[o],
                                       cmp, nullptr);
        e.expected += " (run 1)";
        return failed(std::move(e), &res);
      }
    }
    return CaseOutcome{};
  }
};

}  // namespace

std::unique_ptr<Gate> make_determinism_gate() { return std::make_unique<DeterminismGate>(); }

}  // namespace kgate::gates
