// Gate 9, bounds: the kernel writes nothing outside its buffers. Every buffer sits between guard zones of a
// random pattern; after the call every guard must be intact, at nominal and at odd shapes where tail code
// lives; and no guard of memory the candidate allocated itself (its returned outputs, its scratch) was hit in
// any call of the run, whichever gate made it (a violation seen after this gate ran is added to its verdict
// by verify()). Tolerance-free. (On a GPU, compute-sanitizer can add memcheck/racecheck; that is the worker's.)
#include <limits>

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
    GateCase owned;
    owned.label = "guards of memory the candidate allocated, over every call of the run so far";
    owned.bindings = ctx.contract().nominal();
    owned.seed = ctx.standard_stream(0).key();
    owned.shrinkable = false;
    owned.run = [](GateContext& cx, const CaseInfo& info) {
      const auto& seen = cx.candidate_owned_violations();
      if (seen.empty()) return CaseOutcome{};
      return candidate_owned_failure(info, seen.front(), seen.size());
    };
    out.push_back(std::move(owned));
    return out;
  }

  static CaseOutcome candidate_owned_failure(const CaseInfo& info, const GateContext::SeenGuard& g, std::size_t count) {
    Evidence e = info.evidence();
    e.tensor = g.violation.region.empty() ? "memory the candidate allocated" : g.violation.region;
    e.index = {g.violation.offset};
    e.expected = fmt::format("guard byte 0x{:02x}", g.violation.expected);
    e.got = fmt::format("0x{:02x}", g.violation.found);
    e.detail = fmt::format("stray write {} {} (byte offset {} from its first byte), seen during the {} gate; {} "
                           "violation(s) in candidate-owned memory in all",
                           g.violation.offset < 0 ? "before" : "past the end of", e.tensor, g.violation.offset,
                           g.gate.empty() ? "?" : g.gate, count);
    return failed(std::move(e), nullptr, std::numeric_limits<double>::quiet_NaN(), "guard overwritten");
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
    if (v.buffer == kCandidateOwnedBuffer) return candidate_owned_failure(info, {v, "bounds"}, r.guards.size());
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
    return failed(std::move(e), &r, std::numeric_limits<double>::quiet_NaN(), "guard overwritten");
  }
};

}  // namespace

std::unique_ptr<Gate> make_bounds_gate() { return std::make_unique<BoundsGate>(); }

std::optional<GateResult> late_candidate_owned_violation(const GateContext& ctx, const GateResult& bounds,
                                                         std::size_t seen_when_bounds_ran) {
  const auto& seen = ctx.candidate_owned_violations();
  if (seen.size() <= seen_when_bounds_ran || bounds.verdict == Verdict::fail || bounds.verdict == Verdict::crash)
    return std::nullopt;
  CaseInfo info{"bounds", ctx.run_seed(), ctx.contract().nominal(), "guards of memory the candidate allocated, in a later gate's call"};
  const CaseOutcome o = BoundsGate::candidate_owned_failure(info, seen[seen_when_bounds_ran], seen.size());
  GateResult r = bounds;
  r.verdict = Verdict::fail;
  r.evidence = o.evidence;
  r.finding = o.finding;
  r.summary = fmt::format("{}: {} {} (seen during the {} gate)", info.variant, o.evidence->tensor, o.evidence->got,
                          seen[seen_when_bounds_ran].gate);
  return r;
}

}  // namespace kgate::gates
