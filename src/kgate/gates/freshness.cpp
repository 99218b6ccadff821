// Gate 10, freshness: no caching and no stale results. A call on inputs A, then B written into A's very
// buffers, then A's values in new buffers: each output follows its own inputs. Tolerance-free where the
// oracle outputs of A and B differ by more than both bounds and twice the kernel's own error on A (there,
// B's result may not carry A's bits; nearer, an imprecise kernel's rounding of B's answer can be A's); the
// repeated A must be bitwise equal to the first when the contract promises determinism; and B is held to the
// oracle gate's bound.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "kgate/report.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr std::int64_t kBlock = 1 << 14;  // elements decoded at a time

class FreshnessGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"freshness", "no caching or stale results",
            "A, then B in A's buffers, then A's values in new buffers; where the oracle says A and B differ, "
            "B's result must not carry A's bits; repeated A bitwise equal (if deterministic); B within bound",
            true, false};
  }

  // B: another draw; or A with only its tail (last quarter of every float input) or one element in the
  // middle taken from that draw. A cache keyed on pointer, shape and first elements misses only the first.
  enum class Variant { other_draw, tail, middle };

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    const std::pair<Variant, const char*> variants[] = {
        {Variant::other_draw, "A = standard set 0, B = standard set 1"},
        {Variant::tail, "B = A but the last quarter of each float input (from set 1)"},
        {Variant::middle, "B = A but one element in the middle of each float input (from set 1)"}};
    for (const auto& [v, label] : variants) {
      GateCase g;
      g.label = label;
      g.bindings = ctx.contract().nominal();
      g.seed = ctx.standard_stream(1).key();
      g.run = [v](GateContext& cx, const CaseInfo& info) { return run_case(cx, info, v); };
      out.push_back(std::move(g));
    }
    return out;
  }

 private:
  static CaseOutcome stage_problem(const GateContext& ctx, const CallResult& r, const CaseInfo& info,
                                   const std::string& stage) {
    CaseInfo s = info;
    s.variant = fmt::format("{}: {}", info.variant, stage);
    if (auto bad = call_problem(ctx, r, 0, s)) return *bad;
    return CaseOutcome{};
  }

  static InputSetPtr second_input(GateContext& ctx, const CaseInfo& info, Variant v, const InputSet& a) {
    const InputSetPtr other = ctx.standard_inputs(info.bindings, 1);
    if (v == Variant::other_draw) return other;
    const Contract& c = ctx.contract();
    std::vector<HostArray> arrays = a.arrays;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      if (!is_float(c.inputs[i].dtype) || c.inputs[i].domain.kind == DomainKind::offsets) continue;
      HostArray& x = arrays[i];
      const std::int64_t n = x.numel();
      const std::int64_t from = v == Variant::tail ? n - std::max<std::int64_t>(n / 4, 1) : n / 2;
      const std::int64_t to = v == Variant::tail ? n : std::min<std::int64_t>(n / 2 + 1, n);
      for (std::int64_t k = std::max<std::int64_t>(from, 0); k < to; ++k) x.set(k, other->arrays[i].get(k));
    }
    return ctx.custom_inputs(info.bindings, other->seed, info.variant, std::move(arrays));
  }

  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& info, Variant v) {
    const InputSetPtr a = ctx.standard_inputs(info.bindings, 0);
    const InputSetPtr b = second_input(ctx, info, v, *a);
    CaseOutcome o = run_pair(ctx, info, a, b);
    return v == Variant::other_draw ? o : label_domain(ctx, std::move(o), *b);
  }

  static CaseOutcome run_pair(GateContext& ctx, const CaseInfo& info, const InputSetPtr& a, const InputSetPtr& b) {
    const Contract& c = ctx.contract();
    PlacedCall first(ctx.candidate(), a->arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
                     ctx.attrs());
    CallResult ra = call_once(ctx, first);
    if (CaseOutcome o = stage_problem(ctx, ra, info, "first call on A"); o.verdict != Verdict::pass) return o;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) first.rewrite_input(i, b->arrays[i]);
    CallResult rb = call_once(ctx, first);
    if (CaseOutcome o = stage_problem(ctx, rb, info, "B in A's buffers"); o.verdict != Verdict::pass) return o;
    PlacedCall again(ctx.candidate(), a->arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
                     ctx.attrs());
    CallResult ra2 = call_once(ctx, again);
    if (CaseOutcome o = stage_problem(ctx, ra2, info, "A again in new buffers"); o.verdict != Verdict::pass) return o;

    const std::vector<HostArray>& got_a = ra.results[0].outputs;
    const std::vector<HostArray>& got_b = rb.results[0].outputs;
    const std::vector<HostArray>& got_a2 = ra2.results[0].outputs;
    const OracleResultPtr oa = ctx.oracle(*a);
    const OracleResultPtr ob = ctx.oracle(*b);
    const std::vector<Tolerance> tol = ctx.tolerances(info.bindings);

    for (std::size_t o = 0; o < c.outputs.size(); ++o) {
      const Reference& ref_a = oa->refs[o];
      const Reference& ref_b = ob->refs[o];
      // The kernel's own largest error on A: an fp16-grained kernel returns the same rounded value for A and
      // for a B whose answer moved by less than its grain (the h100 L3/T11 "stale" value was the fp16
      // rounding of B's answer); only a gap beyond that says B's result should have differed.
      // Decoded a block at a time (one dtype switch per block, not a call per element; no float64 copy of the
      // whole output).
      double err_a = 0.0;
      std::vector<double> block(static_cast<std::size_t>(std::min<std::int64_t>(kBlock, got_a[o].numel())));
      const std::size_t es = size_of(got_a[o].dtype());
      for (std::int64_t start = 0; start < got_a[o].numel(); start += kBlock) {
        const std::int64_t m = std::min(kBlock, got_a[o].numel() - start);
        decode_elements(got_a[o].dtype(), got_a[o].bytes().data() + static_cast<std::size_t>(start) * es, m, block.data());
        for (std::int64_t j = 0; j < m; ++j) {
          const double g = block[static_cast<std::size_t>(j)], r = ref_a.rounded[static_cast<std::size_t>(start + j)];
          if (std::isfinite(g) && std::isfinite(r)) err_a = std::max(err_a, std::fabs(g - r));
        }
      }
      const std::byte* bytes_a = got_a[o].bytes().data();
      const std::byte* bytes_b = got_b[o].bytes().data();
      std::int64_t stale = -1, stale_count = 0, distinct = 0;
      for (std::int64_t i = 0; i < got_b[o].numel(); ++i) {
        const auto k = static_cast<std::size_t>(i);
        const double gap = std::fabs(ref_a.exact[k] - ref_b.exact[k]);
        if (!(gap > tol[o].bound(ref_a.exact[k], ref_a.rms) + tol[o].bound(ref_b.exact[k], ref_b.rms) + 2 * err_a))
          continue;
        ++distinct;
        if (std::memcmp(bytes_b + k * es, bytes_a + k * es, es) != 0) continue;  // bits differ
        if (stale < 0) stale = i;
        ++stale_count;
      }
      // A correct kernel can never repeat A's bits here (they would be out of bound for B); an imprecise one,
      // failing the oracle gate anyway, can at a few elements by coincidence (bf16-grained values collide).
      // A stale or cached result repeats at a block of them: require one in a thousand, at least one.
      if (stale < 0 || static_cast<double>(stale_count) < std::max(1.0, std::ceil(1e-3 * static_cast<double>(distinct))))
        continue;
      CaseInfo s = info;
      s.variant = fmt::format("{}: B written into A's buffers", info.variant);
      Evidence e = s.evidence();
      e.tensor = c.outputs[o].name;
      e.index = unravel(stale, got_b[o].shape());
      e.expected = format_value(ref_b.rounded[static_cast<std::size_t>(stale)], ref_b.dtype) + " (B's oracle)";
      e.got = format_element(got_b[o], stale, true) + ", bit for bit A's result";
      e.detail = fmt::format("{} of the {} elements where A's and B's oracle outputs differ kept A's result: a "
                             "stale or cached output",
                             stale_count, distinct);
      return failed(std::move(e), &rb, std::numeric_limits<double>::quiet_NaN(), "stale result");
    }

    CaseInfo again_info = info;
    again_info.variant = fmt::format("{}: A again in new buffers", info.variant);
    if (c.deterministic) {
      for (std::size_t o = 0; o < c.outputs.size(); ++o) {
        const Comparison cmp = compare_bitwise(got_a[o], got_a2[o]);
        if (cmp.ok) continue;
        Evidence e = mismatch_evidence(again_info, c.outputs[o].name, got_a2[o], nullptr, &got_a[o], cmp, nullptr);
        e.expected += " (first call on A)";
        // Two causes give these bits: state the calls carry (B's call, or a count of calls, changed what A
        // computes) and a result that depends on where the buffers sit (an alignment-dependent summation
        // order, a library that picks its algorithm by address); both are the determinism gate's property
        // (attribute_findings counts this finding under it when it failed as well). One more call, A in A's own
        // first buffers, is reported as what it saw, a hint for the reader and never a verdict on the cause: a
        // result that varies from call to call can repeat A's bits there by chance.
        for (std::size_t i = 0; i < c.inputs.size(); ++i) first.rewrite_input(i, a->arrays[i]);
        CallResult ra3 = call_once(ctx, first);
        if (CaseOutcome s = stage_problem(ctx, ra3, info, "A again in A's own buffers"); s.verdict != Verdict::pass)
          return s;
        bool same_in_own_buffers = true;
        for (std::size_t k = 0; k < c.outputs.size(); ++k)
          same_in_own_buffers = same_in_own_buffers && compare_bitwise(got_a[k], ra3.results[0].outputs[k]).ok;
        e.detail = fmt::format(
            "the result of A in new buffers, after B ran in A's, is not A's first result: state carried between "
            "calls, a result that depends on where the buffers sit, or one that differs from call to call; A once "
            "more in A's own first buffers gave {}\n{}",
            same_in_own_buffers ? "A's first bits again" : "other bits than A's first again",
            e.detail);
        return failed(std::move(e), &ra2, std::numeric_limits<double>::quiet_NaN(), kFindingRepeatChanged);
      }
    } else {
      CaseOutcome o = judge_within(ctx, again_info, got_a2, *a, *oa, tol, &ra2);
      if (o.verdict != Verdict::pass) return o;
    }
    CaseInfo b_info = info;
    b_info.variant = fmt::format("{}: B written into A's buffers", info.variant);
    return judge_within(ctx, b_info, got_b, *b, *ob, tol, &rb);
  }
};

}  // namespace

std::unique_ptr<Gate> make_freshness_gate() { return std::make_unique<FreshnessGate>(); }

}  // namespace kgate::gates
