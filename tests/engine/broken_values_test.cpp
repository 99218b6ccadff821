// Positive controls for the value gates: each kernel plants one defect, and the gate meant to catch it fails
// (where the defect is deterministic, it is the only gate that fails).
#include <algorithm>
#include <cfloat>

#include <gtest/gtest.h>

#include "kgate/compare.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

constexpr std::uint64_t kSeeds[] = {3, 101, 90210};

void expect_fails(const Subject& s, const EntryFn& kernel, const std::string& gate,
                  std::optional<std::vector<std::string>> exactly = std::nullopt) {
  for (std::uint64_t seed : kSeeds) {
    const Report r = run(s, kernel, seed);
    const GateResult* g = find(r, gate);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->verdict, Verdict::fail) << gate << " seed " << seed << ": " << verdicts(r);
    ASSERT_TRUE(g->evidence.has_value()) << gate;
    EXPECT_EQ(g->evidence->gate, gate);
    EXPECT_FALSE(g->evidence->variant.empty());
    EXPECT_EQ(r.exit_code(), 1);
    if (exactly) {
      EXPECT_EQ(failing(r), *exactly) << verdicts(r);
    }
  }
}

// Defect: a systematic relative error of 1e-3 (an approximate formula). The field's allclose(1e-2) lets it
// through; the derived bound does not.
std::int32_t slightly_off(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
    store(out(c, 0), i, relu(static_cast<float>(load(in(c, 0), i))) * static_cast<float>(load(in(c, 1), i)) * 1.001f);
  return KGATE_OK;
}

TEST(BrokenKernels, OracleCatchesASmallSystematicErrorThatBaselinePasses) {
  expect_fails(elementwise(), slightly_off, "oracle");
  const Report r = run(elementwise(), slightly_off, 5);
  EXPECT_EQ(find(r, "baseline")->verdict, Verdict::pass) << verdicts(r);
  EXPECT_GT(find(r, "oracle")->error_ratio, 100.0) << "1e-3 against a bound of a few f32 ulps";
  EXPECT_EQ(classify(r), Classification::broken);
}

// Defect: relu through fmaxf, which returns the other operand when one is NaN.
std::int32_t fmaxf_relu(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
    store(out(c, 0), i, std::fmax(static_cast<float>(load(in(c, 0), i)), 0.0f) * static_cast<float>(load(in(c, 1), i)));
  return KGATE_OK;
}

TEST(BrokenKernels, NanCatchesFmaxfDroppingNan) {
  expect_fails(elementwise(), fmaxf_relu, "nan", std::vector<std::string>{"nan"});
  const Report r = run(elementwise(), fmaxf_relu, 8);
  const Evidence& e = *find(r, "nan")->evidence;
  EXPECT_EQ(e.expected.substr(0, 3), "nan");
  EXPECT_NE(e.detail.find("NaN masked"), std::string::npos) << e.detail;
  EXPECT_EQ(classify(r), Classification::broken);
}

// Defect: any NaN in the input poisons the whole output (a shared "invalid" flag), far beyond the oracle.
std::int32_t nan_everywhere(const kgate_call& c) {
  bool any = false;
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) any = any || std::isnan(load(in(c, 0), i)) || std::isnan(load(in(c, 1), i));
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
    store(out(c, 0), i, any ? NAN : relu(static_cast<float>(load(in(c, 0), i))) * static_cast<float>(load(in(c, 1), i)));
  return KGATE_OK;
}

TEST(BrokenKernels, NanReportsSpreadBeyondTheOracleAsItsOwnViolation) {
  const Report r = run(elementwise(), nan_everywhere, 4, {"nan"});
  const GateResult& g = r.gates.at(0);
  ASSERT_EQ(g.verdict, Verdict::fail) << g.summary;
  EXPECT_EQ(g.finding, to_string(Mismatch::spread)) << g.summary;
  EXPECT_NE(g.evidence->detail.find("past the oracle's spread"), std::string::npos) << g.evidence->detail;
  EXPECT_EQ(classify(r), Classification::violation) << "DESIGN.md: a separate, reported violation";
}

// Defect: overflow saturated to the largest finite float instead of Inf.
std::int32_t saturating(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
    const float v = relu(static_cast<float>(load(in(c, 0), i))) * static_cast<float>(load(in(c, 1), i));
    store(out(c, 0), i, std::isnan(v) ? v : std::clamp(v, -FLT_MAX, FLT_MAX));
  }
  return KGATE_OK;
}

TEST(BrokenKernels, InfCatchesSaturationToMax) {
  expect_fails(elementwise(), saturating, "inf", std::vector<std::string>{"inf"});
}

// Defect: the row length is the nominal one, hard-coded (written for the one shape the field tests).
std::int32_t nominal_rows(const kgate_call& c) {
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < std::min<std::int64_t>(n, 48); ++j) {
      const std::int64_t i = r * 48 + j < rows * n ? r * 48 + j : r * n + j;
      store(out(c, 0), r * n + j, relu(static_cast<float>(load(in(c, 0), i))) * static_cast<float>(load(in(c, 1), i)));
    }
  return KGATE_OK;
}

TEST(BrokenKernels, ShapesCatchesAHardCodedNominalSize) {
  expect_fails(elementwise(), nominal_rows, "shapes");
  const Report r = run(elementwise(), nominal_rows, 3);
  EXPECT_EQ(find(r, "oracle")->verdict, Verdict::pass) << "correct at the nominal shape";
  EXPECT_EQ(find(r, "baseline")->verdict, Verdict::pass);
}

// Defect: the matmul accumulates in fp16 (emulated with kgate's own rounding), as a kernel that keeps its
// partial sums in half registers would.
std::int32_t half_accumulator(const kgate_call& c) {
  const DLTensor &a = in(c, 0), &b = in(c, 1);
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc = round_to(acc + load(a, i * k + p) * load(b, p * n + j), DType::f16);
      store(out(c, 0), i * n + j, acc);
    }
  return KGATE_OK;
}

TEST(BrokenKernels, AccumulationCatchesAnFp16Accumulator) {
  expect_fails(matmul(), half_accumulator, "accumulation");
  const Report r = run(matmul(), half_accumulator, 1, {"accumulation"});
  // 4096 ones summed in fp16 stall at 2048: off by half, far past any bound.
  EXPECT_GT(r.gates[0].error_ratio, 100.0);
  EXPECT_NE(r.gates[0].evidence->got.find("2048"), std::string::npos) << r.gates[0].evidence->got;
}

// Defect: softmax's row sum kept in bf16. Small rows look fine; long rows stall.
std::int32_t bf16_row_sum(const kgate_call& c) {
  const DLTensor& x = in(c, 0);
  const std::int64_t rows = x.shape[0], n = x.shape[1];
  for (std::int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (std::int64_t j = 0; j < n; ++j) {
      const float v = static_cast<float>(load(x, r * n + j));
      if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
    }
    double s = 0;
    for (std::int64_t j = 0; j < n; ++j) s = round_to(s + std::exp(static_cast<float>(load(x, r * n + j)) - m), DType::bf16);
    for (std::int64_t j = 0; j < n; ++j)
      store(out(c, 0), r * n + j, std::exp(static_cast<float>(load(x, r * n + j)) - m) / static_cast<float>(s));
  }
  return KGATE_OK;
}

TEST(BrokenKernels, AccumulationCatchesABf16RowSum) { expect_fails(softmax(), bf16_row_sum, "accumulation"); }

// A clean refusal of everything but the nominal shape is REFUSED in shapes, never FAIL; a refusal of the
// nominal shape fails.
std::int32_t nominal_only(const kgate_call& c) {
  if (in(c, 0).shape[0] != 4 || in(c, 0).shape[1] != 48) {
    std::snprintf(c.message, c.message_capacity, "only 4x48");
    return KGATE_REFUSED;
  }
  return elementwise_kernel(c);
}

TEST(BrokenKernels, RefusingOptionalShapesIsRefusedNotFailed) {
  const Report r = run(elementwise(), nominal_only, 2);
  const GateResult* shapes = find(r, "shapes");
  EXPECT_EQ(shapes->verdict, Verdict::refused) << verdicts(r);
  EXPECT_GT(shapes->refused, 0);
  EXPECT_NE(shapes->summary.find("only 4x48"), std::string::npos) << shapes->summary;
  EXPECT_EQ(find(r, "oracle")->verdict, Verdict::pass);
  EXPECT_EQ(r.exit_code(), 0) << verdicts(r);
}

std::int32_t refuses_everything(const kgate_call& c) {
  std::snprintf(c.message, c.message_capacity, "not today");
  return KGATE_REFUSED;
}

TEST(BrokenKernels, RefusingTheNominalShapeFails) {
  const Report r = run(elementwise(), refuses_everything, 2, {"oracle", "shapes"});
  EXPECT_EQ(r.gates[0].verdict, Verdict::fail);
  EXPECT_NE(r.gates[0].evidence->got.find("not today"), std::string::npos);
  EXPECT_EQ(r.gates[1].verdict, Verdict::fail) << "the sweep starts at the nominal shape";
}

}  // namespace
}  // namespace kgate::test
