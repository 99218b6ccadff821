// The classes of the non-finite gates' findings (issue 14's policy question): NaN past the oracle's spread is
// a violation, never broken, and never hides a masked NaN in a later case; a kernel that overflows exactly
// where the operator overflows at its promised precision (its fp32 reference run) is excused, one that
// overflows further is not. Each test runs on a fixed seed and a fresh one.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "kgate/compare.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

std::vector<std::uint64_t> fixed_and_fresh(std::uint64_t fixed) {
  std::random_device rd;
  return {fixed, (static_cast<std::uint64_t>(rd()) << 32) ^ rd()};
}

bool row_has_nan(const DLTensor& t, std::int64_t r) {
  for (std::int64_t j = 0; j < t.shape[1]; ++j)
    if (std::isnan(load2(t, r, j))) return true;
  return false;
}

// Defect: a NaN anywhere in a row of x or y makes the whole row of z NaN (a row-wide "invalid" flag), where
// the oracle (relu(x) * y, elementwise) has NaN only at the planted element. Gate: nan (spread: a violation).
std::int32_t spreads_nan_along_the_row(const kgate_call& c) {
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool poisoned = row_has_nan(in(c, 0), r) || row_has_nan(in(c, 1), r);
    for (std::int64_t j = 0; j < n; ++j)
      store2(out(c, 0), r, j,
             poisoned ? NAN : relu(static_cast<float>(load2(in(c, 0), r, j))) * static_cast<float>(load2(in(c, 1), r, j)));
  }
  return KGATE_OK;
}

// Defect: spreads a NaN of x along its row, as above, and drops a NaN of y (z = 0 there). The nan gate plants
// in x before y: its first cases find only spread. Gate: nan (NaN masked: broken).
std::int32_t spreads_x_and_masks_y(const kgate_call& c) {
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool poisoned = row_has_nan(in(c, 0), r);
    for (std::int64_t j = 0; j < n; ++j) {
      const float y = static_cast<float>(load2(in(c, 1), r, j));
      store2(out(c, 0), r, j, poisoned ? NAN : std::isnan(y) ? 0.0f : relu(static_cast<float>(load2(in(c, 0), r, j))) * y);
    }
  }
  return KGATE_OK;
}

TEST(NonfiniteClasses, NanSpreadAlongARowIsAViolationNeverBroken) {
  for (std::uint64_t seed : fixed_and_fresh(5)) {
    SCOPED_TRACE(seed);
    const Report r = run(elementwise(), spreads_nan_along_the_row, seed, {"nan"});
    const GateResult* g = find(r, "nan");
    ASSERT_EQ(g->verdict, Verdict::fail) << g->summary;
    EXPECT_EQ(g->finding, to_string(Mismatch::spread)) << g->summary;
    EXPECT_TRUE(violation_only(g->finding));
    EXPECT_EQ(g->cases, 6) << "a spread FAIL does not end the gate: every case ran";
    EXPECT_EQ(classify(r), Classification::violation) << g->summary;
    EXPECT_TRUE(broken_reasons(r).empty());
  }
}

TEST(NonfiniteClasses, ASpreadFoundFirstNeverHidesAMaskedNanInALaterCase) {
  for (std::uint64_t seed : fixed_and_fresh(6)) {
    SCOPED_TRACE(seed);
    const Report r = run(elementwise(), spreads_x_and_masks_y, seed, {"nan"});
    const GateResult* g = find(r, "nan");
    ASSERT_EQ(g->verdict, Verdict::fail) << g->summary;
    EXPECT_EQ(g->finding, to_string(Mismatch::nan_masked)) << g->summary;
    ASSERT_TRUE(g->evidence);
    EXPECT_NE(g->evidence->variant.find("NaN in y"), std::string::npos) << g->evidence->variant;
    EXPECT_EQ(classify(r), Classification::broken) << g->summary;
  }
}

// The candidate's fourth call (the nan gate's first case in y, each case calling once) times out.
class FourthCallTimesOut final : public ForwardingTarget {
 public:
  using ForwardingTarget::ForwardingTarget;
  std::string describe() const override { return "times out on its fourth call"; }
  CallResult call(const CallRequest& req) override {
    if (++calls_ != 4) return t_->call(req);
    CallResult r;
    r.outcome = CallOutcome::timed_out;
    r.detail = "timeout after 10.0 s";
    return r;
  }

 private:
  int calls_ = 0;
};

TEST(NonfiniteClasses, AHeldSpreadIsReportedWhenALaterCaseTimesOut) {
  const Subject s = elementwise();
  FourthCallTimesOut t(make_inprocess_target("x", spreads_nan_along_the_row));
  VerifyOptions o;
  o.seed = 9;
  o.gates = {"nan"};
  const Report r = verify(s.contract, t, *s.oracle, o);
  const GateResult* g = find(r, "nan");
  ASSERT_EQ(g->verdict, Verdict::fail) << g->summary;
  EXPECT_EQ(g->finding, to_string(Mismatch::spread)) << g->summary;
  EXPECT_EQ(g->cases, 4) << "the timeout ends the gate";
  EXPECT_NE(g->summary.find("the gate then stopped at NaN in y at first site: TIMEOUT"), std::string::npos) << g->summary;
  EXPECT_EQ(classify(r), Classification::violation);
}

// y[r, j] = x[r, j]^2 / sum_k x[r, k]^2 over [R, N], f32, fp32 working precision. With one x near the f32 max,
// x^2 overflows in fp32: Inf / Inf = NaN at that element, 0 at the others of its row; in float64 it is finite
// (about 1, and tiny elsewhere). The fp32 overflow is the operator's at its promised precision.
Subject energy_share(bool with_reference_run) {
  Subject s;
  Contract& c = s.contract;
  c.name = "energy_share";
  c.working_precision = DType::f32;
  c.dims = {dim("R", 1, 8, 4), dim("N", 1, 256, 32)};
  c.inputs = {tensor("x", DType::f32, {"R", "N"})};
  c.outputs = {tensor("y", DType::f32, {"R", "N"})};
  c.outputs[0].reduced = {"N"};
  auto evaluate = [](const std::vector<HostArray>& in, const Bindings& b, DType t) {
    const std::int64_t rows = b.at("R"), n = b.at("N");
    HostArray y(t, {rows, n});
    for (std::int64_t r = 0; r < rows; ++r) {
      if (t == DType::f32) {  // the fp32 reference: the naive formula in float
        float s = 0;
        for (std::int64_t j = 0; j < n; ++j) s += static_cast<float>(in[0].get(r * n + j)) * static_cast<float>(in[0].get(r * n + j));
        for (std::int64_t j = 0; j < n; ++j) {
          const float x = static_cast<float>(in[0].get(r * n + j));
          y.set(r * n + j, x * x / s);
        }
      } else {
        double s = 0;
        for (std::int64_t j = 0; j < n; ++j) s += in[0].get(r * n + j) * in[0].get(r * n + j);
        for (std::int64_t j = 0; j < n; ++j) y.set(r * n + j, in[0].get(r * n + j) * in[0].get(r * n + j) / s);
      }
    }
    return y;
  };
  ReferenceFn refs;
  if (with_reference_run)
    refs = [evaluate](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
      return std::vector<ReferenceRun>{{"fp32", {evaluate(in, b, DType::f32)}}};
    };
  s.oracle = make_function_oracle(
      "energy share f64",
      [evaluate](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
        return std::vector<HostArray>{evaluate(in, b, DType::f64)};
      },
      refs);
  return s;
}

float square_sum(const kgate_call& c, std::int64_t r) {
  float s = 0;
  for (std::int64_t j = 0; j < in(c, 0).shape[1]; ++j) {
    const float x = static_cast<float>(load2(in(c, 0), r, j));
    s += x * x;
  }
  return s;
}

// What fp32 does: x^2 / sum x^2.
std::int32_t energy_share_fp32(const kgate_call& c) {
  for (std::int64_t r = 0; r < in(c, 0).shape[0]; ++r) {
    const float s = square_sum(c, r);
    for (std::int64_t j = 0; j < in(c, 0).shape[1]; ++j) {
      const float x = static_cast<float>(load2(in(c, 0), r, j));
      store2(out(c, 0), r, j, x * x / s);
    }
  }
  return KGATE_OK;
}

// Defect: on a row of finite x, 1 - (sum - x^2) / sum, equal in exact arithmetic, which overflows further in
// fp32: once the sum is Inf every element of the row is NaN (Inf / Inf), where the fp32 reference is NaN only
// at the near-max element. (A row holding an Inf takes the plain formula: the defect is the overflow path's.)
// Gate: inf (unexpected non-finite value: broken), in a near-max case.
std::int32_t energy_share_complement(const kgate_call& c) {
  for (std::int64_t r = 0; r < in(c, 0).shape[0]; ++r) {
    const float s = square_sum(c, r);
    bool finite = true;
    for (std::int64_t j = 0; j < in(c, 0).shape[1]; ++j) finite = finite && std::isfinite(load2(in(c, 0), r, j));
    for (std::int64_t j = 0; j < in(c, 0).shape[1]; ++j) {
      const float x = static_cast<float>(load2(in(c, 0), r, j));
      store2(out(c, 0), r, j, finite ? 1.0f - (s - x * x) / s : x * x / s);
    }
  }
  return KGATE_OK;
}

std::int64_t excused_by(const GateResult& g, Excuse why) {
  std::int64_t n = 0;
  for (const Excused& e : g.excused)
    if (e.reason == to_string(why)) n += e.count;
  return n;
}

TEST(NonfiniteClasses, AKernelOverflowingWhereTheFp32ReferenceDoesIsExcused) {
  for (std::uint64_t seed : fixed_and_fresh(7)) {
    SCOPED_TRACE(seed);
    const Report r = run(energy_share(true), energy_share_fp32, seed, {"inf"});
    const GateResult* g = find(r, "inf");
    ASSERT_EQ(g->verdict, Verdict::pass) << g->summary;
    EXPECT_GT(excused_by(*g, Excuse::reference_nonfinite), 0) << g->summary;
    EXPECT_NE(g->summary.find(to_string(Excuse::reference_nonfinite)), std::string::npos) << g->summary;
    EXPECT_EQ(classify(r), Classification::clean);
    // Without the reference run nothing says the overflow is the operator's: the same kernel fails.
    const Report bare = run(energy_share(false), energy_share_fp32, seed, {"inf"});
    EXPECT_EQ(find(bare, "inf")->verdict, Verdict::fail) << find(bare, "inf")->summary;
    EXPECT_EQ(find(bare, "inf")->finding, to_string(Mismatch::unexpected_nonfinite));
  }
}

TEST(NonfiniteClasses, AKernelOverflowingWhereTheFp32ReferenceDoesNotStillFails) {
  for (std::uint64_t seed : fixed_and_fresh(8)) {
    SCOPED_TRACE(seed);
    const Report r = run(energy_share(true), energy_share_complement, seed, {"inf"});
    const GateResult* g = find(r, "inf");
    ASSERT_EQ(g->verdict, Verdict::fail) << g->summary;
    EXPECT_EQ(g->finding, to_string(Mismatch::unexpected_nonfinite)) << g->summary;
    ASSERT_TRUE(g->evidence);
    EXPECT_NE(g->evidence->variant.find("near-max"), std::string::npos) << g->evidence->variant;
    EXPECT_EQ(classify(r), Classification::broken) << g->summary;
    // The element whose square overflows is excused (the reference is NaN there too), the rest of its row not.
    EXPECT_GT(excused_by(*g, Excuse::reference_nonfinite), 0) << g->summary;
  }
}

}  // namespace
}  // namespace kgate::test
