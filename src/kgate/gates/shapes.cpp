// Gate 5, shapes: the kernel is correct beyond the one tested shape. Each dim is swept over 1, small primes,
// sizes one off the usual tile widths (17, 33, 65, 127, 129), nominal and large, inside the contract's ranges
// and grids; then all dims odd at once and all at their smallest. Not tolerance-free (same bound as oracle).
// A clean refusal of a non-nominal shape is REFUSED; a refusal of the nominal shape is a FAIL.
#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

class ShapesGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"shapes", "correct beyond the one tested shape",
            "each dim over 1, small primes, 17, 33, 65, 127, 129, nominal and large (others nominal), then every "
            "dim odd at once and every dim at its smallest; within the oracle gate's bound; refusing a "
            "non-nominal shape is REFUSED",
            false, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    for (const Bindings& b : shape_sweep(ctx.contract())) {
      GateCase g;
      g.label = fmt::format("shape {}", to_string(b));
      g.bindings = b;
      g.seed = ctx.standard_stream(0).key();
      g.run = [](GateContext& cx, const CaseInfo& info) {
        const InputSetPtr in = cx.standard_inputs(info.bindings, 0);
        CaseInfo named = info;
        named.variant = fmt::format("standard set 0 at {}", to_string(info.bindings));
        return run_and_judge(cx, named, *in, cx.dense_inputs(info.bindings), cx.dense_outputs(info.bindings));
      };
      out.push_back(std::move(g));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_shapes_gate() { return std::make_unique<ShapesGate>(); }

}  // namespace kgate::gates
