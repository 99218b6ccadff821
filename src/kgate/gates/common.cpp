#include "gates/common.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kgate::gates {

bool is_nominal(const GateContext& ctx, const Bindings& b) { return b == ctx.contract().nominal(); }

CaseOutcome label_domain(GateContext& ctx, CaseOutcome o, const InputSet& perturbed) {
  if (o.verdict != Verdict::fail && o.verdict != Verdict::crash) return o;
  const std::string why = ctx.out_of_domain(perturbed);
  if (why.empty()) return o;
  o.out_of_domain = true;
  if (o.evidence) o.evidence->detail = "out of the source's domain: " + why + "\n" + o.evidence->detail;
  return o;
}

CallResult call_once(GateContext& ctx, const PlacedCall& p, std::vector<std::byte> poison, StreamMode mode) {
  CallRequest req;
  req.invocations.push_back(p.invocation());
  req.poison = std::move(poison);
  req.stream = mode;
  return ctx.call(req);
}

CaseOutcome failed(Evidence e, const CallResult* r, double ratio, std::string finding) {
  CaseOutcome o;
  o.verdict = Verdict::fail;
  o.finding = std::move(finding);
  o.evidence = std::move(e);
  o.error_ratio = ratio;
  if (r) o.output = r->output;
  return o;
}

std::optional<CaseOutcome> call_problem(const GateContext& ctx, const CallResult& r, std::size_t k,
                                        const CaseInfo& info, bool optional_variant) {
  CaseOutcome o;
  o.output = r.output;
  o.evidence = info.evidence();
  switch (r.outcome) {
    case CallOutcome::crashed:
      o.verdict = Verdict::crash;
      o.message = r.detail;
      o.evidence->got = "crashed: " + r.detail;
      return o;
    case CallOutcome::timed_out:
      o.verdict = Verdict::timeout;
      o.message = r.detail;
      o.evidence->got = "timed out: " + r.detail;
      return o;
    case CallOutcome::completed: break;
  }
  if (r.results.size() <= k) {
    o.verdict = Verdict::error;
    o.message = fmt::format("the target returned {} results for invocation {}", r.results.size(), k);
    return o;
  }
  const InvocationResult& res = r.results[k];
  if (res.status == KGATE_OK) return std::nullopt;
  const std::string msg = res.message.empty() ? "(no message)" : res.message;
  if (res.status == KGATE_REFUSED) {
    if (optional_variant || !is_nominal(ctx, info.bindings)) {
      o.verdict = Verdict::refused;
      o.message = msg;
      o.evidence.reset();
      return o;
    }
    o.verdict = Verdict::fail;
    o.finding = "refused the nominal shape";
    o.evidence->expected = "a result (the nominal shape is not optional)";
    o.evidence->got = "KGATE_REFUSED: " + msg;
    return o;
  }
  o.verdict = Verdict::fail;
  o.finding = "error status";
  o.evidence->expected = "KGATE_OK";
  o.evidence->got = res.status == KGATE_ERROR ? "KGATE_ERROR: " + msg : fmt::format("unknown status {}: {}", res.status, msg);
  return o;
}

Evidence mismatch_evidence(const CaseInfo& info, const std::string& tensor, const HostArray& got,
                           const Reference* ref, const HostArray* expected_bits, const Comparison& c,
                           const Tolerance* tol) {
  Evidence e = info.evidence();
  e.tensor = tensor;
  if (c.kind == Mismatch::shape) {
    e.expected = ref ? fmt::format("{} {}", name_of(ref->dtype), shape_string(ref->shape)) : "";
    e.got = fmt::format("{} {}", name_of(got.dtype()), shape_string(got.shape()));
    e.detail = "dtype or shape of the result differs";
    return e;
  }
  const std::int64_t i = c.first;
  e.index = unravel(i, got.shape());
  // Bits matter wherever the judgement is about bits or about non-finite values.
  const bool bits = c.kind != Mismatch::value;
  e.got = format_element(got, i, bits);
  if (expected_bits) {
    e.expected = format_element(*expected_bits, i, bits);
  } else if (ref) {
    const double r = ref->rounded[static_cast<std::size_t>(i)], x = ref->exact[static_cast<std::size_t>(i)];
    e.expected = format_value(r, ref->dtype);
    if (!(r == x) && !(std::isnan(r) && std::isnan(x))) e.expected += fmt::format(" (f64 oracle {})", x);
  }
  std::string d = fmt::format("{}; {} of {} elements offend", to_string(c.kind), c.bad, got.numel());
  if (c.by_kind[static_cast<std::size_t>(c.kind)] < c.bad) {  // several kinds: the most serious is shown
    std::vector<std::string> kinds;
    for (std::size_t k = 0; k < kMismatchKinds; ++k)
      if (c.by_kind[k] > 0) kinds.push_back(fmt::format("{} {}", c.by_kind[k], to_string(static_cast<Mismatch>(k))));
    d += fmt::format(" ({})", fmt::join(kinds, ", "));
  }
  if (ref && tol && c.kind == Mismatch::value) {
    const double b = tol->bound(ref->exact[static_cast<std::size_t>(i)], ref->rms);
    const double err = std::fabs(got.get(i) - ref->rounded[static_cast<std::size_t>(i)]);
    d += fmt::format("\nerror {:.6g} > bound {:.6g} ({:.3g}x); worst {:.3g}x at {}; bound = {}", err, b, err / b,
                     c.max_ratio, format_index(unravel(c.worst, got.shape())), describe(*tol));
  }
  e.detail = d + "\n" + neighbourhood(got, expected_bits ? nullptr : ref, expected_bits, i, 3, bits);
  return e;
}

std::string precision_label(const ReferenceResult& refs, std::size_t k, const HostArray& got, const Reference& ref) {
  std::string best;
  double best_ratio = std::numeric_limits<double>::infinity();
  const std::vector<double> g = got.to_f64();
  for (std::size_t p = 1; p < refs.runs.size(); ++p) {
    const ReferenceRunResult& run = refs.runs[p];
    const std::vector<double> v = run.outputs.at(k).to_f64();
    if (v.size() != g.size()) continue;
    const double allowed = reference_term(run.error.at(k), ref) - (kRefFactor - 1.0) * run.error.at(k);  // e_run + floor
    double d = 0.0;
    bool same_classes = true;
    for (std::size_t i = 0; i < g.size() && same_classes; ++i) {
      if (!std::isfinite(ref.exact[i])) continue;
      if (std::isfinite(g[i]) && std::isfinite(v[i])) {
        d = std::max(d, std::fabs(g[i] - v[i]));
      } else if (!(std::isnan(g[i]) && std::isnan(v[i])) && g[i] != v[i]) {
        same_classes = false;
      }
    }
    if (!same_classes || d > allowed) continue;
    const double ratio = allowed > 0 ? d / allowed : 0.0;
    if (ratio < best_ratio) {
      best_ratio = ratio;
      best = run.precision;
    }
  }
  return best;
}

CaseOutcome judge_within(GateContext& ctx, const CaseInfo& info, const std::vector<HostArray>& got, const InputSet& in,
                         const OracleResult& oracle, const std::vector<Tolerance>& tol, const CallResult* r) {
  const Contract& c = ctx.contract();
  const ReferenceResultPtr refs = ctx.references(in, oracle);
  CaseOutcome o;
  o.error_ratio = 0.0;
  for (std::size_t k = 0; k < c.outputs.size(); ++k) {
    Tolerance t = tol.at(k);
    std::span<const std::uint8_t> reference_nonfinite;
    if (!refs->runs.empty()) {
      const ReferenceRunResult& working = refs->runs.front();
      t.ref_term = reference_term(working.error.at(k), oracle.refs.at(k));
      reference_nonfinite = working.nonfinite.at(k);
    }
    const Comparison cmp = compare_within(got.at(k), oracle.refs.at(k), t, reference_nonfinite);
    o.add_excused(cmp);
    o.error_ratio = std::max(o.error_ratio, cmp.max_ratio);
    if (!cmp.ok) {
      CaseOutcome f = failed(mismatch_evidence(info, c.outputs[k].name, got[k], &oracle.refs[k], nullptr, cmp, &t), r,
                             cmp.max_ratio);
      f.finding = to_string(cmp.kind);
      for (std::size_t e = 0; e < kExcuseKinds; ++e) f.excused[e] = o.excused[e];
      if (cmp.kind != Mismatch::shape)
        f.precision_label = precision_label(*ctx.labelled_references(in, oracle), k, got[k], oracle.refs[k]);
      return f;
    }
  }
  return o;
}

CaseOutcome run_and_judge(GateContext& ctx, const CaseInfo& info, const InputSet& in, const std::vector<Placement>& pin,
                          const std::vector<Placement>& pout, bool optional_variant) {
  std::vector<HostArray> got;
  CallResult r;
  {
    PlacedCall p(ctx.candidate(), in.arrays, pin, pout, ctx.attrs());
    r = call_once(ctx, p);
    if (auto bad = call_problem(ctx, r, 0, info, optional_variant)) return *bad;
    got = std::move(r.results[0].outputs);
  }
  const OracleResultPtr oracle = ctx.oracle(in);
  return judge_within(ctx, info, got, in, *oracle, ctx.tolerances(info.bindings), &r);
}

DenseRun run_dense(GateContext& ctx, const CaseInfo& info, const InputSet& in, std::vector<std::byte> poison) {
  DenseRun d;
  PlacedCall p(ctx.candidate(), in.arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
               ctx.attrs());
  d.call = call_once(ctx, p, std::move(poison));
  d.problem = call_problem(ctx, d.call, 0, info);
  if (!d.problem) d.outputs = std::move(d.call.results[0].outputs);
  return d;
}

}  // namespace kgate::gates
