// Gate 7, immutability: the kernel never writes to its inputs. Every input buffer is read back byte for byte
// after the call, at nominal and at an odd shape. Tolerance-free.
#include <algorithm>
#include <cstring>

#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

class ImmutabilityGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"immutability", "inputs are not modified",
            "every input buffer compared byte for byte before and after a call, at nominal and an odd shape", true,
            false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<Bindings> shapes{ctx.contract().nominal()};
    for (const Bindings& b : odd_shapes(ctx.contract())) shapes.push_back(b);
    if (shapes.size() > 2) shapes.resize(2);
    std::vector<GateCase> out;
    for (const Bindings& b : shapes) {
      GateCase g;
      g.label = fmt::format("standard set 0 at {}", to_string(b));
      g.bindings = b;
      g.seed = ctx.standard_stream(0).key();
      g.run = run_case;
      out.push_back(std::move(g));
    }
    return out;
  }

 private:
  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& info) {
    const Contract& c = ctx.contract();
    const InputSetPtr in = ctx.standard_inputs(info.bindings, 0);
    PlacedCall p(ctx.candidate(), in->arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
                 ctx.attrs());
    const CallResult r = call_once(ctx, p);
    if (auto bad = call_problem(ctx, r, 0, info)) return *bad;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      const std::vector<std::byte> after = p.input_payload(i);
      const std::span<const std::byte> before = p.input_payload_written(i);
      if (std::equal(after.begin(), after.end(), before.begin(), before.end())) continue;
      const std::size_t es = size_of(c.inputs[i].dtype);
      std::size_t byte = 0;
      while (byte < after.size() && after[byte] == before[byte]) ++byte;
      std::size_t changed = 0;
      for (std::size_t k = 0; k + es <= after.size(); k += es)
        changed += std::memcmp(after.data() + k, before.data() + k, es) != 0;
      const std::int64_t elem = static_cast<std::int64_t>(byte / es);
      HostArray was(c.inputs[i].dtype, {1}), now(c.inputs[i].dtype, {1});
      std::memcpy(was.data(), before.data() + elem * static_cast<std::int64_t>(es), es);
      std::memcpy(now.data(), after.data() + elem * static_cast<std::int64_t>(es), es);
      Evidence e = info.evidence();
      e.tensor = c.inputs[i].name;
      e.index = unravel(elem, in->arrays[i].shape());
      e.expected = format_element(was, 0, true) + " (as written before the call)";
      e.got = format_element(now, 0, true);
      e.detail = fmt::format("the kernel wrote {} of the {} elements of input {}", changed,
                             in->arrays[i].numel(), c.inputs[i].name);
      return failed(std::move(e), &r, std::numeric_limits<double>::quiet_NaN(), "input modified");
    }
    return CaseOutcome{};
  }
};

}  // namespace

std::unique_ptr<Gate> make_immutability_gate() { return std::make_unique<ImmutabilityGate>(); }

}  // namespace kgate::gates
