// Gate 8, coverage: every output element is written, and none is read before it is written. Outputs are
// pre-filled with two different poison patterns (all 0xff bytes: NaN in every float dtype; then random
// bytes drawn from the case seed); the results must be bitwise identical and free of the poison.
// Tolerance-free. (For deterministic = false only poison-freedom is judged.)
#include <cmath>

#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

class CoverageGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"coverage", "every output element is written, and none is read before written",
            "outputs pre-filled with two poison patterns (0xff bytes, then random bytes) at nominal and an odd "
            "shape; results bitwise identical and poison-free",
            true, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<Bindings> shapes{ctx.contract().nominal()};
    for (const Bindings& b : odd_shapes(ctx.contract())) shapes.push_back(b);
    if (shapes.size() > 2) shapes.resize(2);
    std::vector<GateCase> out;
    const Stream gs = ctx.gate_stream("coverage");
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      GateCase g;
      g.label = fmt::format("two poisons at {}", to_string(shapes[k]));
      g.bindings = shapes[k];
      const Stream s = gs.child(k);
      g.seed = s.key();
      g.run = [s](GateContext& cx, const CaseInfo& info) { return run_case(cx, info, s, false); };
      out.push_back(std::move(g));
    }
    // A kernel that skips outputs whose input is exactly zero (and relies on zeroed memory) writes every
    // element of a random draw: only inputs holding exact zeros reach the skip.
    GateCase z;
    z.label = "two poisons, inputs with exact zeros and special values";
    z.bindings = ctx.contract().nominal();
    const Stream zs = gs.child("special values");
    z.seed = zs.key();
    z.run = [zs](GateContext& cx, const CaseInfo& info) { return run_case(cx, info, zs, true); };
    out.push_back(std::move(z));
    return out;
  }

 private:
  static std::vector<std::byte> second_poison(const Contract& c, Stream s) {
    // One element's worth when every output shares a size, so each element carries the same pattern.
    std::size_t es = 8;
    bool same = !c.outputs.empty();
    for (const TensorSpec& o : c.outputs) same = same && size_of(o.dtype) == size_of(c.outputs[0].dtype);
    if (same) es = size_of(c.outputs[0].dtype);
    std::vector<std::byte> p(es);
    for (std::size_t i = 0; i < es; ++i) {
      auto b = static_cast<std::uint8_t>(s.bits(i) & 0xff);
      if (b == 0xff) b = 0x5a;  // never the first poison's byte
      p[i] = static_cast<std::byte>(b);
    }
    return p;
  }

  static bool holds_poison(const HostArray& a, std::int64_t k, const std::vector<std::byte>& poison) {
    const std::size_t es = size_of(a.dtype());
    for (std::size_t b = 0; b < es; ++b)
      if (a.data()[static_cast<std::size_t>(k) * es + b] != poison[b % poison.size()]) return false;
    return true;
  }

  // Standard set 0 with about a quarter of every float input's elements set to 0, and a few to -0, 1 and -1,
  // keeping the source's structure (structural zeros stay, signs stay, symmetric partners change together).
  static InputSetPtr special_values(GateContext& ctx, const CaseInfo& info, Stream s) {
    const Contract& c = ctx.contract();
    std::vector<HostArray> arrays = ctx.standard_inputs(info.bindings, 0)->arrays;
    const std::vector<InputStructure>& st = ctx.structure(info.bindings);
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      if (!is_float(c.inputs[i].dtype) || c.inputs[i].domain.kind == DomainKind::offsets) continue;
      HostArray& a = arrays[i];
      const Stream si = s.child(c.inputs[i].name);
      const bool may_be_zero = st[i].sign != SignStructure::positive && st[i].sign != SignStructure::negative;
      const bool may_be_negative = st[i].sign == SignStructure::any || st[i].sign == SignStructure::nonpositive ||
                                   st[i].sign == SignStructure::negative;
      const bool may_be_positive = st[i].sign != SignStructure::nonpositive && st[i].sign != SignStructure::negative;
      for (std::int64_t k = 0; k < a.numel(); ++k) {
        const double u = si.uniform(static_cast<std::uint64_t>(k));
        double v;
        if (u < 0.22 && may_be_zero) v = 0.0;
        else if (u < 0.24 && may_be_zero) v = -0.0;
        else if (u < 0.26 && may_be_positive) v = 1.0;
        else if (u < 0.28 && may_be_negative) v = -1.0;
        else continue;
        a.set(k, v);
      }
      if (st[i].symmetric) {  // mirror the upper triangle onto the lower one
        const Shape& sh = a.shape();
        const std::int64_t n = sh.back();
        for (std::int64_t m = 0; m < a.numel() / (n * n); ++m)
          for (std::int64_t r = 0; r < n; ++r)
            for (std::int64_t q = r + 1; q < n; ++q) a.set(m * n * n + q * n + r, a.get(m * n * n + r * n + q));
      }
    }
    return ctx.custom_inputs(info.bindings, s.key(), info.variant, std::move(arrays));
  }

  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& info, Stream s, bool special) {
    if (!special) return run_poisons(ctx, info, s, ctx.standard_inputs(info.bindings, 0));
    const InputSetPtr in = special_values(ctx, info, s);
    return label_domain(ctx, run_poisons(ctx, info, s, in), *in);
  }

  static CaseOutcome run_poisons(GateContext& ctx, const CaseInfo& info, Stream s, const InputSetPtr& in) {
    const Contract& c = ctx.contract();
    const std::vector<std::vector<std::byte>> poisons{std::vector<std::byte>(1, std::byte{0xff}), second_poison(c, s)};
    std::vector<DenseRun> runs;
    for (std::size_t k = 0; k < poisons.size(); ++k) {
      CaseInfo run_info = info;
      run_info.variant = fmt::format("{}: poison {} ({})", info.variant, k + 1, k == 0 ? "0xff bytes" : "random bytes");
      runs.push_back(run_dense(ctx, run_info, *in, poisons[k]));
      if (runs.back().problem) return *runs.back().problem;
    }
    CaseInfo both = info;
    both.variant = fmt::format("{}: poison 0xff bytes, then random bytes", info.variant);
    if (c.deterministic) {
      // The poisons differ in every byte, so an element left unwritten, or read before it was written,
      // comes out different under the two.
      for (std::size_t o = 0; o < c.outputs.size(); ++o) {
        const HostArray& a = runs[0].outputs[o];
        const HostArray& b = runs[1].outputs[o];
        const Comparison cmp = compare_bitwise(a, b);
        if (cmp.ok) continue;
        Evidence e = mismatch_evidence(both, c.outputs[o].name, b, nullptr, &a, cmp, nullptr);
        e.expected += " (under poison 1)";
        e.got += " (under poison 2)";
        const bool untouched = holds_poison(a, cmp.first, poisons[0]) && holds_poison(b, cmp.first, poisons[1]);
        e.detail = std::string(untouched ? "the element was never written (it still holds the poison)"
                                         : "the result depends on what the output held before the call (read before written)") +
                   "\n" + e.detail;
        return failed(std::move(e), &runs[1].call, std::numeric_limits<double>::quiet_NaN(), untouched ? "unwritten element" : "read before written");
      }
      return CaseOutcome{};
    }
    // Without a determinism promise: no element may still hold the first poison (a NaN pattern no finite
    // oracle value has), and the second run must still agree with the oracle.
    const OracleResultPtr oracle = ctx.oracle(*in);
    for (std::size_t o = 0; o < c.outputs.size(); ++o) {
      const HostArray& a = runs[0].outputs[o];
      for (std::int64_t k = 0; k < a.numel(); ++k) {
        if (!holds_poison(a, k, poisons[0])) continue;
        const double want = oracle->refs[o].rounded[static_cast<std::size_t>(k)];
        if (is_float(a.dtype()) ? std::isnan(want) : want == a.get(k)) continue;
        Evidence e = both.evidence();
        e.tensor = c.outputs[o].name;
        e.index = unravel(k, a.shape());
        e.expected = format_value(want, a.dtype());
        e.got = format_element(a, k, true) + " (the poison, untouched)";
        return failed(std::move(e), &runs[0].call, std::numeric_limits<double>::quiet_NaN(), "unwritten element");
      }
    }
    return judge_within(ctx, both, runs[1].outputs, *in, *oracle, ctx.tolerances(info.bindings), &runs[1].call);
  }
};

}  // namespace

std::unique_ptr<Gate> make_coverage_gate() { return std::make_unique<CoverageGate>(); }

}  // namespace kgate::gates
