// Gate 1, oracle: the kernel agrees with the float64 oracle at the nominal shape, for several seeds and
// several input distributions (never only the contract's default). Not tolerance-free: every element is
// held to the bound derived from the dtypes, the working precision and the reduction size (compare.hpp).
#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr int kSeedsPerDistribution = 2;

class OracleGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"oracle", "agrees with the float64 oracle at the nominal shape",
            fmt::format("{} seeds x 4 input distributions (contract domain, wide magnitudes, small magnitudes, "
                        "uniform) at nominal; each element within 4 u_d |ref| + 8 u_w sqrt(N) rms(ref) + tiny_d",
                        kSeedsPerDistribution),
            false, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    const Stream gs = ctx.gate_stream("oracle");
    for (Distribution d : kAllDistributions) {
      for (int s = 0; s < kSeedsPerDistribution; ++s) {
        // The contract-domain sets are the standard sets every other gate also uses, so their oracle
        // outputs are computed once for the whole run.
        const bool standard = d == Distribution::contract;
        const Stream stream = standard ? ctx.standard_stream(s) : gs.child(to_string(d)).child(static_cast<std::uint64_t>(s));
        GateCase c;
        c.label = fmt::format("{} inputs, seed {}", to_string(d), s);
        c.bindings = ctx.contract().nominal();
        c.seed = stream.key();
        c.run = [=](GateContext& cx, const CaseInfo& info) {
          const InputSetPtr in = standard ? cx.standard_inputs(info.bindings, s)
                                          : cx.inputs(info.bindings, stream, d, info.variant);
          return run_and_judge(cx, info, *in, cx.dense_inputs(info.bindings), cx.dense_outputs(info.bindings));
        };
        out.push_back(std::move(c));
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_oracle_gate() { return std::make_unique<OracleGate>(); }

}  // namespace kgate::gates
