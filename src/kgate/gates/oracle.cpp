// Gate 1, oracle: the kernel agrees with the float64 oracle at the nominal shape, for several seeds and
// several input distributions (never only the contract's default), and across input magnitudes: the nominal
// draw scaled by powers of ten, as long as the operator itself stays representable (the oracle rounded to the
// output dtype stays finite) and, where the oracle has a working-precision reference run, that run stays
// finite and as accurate, relative to the output's magnitude, as on the unscaled draw (K_REF times its
// relative error there, plus 16 output ulps). Not tolerance-free: every element is held to the bound derived
// from the dtypes, the working precision and the reduction size (compare.hpp), and the reference term; on a
// draw scaled up, the relative term also allows what rounding one intermediate as large as the inputs costs
// (kSweepMagnitudeUlps below): the sweep hunts range defects, not the conditioning of large inputs.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr int kSeedsPerDistribution = 2;
// A source of its own has no distributions to vary: this many of its draws instead.
constexpr int kSourceSeeds = 8;
// Powers of ten the nominal draw is scaled by: up until an exp overflows (a softmax without max subtraction
// overflows above about 88, which randn x 100 reaches), and down where flush-to-zero and absolute epsilons live.
constexpr int kSweepExponents[] = {1, 2, 3, -3};
// On a draw scaled up to inputs as large as M, a working-precision kernel may round an intermediate of that
// size (a logsumexp, a max, x * scale - c) before an exp turns its absolute error u_w M into a relative one:
// exp(x - logsumexp(x)), the softmax FlashAttention's backward recomputes, loses about u_w M / 2 that way
// although the task's max-subtracting reference stays exact to 1 u. So at a factor above 1 each element's
// relative term is at least this many u_w M. Range defects (an exp that overflows, a saturation, a flush to
// zero) are errors of the order of the output itself, far beyond it; ordinary magnitudes keep the tight bound.
constexpr double kSweepMagnitudeUlps = 2.0;

// The largest finite |x| of an array, decoded a block at a time (no float64 copy of a large input).
double largest_finite(const HostArray& a) {
  constexpr std::int64_t kBlock = 4096;
  double block[kBlock];
  double m = 0.0;
  const std::size_t es = size_of(a.dtype());
  for (std::int64_t start = 0; start < a.numel(); start += kBlock) {
    const std::int64_t n = std::min(kBlock, a.numel() - start);
    decode_elements(a.dtype(), a.data() + static_cast<std::size_t>(start) * es, n, block);
    for (std::int64_t k = 0; k < n; ++k)
      if (std::isfinite(block[k])) m = std::max(m, std::fabs(block[k]));
  }
  return m;
}

CaseOutcome skipped(std::string why) {
  CaseOutcome o;
  o.verdict = Verdict::skip;
  o.message = std::move(why);
  return o;
}

// The relative error of the working-precision run on output k: e_ref / max|oracle|.
double relative_reference_error(const ReferenceResult& refs, const OracleResult& oracle, std::size_t k) {
  const double mag = largest_finite_magnitude(oracle.refs[k]);
  return mag > 0 ? refs.runs.front().error[k] / mag : 0.0;
}

CaseOutcome run_sweep(GateContext& ctx, const CaseInfo& info, int exponent) {
  const Contract& c = ctx.contract();
  const InputSetPtr base = ctx.standard_inputs(info.bindings, 0);
  const std::vector<InputStructure>& st = ctx.structure(info.bindings);
  const double factor = std::pow(10.0, exponent);
  std::vector<HostArray> arrays = base->arrays;
  int scaled = 0;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const TensorSpec& spec = c.inputs[i];
    if (!is_float(spec.dtype) || spec.domain.kind == DomainKind::offsets) continue;
    // The contract's own domains bound every kind but normal: scaling those leaves the domain by definition.
    if (ctx.contract_domain_source() && spec.domain.kind != DomainKind::normal) continue;
    if (exponent < 0 && st[i].integral) continue;  // scaling down would break integrality
    HostArray& a = arrays[i];
    if (a.dtype() == DType::f32) {  // the common case without a dtype switch per element; same values
      for (std::int64_t k = 0; k < a.numel(); ++k) {
        float x;
        std::memcpy(&x, a.data() + 4 * k, 4);
        const double v = static_cast<double>(x) * factor;
        const float y = static_cast<float>(v);
        std::memcpy(a.data() + 4 * k, &y, 4);
        if (!std::isfinite(y) && std::isfinite(v))
          return skipped(fmt::format("x 1e{} overflows input {} ({})", exponent, spec.name, name_of(spec.dtype)));
      }
      ++scaled;
      continue;
    }
    for (std::int64_t k = 0; k < a.numel(); ++k) {
      const double v = a.get(k) * factor;
      a.set(k, v);
      if (!std::isfinite(a.get(k)) && std::isfinite(v))
        return skipped(fmt::format("x 1e{} overflows input {} ({})", exponent, spec.name, name_of(spec.dtype)));
    }
    ++scaled;
  }
  if (scaled == 0) return skipped("no input whose magnitude may be scaled");
  const InputSetPtr in = ctx.custom_inputs(info.bindings, info.seed, info.variant, std::move(arrays));
  const OracleResultPtr unscaled = ctx.oracle(*base);
  const OracleResultPtr oracle = ctx.oracle(*in);
  for (std::size_t k = 0; k < c.outputs.size(); ++k) {
    const Reference& r = oracle->refs[k];
    for (std::size_t i = 0; i < r.rounded.size(); ++i)
      if (!std::isfinite(r.rounded[i]) && std::isfinite(unscaled->refs[k].rounded[i]))
        return skipped(fmt::format("x 1e{}: the oracle leaves the range of output {}", exponent, c.outputs[k].name));
  }
  if (ctx.has_reference_runs()) {
    const ReferenceResultPtr refs = ctx.references(*in, *oracle);
    const ReferenceResultPtr refs1 = ctx.references(*base, *unscaled);
    if (!refs->runs.empty() && !refs1->runs.empty()) {
      for (std::size_t k = 0; k < c.outputs.size(); ++k) {
        for (std::uint8_t cls : refs->runs.front().nonfinite[k])
          if (cls != 0)
            return skipped(fmt::format("x 1e{}: the working-precision reference overflows", exponent));
        const double allowed = kRefFactor * relative_reference_error(*refs1, *unscaled, k) +
                               kRefFloorUlps * kgate::info(c.outputs[k].dtype).unit_roundoff;
        if (relative_reference_error(*refs, *oracle, k) > allowed)
          return skipped(fmt::format("x 1e{}: the working-precision reference leaves its bound", exponent));
      }
    }
  }
  std::vector<Tolerance> tol = ctx.tolerances(info.bindings);
  if (exponent > 0) {
    double largest_input = 0.0;
    for (std::size_t i = 0; i < c.inputs.size(); ++i)
      if (is_float(c.inputs[i].dtype) && c.inputs[i].domain.kind != DomainKind::offsets)
        largest_input = std::max(largest_input, largest_finite(in->arrays[i]));
    const double magnitude_rel = kSweepMagnitudeUlps * kgate::info(c.working_precision).unit_roundoff * largest_input;
    for (Tolerance& t : tol) t.rel = std::max(t.rel, magnitude_rel);
  }
  DenseRun run = run_dense(ctx, info, *in);
  if (run.problem) return label_domain(ctx, *run.problem, *in);
  return label_domain(ctx, judge_within(ctx, info, run.outputs, *in, *oracle, tol, &run.call), *in);
}

class OracleGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"oracle", "agrees with the float64 oracle at the nominal shape",
            fmt::format("{} seeds x 4 input distributions (contract domain, wide magnitudes, small magnitudes, "
                        "uniform) at nominal, or {} draws of a source of its own; then the nominal draw scaled by "
                        "1e1, 1e2, 1e3 and 1e-3 while the operator stays representable and its working-precision "
                        "reference accurate; each element within max(4 u_d |ref| + 8 u_w sqrt(N) rms(ref) + "
                        "tiny_d, K_REF e_ref + 16 u_d max|ref|), the relative term at least {:g} u_w max|x| on a "
                        "draw scaled up",
                        kSeedsPerDistribution, kSourceSeeds, kSweepMagnitudeUlps),
            false, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<GateCase> out;
    const Stream gs = ctx.gate_stream("oracle");
    const Bindings nominal = ctx.contract().nominal();
    if (ctx.contract_domain_source()) {
      for (Distribution d : kAllDistributions) {
        for (int s = 0; s < kSeedsPerDistribution; ++s) {
          // The contract-domain sets are the standard sets every other gate also uses, so their oracle
          // outputs are computed once for the whole run.
          const bool standard = d == Distribution::contract;
          const Stream stream = standard ? ctx.standard_stream(s) : gs.child(to_string(d)).child(static_cast<std::uint64_t>(s));
          GateCase c;
          c.label = fmt::format("{} inputs, seed {}", to_string(d), s);
          c.bindings = nominal;
          c.seed = stream.key();
          c.run = [=](GateContext& cx, const CaseInfo& info) {
            const InputSetPtr in = standard ? cx.standard_inputs(info.bindings, s)
                                            : cx.inputs(info.bindings, stream, d, info.variant);
            return run_and_judge(cx, info, *in, cx.dense_inputs(info.bindings), cx.dense_outputs(info.bindings));
          };
          out.push_back(std::move(c));
        }
      }
    } else {
      for (int s = 0; s < kSourceSeeds; ++s) {
        GateCase c;
        c.label = fmt::format("source draw {}", s);
        c.bindings = nominal;
        c.seed = ctx.standard_stream(s).key();
        c.run = [s](GateContext& cx, const CaseInfo& info) {
          const InputSetPtr in = cx.standard_inputs(info.bindings, s);
          return run_and_judge(cx, info, *in, cx.dense_inputs(info.bindings), cx.dense_outputs(info.bindings));
        };
        out.push_back(std::move(c));
      }
    }
    for (int e : kSweepExponents) {
      GateCase c;
      c.label = fmt::format("standard set 0 x 1e{}", e);
      c.bindings = nominal;
      c.seed = gs.child("sweep").child(static_cast<std::uint64_t>(e + 100)).key();
      c.run = [e](GateContext& cx, const CaseInfo& info) { return run_sweep(cx, info, e); };
      out.push_back(std::move(c));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Gate> make_oracle_gate() { return std::make_unique<OracleGate>(); }

}  // namespace kgate::gates
