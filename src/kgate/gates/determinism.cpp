// Gate 4, determinism: the same inputs give the same bits, whatever the buffers' addresses. Repeated runs in
// fresh allocations (earlier ones kept alive, so addresses really differ) and once more in the same buffers
// moved 16 bytes along must be bitwise equal. Tolerance-free. SKIP if the contract declares
// deterministic = false.
//
// Why 16 bytes: it keeps the alignment 128-bit vector loads and TMA need, and changes every coarser
// alignment class (32 to 256 bytes), which is where a vectorised loop that peels to an aligned address
// starts grouping its sums differently. A kernel that needs more alignment may refuse that run; a refusal
// of it is ignored, never a failure.
#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr int kRuns = 3;
constexpr std::size_t kShift = 16;  // bytes; a multiple of every element size

class DeterminismGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"determinism", "same inputs, same bits",
            fmt::format("{} runs of the nominal set (and 2 of an odd shape): fresh buffers at different addresses, "
                        "then the same buffers with every tensor moved 16 bytes along (refusing that is allowed); outputs bitwise "
                        "equal",
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
    std::vector<HostArray> first;
    for (int r = 0; r < runs; ++r) {
      // The last run moves the previous run's tensors along their own buffers: the address changes for
      // certain (a fresh allocation may land where an earlier one was), and so does its alignment class.
      const bool shifted = r == runs - 1 && r > 0;
      if (shifted) {
        alive.back()->move_to(kShift, in->arrays);
      } else {
        std::vector<Placement> pin = ctx.dense_inputs(info.bindings), pout = ctx.dense_outputs(info.bindings);
        if (r == runs - 2 && runs > 1)  // room for the move that follows
          for (auto* list : {&pin, &pout})
            for (Placement& p : *list) p.layout.offset = static_cast<std::int64_t>(kShift / size_of(p.layout.dtype));
        alive.push_back(std::make_unique<PlacedCall>(ctx.candidate(), in->arrays, pin, pout, ctx.attrs()));
        if (r == runs - 2 && runs > 1) alive.back()->move_to(0, in->arrays);
      }
      CallResult res = call_once(ctx, *alive.back());
      CaseInfo run_info = info;
      run_info.variant = fmt::format("{}: run {}{}", info.variant, r + 1,
                                     shifted ? " (the previous run's buffers, 16 bytes along)" : " (fresh buffers)");
      // Refusing the shifted placement is refusing an optional placement, not the shape.
      if (auto bad = call_problem(ctx, res, 0, run_info, shifted)) {
        if (bad->verdict == Verdict::refused) continue;
        return *bad;
      }
      std::vector<HostArray> got = std::move(res.results[0].outputs);
      if (first.empty()) {
        first = std::move(got);
        continue;
      }
      for (std::size_t o = 0; o < c.outputs.size(); ++o) {
        const Comparison cmp = compare_bitwise(first[o], got[o]);
        if (cmp.ok) continue;
        Evidence e = mismatch_evidence(run_info, c.outputs[o].name, got[o], nullptr, &first[o], cmp, nullptr);
        e.expected += " (run 1)";
        return failed(std::move(e), &res, std::numeric_limits<double>::quiet_NaN(), "bits differ");
      }
    }
    return CaseOutcome{};
  }
};

}  // namespace

std::unique_ptr<Gate> make_determinism_gate() { return std::make_unique<DeterminismGate>(); }

}  // namespace kgate::gates
