// The comparison core is itself tested: it passes what is correct and reports failure where it must (a NaN
// swallowed, an Inf saturated, one ulp under the bitwise check, an error just over the bound).
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "kgate/compare.hpp"
#include "kit.hpp"

namespace kgate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

HostArray array(DType t, std::vector<double> v) {
  return HostArray::from_f64(t, {static_cast<std::int64_t>(v.size())}, v);
}
Reference ref_of(std::vector<double> exact, DType t) { return make_reference(array(DType::f64, std::move(exact)), t); }

TEST(Bitwise, OneUlpIsADifferenceAndTheFirstIndexIsReported) {
  const HostArray a = array(DType::f32, {1, 2, 3, 4});
  HostArray b = a;
  b.set(2, std::nextafter(3.0f, 4.0f));
  const Comparison c = compare_bitwise(a, b);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.kind, Mismatch::bits);
  EXPECT_EQ(c.first, 2);
  EXPECT_EQ(c.bad, 1);
  EXPECT_TRUE(compare_bitwise(a, a).ok);
}

TEST(Bitwise, NanPayloadsAndSignedZerosAreBitsToo) {
  HostArray a = array(DType::f32, {0.0, kNan}), b = a;
  b.set(0, -0.0);
  EXPECT_EQ(compare_bitwise(a, b).first, 0);
  const std::uint32_t other_nan = 0x7fc00001u;
  std::memcpy(b.data() + 4, &other_nan, 4);
  b.set(0, 0.0);
  EXPECT_EQ(compare_bitwise(a, b).first, 1);
}

TEST(Bitwise, FindsTheFirstDifferenceInALargeArray) {
  HostArray a(DType::bf16, {1 << 18}), b = a;
  b.set((1 << 18) - 3, 1.0);
  b.set((1 << 17) + 5, 1.0);
  const Comparison c = compare_bitwise(a, b);
  EXPECT_EQ(c.first, (1 << 17) + 5);
  EXPECT_EQ(c.bad, 2);
}

TEST(Within, JustUnderTheBoundPassesJustOverFails) {
  const Reference r = ref_of({1.0, -2.0, 0.5}, DType::f64);
  Tolerance t;
  t.abs = 1e-3;
  HostArray got = array(DType::f64, {1.0 + 0.999e-3, -2.0, 0.5});
  Comparison c = compare_within(got, r, t);
  EXPECT_TRUE(c.ok);
  EXPECT_NEAR(c.max_ratio, 0.999, 1e-9);
  EXPECT_EQ(c.worst, 0);
  got.set(1, -2.0 - 1.001e-3);
  c = compare_within(got, r, t);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.kind, Mismatch::value);
  EXPECT_EQ(c.first, 1);
  EXPECT_NEAR(c.max_ratio, 1.001, 1e-9);
}

TEST(Within, ComparesAgainstTheOracleRoundedToTheOutputDtype) {
  // A perfect bf16 kernel returns round(1/3); its error against the unrounded oracle would be half an ulp.
  const Reference r = ref_of({1.0 / 3}, DType::bf16);
  Tolerance none;  // zero bound: only the exact rounding passes
  EXPECT_TRUE(compare_within(array(DType::bf16, {1.0 / 3}), r, none).ok);
  HostArray off = array(DType::bf16, {1.0 / 3});
  off.set(0, bf16_bits_to_f64(static_cast<std::uint16_t>(f64_to_bf16_bits(1.0 / 3) + 1)));
  EXPECT_FALSE(compare_within(off, r, none).ok);
}

TEST(Within, ASwallowedNanFails) {
  const Reference r = ref_of({1.0, kNan}, DType::f32);
  Tolerance loose;
  loose.abs = 1e30;  // no bound excuses a missing NaN
  const Comparison c = compare_within(array(DType::f32, {1.0, 0.0}), r, loose);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.kind, Mismatch::nan_masked);
  EXPECT_EQ(c.first, 1);
  EXPECT_TRUE(std::isinf(c.max_ratio));
  EXPECT_TRUE(compare_within(array(DType::f32, {1.0, kNan}), r, loose).ok);
}

TEST(Within, ASaturatedInfFails) {
  const Reference r = ref_of({1e39}, DType::f32);  // past f32's max: a perfect kernel returns +Inf
  Tolerance t;
  t.rel = 4 * info(DType::f32).unit_roundoff;
  const Comparison c = compare_within(array(DType::f32, {FLT_MAX}), r, t);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.kind, Mismatch::inf_mismatch);
  EXPECT_TRUE(compare_within(array(DType::f32, {kInf}), r, t).ok);
  EXPECT_FALSE(compare_within(array(DType::f32, {-kInf}), r, t).ok) << "the sign of an Inf matters";
}

TEST(Within, AnUnexpectedInfOrNanFails) {
  const Reference r = ref_of({1.0}, DType::f32);
  Tolerance t;
  t.abs = 1.0;
  EXPECT_EQ(compare_within(array(DType::f32, {kInf}), r, t).kind, Mismatch::unexpected_nonfinite);
  EXPECT_EQ(compare_within(array(DType::f32, {kNan}), r, t).kind, Mismatch::unexpected_nonfinite);
}

TEST(Within, OverflowAtTheEdgeOfTheRangeIsACorrectRounding) {
  // The oracle sits just under max; a kernel whose result, within its bound, is past max may return Inf.
  const double below = FLT_MAX * (1 - 1e-8);
  const Reference r = ref_of({below}, DType::f32);
  Tolerance t;
  t.rel = 1e-6;
  EXPECT_TRUE(compare_within(array(DType::f32, {kInf}), r, t).ok);
  t.rel = 0;
  EXPECT_FALSE(compare_within(array(DType::f32, {kInf}), r, t).ok);
}

TEST(Within, IntegersMustBeExact) {
  const Reference r = make_reference(array(DType::i32, {3, 4}), DType::i32);
  Tolerance t;
  t.abs = 100;
  EXPECT_TRUE(compare_within(array(DType::i32, {3, 4}), r, t).ok);
  EXPECT_FALSE(compare_within(array(DType::i32, {3, 5}), r, t).ok);
}

TEST(Within, DtypeOrShapeMismatchIsReportedNotCrashed) {
  const Reference r = ref_of({1, 2}, DType::f32);
  EXPECT_EQ(compare_within(array(DType::f16, {1, 2}), r, Tolerance{}).kind, Mismatch::shape);
  EXPECT_EQ(compare_within(array(DType::f32, {1, 2, 3}), r, Tolerance{}).kind, Mismatch::shape);
}

TEST(Tolerance, DefaultBoundFollowsTheFormula) {
  TensorSpec out = test::tensor("y", DType::bf16, {"N"});
  const Tolerance t = default_tolerance(out, DType::f32, 1024, 10.0);
  EXPECT_DOUBLE_EQ(t.rel, 4 * 0x1p-8);
  EXPECT_DOUBLE_EQ(t.abs_rms, 8 * 0x1p-24 * 32);
  EXPECT_DOUBLE_EQ(t.abs, 0x1p-126);
  EXPECT_DOUBLE_EQ(t.scale, 10.0);
  EXPECT_DOUBLE_EQ(t.bound(-2.0, 0.5), 10.0 * (4 * 0x1p-8 * 2.0 + 8 * 0x1p-24 * 32 * 0.5 + 0x1p-126));
}

TEST(Tolerance, ContractOverridesReplaceTheirTermsAndScalesMultiply) {
  TensorSpec out = test::tensor("y", DType::f32, {"N"});
  out.rtol = 1e-3;
  out.atol = 1e-5;
  out.tolerance_scale = 2.0;
  const Tolerance t = default_tolerance(out, DType::f32, 16, 100.0);
  EXPECT_DOUBLE_EQ(t.rel, 1e-3);
  EXPECT_DOUBLE_EQ(t.abs, 1e-5);
  EXPECT_DOUBLE_EQ(t.abs_rms, 8 * 0x1p-24 * 4) << "not overridden: still derived";
  EXPECT_DOUBLE_EQ(t.scale, 200.0);
  out.atol_rms = 0.0;
  EXPECT_DOUBLE_EQ(default_tolerance(out, DType::f32, 16, 1.0).abs_rms, 0.0);
}

TEST(Tolerance, AccumulationBoundIsGammaNAndVanishesWhenNoBoundExists) {
  const Tolerance t = accumulation_tolerance(DType::f32, DType::f32, 4096, 1.0);
  const double nu = 4100 * 0x1p-24;
  EXPECT_DOUBLE_EQ(t.rel, nu / (1 - nu) + 8 * 0x1p-24);
  EXPECT_TRUE(std::isinf(accumulation_tolerance(DType::f16, DType::f16, 4096, 1.0).rel));
}

TEST(Tolerance, AccumulationBoundAddsDeclaredOperandRoundings) {
  // r roundings at u_op and N + 4 at u_w: gamma_r(u_op) + gamma_{N+4}(u_w) + their product, + 8 u_d.
  const double nu = 324 * 0x1p-24, g_w = nu / (1 - nu), g_op = 2 * 0x1p-8 / (1 - 2 * 0x1p-8);
  const Tolerance t = accumulation_tolerance(DType::f32, DType::f32, 320, 1.0, DType::bf16, 2);
  EXPECT_DOUBLE_EQ(t.rel, g_op + g_w + g_op * g_w + 8 * 0x1p-24);
  // It covers (1 + u_op)^r (1 + u_w)^{N+4} - 1, the worst a term of one sign can move.
  EXPECT_GE(t.rel, std::pow(1 + 0x1p-8, 2) * std::pow(1 + 0x1p-24, 324) - 1);
  // Nothing declared: the exact-operand bound, bit for bit.
  EXPECT_EQ(accumulation_tolerance(DType::f32, DType::f32, 320, 1.0).rel,
            accumulation_tolerance(DType::f32, DType::f32, 320, 1.0, DType::bf16, 0).rel);
  EXPECT_DOUBLE_EQ(accumulation_tolerance(DType::f32, DType::f32, 320, 1.0).rel, g_w + 8 * 0x1p-24);
  // r u_op >= 1: no bound.
  EXPECT_TRUE(std::isinf(accumulation_tolerance(DType::f32, DType::f32, 320, 1.0, DType::bf16, 256).rel));
}

TEST(Tolerance, ReductionSizeIsTheProductOfReducedDims) {
  TensorSpec out = test::tensor("y", DType::f32, {"M"});
  out.reduced = {"K", "J"};
  EXPECT_EQ(reduction_size(out, {{"K", 8}, {"J", 3}, {"M", 2}}), 24);
  out.reduced.clear();
  EXPECT_EQ(reduction_size(out, {{"M", 5}}), 1);
  out.reduced = {"Q"};
  EXPECT_THROW(reduction_size(out, {{"M", 5}}), std::invalid_argument);
}

TEST(Reference, RmsIsOverFiniteValuesOnly) {
  const Reference r = ref_of({3, -4, kNan, kInf}, DType::f32);
  EXPECT_DOUBLE_EQ(r.rms, std::sqrt(12.5));
}

TEST(Allclose, MirrorsTorchAllclose) {
  const Reference r = ref_of({1.0, 100.0, kInf}, DType::f32);
  EXPECT_TRUE(compare_allclose(array(DType::f32, {1.0195, 101.0, kInf}), r, 1e-2, 1e-2).ok);
  EXPECT_FALSE(compare_allclose(array(DType::f32, {1.0205, 100.0, kInf}), r, 1e-2, 1e-2).ok);
  EXPECT_FALSE(compare_allclose(array(DType::f32, {1.0, 100.0, 3e38}), r, 1e-2, 1e-2).ok);
  const Reference n = ref_of({kNan}, DType::f32);
  EXPECT_FALSE(compare_allclose(array(DType::f32, {kNan}), n, 1e-2, 1e-2).ok) << "equal_nan=False";
}

TEST(Nonfinite, NanModeRequiresEveryOracleNanAndNothingElse) {
  const Reference r = ref_of({kNan, 1.0, 2.0}, DType::f32);
  EXPECT_TRUE(check_nonfinite(array(DType::f32, {kNan, 5.0, 2.0}), r, {}, NonfiniteMode::nan, false).ok)
      << "finite values are not this check's business";
  Comparison c = check_nonfinite(array(DType::f32, {0.0, 1.0, 2.0}), r, {}, NonfiniteMode::nan, false);
  EXPECT_EQ(c.kind, Mismatch::nan_masked);
  c = check_nonfinite(array(DType::f32, {kNan, kNan, 2.0}), r, {}, NonfiniteMode::nan, false);
  EXPECT_EQ(c.kind, Mismatch::spread) << "NaN past the oracle's spread: its own kind, a violation";
  EXPECT_TRUE(violation_only(c.kind));
  EXPECT_EQ(c.first, 1);
  const std::vector<std::uint8_t> allowed{1, 1, 0};
  EXPECT_TRUE(check_nonfinite(array(DType::f32, {kNan, kNan, 2.0}), r, allowed, NonfiniteMode::nan, false).ok);
}

TEST(Nonfinite, TheMostSeriousKindIsReportedWhereverItLies) {
  // Spread at 1 found first, a masked NaN at 3: the masked NaN is what the comparison reports.
  const Reference r = ref_of({1.0, 2.0, 3.0, kNan, 5.0}, DType::f32);
  const Comparison c = check_nonfinite(array(DType::f32, {1.0, kNan, kNan, 0.0, 5.0}), r, {}, NonfiniteMode::nan, false);
  EXPECT_EQ(c.kind, Mismatch::nan_masked);
  EXPECT_EQ(c.first, 3);
  EXPECT_EQ(c.bad, 3);
  EXPECT_EQ(c.by_kind[static_cast<std::size_t>(Mismatch::spread)], 2);
  EXPECT_EQ(c.by_kind[static_cast<std::size_t>(Mismatch::nan_masked)], 1);
  // Under injected Inf: an indeterminate form first, an Inf saturated later.
  const Reference q = ref_of({kNan, 1.0, kInf}, DType::f32);
  const Comparison d = check_nonfinite(array(DType::f32, {0.0, 1.0, FLT_MAX}), q, {}, NonfiniteMode::inf, false);
  EXPECT_EQ(d.kind, Mismatch::inf_mismatch);
  EXPECT_EQ(d.first, 2);
  // Of equal rank, the first found stays (a saturated Inf before an unexpected one).
  const Reference e = ref_of({kInf, 1.0}, DType::f32);
  const Comparison f = check_nonfinite(array(DType::f32, {FLT_MAX, kInf}), e, {}, NonfiniteMode::inf, false);
  EXPECT_EQ(f.kind, Mismatch::inf_mismatch);
  EXPECT_EQ(f.first, 0);
}

TEST(Nonfinite, AValueTheWorkingPrecisionReferenceSharesIsExcusedInBothModes) {
  // x0 near max: x0 * x0 / sum(x * x) overflows to Inf / Inf = NaN in fp32, not in float64 (oracle 1).
  const Reference r = ref_of({1.0, 1e-30, 0.5}, DType::f32);
  const std::vector<std::uint8_t> reference_nonfinite{1, 0, 2};  // the fp32 run: NaN, finite, +Inf
  const HostArray same = array(DType::f32, {kNan, 1e-30, kInf});
  for (const NonfiniteMode mode : {NonfiniteMode::nan, NonfiniteMode::inf}) {
    SCOPED_TRACE(mode == NonfiniteMode::nan ? "nan" : "inf");
    EXPECT_FALSE(check_nonfinite(same, r, {}, mode, false).ok) << "without the reference run it fails";
    const Comparison ok = check_nonfinite(same, r, {}, mode, false, {}, {}, reference_nonfinite);
    EXPECT_TRUE(ok.ok);
    EXPECT_EQ(ok.excused[static_cast<std::size_t>(Excuse::reference_nonfinite)], 2);
    // Another class than the reference's (-Inf for +Inf, Inf for NaN), or where the reference is finite: held.
    const Comparison other = check_nonfinite(array(DType::f32, {kInf, 1e-30, -kInf}), r, {}, mode, false, {}, {},
                                             reference_nonfinite);
    EXPECT_EQ(other.bad, 2);
    EXPECT_EQ(other.kind, mode == NonfiniteMode::nan ? Mismatch::spread : Mismatch::unexpected_nonfinite);
    EXPECT_EQ(check_nonfinite(array(DType::f32, {kNan, kNan, kInf}), r, {}, mode, false, {}, {}, reference_nonfinite).first, 1);
  }
}

TEST(Nonfinite, InfModeExcusesANonfiniteValueForAnOracleNanButNeverAFiniteOne) {
  // Inf - Inf is NaN in the oracle's order and a signed Inf in a chunked one: both non-finite, the second
  // excused and counted. A finite value there (a limit 0 in exp(x - lse)) is an ordinary number where the
  // operator has no value: the indeterminate-form finding. Under injected NaN only NaN is faithful.
  const Reference r = ref_of({kNan, kNan, kNan, 1.0}, DType::f32);
  Comparison ok = check_nonfinite(array(DType::f32, {kInf, -kInf, kNan, 1.0}), r, {}, NonfiniteMode::inf, false);
  EXPECT_TRUE(ok.ok);
  EXPECT_EQ(ok.excused[static_cast<std::size_t>(Excuse::order_nonfinite)], 2);
  Comparison finite = check_nonfinite(array(DType::f32, {kInf, -kInf, 0.0, 1.0}), r, {}, NonfiniteMode::inf, false);
  EXPECT_FALSE(finite.ok);
  EXPECT_EQ(finite.kind, Mismatch::indeterminate);
  EXPECT_EQ(finite.first, 2);
  Comparison c = check_nonfinite(array(DType::f32, {kNan, kInf, kNan, 1.0}), r, {}, NonfiniteMode::nan, false);
  EXPECT_EQ(c.kind, Mismatch::nan_masked);
  EXPECT_EQ(c.first, 1);
}

TEST(Nonfinite, InfModeCatchesSaturationAndKeepsAnUnjudgedBand) {
  const double max = FLT_MAX;
  // oracle: +Inf, beyond 2 max, in the unjudged band, comfortably finite, -Inf
  const Reference r = ref_of({kInf, 3 * max, 1.5 * max, 0.25 * max, -kInf}, DType::f32);
  EXPECT_TRUE(check_nonfinite(array(DType::f32, {kInf, kInf, FLT_MAX, 1.0, -kInf}), r, {}, NonfiniteMode::inf, false).ok);
  EXPECT_TRUE(check_nonfinite(array(DType::f32, {kInf, kInf, kInf, 1.0, -kInf}), r, {}, NonfiniteMode::inf, false).ok)
      << "between max/2 and 2 max either answer is a correct rounding of some order of operations";
  Comparison c = check_nonfinite(array(DType::f32, {kInf, FLT_MAX, 1.0, 1.0, -kInf}), r, {}, NonfiniteMode::inf, false);
  EXPECT_EQ(c.kind, Mismatch::inf_mismatch);
  EXPECT_EQ(c.first, 1) << "3 max saturated to max";
  c = check_nonfinite(array(DType::f32, {kInf, kInf, 1.0, kInf, -kInf}), r, {}, NonfiniteMode::inf, false);
  EXPECT_EQ(c.kind, Mismatch::unexpected_nonfinite);
  c = check_nonfinite(array(DType::f32, {kInf, kInf, 1.0, 1.0, kInf}), r, {}, NonfiniteMode::inf, false);
  EXPECT_EQ(c.first, 4) << "wrong sign";
  const HostArray nan_for_inf = array(DType::f32, {kNan, kInf, 1.0, 1.0, -kInf});
  EXPECT_FALSE(check_nonfinite(nan_for_inf, r, {}, NonfiniteMode::inf, false).ok);
  EXPECT_TRUE(check_nonfinite(nan_for_inf, r, {}, NonfiniteMode::inf, true).ok) << "inf_may_become_nan";
}

TEST(Nonfinite, SeedsIncludeWhatMightLegitimatelyOverflow) {
  const Reference r = ref_of({1.0, kNan, 0.6 * FLT_MAX, kInf}, DType::f32);
  EXPECT_EQ(nonfinite_seeds(r, NonfiniteMode::nan), (std::vector<std::uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(nonfinite_seeds(r, NonfiniteMode::inf), (std::vector<std::uint8_t>{0, 1, 1, 1}));
}

Contract spread_contract(SpreadRule rule) {
  Contract c;
  c.name = "scan";
  c.dims = {test::dim("B", 1, 8, 2), test::dim("T", 1, 64, 8)};
  c.inputs = {test::tensor("x", DType::f32, {"B", "T"}), test::tensor("cu", DType::i32, {"S"})};
  c.outputs = {test::tensor("y", DType::f32, {"B", "T"})};
  rule.exact = false;
  c.spread = rule;
  return c;
}

std::vector<std::uint8_t> seed_at(std::int64_t b, std::int64_t t, std::int64_t T = 8, std::int64_t B = 2) {
  std::vector<std::uint8_t> s(static_cast<std::size_t>(B * T), 0);
  s[static_cast<std::size_t>(b * T + t)] = 1;
  return s;
}

std::string row(const std::vector<std::uint8_t>& m, std::int64_t b, std::int64_t T = 8) {
  std::string s;
  for (std::int64_t t = 0; t < T; ++t) s += m[static_cast<std::size_t>(b * T + t)] ? '#' : '.';
  return s;
}

TEST(Spread, ForwardInBlocksBackwardAndBoth) {
  SpreadRule r;
  r.dim = "T";
  r.block = 4;
  const Contract fwd = spread_contract(r);
  const auto m = allowed_spread(fwd, fwd.outputs[0], {2, 8}, seed_at(1, 5), {});
  EXPECT_EQ(row(m, 0), "........") << "nothing crosses to another line";
  EXPECT_EQ(row(m, 1), "....####") << "the seed's block and every later one";
  r.direction = SpreadRule::Direction::backward;
  const Contract back = spread_contract(r);
  EXPECT_EQ(row(allowed_spread(back, back.outputs[0], {2, 8}, seed_at(1, 5), {}), 1), "########");
  r.block = 0;
  const Contract back1 = spread_contract(r);
  EXPECT_EQ(row(allowed_spread(back1, back1.outputs[0], {2, 8}, seed_at(0, 5), {}), 0), "######..");
  r.direction = SpreadRule::Direction::both;
  const Contract both = spread_contract(r);
  EXPECT_EQ(row(allowed_spread(both, both.outputs[0], {2, 8}, seed_at(0, 5), {}), 0), "########");
}

TEST(Spread, SegmentsStopTheSpreadAndRestartBlocks) {
  SpreadRule r;
  r.dim = "T";
  r.block = 2;
  r.segments = "cu";
  const Contract c = spread_contract(r);
  // Segments [0, 3) [3, 3) [3, 8): blocks {0,1} {2}, then restarting at 3: {3,4} {5,6} {7}.
  const std::vector<HostArray> inputs{HostArray(DType::f32, {2, 8}), array(DType::i32, {0, 3, 3, 8})};
  EXPECT_EQ(row(allowed_spread(c, c.outputs[0], {2, 8}, seed_at(0, 1), inputs), 0), "###.....");
  EXPECT_EQ(row(allowed_spread(c, c.outputs[0], {2, 8}, seed_at(0, 3), inputs), 0), "...#####");
  EXPECT_EQ(row(allowed_spread(c, c.outputs[0], {2, 8}, seed_at(0, 6), inputs), 0), ".....###");
}

TEST(Spread, ExactRuleOrAnOutputWithoutTheAxisKeepsTheSeeds) {
  SpreadRule r;
  r.dim = "T";
  Contract c = spread_contract(r);
  c.outputs.push_back(test::tensor("state", DType::f32, {"B", "B"}));
  const auto seeds = seed_at(0, 1, 2, 2);
  EXPECT_EQ(allowed_spread(c, c.outputs[1], {2, 2}, seeds, {}), seeds);
  c.spread.exact = true;
  EXPECT_EQ(allowed_spread(c, c.outputs[0], {2, 8}, seed_at(0, 1), {}), seed_at(0, 1));
}

TEST(Format, ValuesReadBackAndBitsAreShown) {
  EXPECT_EQ(format_value(0.1f, DType::f32), "0.1");
  EXPECT_EQ(format_value(f16_bits_to_f64(0x3555), DType::f16), "0.3333");
  EXPECT_EQ(format_value(kNan, DType::bf16), "nan");
  EXPECT_EQ(format_value(-kInf, DType::f32), "-inf");
  EXPECT_EQ(format_value(7, DType::i64), "7");
  EXPECT_EQ(format_bits(0x7fc00000, DType::f32), "0x7fc00000");
  EXPECT_EQ(format_bits(0x3c00, DType::f16), "0x3c00");
  const HostArray a = array(DType::f16, {1.0});
  EXPECT_EQ(format_element(a, 0, true), "1 (f16 0x3c00)");
}

TEST(Format, NeighbourhoodMarksTheFirstBadElementInItsRow) {
  HostArray got(DType::f32, {2, 6});
  for (int i = 0; i < 12; ++i) got.set(i, i);
  const Reference r = make_reference(got, DType::f32);
  const std::string s = neighbourhood(got, &r, nullptr, 7, 2, false);
  EXPECT_NE(s.find("> [1, 1]"), std::string::npos) << s;
  EXPECT_NE(s.find("[1, 0]"), std::string::npos) << s;
  EXPECT_EQ(s.find("[0, 5]"), std::string::npos) << "stays within the row:\n" << s;
  EXPECT_NE(s.find("f32"), std::string::npos);
}

TEST(Decode, EveryDtype) {
  for (DType t : kAllDTypes) {
    const HostArray a = array(t, {0, 1, 3});
    std::vector<double> v(3);
    decode_elements(t, a.data(), 3, v.data());
    const double last = t == DType::boolean ? 1.0 : 3.0;
    EXPECT_EQ(v, (std::vector<double>{0, 1, last})) << name_of(t);
  }
}

TEST(Reference, ItsLargestFiniteMagnitudeIsComputedOnceAndMatchesAScan) {
  const Reference r = ref_of({3, -7.5, kNan, kInf, -kInf, 2}, DType::f32);
  EXPECT_EQ(r.max_abs, 7.5);
  EXPECT_EQ(largest_finite_magnitude(r), 7.5);
  Reference by_hand;  // built without make_reference: scanned when asked
  by_hand.dtype = DType::f32;
  by_hand.exact = {-1, kNan, 4, -kInf};
  EXPECT_EQ(largest_finite_magnitude(by_hand), 4.0);
  EXPECT_EQ(reference_term(0.5, r) , reference_term(0.5, [&] { Reference c = r; c.max_abs = -1; return c; }()));
}

}  // namespace
}  // namespace kgate
