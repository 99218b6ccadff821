// The verify loop: shrinking, reproducibility from the printed seed, CRASH/TIMEOUT/ERROR handling with reset,
// gate selection, callbacks and the tolerance sweep.
#include <atomic>

#include <gtest/gtest.h>

#include "kit.hpp"

namespace kgate::test {
namespace {

// Defect for shrinking: when a row is longer than 16 and not a multiple of 16, its last element is wrong
// (a vector main loop and a missing scalar tail).
std::int32_t tail_bug(const kgate_call& c) {
  elementwise_kernel(c);
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  if (n > 16 && n % 16 != 0)
    for (std::int64_t r = 0; r < rows; ++r) store(out(c, 0), r * n + n - 1, 0.5);
  return KGATE_OK;
}

TEST(Shrinking, AFailingShapeIsReducedToTheSmallestThatStillFails) {
  const Report r = run(elementwise(), tail_bug, 17, {"shapes"});
  const GateResult& g = r.gates.at(0);
  ASSERT_EQ(g.verdict, Verdict::fail) << g.summary;
  ASSERT_TRUE(g.evidence && g.original);
  EXPECT_EQ(g.evidence->bindings, (Bindings{{"M", 1}, {"N", 17}})) << to_string(g.evidence->bindings);
  EXPECT_NE(g.original->bindings, g.evidence->bindings);
  EXPECT_EQ(g.evidence->index, (Shape{0, 16})) << "the missing tail element";
  EXPECT_EQ(g.evidence->variant.find("standard set 0"), 0u) << "same variant as the original";
  EXPECT_EQ(g.evidence->seed, g.original->seed) << "same case seed";
  const std::string table = to_table(r, false);
  EXPECT_NE(table.find("shrunk from"), std::string::npos) << table;
  // the one-line summary says both shapes: where the evidence is and where the case was found
  EXPECT_NE(g.summary.find("(at " + to_string(g.evidence->bindings) + ") (shrunk from " +
                           to_string(g.original->bindings) + ")"),
            std::string::npos)
      << g.summary;
}

std::int32_t always_off(const kgate_call& c) {
  elementwise_kernel(c);
  store(out(c, 0), 0, load(out(c, 0), 0) + 1.0);
  return KGATE_OK;
}

TEST(Shrinking, WorksForAnyGateAndCanBeTurnedOff) {
  Report r = run(elementwise(), always_off, 5, {"oracle"});
  ASSERT_EQ(r.gates[0].verdict, Verdict::fail);
  EXPECT_EQ(r.gates[0].evidence->bindings, (Bindings{{"M", 1}, {"N", 1}}));
  EXPECT_EQ(r.gates[0].original->bindings, elementwise_contract().nominal());
  r = run(elementwise(), always_off, 5, {"oracle"}, /*shrink=*/false);
  EXPECT_EQ(r.gates[0].evidence->bindings, elementwise_contract().nominal());
  EXPECT_FALSE(r.gates[0].original.has_value());
}

// Times, and the stream gate's count of rounds (it runs until enough calls overlapped, which depends on
// the scheduler), are not part of a verdict.
std::string without_times(Report r) {
  for (GateResult& g : r.gates) {
    g.seconds = g.candidate_seconds = g.oracle_seconds = g.draw_seconds = 0;
    if (g.gate == "stream" && g.verdict != Verdict::fail) {
      g.summary.clear();
      g.cases = g.candidate_calls = g.input_draws = 0;  // rounds until two calls overlap
      if (g.verdict == Verdict::skip) g.verdict = Verdict::pass;  // concurrency not exercised this time
    }
  }
  return to_json(r);
}

TEST(Reproducibility, TheSeedAndTheGateNameReproduceEveryVerdict) {
  const EntryFn k = [](const kgate_call& c) { return tail_bug(c); };
  const Report a = run(elementwise(), k, 123);
  const Report b = run(elementwise(), k, 123);
  EXPECT_EQ(without_times(a), without_times(b));
  for (const GateResult& g : a.gates) {
    const Report alone = run(elementwise(), k, 123, {g.gate});
    if (!concurrency_unexercised(g) && !concurrency_unexercised(alone.gates.at(0)))
      EXPECT_EQ(alone.gates.at(0).verdict, g.verdict) << g.gate;
    if (g.evidence) {
      EXPECT_EQ(alone.gates[0].evidence->bindings, g.evidence->bindings) << g.gate;
      EXPECT_EQ(alone.gates[0].evidence->expected, g.evidence->expected) << g.gate;
      EXPECT_EQ(alone.gates[0].evidence->got, g.evidence->got) << g.gate;
    }
  }
  const Report other = run(elementwise(), k, 124, {"oracle"});
  EXPECT_NE(other.seed, a.seed);
}

TEST(Reproducibility, NoSeedMeansAFreshOneThatIsReported) {
  auto target = make_inprocess_target("e", elementwise_kernel);
  const Subject s = elementwise();
  VerifyOptions o;
  o.gates = {"oracle"};
  const Report a = verify(s.contract, *target, *s.oracle, o);
  const Report b = verify(s.contract, *target, *s.oracle, o);
  EXPECT_NE(a.seed, b.seed);
}

// A target whose calls crash or hang when a row is 17 long, as an isolated worker would report them.
class FlakyTarget final : public Target {
 public:
  FlakyTarget(CallOutcome how) : inner_(make_inprocess_target("flaky", elementwise_kernel)), how_(how) {}
  std::string describe() const override { return "flaky"; }
  DLDeviceType device() const override { return kDLCPU; }
  BufferId alloc(std::size_t n) override { return check(), inner_->alloc(n); }
  void release(BufferId id) override { check(), inner_->release(id); }
  void write(BufferId id, std::size_t o, std::span<const std::byte> d) override { check(), inner_->write(id, o, d); }
  std::vector<std::byte> read(BufferId id, std::size_t o, std::size_t n) override { return check(), inner_->read(id, o, n); }
  std::vector<GuardViolation> check_guards(BufferId id) override { return inner_->check_guards(id); }
  CallResult call(const CallRequest& r) override {
    check();
    if (r.invocations.at(0).inputs.at(0).layout.shape.back() == 17) {
      healthy_ = false;
      CallResult res;
      res.outcome = how_;
      res.detail = how_ == CallOutcome::crashed ? "SIGSEGV" : "timeout after 10.0 s";
      res.output = "about to crash\n";
      return res;
    }
    return inner_->call(r);
  }
  void reset() override {
    ++resets;
    healthy_ = true;
    inner_->reset();
  }
  bool healthy() const override { return healthy_; }
  int resets = 0;

 private:
  void check() const {
    if (!healthy_) throw TargetError("the worker died and was not reset");
  }
  std::unique_ptr<Target> inner_;
  CallOutcome how_;
  bool healthy_ = true;
};

TEST(Outcomes, ACrashEndsOneGateAsCrashAndTheRunGoesOn) {
  for (CallOutcome how : {CallOutcome::crashed, CallOutcome::timed_out}) {
    FlakyTarget t(how);
    const Subject s = elementwise();
    VerifyOptions o;
    o.seed = 3;
    const Report r = verify(s.contract, t, *s.oracle, o);
    const GateResult* shapes = find(r, "shapes");
    EXPECT_EQ(shapes->verdict, how == CallOutcome::crashed ? Verdict::crash : Verdict::timeout) << verdicts(r);
    EXPECT_EQ(shapes->output, "about to crash\n");
    ASSERT_TRUE(shapes->evidence);
    EXPECT_EQ(shapes->evidence->bindings.at("N"), 17) << "evidence says where it crashed";
    EXPECT_GE(t.resets, 1);
    EXPECT_EQ(find(r, "layout")->verdict, Verdict::pass) << "later gates ran on a reset target";
    EXPECT_EQ(find(r, "oracle")->verdict, Verdict::pass);
    EXPECT_EQ(r.exit_code(), 1);
    // A crash is broken (no tolerance explains a dead process); a timeout is a status, never broken.
    EXPECT_EQ(classify(r), how == CallOutcome::crashed ? Classification::broken : Classification::violation);
  }
}

TEST(Outcomes, AnOracleThatCannotRunIsAnErrorNeverAVerdictOnTheCandidate) {
  const Contract c = elementwise_contract();
  auto bad = make_function_oracle("broken oracle", [](const std::vector<HostArray>&, const Bindings&, const Attrs&)
                                                       -> std::vector<HostArray> { throw std::runtime_error("no GPU"); });
  auto target = make_inprocess_target("e", elementwise_kernel);
  VerifyOptions o;
  o.seed = 1;
  const Report r = verify(c, *target, *bad, o);
  EXPECT_EQ(find(r, "oracle")->verdict, Verdict::error);
  EXPECT_NE(find(r, "oracle")->summary.find("no GPU"), std::string::npos) << find(r, "oracle")->summary;
  EXPECT_EQ(find(r, "determinism")->verdict, Verdict::pass) << "gates that need no oracle still judge";
  EXPECT_EQ(r.exit_code(), 2);
}

TEST(Outcomes, AnOracleWithTheWrongShapeIsAnError) {
  const Contract c = elementwise_contract();
  auto bad = make_function_oracle("short", [](const std::vector<HostArray>&, const Bindings&, const Attrs&) {
    return std::vector<HostArray>{HostArray(DType::f64, {1})};
  });
  auto target = make_inprocess_target("e", elementwise_kernel);
  VerifyOptions o;
  o.seed = 1;
  o.gates = {"oracle"};
  const Report r = verify(c, *target, *bad, o);
  EXPECT_EQ(r.gates[0].verdict, Verdict::error);
  EXPECT_NE(r.gates[0].summary.find("shape [1]"), std::string::npos) << r.gates[0].summary;
}

TEST(Verify, UnknownGatesAndBadContractsAreRejectedUpFront) {
  const Subject s = elementwise();
  auto target = make_inprocess_target("e", elementwise_kernel);
  VerifyOptions o;
  o.gates = {"oracle", "speed"};
  try {
    verify(s.contract, *target, *s.oracle, o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"speed\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("determinism"), std::string::npos) << "lists the known gates: " << e.what();
  }
  Contract c = s.contract;
  c.dims[0].nominal = 1000;
  EXPECT_THROW(verify(c, *target, *s.oracle, VerifyOptions{}), std::invalid_argument);
  o.gates.clear();
  o.tolerance_scale = 0;
  EXPECT_THROW(verify(s.contract, *target, *s.oracle, o), std::invalid_argument);
}

TEST(Verify, GatesRunInTheOrderAskedAndOnResultSeesEach) {
  const Subject s = elementwise();
  auto target = make_inprocess_target("e", elementwise_kernel);
  VerifyOptions o;
  o.seed = 2;
  o.gates = {"layout", "nan", "layout"};
  std::vector<std::string> seen;
  o.on_result = [&](const GateResult& g) { seen.push_back(g.gate); };
  const Report r = verify(s.contract, *target, *s.oracle, o);
  EXPECT_EQ(seen, (std::vector<std::string>{"layout", "nan"}));
  ASSERT_EQ(r.gates.size(), 2u);
  EXPECT_GT(r.gates[0].seconds, 0.0);
  EXPECT_GT(r.gates[0].cases, 0);
}

TEST(Verify, ListGatesIsTheTwelveThenBaseline) {
  const std::vector<GateInfo> g = list_gates();
  const std::vector<std::string> names{"oracle", "nan", "inf", "determinism", "shapes", "accumulation", "immutability",
                                       "coverage", "bounds", "freshness", "stream", "layout", "baseline"};
  ASSERT_EQ(g.size(), names.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].name, names[i]);
    EXPECT_FALSE(g[i].property.empty());
    EXPECT_FALSE(g[i].method.empty());
    EXPECT_EQ(g[i].is_baseline, names[i] == "baseline");
  }
  for (const char* t : {"nan", "inf", "determinism", "immutability", "coverage", "bounds", "freshness", "stream"})
    EXPECT_TRUE(std::find_if(g.begin(), g.end(), [&](const GateInfo& x) { return x.name == t && x.tolerance_free; }) != g.end()) << t;
  for (const char* t : {"oracle", "shapes", "accumulation", "layout", "baseline"})
    EXPECT_TRUE(std::find_if(g.begin(), g.end(), [&](const GateInfo& x) { return x.name == t && !x.tolerance_free; }) != g.end()) << t;
}

// Error 1e-4 relative: about 400x a few f32 ulps.
std::int32_t off_by_1e4(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
    store(out(c, 0), i, relu(static_cast<float>(load(in(c, 0), i))) * static_cast<float>(load(in(c, 1), i)) * 1.0001f);
  return KGATE_OK;
}

TEST(Verify, TheThresholdSweepRelaxesOnlyToleranceGates) {
  const Subject s = elementwise();
  std::vector<std::size_t> failures;
  for (double scale : {1.0, 10.0, 100.0, 1000.0}) {
    auto target = make_inprocess_target("e", off_by_1e4);
    VerifyOptions o;
    o.seed = 8;
    o.tolerance_scale = scale;
    const Report r = verify(s.contract, *target, *s.oracle, o);
    failures.push_back(failing(r).size());
    EXPECT_EQ(find(r, "nan")->verdict, Verdict::pass);
    if (scale == 1.0) {
      EXPECT_EQ(find(r, "oracle")->verdict, Verdict::fail);
      EXPECT_EQ(classify(r), Classification::broken) << "ratio " << find(r, "oracle")->error_ratio;
    }
    if (scale == 1000.0) {
      EXPECT_EQ(find(r, "oracle")->verdict, Verdict::pass) << find(r, "oracle")->summary;
    }
  }
  EXPECT_TRUE(std::is_sorted(failures.rbegin(), failures.rend()));
  EXPECT_GT(failures.front(), failures.back());
}

TEST(Memo, OracleOutputsAreComputedOncePerInputSet) {
  const Contract c = elementwise_contract();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto inner = elementwise_oracle();
  auto counting = make_function_oracle("count", [&, calls](const std::vector<HostArray>& in, const Bindings& b,
                                                           const Attrs& a) {
    ++*calls;
    return inner->evaluate(in, b, a);
  });
  auto target = make_inprocess_target("e", elementwise_kernel);
  VerifyOptions o;
  o.seed = 4;
  verify(c, *target, *counting, o);
  const int all = calls->load();
  // The oracle gate's 8 sets and 4 magnitude-swept ones, the injections (one set per case: 3 NaN sites, 3 Inf
  // sites and 2 near-max values per input),
  // one set per swept shape, coverage's special values, freshness's two variants, baseline's 5 trials;
  // everything else reuses the standard sets.
  calls->store(0);
  o.gates = {"oracle", "freshness", "layout", "stream", "coverage"};
  verify(c, *target, *counting, o);
  EXPECT_LE(calls->load(), 8 + 4 + 1 + 2) << "freshness, layout, stream and coverage reuse the oracle gate's sets";
  EXPECT_LE(all, 8 + 4 + 6 + 10 + 22 + 1 + 2 + 5) << all;
  // A site per case costs one oracle evaluation per case and nothing else (the nominal set and the structure
  // it keeps are shared).
  calls->store(0);
  o.gates = {"nan", "inf"};
  const Report r = verify(c, *target, *counting, o);
  EXPECT_EQ(calls->load(), find(r, "nan")->cases + find(r, "inf")->cases);
  EXPECT_EQ(find(r, "nan")->cases, 2 * 3);
  EXPECT_EQ(find(r, "inf")->cases, 2 * (3 + 2));
}

}  // namespace
}  // namespace kgate::test
