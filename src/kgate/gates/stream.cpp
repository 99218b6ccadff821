// Gate 11, stream: the kernel honours the caller's stream and is safe to run concurrently. Two calls with
// different inputs in flight at once (CUDA: two streams, inputs staged by a long kernel on the caller's
// stream just before the call; CPU: two threads released together), repeated with the order swapped; each
// result must equal the same input run alone, bit for bit (tolerance-free) when the contract promises
// determinism, else within the oracle gate's bound. Where the backend times each call (the CPU), rounds go on
// until the two calls demonstrably overlapped in enough of them, with longer calls (larger shapes) where
// they rarely do: a race that never got the chance to happen is not a pass, and the summary says how many
// rounds overlapped.
#include <algorithm>
#include <cmath>

#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

constexpr int kRounds = 4;             // at least this many rounds
constexpr int kOverlapsWanted = 2;     // ... and, where calls are timed, this many that overlapped
constexpr int kRoundsPerSize = 64;     // rounds at one size before the calls are made longer
constexpr int kSizes = 4;              // 64K, 256K, 1M, 4M elements (as far as the contract admits)
constexpr std::int64_t kConcurrentElements = 1 << 16;

// Whether two timed invocations ran at the same time; true where the backend does not time them (CUDA:
// two streams in flight are the method there, and the staged inputs hold both calls back together).
bool overlapped(const CallResult& r) {
  if (r.results.size() < 2) return false;
  const InvocationResult& a = r.results[0];
  const InvocationResult& b = r.results[1];
  if (std::isnan(a.started) || std::isnan(b.started)) return true;
  return std::max(a.started, b.started) < std::min(a.finished, b.finished);
}

class StreamGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"stream", "honours the caller's stream and is safe to run concurrently",
            fmt::format("{} rounds of two calls in flight at once on different inputs (staged on the caller's "
                        "stream); each bitwise equal to the same input run alone (within bound if not "
                        "deterministic)",
                        kRounds),
            true, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    GateCase g;
    g.label = "standard sets 0 and 1 concurrently";
    // Large enough that a call outlasts the skew between two threads' starts (~tens of microseconds).
    g.bindings = concurrency_bindings(ctx.contract(), kConcurrentElements);
    g.seed = ctx.standard_stream(0).key();
    g.run = run_case;
    return {std::move(g)};
  }

 private:
  // Where the calls rarely overlap (a loaded machine deschedules one thread for longer than a short call
  // lasts), the rounds go on at up to kSizes growing sizes, each call four times longer than the last.
  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& first) {
    int overlaps = 0, rounds = 0;
    Bindings previous;
    for (int size = 0; size < kSizes; ++size) {
      CaseInfo info = first;
      if (size > 0) info.bindings = concurrency_bindings(ctx.contract(), kConcurrentElements << (2 * size));
      if (size > 0 && info.bindings == previous) break;  // the contract admits nothing larger
      previous = info.bindings;
      CaseOutcome o = run_size(ctx, info, overlaps, rounds);
      if (o.verdict != Verdict::pass || overlaps >= kOverlapsWanted) {
        if (o.verdict == Verdict::pass) o.message = fmt::format("{} of {} rounds overlapped", overlaps, rounds);
        return o;
      }
    }
    // Every round agreed, but the calls ran one after the other: say so rather than claim the property was
    // tested.
    CaseOutcome done;
    done.verdict = Verdict::skip;
    done.message = fmt::format("the two calls overlapped in only {} of {} rounds, up to {} elements: concurrency "
                               "not exercised",
                               overlaps, rounds, kConcurrentElements << (2 * (kSizes - 1)));
    return done;
  }

  // Rounds at one size until enough overlapped (or kRoundsPerSize); a pass here means "no interference
  // seen", the caller decides whether the overlaps make it a PASS.
  static CaseOutcome run_size(GateContext& ctx, const CaseInfo& info, int& overlaps, int& rounds) {
    const Contract& c = ctx.contract();
    const InputSetPtr sets[2] = {ctx.standard_inputs(info.bindings, 0), ctx.standard_inputs(info.bindings, 1)};
    std::vector<HostArray> alone[2];
    for (int k = 0; k < 2; ++k) {
      CaseInfo a = info;
      a.variant = fmt::format("{}: set {} alone", info.variant, k);
      DenseRun run = run_dense(ctx, a, *sets[k]);
      if (run.problem) return *run.problem;
      alone[k] = std::move(run.outputs);
    }
    const std::vector<Tolerance> tol = ctx.tolerances(info.bindings);
    for (int round = 0; round < kRoundsPerSize && (rounds < kRounds || overlaps < kOverlapsWanted);
         ++round, ++rounds) {
      PlacedCall p0(ctx.candidate(), sets[0]->arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
                    ctx.attrs());
      PlacedCall p1(ctx.candidate(), sets[1]->arrays, ctx.dense_inputs(info.bindings), ctx.dense_outputs(info.bindings),
                    ctx.attrs());
      const bool swapped = round % 2 == 1;
      CallRequest req;
      req.stream = StreamMode::staged_inputs;
      req.invocations = swapped ? std::vector<Invocation>{p1.invocation(), p0.invocation()}
                                : std::vector<Invocation>{p0.invocation(), p1.invocation()};
      const CallResult r = ctx.call(req);
      if (r.outcome == CallOutcome::completed && overlapped(r)) ++overlaps;
      for (int slot = 0; slot < 2; ++slot) {
        const int set = swapped ? 1 - slot : slot;
        CaseInfo s = info;
        s.variant = fmt::format("{}: round {}, set {} while set {} ran concurrently", info.variant, rounds + 1, set, 1 - set);
        if (auto bad = call_problem(ctx, r, static_cast<std::size_t>(slot), s)) return *bad;
        const std::vector<HostArray>& got = r.results[static_cast<std::size_t>(slot)].outputs;
        if (!c.deterministic) {
          CaseOutcome o = judge_within(ctx, s, got, *sets[set], *ctx.oracle(*sets[set]), tol, &r);
          if (o.verdict != Verdict::pass) return o;
          continue;
        }
        for (std::size_t o = 0; o < c.outputs.size(); ++o) {
          const Comparison cmp = compare_bitwise(alone[set][o], got[o]);
          if (cmp.ok) continue;
          Evidence e = mismatch_evidence(s, c.outputs[o].name, got[o], nullptr, &alone[set][o], cmp, nullptr);
          e.expected += " (the same input run alone)";
          e.detail = "concurrent calls interfere: shared state, or work outside the caller's stream\n" + e.detail;
          return failed(std::move(e), &r, std::numeric_limits<double>::quiet_NaN(), "concurrent calls interfere");
        }
      }
    }
    return CaseOutcome{};
  }
};

}  // namespace

std::unique_ptr<Gate> make_stream_gate() { return std::make_unique<StreamGate>(); }

}  // namespace kgate::gates
