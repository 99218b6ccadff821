// The engine's general seams and properties of issue 14: an input source of its own, the structure its
// draws share (and that perturbations keep or label), inputs with exact zeros for coverage, freshness
// variants sharing first elements, differing inside or only in the tail, the indeterminate-form finding,
// and guard violations in memory the candidate allocated itself.
#include <gtest/gtest.h>

#include "kgate/compare.hpp"
#include "kgate/inputs.hpp"
#include "kgate/structure.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

HostArray from(DType t, Shape s, std::vector<double> v) { return HostArray::from_f64(t, std::move(s), v); }

TEST(Structure, InfersZerosSymmetrySignAndIntegrality) {
  const HostArray a = from(DType::f32, {2, 2}, {1, 0, 2, 3});
  const HostArray b = from(DType::f32, {2, 2}, {4, 0, 5, 6});
  const InputStructure s = infer_structure({&a, &b});
  EXPECT_EQ(s.zero_count, 1);
  EXPECT_EQ(s.sign, SignStructure::nonnegative);
  EXPECT_TRUE(s.integral);
  EXPECT_FALSE(s.symmetric);
  EXPECT_EQ(structure_violation(s, from(DType::f32, {2, 2}, {1, 0, 1, 1})), "");
  EXPECT_NE(structure_violation(s, from(DType::f32, {2, 2}, {1, NAN, 1, 1})).find("structural zero"), std::string::npos);
  EXPECT_NE(structure_violation(s, from(DType::f32, {2, 2}, {-1, 0, 1, 1})).find("non-negative"), std::string::npos);
  EXPECT_NE(structure_violation(s, from(DType::f32, {2, 2}, {0.5, 0, 1, 1})).find("integral"), std::string::npos);

  const HostArray c = from(DType::f32, {2, 2}, {1, -2, -2, 3});
  const HostArray d = from(DType::f32, {2, 2}, {0.5, 7, 7, -1});
  const InputStructure sym = infer_structure({&c, &d});
  EXPECT_TRUE(sym.symmetric);
  EXPECT_EQ(sym.sign, SignStructure::any);
  EXPECT_NE(structure_violation(sym, from(DType::f32, {2, 2}, {1, 2, 3, 4})).find("asymmetric"), std::string::npos);

  // Chance zeros of a discrete draw differ between draws: not structural.
  const HostArray e = from(DType::f32, {4}, {0, 1, 0, 1});
  const HostArray f = from(DType::f32, {4}, {1, 0, 0, 1});
  EXPECT_EQ(infer_structure({&e, &f}).zero_count, 0);
}

// x and y lower-triangular in every draw (as torch.tril(randn) is).
class TrilSource final : public InputSource {
 public:
  explicit TrilSource(const Contract& c) : contract_(c) {}
  std::string describe() const override { return "tril(x), tril(y)"; }
  std::vector<HostArray> draw(const Bindings& b, std::uint64_t seed) override {
    ++draws;
    std::vector<HostArray> v = generate_inputs(contract_, b, Stream(seed), Distribution::contract);
    for (HostArray& x : v) {
      const std::int64_t n = x.shape()[1];
      for (std::int64_t i = 0; i < x.shape()[0]; ++i)
        for (std::int64_t j = i + 1; j < n; ++j) x.set(i * n + j, 0.0);
    }
    return v;
  }
  int draws = 0;

 private:
  const Contract& contract_;
};

// Correct on lower-triangular x only: skips the upper triangle, where x is structurally zero (z = 0 there).
std::int32_t triangular_elementwise(const kgate_call& c) {
  const std::int64_t rows = in(c, 0).shape[0], cols = in(c, 0).shape[1];
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      store2(out(c, 0), i, j, j > i ? 0.0 : relu(static_cast<float>(load2(in(c, 0), i, j))) * static_cast<float>(load2(in(c, 1), i, j)));
  return KGATE_OK;
}

Report run_with(const Subject& s, EntryFn kernel, InputSource* source, std::vector<std::string> gates) {
  auto target = make_inprocess_target(s.contract.name, std::move(kernel));
  VerifyOptions o;
  o.seed = 5;
  o.gates = std::move(gates);
  o.source = source;
  return verify(s.contract, *target, *s.oracle, o);
}

TEST(Source, EveryDrawComesFromTheSourceAndInjectionsKeepItsStructuralZeros) {
  const Subject s = elementwise();
  TrilSource src(s.contract);
  const Report r = run_with(s, triangular_elementwise, &src, {"oracle", "nan", "inf"});
  EXPECT_EQ(r.source, "tril(x), tril(y)");
  EXPECT_GT(src.draws, 0);
  // NaN planted in the zero triangle would make a triangle-aware kernel "mask" it; kept off it, it passes.
  for (const char* g : {"oracle", "nan", "inf"}) EXPECT_EQ(find(r, g)->verdict, Verdict::pass) << g << ": " << find(r, g)->summary;
}

TEST(Source, CoveragesExactZerosKeepTheSourcesStructuralZeros) {
  const Subject s = elementwise();
  TrilSource src(s.contract);
  const Report r = run_with(s, triangular_elementwise, &src, {"coverage"});
  const GateResult* cov = find(r, "coverage");
  ASSERT_NE(cov, nullptr);
  EXPECT_EQ(cov->verdict, Verdict::pass) << cov->summary;
}

class ThrowingSource final : public InputSource {
 public:
  std::string describe() const override { return "throws"; }
  std::vector<HostArray> draw(const Bindings&, std::uint64_t) override { throw std::runtime_error("no draw today"); }
};

TEST(Source, AFailingSourceIsAnErrorNeverAVerdict) {
  ThrowingSource src;
  const Report r = run_with(elementwise(), elementwise_kernel, &src, {"oracle"});
  EXPECT_EQ(find(r, "oracle")->verdict, Verdict::error);
  EXPECT_NE(find(r, "oracle")->summary.find("no draw today"), std::string::npos) << find(r, "oracle")->summary;
  // Not held against the kernel (no violation, exit status 2), and not shown clean either.
  EXPECT_EQ(classify(r), Classification::incomplete);
  EXPECT_EQ(r.exit_code(), 2);
}

// Skips the store where x is exactly zero, relying on a zeroed output.
std::int32_t skips_exact_zeros(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
    const double x = load(in(c, 0), i);
    if (x == 0.0) continue;
    store(out(c, 0), i, relu(static_cast<float>(x)) * static_cast<float>(load(in(c, 1), i)));
  }
  return KGATE_OK;
}

TEST(Coverage, InputsWithExactZerosCatchAKernelThatSkipsThem) {
  const Report r = run(elementwise(), skips_exact_zeros, 3, {"coverage"});
  const GateResult* g = find(r, "coverage");
  EXPECT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_NE(g->summary.find("special values"), std::string::npos) << g->summary;
  EXPECT_FALSE(g->out_of_domain);
}

// Remembers the last call by input pointer, size and first element.
std::int32_t first_element_cache(const kgate_call& c) {
  static const void* last = nullptr;
  static double first = 0;
  static std::int64_t n = -1;
  const double f = load(in(c, 0), 0);
  if (in(c, 0).data == last && count(in(c, 0)) == n && f == first) return KGATE_OK;
  last = in(c, 0).data;
  n = count(in(c, 0));
  first = f;
  return elementwise_kernel(c);
}

// Remembers the last call by input pointer, size, first and last elements: only an input differing inside
// (not at its start, not at its tail) gets the stale result.
std::int32_t first_last_cache(const kgate_call& c) {
  static const void* last = nullptr;
  static double first = 0, final = 0;
  static std::int64_t n = -1;
  const double f = load(in(c, 0), 0), l = load(in(c, 0), count(in(c, 0)) - 1);
  if (in(c, 0).data == last && count(in(c, 0)) == n && f == first && l == final) return KGATE_OK;
  last = in(c, 0).data;
  n = count(in(c, 0));
  first = f;
  final = l;
  return elementwise_kernel(c);
}

TEST(Freshness, AnInputDifferingOnlyInsideInTheSameBuffersCatchesAFirstAndLastElementCache) {
  const Report r = run(elementwise(), first_last_cache, 9, {"freshness"});
  const GateResult* g = find(r, "freshness");
  EXPECT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_EQ(g->finding, "stale result") << g->summary;
  ASSERT_TRUE(g->evidence);
  EXPECT_NE(g->evidence->variant.find("middle"), std::string::npos) << g->evidence->variant;
}

TEST(Freshness, AnInputSharingItsFirstElementsInTheSameBuffersCatchesAFirstElementCache) {
  const Report r = run(elementwise(), first_element_cache, 9, {"freshness"});
  const GateResult* g = find(r, "freshness");
  EXPECT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_EQ(g->finding, "stale result") << g->summary;
}

// Remembers the last call by input pointer, size, first element and the element in the middle: only an input
// differing in its tail (the first and middle elements as they were) gets the stale result.
std::int32_t first_middle_cache(const kgate_call& c) {
  static const void* last = nullptr;
  static double first = 0, middle = 0;
  static std::int64_t n = -1;
  const std::int64_t count_now = count(in(c, 0));
  const double f = load(in(c, 0), 0), m = load(in(c, 0), count_now / 2);
  if (in(c, 0).data == last && count_now == n && f == first && m == middle) return KGATE_OK;
  last = in(c, 0).data;
  n = count_now;
  first = f;
  middle = m;
  return elementwise_kernel(c);
}

TEST(Freshness, AnInputDifferingOnlyInItsTailInTheSameBuffersCatchesAFirstAndMiddleElementCache) {
  // Neither another draw (its first element differs) nor the middle variant (its middle element differs)
  // reaches this cache: the tail variant alone does, and the evidence names it.
  const Report r = run(elementwise(), first_middle_cache, 9, {"freshness"});
  const GateResult* g = find(r, "freshness");
  EXPECT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_EQ(g->finding, "stale result") << g->summary;
  ASSERT_TRUE(g->evidence);
  EXPECT_NE(g->evidence->variant.find("last quarter"), std::string::npos) << g->evidence->variant;
}

// y[r] = mean of row r of x [R, N], f32, rows near 1.52: the rows of two draws differ by about 0.01.
Subject row_mean() {
  Subject s;
  s.contract.name = "row_mean";
  s.contract.working_precision = DType::f32;
  s.contract.dims = {dim("R", 1, 16, 8), dim("N", 1, 2048, 1024)};
  s.contract.inputs = {tensor("x", DType::f32, {"R", "N"})};
  s.contract.inputs[0].domain = Domain{DomainKind::normal, 1.52, 0.3};
  s.contract.outputs = {tensor("y", DType::f32, {"R"})};
  s.contract.outputs[0].reduced = {"N"};
  s.oracle = make_function_oracle("row mean f64", [](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
    const std::int64_t rows = b.at("R"), n = b.at("N");
    HostArray y(DType::f64, {rows});
    for (std::int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (std::int64_t j = 0; j < n; ++j) acc += in[0].get(r * n + j);
      y.set(r, acc / static_cast<double>(n));
    }
    return std::vector<HostArray>{std::move(y)};
  });
  return s;
}

double row_mean_of(const kgate_call& c, std::int64_t r) {
  const std::int64_t n = in(c, 0).shape[1];
  double acc = 0;
  for (std::int64_t j = 0; j < n; ++j) acc += load2(in(c, 0), r, j);
  return acc / static_cast<double>(n);
}

// Rounds each mean to a grid of 1/16: imprecise (the oracle gate's business), never stale, though two
// draws' means near 1.52 both round to 1.5.
std::int32_t coarse_row_mean(const kgate_call& c) {
  for (std::int64_t r = 0; r < in(c, 0).shape[0]; ++r) store(out(c, 0), r, std::nearbyint(row_mean_of(c, r) * 16) / 16);
  return KGATE_OK;
}

// Exact, but returns at once (the output as it was) when called again on the same input pointer.
std::int32_t pointer_cached_row_mean(const kgate_call& c) {
  static const void* last = nullptr;
  if (in(c, 0).data == last) return KGATE_OK;
  last = in(c, 0).data;
  for (std::int64_t r = 0; r < in(c, 0).shape[0]; ++r) store(out(c, 0), r, row_mean_of(c, r));
  return KGATE_OK;
}

TEST(Freshness, AnImpreciseKernelRoundingBsAnswerToAsIsNotStale) {
  const GateResult coarse = *find(run(row_mean(), coarse_row_mean, 3, {"freshness"}), "freshness");
  EXPECT_NE(coarse.finding, "stale result") << coarse.summary;
  EXPECT_EQ(coarse.verdict, Verdict::fail) << "B is still held to its bound: " << coarse.summary;
  const GateResult cached = *find(run(row_mean(), pointer_cached_row_mean, 3, {"freshness"}), "freshness");
  EXPECT_EQ(cached.verdict, Verdict::fail) << cached.summary;
  EXPECT_EQ(cached.finding, "stale result") << cached.summary;
}

TEST(Inf, AFiniteValueWhereTheOracleIsNanUnderInjectedInfIsTheIndeterminateFinding) {
  // Returns 0 wherever the result is not finite: NaN for Inf * 0-like cases becomes an ordinary number.
  auto finite_only = [](const kgate_call& c) {
    for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
      const float x = static_cast<float>(load(in(c, 0), i)), y = static_cast<float>(load(in(c, 1), i));
      const float z = relu(x) * y;
      store(out(c, 0), i, std::isnan(z) && !std::isnan(x) && !std::isnan(y) ? 0.0f : z);
    }
    return KGATE_OK;
  };
  // relu(-Inf) * y = 0 * y is finite; relu(+Inf) * y is +-Inf; Inf injected into y against relu(x) = 0
  // gives 0 * Inf = NaN: the oracle is NaN there, the kernel says 0.
  const Report r = run(elementwise(), finite_only, 21, {"inf"});
  const GateResult* g = find(r, "inf");
  ASSERT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_EQ(g->finding, "indeterminate form") << g->summary;
  EXPECT_EQ(classify(r), Classification::violation) << "its own class: never broken";
}

// c = a @ b over [N, N] in f32 (K = N reduced), with a float64 oracle that multiplies densely: under the
// TrilSource both factors are lower-triangular in every draw, as KernelBench's triangular matmul tasks are.
Subject square_matmul() {
  Subject s;
  s.contract.name = "square_matmul";
  s.contract.working_precision = DType::f32;
  s.contract.dims = {dim("N", 1, 32, 16)};
  s.contract.inputs = {tensor("a", DType::f32, {"N", "N"}), tensor("b", DType::f32, {"N", "N"})};
  s.contract.outputs = {tensor("c", DType::f32, {"N", "N"})};
  s.contract.outputs[0].reduced = {"N"};
  s.oracle = make_function_oracle("dense matmul f64", [](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
    const std::int64_t n = b.at("N");
    HostArray c(DType::f64, {n, n});
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < n; ++k) acc += in[0].get(i * n + k) * in[1].get(k * n + j);
        c.set(i * n + j, acc);
      }
    return std::vector<HostArray>{std::move(c)};
  });
  return s;
}

// Correct on lower-triangular a and b: c[i, j] sums a[i, k] b[k, j] over k in [j, i] only (elsewhere one
// factor is a structural zero), and the upper triangle of c is 0.
std::int32_t triangular_matmul(const kgate_call& c) {
  const std::int64_t n = in(c, 0).shape[0];
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (std::int64_t k = j; k <= i; ++k)
        acc += static_cast<float>(load2(in(c, 0), i, k)) * static_cast<float>(load2(in(c, 1), k, j));
      store2(out(c, 0), i, j, acc);
    }
  return KGATE_OK;
}

// The same, but a NaN or Inf that does reach an output is replaced by 0 (masked).
std::int32_t triangular_matmul_masking(const kgate_call& c) {
  triangular_matmul(c);
  for (std::int64_t i = 0; i < count(out(c, 0)); ++i)
    if (!std::isfinite(load(out(c, 0), i))) store(out(c, 0), i, 0.0);
  return KGATE_OK;
}

TEST(Nonfinite, AnOracleNanThatArrivesOnlyThroughAStructuralZeroIsExcusedAndCounted) {
  const Subject s = square_matmul();
  TrilSource src(s.contract);
  const Report r = run_with(s, triangular_matmul, &src, {"oracle", "nan", "inf"});
  for (const char* g : {"oracle", "nan", "inf"}) {
    const GateResult* res = find(r, g);
    EXPECT_EQ(res->verdict, Verdict::pass) << g << ": " << res->summary;
  }
  // The dense oracle's 0 * NaN is not held against the kernel, and the summary says how many and why.
  for (const char* g : {"nan", "inf"}) {
    const GateResult* res = find(r, g);
    std::int64_t excused = 0;
    for (const Excused& e : res->excused)
      if (e.reason == to_string(Excuse::structural_zero)) excused += e.count;
    EXPECT_GT(excused, 0) << g << ": " << res->summary;
    EXPECT_NE(res->summary.find("structural zero"), std::string::npos) << res->summary;
  }
  EXPECT_EQ(classify(r), Classification::clean) << verdicts(r);
}

TEST(Nonfinite, AStructuralZeroNeverExcusesANanTheOperatorCarries) {
  const Subject s = square_matmul();
  TrilSource src(s.contract);
  // Outputs that do depend on the planted value (through non-zero factors) must still be NaN.
  const Report r = run_with(s, triangular_matmul_masking, &src, {"nan"});
  const GateResult* nan = find(r, "nan");
  ASSERT_EQ(nan->verdict, Verdict::fail) << nan->summary;
  EXPECT_EQ(nan->finding, "NaN masked");
  EXPECT_FALSE(nan->out_of_domain);
  EXPECT_EQ(classify(r), Classification::broken);
  // relu masking NaN on a source with structural zeros: relu's dependence on x is not a structural zero's.
  const Subject e = elementwise();
  TrilSource tril(e.contract);
  auto fmax_relu = [](const kgate_call& c) {
    for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
      store(out(c, 0), i, std::fmax(static_cast<float>(load(in(c, 0), i)), 0.0f) * static_cast<float>(load(in(c, 1), i)));
    return KGATE_OK;
  };
  const Report r2 = run_with(e, fmax_relu, &tril, {"nan"});
  EXPECT_EQ(find(r2, "nan")->verdict, Verdict::fail) << find(r2, "nan")->summary;
  EXPECT_EQ(find(r2, "nan")->finding, "NaN masked");
}

// A target whose callee "allocates" memory of its own and overruns it in every third call: it reports the
// violation as a guarded allocator would.
class OverrunsOwnMemory final : public ForwardingTarget {
 public:
  using ForwardingTarget::ForwardingTarget;
  std::string describe() const override { return "overruns its own scratch"; }
  CallResult call(const CallRequest& req) override {
    CallResult r = t_->call(req);
    if (++calls_ % 3 == 0) r.guards.push_back({kCandidateOwnedBuffer, 4096, 0xa5, 0x00, "scratch of 4096 bytes"});
    return r;
  }

 private:
  int calls_ = 0;
};

TEST(Bounds, AGuardViolationInCandidateOwnedMemoryFromAnyCallFailsBounds) {
  const Subject s = elementwise();
  OverrunsOwnMemory t(make_inprocess_target("x", elementwise_kernel));
  VerifyOptions o;
  o.seed = 4;
  o.gates = {"oracle", "bounds"};
  const Report r = verify(s.contract, t, *s.oracle, o);
  const GateResult* g = find(r, "bounds");
  ASSERT_EQ(g->verdict, Verdict::fail) << g->summary;
  ASSERT_TRUE(g->evidence);
  EXPECT_EQ(g->evidence->tensor, "scratch of 4096 bytes");
  EXPECT_EQ(classify(r), Classification::broken);
}

}  // namespace
}  // namespace kgate::test

namespace kgate::test {
namespace {

// Every call of this target times out (as a hanging kernel's would, without the wait).
class HangingTarget final : public ForwardingTarget {
 public:
  using ForwardingTarget::ForwardingTarget;
  std::string describe() const override { return "hangs"; }
  CallResult call(const CallRequest&) override {
    ++calls;
    CallResult r;
    r.outcome = CallOutcome::timed_out;
    r.detail = "timeout after 10.0 s";
    return r;
  }
  void reset() override { ++resets; }
  bool healthy() const override { return true; }
  int calls = 0, resets = 0;
};

TEST(Patience, AHangingCandidateIsCalledTwiceNotOncePerCase) {
  const Subject s = elementwise();
  HangingTarget t(make_inprocess_target("x", elementwise_kernel));
  VerifyOptions o;
  o.seed = 5;
  const Report r = verify(s.contract, t, *s.oracle, o);
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.resets, 2) << "one restart per timed-out call, none for the calls not made";
  const GateResult* oracle = find(r, "oracle");
  ASSERT_NE(oracle, nullptr);
  EXPECT_EQ(oracle->verdict, Verdict::timeout);
  const GateResult* layout = find(r, "layout");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(layout->verdict, Verdict::timeout) << verdicts(r);
  EXPECT_NE(layout->summary.find("not called"), std::string::npos) << layout->summary;
}

}  // namespace
}  // namespace kgate::test
