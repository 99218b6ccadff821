// The engine's general seams and properties of issue 14: an input source of its own, the structure its
// draws share (and that perturbations keep or label), inputs with exact zeros for coverage, freshness
// variants sharing first elements, the indeterminate-form finding, and guard violations in memory the
// candidate allocated itself.
#include <gtest/gtest.h>

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
  EXPECT_EQ(classify(r), Classification::clean);
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

TEST(Freshness, AnInputSharingItsFirstElementsInTheSameBuffersCatchesAFirstElementCache) {
  const Report r = run(elementwise(), first_element_cache, 9, {"freshness"});
  const GateResult* g = find(r, "freshness");
  EXPECT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_EQ(g->finding, "stale result") << g->summary;
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

// A target whose callee "allocates" memory of its own and overruns it in every third call: it reports the
// violation as a guarded allocator would.
class OverrunsOwnMemory final : public Target {
 public:
  explicit OverrunsOwnMemory(std::unique_ptr<Target> t) : t_(std::move(t)) {}
  std::string describe() const override { return "overruns its own scratch"; }
  DLDeviceType device() const override { return t_->device(); }
  BufferId alloc(std::size_t bytes) override { return t_->alloc(bytes); }
  void release(BufferId id) override { t_->release(id); }
  void write(BufferId id, std::size_t off, std::span<const std::byte> d) override { t_->write(id, off, d); }
  std::vector<std::byte> read(BufferId id, std::size_t off, std::size_t n) override { return t_->read(id, off, n); }
  std::vector<GuardViolation> check_guards(BufferId id) override { return t_->check_guards(id); }
  CallResult call(const CallRequest& req) override {
    CallResult r = t_->call(req);
    if (++calls_ % 3 == 0) r.guards.push_back({kCandidateOwnedBuffer, 4096, 0xa5, 0x00, "scratch of 4096 bytes"});
    return r;
  }
  void reset() override { t_->reset(); }
  bool healthy() const override { return t_->healthy(); }

 private:
  std::unique_ptr<Target> t_;
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
class HangingTarget final : public Target {
 public:
  explicit HangingTarget(std::unique_ptr<Target> t) : t_(std::move(t)) {}
  std::string describe() const override { return "hangs"; }
  DLDeviceType device() const override { return t_->device(); }
  BufferId alloc(std::size_t bytes) override { return t_->alloc(bytes); }
  void release(BufferId id) override { t_->release(id); }
  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override { t_->write(id, offset, data); }
  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    return t_->read(id, offset, bytes);
  }
  std::vector<GuardViolation> check_guards(BufferId id) override { return t_->check_guards(id); }
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

 private:
  std::unique_ptr<Target> t_;
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
