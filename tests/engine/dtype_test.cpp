// Exact conversions between f64 and the narrow float formats: exhaustive round trips over every 16-bit
// pattern, round-to-nearest-even at every halfway point, no double rounding, subnormals, overflow, NaN.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "kgate/dtype.hpp"
#include "kgate/rng.hpp"

namespace kgate {
namespace {

struct Format16 {
  const char* name;
  std::uint16_t (*encode)(double);
  double (*decode)(std::uint16_t);
  std::uint16_t exp_mask, quiet_bit, max_bits;
};
const Format16 kHalf{"f16", f64_to_f16_bits, f16_bits_to_f64, 0x7c00, 0x0200, 0x7bff};
const Format16 kBfloat{"bf16", f64_to_bf16_bits, bf16_bits_to_f64, 0x7f80, 0x0040, 0x7f7f};

bool is_nan_bits(const Format16& f, std::uint16_t b) { return (b & f.exp_mask) == f.exp_mask && (b & ~f.exp_mask & 0x7fff) != 0; }

class Narrow : public ::testing::TestWithParam<Format16> {};

TEST_P(Narrow, EveryBitPatternRoundTrips) {
  const Format16& f = GetParam();
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const double v = f.decode(bits);
    const std::uint16_t back = f.encode(v);
    if (is_nan_bits(f, bits)) {
      ASSERT_TRUE(std::isnan(v)) << f.name << " " << b;
      // Sign and payload survive; a signalling NaN comes back quiet, as hardware converts it.
      ASSERT_EQ(back, bits | f.quiet_bit) << f.name << " NaN pattern " << b;
    } else {
      ASSERT_EQ(back, bits) << f.name << " pattern " << b << " value " << v;
      ASSERT_EQ(std::signbit(v), (bits & 0x8000) != 0) << f.name << " sign of " << b;
    }
  }
}

// For every pair of adjacent finite values of one sign: the exact midpoint goes to the even neighbour, and
// anything off the midpoint, by as little as one double ulp, to the nearer one. A conversion that rounds
// through float first gets the "just above the midpoint" cases wrong whenever the offset is below float's
// resolution, which is exactly what the `+ tiny` probes are.
TEST_P(Narrow, HalfwayPointsRoundToEvenAndNothingElseDoes) {
  const Format16& f = GetParam();
  for (std::uint32_t sign : {0u, 0x8000u}) {
    for (std::uint32_t lo = 0; lo < f.max_bits; ++lo) {
      const auto a = static_cast<std::uint16_t>(lo | sign), b = static_cast<std::uint16_t>((lo + 1) | sign);
      const double va = f.decode(a), vb = f.decode(b);
      const double mid = (va + vb) / 2;  // exact in double
      const std::uint16_t even = (lo & 1) ? b : a;
      ASSERT_EQ(f.encode(mid), even) << f.name << " midpoint of " << lo;
      const double toward_b = std::nextafter(mid, vb), toward_a = std::nextafter(mid, va);
      ASSERT_EQ(f.encode(toward_b), b) << f.name << " just past the midpoint of " << lo;
      ASSERT_EQ(f.encode(toward_a), a) << f.name << " just before the midpoint of " << lo;
      const double tiny = std::fabs(mid) * 0x1p-40;
      if (tiny > 0) {
        ASSERT_EQ(f.encode(mid + (vb > va ? tiny : -tiny)), b) << f.name << " double rounding at " << lo;
      }
    }
  }
}

TEST_P(Narrow, OverflowRoundsToInfExactlyAsIeeeSays) {
  const Format16& f = GetParam();
  const double max = f.decode(f.max_bits);
  const double next = 2 * max - f.decode(f.max_bits - 1);  // where the next value would be
  const double halfway = (max + next) / 2;
  const auto inf = static_cast<std::uint16_t>(f.exp_mask);
  EXPECT_EQ(f.encode(max), f.max_bits);
  EXPECT_EQ(f.encode(std::nextafter(halfway, 0.0)), f.max_bits) << "below the halfway point stays max";
  EXPECT_EQ(f.encode(halfway), inf) << "max has an odd mantissa, so the tie goes to Inf";
  EXPECT_EQ(f.encode(-halfway), inf | 0x8000);
  EXPECT_EQ(f.encode(1e300), inf);
  EXPECT_EQ(f.encode(-std::numeric_limits<double>::infinity()), inf | 0x8000);
}

TEST_P(Narrow, SubnormalsAndZeros) {
  const Format16& f = GetParam();
  const double min_sub = f.decode(1);
  EXPECT_GT(min_sub, 0);
  EXPECT_EQ(f.encode(min_sub), 1);
  EXPECT_EQ(f.encode(min_sub / 2), 0) << "halfway to zero: zero is even";
  EXPECT_EQ(f.encode(std::nextafter(min_sub / 2, 1.0)), 1);
  EXPECT_EQ(f.encode(-min_sub / 2), 0x8000) << "the sign of an underflowed zero is kept";
  EXPECT_EQ(f.encode(min_sub * 1.5), 2) << "1.5 units: tie to the even unit count";
  EXPECT_EQ(f.encode(-0.0), 0x8000);
  EXPECT_EQ(f.encode(1e-300), 0);
  // The largest subnormal plus half a unit carries into the smallest normal.
  const std::uint16_t smallest_normal = static_cast<std::uint16_t>(f.exp_mask & ~(f.exp_mask << 1));
  const double sn = f.decode(smallest_normal);
  EXPECT_EQ(f.encode(sn - min_sub / 2), smallest_normal) << "carry from the subnormal range";
}

TEST_P(Narrow, NanIsKept) {
  const Format16& f = GetParam();
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(is_nan_bits(f, f.encode(qnan)));
  EXPECT_TRUE(is_nan_bits(f, f.encode(-qnan)));
  EXPECT_NE(f.encode(-qnan) & 0x8000, 0) << "sign of a NaN kept";
  // A payload in the top fraction bits survives the narrowing.
  std::uint64_t raw;
  std::memcpy(&raw, &qnan, 8);
  raw |= std::uint64_t{1} << 50;
  double payload;
  std::memcpy(&payload, &raw, 8);
  EXPECT_TRUE(std::isnan(f.decode(f.encode(payload))));
  EXPECT_EQ(f.encode(f.decode(f.encode(payload))), f.encode(payload));
}

INSTANTIATE_TEST_SUITE_P(Formats, Narrow, ::testing::Values(kHalf, kBfloat),
                         [](const auto& p) { return std::string(p.param.name); });

// An independent reference for f32 -> bf16: the classic integer rounding trick.
std::uint16_t bf16_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

TEST(Dtype, FloatToBfloatAgreesWithTheIntegerRoundingTrick) {
  const Stream s(2024);
  for (std::uint64_t i = 0; i < 1'000'000; ++i) {
    const auto u = static_cast<std::uint32_t>(s.bits(i));
    float x;
    std::memcpy(&x, &u, 4);
    ASSERT_EQ(f32_to_bf16_bits(x), bf16_reference(x)) << std::hex << u;
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion is a second, independent implementation of f32 -> f16.
TEST(Dtype, FloatToHalfAgreesWithTheCompiler) {
  const Stream s(77);
  for (std::uint64_t i = 0; i < 1'000'000; ++i) {
    auto u = static_cast<std::uint32_t>(s.bits(i));
    // Bias towards f16's range so most samples are not trivially Inf or zero.
    u = (u & 0x80ffffffu) | ((0x60u + (u >> 24) % 0x30u) << 23);
    float x;
    std::memcpy(&x, &u, 4);
    const _Float16 h = static_cast<_Float16>(x);
    std::uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(f32_to_f16_bits(x), hb) << std::hex << u;
  }
}
#endif

TEST(Dtype, IntegersRoundToEvenSaturateAndZeroNan) {
  EXPECT_EQ(round_to(2.5, DType::i32), 2);
  EXPECT_EQ(round_to(3.5, DType::i32), 4);
  EXPECT_EQ(round_to(-2.5, DType::i64), -2);
  EXPECT_EQ(round_to(1e20, DType::i32), 2147483647.0);
  EXPECT_EQ(round_to(-1e20, DType::i32), -2147483648.0);
  EXPECT_EQ(round_to(std::nan(""), DType::i64), 0);
  EXPECT_EQ(round_to(0.25, DType::boolean), 1);
  EXPECT_EQ(round_to(0.0, DType::boolean), 0);
}

TEST(Dtype, FloatRoundTripKeepsNegativeZeroAndInf) {
  EXPECT_TRUE(std::signbit(round_to(-0.0, DType::f32)));
  EXPECT_EQ(round_to(1e39, DType::f32), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(0x1.fffffep127, DType::f32), 0x1.fffffep127);
}

TEST(Dtype, ParsesNamesAndDlpack) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("Half"), DType::f16);
  EXPECT_FALSE(parse_dtype("float8"));
  for (DType t : kAllDTypes) EXPECT_EQ(from_dlpack(to_dlpack(t)), t) << name_of(t);
}

}  // namespace
}  // namespace kgate
