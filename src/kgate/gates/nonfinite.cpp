#include "gates/nonfinite.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "gates/common.hpp"

namespace kgate::gates {

bool has_float_output(const Contract& c) {
  for (const TensorSpec& o : c.outputs)
    if (is_float(o.dtype)) return true;
  return false;
}

namespace {

std::string spread_text(const SpreadRule& r) {
  if (r.exact || r.dim.empty()) return "spread rule: exactly the oracle's non-finite set";
  const char* dir = r.direction == SpreadRule::Direction::forward ? "forward"
                    : r.direction == SpreadRule::Direction::backward ? "backward" : "both ways";
  return fmt::format("spread rule: along {} {}{}{}", r.dim, dir, r.block > 0 ? fmt::format(", blocks of {}", r.block) : "",
                     r.segments.empty() ? "" : fmt::format(", within segments of {}", r.segments));
}

// Per output, the elements where the oracle's NaN under the planted value comes only through a structural
// zero of the source (a triangular matmul's dense oracle meets a NaN planted in B's triangle with A's zero
// triangle: 0 * NaN). Such an element is finite and the same whichever of three finite values the planted
// site (and its symmetric partner) holds instead (the drawn one and two large ones of the input's sign), and
// is not once every structural zero is filled with 1 (so the zeros, not the operator, cut the dependence:
// relu or max of a negative value stays judged). Empty when no input of the source has structural zeros.
std::vector<std::vector<std::uint8_t>> through_structural_zeros(GateContext& ctx, const CaseInfo& info,
                                                                const InputSet& planted, const HostArray& drawn,
                                                                std::size_t input, const std::vector<std::int64_t>& at) {
  const Contract& c = ctx.contract();
  const std::vector<InputStructure>& st = ctx.structure(info.bindings);
  bool any_zeros = false;
  for (const InputStructure& s : st) any_zeros = any_zeros || s.zero_count > 0;
  if (!any_zeros) return {};
  const DType dt = c.inputs[input].dtype;
  double m = 1.0;
  for (std::int64_t k = 0; k < drawn.numel(); ++k)
    if (std::isfinite(drawn.get(k))) m = std::max(m, std::fabs(drawn.get(k)));
  const double big = round_to(std::min(std::round(1e3 * m), kgate::info(dt).max_finite / 4), dt);
  const SignStructure sign = st[input].sign;
  const bool negative = sign == SignStructure::negative || sign == SignStructure::nonpositive;
  const bool any_sign = sign == SignStructure::any;
  // variant 0: the drawn values; 1 and 2: large values of the input's sign (of both signs when it has none)
  const double third = std::round(big / 3);
  const double fills[3] = {0.0, negative ? -big : big, any_sign ? -big : negative ? -third : third};
  auto evaluate = [&](int variant, bool fill_zeros) {
    std::vector<HostArray> arrays = planted.arrays;
    for (std::int64_t p : at) arrays[input].set(p, variant == 0 ? drawn.get(p) : round_to(fills[variant], dt));
    if (fill_zeros) {
      for (std::size_t i = 0; i < arrays.size(); ++i) {
        const bool neg = st[i].sign == SignStructure::negative || st[i].sign == SignStructure::nonpositive;
        for (std::size_t k = 0; k < st[i].zeros.size(); ++k)
          if (st[i].zeros[k]) arrays[i].set(static_cast<std::int64_t>(k), neg ? -1.0 : 1.0);
      }
    }
    return ctx.oracle(*ctx.custom_inputs(info.bindings, planted.seed,
                                         fmt::format("{}: finite value {} at the planted site{}", planted.label, variant,
                                                     fill_zeros ? ", structural zeros filled" : ""),
                                         std::move(arrays)));
  };
  const OracleResultPtr injected = ctx.oracle(planted);
  const OracleResultPtr kept[3] = {evaluate(0, false), evaluate(1, false), evaluate(2, false)};
  const OracleResultPtr filled[3] = {evaluate(0, true), evaluate(1, true), evaluate(2, true)};
  std::vector<std::vector<std::uint8_t>> out;
  for (std::size_t o = 0; o < c.outputs.size(); ++o) {
    const std::vector<double>& e = injected->refs[o].exact;
    std::vector<std::uint8_t> mask(e.size(), 0);
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (!std::isnan(e[i])) continue;
      const double k0 = kept[0]->refs[o].exact[i], k1 = kept[1]->refs[o].exact[i], k2 = kept[2]->refs[o].exact[i];
      const double f0 = filled[0]->refs[o].exact[i], f1 = filled[1]->refs[o].exact[i], f2 = filled[2]->refs[o].exact[i];
      const bool independent = std::isfinite(k0) && k0 == k1 && k1 == k2;
      const bool depends_when_filled = !(f0 == f1 && f1 == f2);
      mask[i] = independent && depends_when_filled;
    }
    out.push_back(std::move(mask));
  }
  return out;
}

// Where the kernel gives the other Inf, whether the oracle's sign there is determined within tolerance. A
// kernel that rounds computes the finite factor an Inf multiplies (dv = beta dX with beta = +Inf) only to
// within its error, so where that factor is within rounding of zero no sign can be demanded; where it is
// not, the other Inf is a wrong answer. Backward-error view: every finite element x of every float input
// (the planted site kept; a symmetric input moved symmetrically) becomes x (1 + s rho), rounded to its
// dtype, with rho the output's relative tolerance (rtol x scale) and s = +-1 from kSignPatterns seeded
// patterns and their negations (one of each pair moves a nearly linear factor towards zero). An element is
// undetermined when the oracle there turns NaN, 0 or the other sign in any of them. Runs only when such
// elements exist (a clean kernel costs nothing) and stops once every one is found undetermined.
constexpr int kSignPatterns = 8;

struct SignCheck {
  std::vector<std::uint8_t> mask;  // per element of the output: the oracle's Inf sign is not determined
  std::int64_t offending = 0;      // elements with the other Inf
  std::int64_t undetermined = 0;   // of those, how many
  int evaluations = 0;
  double rho = 0;
};

SignCheck inf_sign_undetermined(GateContext& ctx, const CaseInfo& info, const InputSet& planted,
                                const std::vector<std::int64_t>& planted_at, std::size_t input, std::size_t o,
                                const HostArray& got, const Reference& ref, Stream stream) {
  const Contract& c = ctx.contract();
  const TensorSpec& out = c.outputs[o];
  SignCheck r;
  if (!is_float(got.dtype()) || got.numel() != static_cast<std::int64_t>(ref.exact.size())) return r;
  const double max_finite = kgate::info(got.dtype()).max_finite;
  std::vector<std::int64_t> open;  // offending elements not yet found undetermined
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double e = ref.exact[static_cast<std::size_t>(i)], g = got.get(i);
    if (!(std::isinf(e) || std::fabs(e) > 2 * max_finite) || !std::isinf(g)) continue;
    if (std::signbit(g) != std::signbit(e)) open.push_back(i);
  }
  r.offending = static_cast<std::int64_t>(open.size());
  if (open.empty()) return r;
  const Tolerance t = default_tolerance(out, c.working_precision, 1, ctx.tolerance_scale());
  // At most a quarter: a looser tolerance (a --tolerance-scale in the hundreds) would move inputs through
  // zero and excuse every sign.
  r.rho = std::min(t.rel * t.scale, 0.25);
  r.mask.assign(ref.exact.size(), 0);
  const std::vector<InputStructure>& st = ctx.structure(info.bindings);
  for (int k = 0; k < kSignPatterns && !open.empty(); ++k) {
    for (const int s : {+1, -1}) {
      std::vector<HostArray> arrays = planted.arrays;
      for (std::size_t j = 0; j < arrays.size(); ++j) {
        HostArray& a = arrays[j];
        if (!is_float(a.dtype())) continue;
        const Stream signs = stream.child(static_cast<std::uint64_t>(k)).child(c.inputs[j].name);
        for (std::int64_t p = 0; p < a.numel(); ++p) {
          if (j == input && std::find(planted_at.begin(), planted_at.end(), p) != planted_at.end()) continue;
          const double x = a.get(p);
          if (!std::isfinite(x) || x == 0) continue;
          std::int64_t key = p;  // a symmetric input's (i, j) and (j, i) move together
          if (st.at(j).symmetric && a.shape().size() >= 2) {
            Shape idx = unravel(p, a.shape());
            std::swap(idx[idx.size() - 1], idx[idx.size() - 2]);
            key = std::min(p, ravel(idx, a.shape()));
          }
          const double sign = (signs.bits(static_cast<std::uint64_t>(key)) & 1) ? s : -s;
          a.set(p, round_to(x * (1 + sign * r.rho), a.dtype()));
        }
      }
      const OracleResultPtr moved = ctx.oracle(*ctx.custom_inputs(
          info.bindings, planted.seed, fmt::format("{}: finite inputs moved by rho {:.3g}, sign pattern {}{}",
                                                   planted.label, r.rho, s > 0 ? "+" : "-", k),
          std::move(arrays)));
      ++r.evaluations;
      const std::vector<double>& v = moved->refs[o].exact;
      std::erase_if(open, [&](std::int64_t i) {
        const double m = v[static_cast<std::size_t>(i)];
        const bool flips = std::isnan(m) || m == 0 || std::signbit(m) != std::signbit(ref.exact[static_cast<std::size_t>(i)]);
        if (flips) r.mask[static_cast<std::size_t>(i)] = 1;
        return flips;
      });
      if (open.empty()) break;
    }
  }
  r.undetermined = r.offending - static_cast<std::int64_t>(open.size());
  return r;
}

}  // namespace

const char* site_name(int site) {
  static constexpr const char* kNames[kSites] = {"first", "last", "random"};
  return site >= 0 && site < kSites ? kNames[site] : "?";
}

GateCase injection_case(GateContext& ctx, const InjectionPlan& plan, const std::string& what) {
  const std::string& input = ctx.contract().inputs.at(plan.input).name;
  const bool near_max = plan.kind == Injection::near_max;
  GateCase g;
  g.label = near_max ? fmt::format("{} in {}", what, input) : fmt::format("{} in {} at {} site", what, input, site_name(plan.site));
  g.bindings = ctx.contract().nominal();
  g.seed = near_max ? plan.stream.key() : plan.stream.child(site_name(plan.site)).key();
  g.run = [plan](GateContext& cx, const CaseInfo& info) { return run_injection(cx, info, plan); };
  return g;
}

CaseOutcome run_injection(GateContext& ctx, const CaseInfo& base_info, const InjectionPlan& plan) {
  const Contract& c = ctx.contract();
  const TensorSpec& spec = c.inputs.at(plan.input);
  std::vector<HostArray> arrays = ctx.standard_inputs(base_info.bindings, 0)->arrays;
  HostArray& target = arrays[plan.input];
  const std::int64_t n = target.numel();
  if (n == 0) return CaseOutcome{};  // nothing to plant at this shape
  // Keep what every draw of the source shares: sites off structural zeros, a random Inf's sign to the
  // input's sign, the transposed partner of a symmetric input planted too.
  const InputStructure& st = ctx.structure(base_info.bindings).at(plan.input);
  auto off_zeros = [&](std::int64_t p) {
    if (!st.zeros.empty())
      for (std::int64_t step = 0; step < n && st.zeros[static_cast<std::size_t>(p)]; ++step) p = (p + 1) % n;
    return p;
  };
  auto skipped = [](std::string why) {
    CaseOutcome o;
    o.verdict = Verdict::skip;
    o.message = std::move(why);
    return o;
  };
  std::int64_t site = 0;
  double value = 0;
  if (plan.kind == Injection::near_max) {
    site = off_zeros(plan.stream.child("site").integer(0, 0, n - 1));
    value = injection_values(plan.kind, spec.dtype, 1, plan.stream.child("value"), plan.sign)[0];
  } else {
    // All of the input's sites, drawn as one (so they are distinct); this case plants only its own.
    std::vector<std::int64_t> drawn = injection_positions(n, plan.stream.child("site"), kSites);
    const auto k = static_cast<std::size_t>(plan.site);
    if (k >= drawn.size())
      return skipped(fmt::format("{} has {} element{} at {}: no {} site apart from the {}", spec.name, n, n == 1 ? "" : "s",
                                 to_string(base_info.bindings), site_name(plan.site), k == 1 ? "first" : "first and last"));
    for (std::int64_t& p : drawn) p = off_zeros(p);
    site = drawn[k];
    for (std::size_t j = 0; j < k; ++j)
      if (drawn[j] == site)
        return skipped(fmt::format("the {} site of {} moves off structural zeros onto its {} site at {}", site_name(plan.site),
                                   spec.name, site_name(static_cast<int>(j)), to_string(base_info.bindings)));
    value = injection_values(plan.kind, spec.dtype, kSites, plan.stream.child("value"), plan.sign)[k];
    if (plan.kind == Injection::infinity && plan.sign == 0) {
      if (st.sign == SignStructure::positive || st.sign == SignStructure::nonnegative) value = std::fabs(value);
      if (st.sign == SignStructure::negative || st.sign == SignStructure::nonpositive) value = -std::fabs(value);
    }
  }
  std::vector<std::int64_t> planted_at{site};  // the site and its symmetric partner
  target.set(site, value);
  if (st.symmetric) {
    Shape idx = unravel(site, target.shape());
    std::swap(idx[idx.size() - 1], idx[idx.size() - 2]);
    const std::int64_t partner = ravel(idx, target.shape());
    target.set(partner, value);
    if (partner != site) planted_at.push_back(partner);
  }

  CaseInfo info = base_info;
  info.variant = fmt::format("{} in {} at {}{}={}", to_string(plan.kind), spec.name,
                             plan.kind == Injection::near_max ? "" : fmt::format("{} site ", site_name(plan.site)),
                             shape_string(unravel(site, target.shape())), format_value(target.get(site), spec.dtype));
  if (planted_at.size() > 1)
    info.variant += fmt::format(" and at {} ({} is symmetric)", shape_string(unravel(planted_at[1], target.shape())), spec.name);

  const InputSetPtr in = ctx.custom_inputs(info.bindings, info.seed, info.variant, std::move(arrays));
  DenseRun run = run_dense(ctx, info, *in);
  if (run.problem) return label_domain(ctx, *run.problem, *in);
  const OracleResultPtr oracle = ctx.oracle(*in);
  const HostArray& drawn = ctx.standard_inputs(base_info.bindings, 0)->arrays[plan.input];
  std::optional<std::vector<std::vector<std::uint8_t>>> structural;  // found only when something fails
  ReferenceResultPtr refs;  // the working-precision reference run: also fetched only when something fails
  CaseOutcome pass;
  for (std::size_t o = 0; o < c.outputs.size(); ++o) {
    const TensorSpec& out = c.outputs[o];
    const Reference& ref = oracle->refs[o];
    const std::vector<std::uint8_t> allowed =
        allowed_spread(c, out, ref.shape, nonfinite_seeds(ref, plan.mode), in->arrays);
    Comparison cmp = check_nonfinite(run.outputs[o], ref, allowed, plan.mode, c.spread.inf_may_become_nan);
    SignCheck sign;
    if (!cmp.ok) {
      if (!structural) structural = through_structural_zeros(ctx, info, *in, drawn, plan.input, planted_at);
      if (plan.mode == NonfiniteMode::inf)
        sign = inf_sign_undetermined(ctx, info, *in, planted_at, plan.input, o, run.outputs[o], ref,
                                     plan.stream.child("inf sign"));
      // Where the operator itself overflows at the promised precision (its working-precision reference run
      // is non-finite while the float64 oracle is not), a kernel that does the same is excused, as the
      // oracle gate excuses it.
      if (!refs && ctx.has_reference_runs()) refs = ctx.references(*in, *oracle);
      std::span<const std::uint8_t> reference_nonfinite;
      if (refs && !refs->runs.empty()) reference_nonfinite = refs->runs.front().nonfinite.at(o);
      if (!structural->empty() || sign.undetermined > 0 || !reference_nonfinite.empty())
        cmp = check_nonfinite(run.outputs[o], ref, allowed, plan.mode, c.spread.inf_may_become_nan,
                              structural->empty() ? std::span<const std::uint8_t>{} : std::span<const std::uint8_t>(structural->at(o)),
                              sign.mask, reference_nonfinite);
    }
    pass.add_excused(cmp);
    if (cmp.ok) continue;
    Evidence e = mismatch_evidence(info, out.name, run.outputs[o], &ref, nullptr, cmp, nullptr);
    e.detail = spread_text(c.spread) + "\n" + e.detail;
    if (cmp.kind == Mismatch::spread)
      e.detail = "a non-finite value where the oracle (and the working-precision reference run, where there is one) "
                 "is finite, beyond the spread rule: a violation, not a masked value\n" + e.detail;
    if (cmp.kind == Mismatch::indeterminate)
      e.detail = "an ordinary number where the operator has no value (the oracle is NaN: Inf - Inf, 0 * Inf, "
                 "Inf / Inf under the injected Inf)\n" + e.detail;
    if (sign.offending > sign.undetermined)
      e.detail = fmt::format("the other Inf at {} element{}; the oracle's sign holds at {} of them with every finite "
                             "input moved by the output's rtol {:.3g} ({} oracle evaluation{}): not a rounding of a "
                             "factor near zero\n",
                             sign.offending, sign.offending == 1 ? "" : "s", sign.offending - sign.undetermined, sign.rho,
                             sign.evaluations, sign.evaluations == 1 ? "" : "s") + e.detail;
    CaseOutcome f = failed(std::move(e), &run.call, std::numeric_limits<double>::quiet_NaN(), to_string(cmp.kind));
    for (std::size_t k = 0; k < kExcuseKinds; ++k) f.excused[k] = pass.excused[k];
    return label_domain(ctx, std::move(f), *in);
  }
  return pass;
}

}  // namespace kgate::gates
