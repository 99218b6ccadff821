// Input sets: reproducible from one seed, inside every domain under every distribution, injections only
// where the contract allows them, and shapes that respect ranges, grids and the element budget.
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "kgate/inputs.hpp"
#include "kit.hpp"

namespace kgate {
namespace {

using test::dim;
using test::tensor;

TensorSpec with_domain(DType t, DomainKind k, double a, double b) {
  TensorSpec s = tensor("x", t, {"N"});
  s.domain.kind = k;
  s.domain.a = a;
  s.domain.b = b;
  return s;
}

TEST(Inputs, OneSeedReproducesEveryValueAndLabelsSeparateStreams) {
  const Contract c = test::matmul_contract();
  const Bindings b = c.nominal();
  const auto x = generate_inputs(c, b, Stream(99), Distribution::contract);
  const auto y = generate_inputs(c, b, Stream(99), Distribution::contract);
  const auto z = generate_inputs(c, b, Stream(100), Distribution::contract);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_TRUE(x[0].bitwise_equal(y[0]) && x[1].bitwise_equal(y[1]));
  EXPECT_FALSE(x[0].bitwise_equal(z[0]));
  EXPECT_NE(x[0].get(0), x[1].get(0)) << "inputs draw from their own labelled streams";
  EXPECT_EQ(x[0].dtype(), DType::f16) << "values are made in the input's own dtype";
}

TEST(Inputs, EveryDistributionStaysInsideBoundedDomains) {
  struct Case {
    DomainKind kind;
    double a, b;
  };
  for (const Case& k : {Case{DomainKind::positive, 0.5, 2.0}, Case{DomainKind::uniform, -3.0, 1.0},
                        Case{DomainKind::uniform, 2.0, 5.0}, Case{DomainKind::probability, 0.0, 1.0},
                        Case{DomainKind::integer, -4.0, 9.0}}) {
    for (DType t : {DType::f32, DType::bf16, DType::f64}) {
      const TensorSpec s = with_domain(t, k.kind, k.a, k.b);
      for (Distribution d : kAllDistributions) {
        const HostArray a = generate_input(s, {4000}, {{"N", 4000}}, Stream(5), d);
        const double lo = k.kind == DomainKind::probability ? 0.0 : k.a, hi = k.kind == DomainKind::probability ? 1.0 : k.b;
        for (std::int64_t i = 0; i < a.numel(); ++i) {
          const double v = a.get(i);
          // Rounding to a narrow dtype may land exactly on (or, for an unrepresentable end, just past) an end.
          const double slack = 2 * info(t).unit_roundoff * std::max(std::fabs(lo), std::fabs(hi));
          ASSERT_GE(v, lo - slack) << to_string(d) << " " << name_of(t);
          ASSERT_LE(v, hi + slack) << to_string(d) << " " << name_of(t);
          if (k.kind == DomainKind::positive) {
            ASSERT_GT(v, 0.0);
          }
          if (k.kind == DomainKind::integer) {
            ASSERT_EQ(v, std::round(v));
          }
        }
      }
    }
  }
}

double max_abs(const HostArray& a) {
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.get(i)));
  return m;
}

TEST(Inputs, DistributionsReallyDiffer) {
  const TensorSpec s = with_domain(DType::f32, DomainKind::normal, 0.0, 1.0);
  const Bindings b{{"N", 20000}};
  const double contract = max_abs(generate_input(s, {20000}, b, Stream(1), Distribution::contract));
  const double wide = max_abs(generate_input(s, {20000}, b, Stream(1), Distribution::wide));
  const double small = max_abs(generate_input(s, {20000}, b, Stream(1), Distribution::small));
  const double uniform = max_abs(generate_input(s, {20000}, b, Stream(1), Distribution::uniform));
  EXPECT_GT(wide, 4 * contract);
  EXPECT_LT(small, contract / 16);
  EXPECT_LE(uniform, 2.0);
  const TensorSpec p = with_domain(DType::f32, DomainKind::positive, 1e-3, 1e3);
  const HostArray w = generate_input(p, {20000}, b, Stream(1), Distribution::wide);
  std::int64_t below_one = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) below_one += w.get(i) < 1.0;
  EXPECT_GT(below_one, 20000 / 10) << "log-uniform: a good share of values far below the mean";
}

TEST(Inputs, OffsetsAreMonotoneSumToTheirDimAndIncludeAnEmptySegment) {
  TensorSpec s = tensor("cu", DType::i32, {"S+1"});
  s.domain.kind = DomainKind::offsets;
  s.domain.total = "T";
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const HostArray o = generate_input(s, {7}, {{"S", 6}, {"T", 40}}, Stream(seed), Distribution::contract);
    EXPECT_EQ(o.get(0), 0);
    EXPECT_EQ(o.get(6), 40);
    bool empty = false;
    for (int k = 1; k < 7; ++k) {
      ASSERT_LE(o.get(k - 1), o.get(k));
      empty = empty || o.get(k - 1) == o.get(k);
    }
    EXPECT_TRUE(empty) << "seed " << seed;
  }
  s.domain.allow_empty = false;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const HostArray o = generate_input(s, {7}, {{"T", 6}}, Stream(seed), Distribution::wide);
    for (int k = 1; k < 7; ++k) ASSERT_LT(o.get(k - 1), o.get(k)) << "six non-empty segments of six tokens";
  }
  EXPECT_THROW(generate_input(s, {7}, {{"T", 5}}, Stream(0), Distribution::contract), std::invalid_argument);
  s.domain.total = "Q";
  EXPECT_THROW(generate_input(s, {7}, {{"T", 5}}, Stream(0), Distribution::contract), std::invalid_argument);
}

TEST(Injection, OnlyWhereTheContractAllows) {
  TensorSpec f = tensor("x", DType::bf16, {"N"});
  EXPECT_TRUE(injectable(f, Injection::nan));
  EXPECT_TRUE(injectable(f, Injection::near_max));
  f.overflow = false;
  EXPECT_TRUE(injectable(f, Injection::infinity));
  EXPECT_FALSE(injectable(f, Injection::near_max));
  f.nonfinite = false;
  EXPECT_FALSE(injectable(f, Injection::nan));
  EXPECT_FALSE(injectable(tensor("i", DType::i32, {"N"}), Injection::nan));
  TensorSpec ints_as_float = with_domain(DType::f32, DomainKind::integer, 0, 9);
  EXPECT_FALSE(injectable(ints_as_float, Injection::infinity)) << "integer-valued indices stay integers";
}

TEST(Injection, PositionsStartAtTheBoundariesAndAreDistinct) {
  const auto p = injection_positions(100, Stream(3), 5);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[1], 99);
  EXPECT_EQ(std::set<std::int64_t>(p.begin(), p.end()).size(), 5u);
  EXPECT_EQ(injection_positions(1, Stream(3), 3), std::vector<std::int64_t>{0});
  EXPECT_TRUE(injection_positions(0, Stream(3), 3).empty());
}

TEST(Injection, ValuesAreNanInfOfBothSignsOrNearMax) {
  const auto inf = injection_values(Injection::infinity, DType::f32, 4, Stream(1));
  EXPECT_EQ(inf[0], INFINITY);
  EXPECT_EQ(inf[1], -INFINITY);
  for (int sign : {+1, -1}) {
    for (double v : injection_values(Injection::near_max, DType::f16, 50, Stream(2), sign)) {
      EXPECT_GE(std::fabs(v), 65504.0 / 2);
      EXPECT_LE(std::fabs(v), 65504.0);
      EXPECT_EQ(v, round_to(v, DType::f16)) << "exact in the input dtype";
      EXPECT_EQ(std::signbit(v), sign < 0);
    }
  }
  EXPECT_TRUE(std::isnan(injection_values(Injection::nan, DType::f64, 1, Stream(0))[0]));
}

Contract grid_contract() {
  Contract c;
  c.name = "grid";
  c.dims = {dim("M", 1, 300, 64), dim("K", 16, 4096, 128, 16), dim("H", 1, 8, 2), dim("HV", 1, 32, 4)};
  c.dims[3].multiple_of_dim = "H";
  c.inputs = {tensor("a", DType::f32, {"M", "K"}), tensor("v", DType::f32, {"HV"})};
  c.outputs = {tensor("c", DType::f32, {"M", "H"})};
  c.outputs[0].reduced = {"K"};
  c.max_case_elements = 64 * 1024;
  return c;
}

TEST(Shapes, SweepValuesProbeTailsOnTheGrid) {
  const Contract c = grid_contract();
  const auto m = sweep_values(c.dims[0]);
  for (std::int64_t v : {1, 2, 3, 5, 7, 17, 33, 65, 127, 129, 64, 300})
    EXPECT_NE(std::find(m.begin(), m.end(), v), m.end()) << v;
  for (std::int64_t v : sweep_values(c.dims[1])) {
    EXPECT_EQ(v % 16, 0);
    EXPECT_GE(v, 16);
    EXPECT_LE(v, 4096);
  }
  const auto k = sweep_values(c.dims[1]);
  EXPECT_NE(std::find(k.begin(), k.end(), 17 * 16), k.end()) << "17 units of the grid: not a power-of-two multiple";
}

TEST(Shapes, SweepIsAdmissibleWithinBudgetAndStartsAtNominal) {
  const Contract c = grid_contract();
  const auto sweep = shape_sweep(c);
  ASSERT_FALSE(sweep.empty());
  EXPECT_EQ(sweep.front(), c.nominal());
  std::set<std::string> seen;
  bool odd_m_and_k = false, hv_follows_h = false;
  for (const Bindings& b : sweep) {
    std::string why;
    EXPECT_TRUE(c.admissible(b, &why)) << to_string(b) << ": " << why;
    EXPECT_TRUE(fits_budget(c, b)) << to_string(b);
    EXPECT_TRUE(seen.insert(to_string(b)).second) << "duplicate " << to_string(b);
    odd_m_and_k = odd_m_and_k || (b.at("M") % 2 == 1 && b.at("M") > 1 && b.at("K") % 32 != 0);
    hv_follows_h = hv_follows_h || (b.at("H") == 3 && b.at("HV") % 3 == 0);
  }
  EXPECT_TRUE(odd_m_and_k) << "an every-dim-odd shape";
  EXPECT_TRUE(hv_follows_h) << "HV moved onto H's grid when H is swept";
  // The large K (4096) does not fit 64 Ki elements at M = 64: it was halved until it did.
  bool big_k = false;
  for (const Bindings& b : sweep) big_k = big_k || (b.at("M") == 64 && b.at("K") == 1024);
  EXPECT_TRUE(big_k);
}

TEST(Shapes, OddShapesAndAccumulationShape) {
  const Contract c = grid_contract();
  const auto odd = odd_shapes(c);
  ASSERT_FALSE(odd.empty());
  for (const Bindings& b : odd) {
    EXPECT_TRUE(c.admissible(b)) << to_string(b);
    EXPECT_NE(b, c.nominal());
  }
  EXPECT_EQ(odd[0].at("M"), 33);
  const Bindings acc = accumulation_bindings(c);
  EXPECT_TRUE(c.admissible(acc)) << to_string(acc);
  EXPECT_TRUE(fits_budget(c, acc)) << to_string(acc);
  EXPECT_EQ(acc.at("K"), 4096) << "the reduced dim stays large; M gave way";
  EXPECT_LE(acc.at("M"), 16);
}

TEST(Shapes, SmallerValuesAscendOnTheGrid) {
  const DimSpec k = grid_contract().dims[1];
  const auto v = smaller_values(k, 4096, 6);
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v.front(), 16);
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  for (std::int64_t x : v) {
    EXPECT_EQ(x % 16, 0);
    EXPECT_LT(x, 4096);
  }
  EXPECT_EQ(v.back(), 4096 - 16);
  EXPECT_TRUE(smaller_values(k, 16, 6).empty());
}

TEST(Accumulation, PatternsAreConstantOrPositiveInTheirRange) {
  Contract c = test::matmul_contract();
  const Bindings b = c.nominal();
  auto def = accumulation_inputs(c, b, Stream(1));
  for (const HostArray& a : def)
    for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get(i), 1.0);
  c.accumulation.inputs = {{"a", AccumulationInput::Pattern::positive, 4.0}};
  auto pos = accumulation_inputs(c, b, Stream(1));
  for (std::int64_t i = 0; i < pos[0].numel(); ++i) {
    ASSERT_GE(pos[0].get(i), 2.0);
    ASSERT_LE(pos[0].get(i), 4.0);
  }
  bool normal = false;
  for (std::int64_t i = 0; i < pos[1].numel(); ++i) normal = normal || pos[1].get(i) < 0;
  EXPECT_TRUE(normal) << "an unlisted input keeps its contract domain";
  c.accumulation.inputs = {{"nope", AccumulationInput::Pattern::constant, 1.0}};
  EXPECT_THROW(accumulation_inputs(c, b, Stream(1)), std::invalid_argument);
}

}  // namespace
}  // namespace kgate
