// The verify loop: every requested gate in turn, each case of a gate until one fails (a FAIL that can only be
// a violation is held while the rest run: a broken-class one after it is reported instead), a failing case shrunk
// to the smallest admissible shape that still fails, per-gate timing, and on_result after every gate so a
// verdict once reached is never lost.
#include "kgate/verify.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "kgate/gate.hpp"
#include "kgate/report.hpp"
#include "gates/gates.hpp"

#ifndef KGATE_VERSION
#define KGATE_VERSION "0.0.0"
#endif

namespace kgate {
namespace {

constexpr int kShrinkTriesPerDim = 6;
constexpr int kShrinkTries = 24;

// A candidate that hangs would otherwise cost one full timeout, and one worker restart, per case of every
// gate. After kTimeoutsBeforeGivingUp consecutive timed-out calls it is not called again in this run: every
// further call ends TIMED_OUT at once and says why, so the verdicts stay TIMEOUT and the run ends.
constexpr int kTimeoutsBeforeGivingUp = 2;

class PatientTarget final : public Target {
 public:
  explicit PatientTarget(Target& t) : t_(t) {}
  std::string describe() const override { return t_.describe(); }
  DLDeviceType device() const override { return t_.device(); }
  BufferId alloc(std::size_t bytes) override { return t_.alloc(bytes); }
  void release(BufferId id) override { t_.release(id); }
  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override { t_.write(id, offset, data); }
  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    return t_.read(id, offset, bytes);
  }
  std::vector<GuardViolation> check_guards(BufferId id) override { return t_.check_guards(id); }
  CallResult call(const CallRequest& request) override {
    if (streak_ >= kTimeoutsBeforeGivingUp) {
      CallResult r;
      r.outcome = CallOutcome::timed_out;
      r.detail = fmt::format("not called: the candidate's last {} calls timed out", streak_);
      return r;
    }
    CallResult r = t_.call(request);
    streak_ = r.outcome == CallOutcome::timed_out ? streak_ + 1 : 0;
    return r;
  }
  // Once the candidate is given up on, its worker is restarted once (ending the hung call) and then left
  // alone: a restart per remaining case cost seconds each on a torch row and called nothing.
  void reset() override {
    if (streak_ >= kTimeoutsBeforeGivingUp) {
      if (reset_after_giving_up_) return;
      reset_after_giving_up_ = true;
    }
    t_.reset();
  }
  bool healthy() const override { return t_.healthy(); }

 private:
  Target& t_;
  int streak_ = 0;
  bool reset_after_giving_up_ = false;
};

bool is_terminal(Verdict v) {
  return v == Verdict::fail || v == Verdict::crash || v == Verdict::timeout || v == Verdict::error;
}

// Runs one case; anything kgate or the oracle cannot do becomes ERROR, never a verdict on the candidate.
CaseOutcome run_safely(GateContext& ctx, const GateCase& gc, const CaseInfo& info) {
  CaseOutcome o;
  try {
    if (!ctx.candidate().healthy()) ctx.candidate().reset();
    return gc.run(ctx, info);
  } catch (const OracleError& e) {
    o.message = fmt::format("the oracle could not run: {}", e.what());
  } catch (const SourceError& e) {
    o.message = fmt::format("the input source could not draw: {}", e.what());
  } catch (const TargetError& e) {
    o.message = fmt::format("the target could not serve kgate: {}", e.what());
  } catch (const std::exception& e) {
    o.message = fmt::format("kgate could not run the case: {}", e.what());
  }
  o.verdict = Verdict::error;
  return o;
}

std::string finding_of(const CaseOutcome& o) {
  switch (o.verdict) {
    case Verdict::crash: return "crash";
    case Verdict::timeout: return "timeout";
    case Verdict::fail: return o.finding.empty() ? "failed" : o.finding;
    default: return {};
  }
}

CaseInfo info_of(const std::string& gate, const GateCase& gc, const Bindings& b) {
  return CaseInfo{gate, gc.seed, b, gc.label};
}

// Re-runs a failing case at smaller admissible bindings, dim by dim, smallest value first; keeps the
// smallest that still FAILs the same way (a crash or a pass at a smaller shape does not count as the same
// failure, nor a FAIL with another finding: a cache keyed on addresses fails freshness as a stale result at one
// shape and as changed bits at another, as the allocator reuses addresses or not, and the report names the
// defect the gate first found).
// `tries` counts the re-runs (GateResult::shrink_runs).
CaseOutcome shrink(GateContext& ctx, const std::string& gate, const GateCase& gc, CaseOutcome failing, int& tries) {
  const Contract& c = ctx.contract();
  Bindings current = gc.bindings;
  for (const DimSpec& d : c.dims) {
    for (std::int64_t v : smaller_values(d, current.at(d.name), kShrinkTriesPerDim)) {
      if (tries >= kShrinkTries) return failing;
      Bindings b = current;
      b[d.name] = v;
      if (!repair_bindings(c, b) || !fits_budget(c, b) || b == current) continue;
      ++tries;
      CaseOutcome o = run_safely(ctx, gc, info_of(gate, gc, b));
      if (o.verdict == Verdict::crash || o.verdict == Verdict::timeout) {
        ctx.candidate().reset();
        return failing;  // no more risk: the failure as found stands
      }
      if (o.verdict == Verdict::fail && finding_of(o) == finding_of(failing)) {
        current = b;
        failing = std::move(o);
        break;  // the smallest failing value of this dim; on to the next dim
      }
    }
  }
  return failing;
}

std::string short_evidence(const Evidence& e) {
  std::string s = e.variant;
  if (!e.tensor.empty()) {
    s += fmt::format(": {}{}", e.tensor, e.index.empty() ? "" : shape_string(e.index));
    if (!e.expected.empty()) s += fmt::format(" expected {}", e.expected);
    if (!e.got.empty()) s += fmt::format(" got {}", e.got);
  } else if (!e.got.empty()) {
    s += ": " + e.got;
  }
  if (!e.bindings.empty()) s += fmt::format(" (at {})", to_string(e.bindings));
  return s;
}

// "excused 12 (non-finite where the contract's spread rule allows it), 3 (...)", or empty.
std::string excused_text(const std::vector<Excused>& ex) {
  std::vector<std::string> parts;
  for (const Excused& e : ex) parts.push_back(fmt::format("{} ({})", e.count, e.reason));
  return parts.empty() ? "" : "excused " + fmt::format("{}", fmt::join(parts, ", "));
}

void add_excused(std::int64_t (&sum)[kExcuseKinds], const CaseOutcome& o) {
  for (std::size_t k = 0; k < kExcuseKinds; ++k) sum[k] += o.excused[k];
}

std::vector<Excused> excused_list(const std::int64_t (&sum)[kExcuseKinds]) {
  std::vector<Excused> out;
  for (std::size_t k = 0; k < kExcuseKinds; ++k)
    if (sum[k] > 0) out.push_back({to_string(static_cast<Excuse>(k)), sum[k]});
  return out;
}

double worse(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

GateResult run_gate(Gate& gate, GateContext& ctx, const VerifyOptions& options) {
  GateResult res;
  const GateInfo gi = gate.info();
  res.gate = gi.name;
  const auto t0 = std::chrono::steady_clock::now();
  const GateContext::Counters before = ctx.counters();
  auto finish = [&]() -> GateResult {
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const GateContext::Counters& now = ctx.counters();
    res.candidate_calls = now.candidate_calls - before.candidate_calls;
    res.candidate_seconds = now.candidate_seconds - before.candidate_seconds;
    res.oracle_evaluations = now.oracle_evaluations - before.oracle_evaluations;
    res.oracle_reuses = now.oracle_reuses - before.oracle_reuses;
    res.reference_evaluations = now.reference_evaluations - before.reference_evaluations;
    res.label_evaluations = now.label_evaluations - before.label_evaluations;
    res.oracle_seconds = now.oracle_seconds - before.oracle_seconds;
    res.input_draws = now.input_draws - before.input_draws;
    res.draw_seconds = now.draw_seconds - before.draw_seconds;
    return res;
  };
  std::vector<GateCase> cases;
  try {
    if (!ctx.candidate().healthy()) ctx.candidate().reset();
    if (auto why = gate.skip_reason(ctx)) {
      res.verdict = Verdict::skip;
      res.summary = *why;
      return finish();
    }
    cases = gate.cases(ctx);
  } catch (const std::exception& e) {
    res.verdict = Verdict::error;
    res.summary = fmt::format("kgate could not prepare the gate: {}", e.what());
    return finish();
  }
  if (cases.empty()) {
    res.verdict = Verdict::skip;
    res.summary = "no case applies to this contract";
    return finish();
  }

  // A terminal outcome ends the gate. A FAIL is shrunk; the ratio stays the first-found case's (NaN when
  // no bound was behind the failure), since the shrunk case re-runs the same check at a smaller shape.
  // `then`: what stopped the gate after the outcome reported, when that is another one (or empty).
  auto conclude = [&](const GateCase& gc, CaseOutcome o, const std::string& then) -> GateResult {
    res.verdict = o.verdict;
    res.error_ratio = o.error_ratio;
    res.finding = finding_of(o);
    res.out_of_domain = o.out_of_domain;
    res.precision_label = o.precision_label;
    if (o.verdict == Verdict::fail && options.shrink && gc.shrinkable) {
      CaseOutcome small = shrink(ctx, res.gate, gc, o, res.shrink_runs);
      if (small.evidence && o.evidence && small.evidence->bindings != o.evidence->bindings) {
        res.original = o.evidence;
        if (!std::isnan(o.error_ratio)) res.error_ratio = worse(o.error_ratio, small.error_ratio);
        o = std::move(small);
        // The labels come from the case whose evidence the report shows (shrink keeps its finding).
        res.finding = finding_of(o);
        res.out_of_domain = o.out_of_domain;
        res.precision_label = o.precision_label;
      }
    }
    if (o.verdict == Verdict::crash || o.verdict == Verdict::timeout) ctx.candidate().reset();
    res.evidence = o.evidence;
    res.output = o.output;
    if (o.verdict == Verdict::error) {
      res.summary = o.message;
    } else if (o.evidence) {
      res.summary = short_evidence(*o.evidence);
      // the variant's text names the shape the case was found at; the evidence is at the shrunk one
      if (res.original) res.summary += fmt::format(" (shrunk from {})", to_string(res.original->bindings));
    } else {
      res.summary = fmt::format("{}: {}", gc.label, o.message);
    }
    if (res.out_of_domain) res.summary = "out of domain: " + res.summary;
    if (!res.precision_label.empty()) res.summary += fmt::format(" [matches {}]", res.precision_label);
    if (!then.empty()) res.summary += "; " + then;
    if (!res.excused.empty()) res.summary += "; " + excused_text(res.excused);
    return finish();
  };

  double worst = std::numeric_limits<double>::quiet_NaN();
  int skipped = 0;
  std::string refusal, skip_note;
  std::int64_t excused[kExcuseKinds] = {};
  // The first FAIL that can only be a violation (report.hpp, violation_only; or out of the source's domain):
  // held while the remaining cases run, so a lesser finding never hides a broken-class one after it.
  const GateCase* held_case = nullptr;
  CaseOutcome held;
  for (const GateCase& gc : cases) {
    CaseOutcome o = run_safely(ctx, gc, info_of(res.gate, gc, gc.bindings));
    ++res.cases;
    add_excused(excused, o);
    res.excused = excused_list(excused);
    if (!is_terminal(o.verdict)) worst = worse(worst, o.error_ratio);
    switch (o.verdict) {
      case Verdict::pass: continue;
      case Verdict::refused:
        ++res.refused;
        if (refusal.empty()) refusal = fmt::format("{}: {}", gc.label, o.message);
        continue;
      case Verdict::skip:
        ++skipped;
        if (skip_note.empty()) skip_note = o.message;
        continue;
      default: break;
    }
    if (o.verdict == Verdict::fail && (o.out_of_domain || violation_only(o.finding))) {
      // An in-domain violation counts, an out-of-domain finding does not: the first counts over the second.
      if (!held_case || (held.out_of_domain && !o.out_of_domain)) {
        held_case = &gc;
        held = std::move(o);
      }
      continue;
    }
    // A broken-class FAIL or a CRASH is what the gate reports, over any held one. A TIMEOUT or an ERROR
    // after a held FAIL ends the gate with the FAIL, saying what stopped it.
    if (held_case && (o.verdict == Verdict::timeout || o.verdict == Verdict::error)) {
      if (o.verdict == Verdict::timeout) ctx.candidate().reset();
      return conclude(*held_case, std::move(held), fmt::format("the gate then stopped at {}: {}", gc.label, to_string(o.verdict)));
    }
    return conclude(gc, std::move(o), {});
  }
  if (held_case) return conclude(*held_case, std::move(held), {});

  res.error_ratio = worst;
  const int judged = res.cases - res.refused - skipped;
  if (res.refused > 0) {
    // A clean refusal of something optional is not a failure, but the gate did not verify everything it
    // meant to, and the verdict says so.
    res.verdict = Verdict::refused;
    res.summary = fmt::format("{} of {} cases refused, {} passed; first refusal: {}", res.refused, res.cases,
                              judged, refusal);
  } else if (judged == 0) {
    res.verdict = Verdict::skip;
    res.summary = skip_note.empty() ? "no case could be judged" : skip_note;
  } else {
    res.verdict = Verdict::pass;
    res.summary = fmt::format("{} cases", res.cases);
    if (skipped > 0) res.summary += fmt::format(", {} skipped ({})", skipped, skip_note);
    if (!std::isnan(worst)) res.summary += fmt::format(", worst error {:.3g}x bound", worst);
  }
  if (!res.excused.empty()) res.summary += "; " + excused_text(res.excused);
  return finish();
}

void check_contract(const Contract& c) {
  std::string why;
  const Bindings nominal = c.nominal();
  if (!c.admissible(nominal, &why))
    throw std::invalid_argument(fmt::format("contract {}: the nominal shape is not admissible: {}", c.name, why));
  for (const auto* list : {&c.inputs, &c.outputs})
    for (const TensorSpec& t : *list) (void)t.resolve(nominal);  // throws naming the tensor and the dim
  if (c.outputs.empty()) throw std::invalid_argument(fmt::format("contract {}: no outputs to judge", c.name));
}

}  // namespace

std::vector<GateInfo> list_gates() {
  std::vector<GateInfo> out;
  for (const auto& g : registered_gates()) out.push_back(g->info());
  return out;
}

Report verify(const Contract& contract, Target& candidate, Oracle& oracle, const VerifyOptions& options) {
  const auto& all = registered_gates();
  std::vector<Gate*> chosen;
  if (options.gates.empty()) {
    for (const auto& g : all) chosen.push_back(g.get());
  } else {
    for (const std::string& name : options.gates) {
      Gate* found = nullptr;
      for (const auto& g : all)
        if (g->info().name == name) found = g.get();
      if (!found) {
        std::vector<std::string> known;
        for (const auto& g : all) known.push_back(g->info().name);
        throw std::invalid_argument(fmt::format("unknown gate \"{}\" (known: {})", name, fmt::join(known, ", ")));
      }
      if (std::find(chosen.begin(), chosen.end(), found) == chosen.end()) chosen.push_back(found);
    }
  }
  if (!(options.tolerance_scale > 0) || !std::isfinite(options.tolerance_scale))
    throw std::invalid_argument(fmt::format("tolerance_scale must be positive and finite, got {}", options.tolerance_scale));
  check_contract(contract);

  Report report;
  report.kgate_version = KGATE_VERSION;
  report.contract = contract.path;
  report.op = contract.name;
  report.candidate = candidate.describe();
  report.oracle = oracle.describe();
  report.seed = options.seed.value_or(fresh_seed());

  std::unique_ptr<InputSource> contract_source;
  InputSource* source = options.source;
  if (!source) {
    contract_source = make_contract_source(contract);
    source = contract_source.get();
  }
  report.source = source->describe();

  PatientTarget patient(candidate);
  GateContext ctx(contract, patient, oracle, *source, report.seed, options.tolerance_scale);
  std::optional<std::size_t> bounds_at;  // index of the bounds result, and how many violations it saw
  std::size_t seen_by_bounds = 0;
  for (Gate* g : chosen) {
    ctx.set_current_gate(g->info().name);
    report.gates.push_back(run_gate(*g, ctx, options));
    if (report.gates.back().gate == "bounds") {
      bounds_at = report.gates.size() - 1;
      seen_by_bounds = ctx.candidate_owned_violations().size();
    }
    // Attribution needs the oracle gate's result, which runs first; re-attributing after each gate keeps
    // what on_result reports equal to the final report.
    attribute_findings(report);
    if (options.on_result) options.on_result(report.gates.back());
  }
  // A guard of candidate-owned memory hit in a gate after bounds: bounds' verdict, reported again.
  if (bounds_at) {
    if (auto late = gates::late_candidate_owned_violation(ctx, report.gates[*bounds_at], seen_by_bounds)) {
      report.gates[*bounds_at] = std::move(*late);
      if (options.on_result) options.on_result(report.gates[*bounds_at]);
    }
  }
  return report;
}

void keep_large_allocations_in_heap() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace kgate
