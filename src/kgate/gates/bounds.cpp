// Gate 9, bounds: the kernel writes nothing outside its buffers. Every buffer sits between guard zones of a
// random pattern; after the call every guard must be intact, at nominal and at odd shapes where tail code
// lives. Tolerance-free. (On a GPU, compute-sanitizer can add memcheck/racecheck; that is the worker's.)
#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

class BoundsGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"bounds", "no write outside the buffers",
            "every buffer between guard zones of a random pattern; every guard intact after a call at nominal "
            "and at odd shapes",
            true, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<Bindings> shapes{ctx.contract().nominal()};
    for (const Bindings& b : odd_shapes(ctx.contract())) shapes.push_back(b);
    std::vector<GateCase> out;
    for (const Bindings& b : shapes) {
      GateCase g;
      g.label = fmt::format("guards around every buffer at {}", to_string(b));
      g.bindings = b;
      g.seed = ctx.standard_stream(0).key();
      g.run = run_case;
      out.push_back(std::move(g));
    }
    return out;
  }

 private:
  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& info) {
    const InputSetPtr in = ctx.standard_inputs(info.bindings, 0);
    PlacedCall p(ctx.candidate(), in->arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
                 ctx.attrs());
    const CallResult r = call_once(ctx, p);
    if (auto bad = call_problem(ctx, r, 0, info)) return *bad;
    if (r.guards.empty()) return CaseOutcome{};
    const GuardViolation& v = r.guards.front();
    const Layout* l = p.layout_of(v.buffer);
    const std::int64_t es = l ? static_cast<std::int64_t>(size_of(l->dtype)) : 1;
    const std::int64_t bytes = l ? l->storage_elements() * es : 0;
    Evidence e = info.evidence();
    e.tensor = p.tensor_of(v.buffer, ctx.contract());
    // The element the stray byte would belong to, counted from the tensor's first element: -1 is just
    // before it, numel just past the end.
    const std::int64_t at = v.offset >= 0 ? v.offset : v.offset - (es - 1);
    e.index = {at / es};
    e.expected = fmt::format("guard byte 0x{:02x}", v.expected);
    e.got = fmt::format("0x{:02x}", v.found);
    e.detail = v.offset < 0
                   ? fmt::format("stray write before the first byte of {}: the guard byte {} bytes before it changed",
                                 e.tensor, -v.offset)
                   : fmt::format("stray write past the end of {} ({} bytes): the guard byte {} bytes after its last "
                                 "byte changed",
                                 e.tensor, bytes, v.offset - bytes);
    if (r.guards.size() > 1) e.detail += fmt::format("; {} guard zones were hit in all", r.guards.size());
    return failed(std::move(e), &r);
  }
};

}  // namespace

std::unique_ptr<Gate> make_bounds_gate() { return std::make_unique<BoundsGate>(); }

}  // namespace kgate::gates
