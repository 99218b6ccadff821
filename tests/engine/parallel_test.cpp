// The host loops that run on several threads (parallel.hpp) give what one pass from the first element to the
// last gave, bit for bit, whatever the thread count: comparisons (first offence, counts, worst ratio and its
// index, excuses), the oracle's reference (rms, largest magnitude), and drawn inputs.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kgate/compare.hpp"
#include "kgate/inputs.hpp"
#include "kgate/parallel.hpp"

namespace kgate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// Restores the default thread count however a test ends.
struct Threads {
  explicit Threads(int n) { set_host_threads(n); }
  ~Threads() { set_host_threads(0); }
};

std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}

void expect_same(const Comparison& a, const Comparison& b) {
  EXPECT_EQ(a.ok, b.ok);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.bad, b.bad);
  EXPECT_EQ(a.judged, b.judged);
  EXPECT_EQ(bits_of(a.max_ratio), bits_of(b.max_ratio));
  EXPECT_EQ(a.worst, b.worst);
  for (std::size_t e = 0; e < kExcuseKinds; ++e) EXPECT_EQ(a.excused[e], b.excused[e]) << "excuse " << e;
  for (std::size_t k = 0; k < kMismatchKinds; ++k) EXPECT_EQ(a.by_kind[k], b.by_kind[k]) << "kind " << k;
}

// Three chunks and a part: every merge path is crossed.
const std::int64_t kN = 3 * kParallelChunk + 12345;

std::vector<double> oracle_values() {
  std::vector<double> v(static_cast<std::size_t>(kN));
  for (std::int64_t i = 0; i < kN; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.001 * static_cast<double>(i)) * 3.0;
  return v;
}

// The comparison of one element as a one-element array with the whole reference's rms: what one serial pass
// judges at i, folded below with that pass's rules.
Comparison one_element(const HostArray& got, const Reference& ref, const Tolerance& tol, std::int64_t i) {
  Reference r;
  r.dtype = ref.dtype;
  r.shape = {1};
  r.exact = {ref.exact[static_cast<std::size_t>(i)]};
  r.rounded = {ref.rounded[static_cast<std::size_t>(i)]};
  r.rms = ref.rms;
  r.max_abs = ref.max_abs;
  HostArray g(got.dtype(), {1});
  g.set(0, got.get(i));
  return compare_within(g, r, tol);
}

TEST(HostParallel, CompareWithinMatchesOneSerialPassOnAnyThreadCount) {
  const std::vector<double> exact = oracle_values();
  const Reference ref = make_reference(HostArray::from_f64(DType::f64, {kN}, exact), DType::f32);
  Tolerance tol;
  tol.rel = 1e-6;
  tol.abs = 1e-7;
  HostArray got = HostArray::from_f64(DType::f32, {kN}, ref.rounded);
  // Offences in several chunks, the largest ratio tied in chunk 0 and chunk 2 (the earlier one must win), a
  // NaN the oracle lacks and an Inf, all after an ordinary error.
  const std::int64_t c = kParallelChunk;
  for (std::int64_t i : {std::int64_t{17}, c + 5, 2 * c + 99, 3 * c + 7})
    got.set(i, ref.rounded[static_cast<std::size_t>(i)] + 1e-3);
  got.set(c - 1, ref.rounded[static_cast<std::size_t>(c - 1)] + 0.5);
  got.set(2 * c, ref.rounded[static_cast<std::size_t>(2 * c)] + 0.5);
  got.set(c + 1000, kNan);
  got.set(3 * c + 1, kInf);

  Comparison serial;
  serial.judged = kN;
  for (std::int64_t i = 0; i < kN; ++i) {
    const Comparison e = one_element(got, ref, tol, i);
    if (!e.ok) {
      if (serial.ok) {
        serial.ok = false;
        serial.first = i;
        serial.kind = e.kind;
      }
      ++serial.bad;
      ++serial.by_kind[static_cast<std::size_t>(e.kind)];
    }
    if (e.worst >= 0 && (serial.worst < 0 || e.max_ratio > serial.max_ratio)) {
      serial.max_ratio = e.max_ratio;
      serial.worst = i;
    }
    for (std::size_t k = 0; k < kExcuseKinds; ++k) serial.excused[k] += e.excused[k];
  }
  ASSERT_FALSE(serial.ok);
  EXPECT_EQ(serial.first, 17);

  for (int threads : {1, 2, 5}) {
    Threads t(threads);
    SCOPED_TRACE(threads);
    expect_same(compare_within(got, ref, tol), serial);
  }
}

TEST(HostParallel, TiedWorstRatiosKeepTheEarliestIndexAcrossChunks) {
  const std::vector<double> exact(static_cast<std::size_t>(kN), 1.0);
  const Reference ref = make_reference(HostArray::from_f64(DType::f64, {kN}, exact), DType::f64);
  Tolerance tol;
  tol.abs = 1.0;
  HostArray got = HostArray::from_f64(DType::f64, {kN}, exact);
  got.set(3 * kParallelChunk + 5, 1.5);
  got.set(kParallelChunk + 3, 1.5);
  got.set(2 * kParallelChunk + 1, 1.25);
  for (int threads : {1, 4}) {
    Threads t(threads);
    const Comparison c = compare_within(got, ref, tol);
    EXPECT_TRUE(c.ok);
    EXPECT_EQ(c.worst, kParallelChunk + 3);
    EXPECT_EQ(c.max_ratio, 0.5);
  }
}

TEST(HostParallel, NonfiniteCheckAndAllcloseAreTheSameOnAnyThreadCount) {
  std::vector<double> exact = oracle_values();
  exact[5] = kNan;
  exact[static_cast<std::size_t>(kParallelChunk + 2)] = kInf;
  exact[static_cast<std::size_t>(2 * kParallelChunk + 2)] = 1e300;
  const Reference ref = make_reference(HostArray::from_f64(DType::f64, {kN}, exact), DType::f32);
  HostArray got = HostArray::from_f64(DType::f32, {kN}, ref.rounded);
  got.set(5, 0.0);
  got.set(9, kNan);
  got.set(2 * kParallelChunk + 7, kInf);
  got.set(3 * kParallelChunk + 3, 2.0);
  std::vector<std::uint8_t> allowed(static_cast<std::size_t>(kN), 0);
  allowed[9] = 1;
  Comparison one[4];
  {
    Threads t(1);
    one[0] = check_nonfinite(got, ref, allowed, NonfiniteMode::nan, false, {});
    one[1] = check_nonfinite(got, ref, {}, NonfiniteMode::inf, true, {});
    one[2] = compare_allclose(got, ref, 1e-5, 1e-8);
    one[3] = compare_within(got, ref, Tolerance{});
  }
  EXPECT_FALSE(one[0].ok);
  EXPECT_EQ(one[0].first, 5);
  for (int threads : {2, 7}) {
    Threads t(threads);
    SCOPED_TRACE(threads);
    expect_same(check_nonfinite(got, ref, allowed, NonfiniteMode::nan, false, {}), one[0]);
    expect_same(check_nonfinite(got, ref, {}, NonfiniteMode::inf, true, {}), one[1]);
    expect_same(compare_allclose(got, ref, 1e-5, 1e-8), one[2]);
    expect_same(compare_within(got, ref, Tolerance{}), one[3]);
  }
}

TEST(HostParallel, TheMostSeriousKindIsFoundAcrossChunks) {
  // NaN past the oracle's spread in the first chunk, a masked NaN in the third: the masked one is reported.
  std::vector<double> exact = oracle_values();
  const std::int64_t masked = 2 * kParallelChunk + 11;
  exact[static_cast<std::size_t>(masked)] = kNan;
  const Reference ref = make_reference(HostArray::from_f64(DType::f64, {kN}, exact), DType::f32);
  HostArray got = HostArray::from_f64(DType::f32, {kN}, ref.rounded);
  got.set(3, kNan);
  got.set(kParallelChunk + 4, kNan);
  got.set(masked, 1.0);
  Comparison one;
  {
    Threads t(1);
    one = check_nonfinite(got, ref, {}, NonfiniteMode::nan, false);
  }
  EXPECT_EQ(one.kind, Mismatch::nan_masked);
  EXPECT_EQ(one.first, masked);
  EXPECT_EQ(one.by_kind[static_cast<std::size_t>(Mismatch::spread)], 2);
  for (int threads : {2, 7}) {
    Threads t(threads);
    SCOPED_TRACE(threads);
    expect_same(check_nonfinite(got, ref, {}, NonfiniteMode::nan, false), one);
  }
}

TEST(HostParallel, ReferenceRmsAndLargestMagnitudeAreOneSerialPass) {
  std::vector<double> exact = oracle_values();
  exact[3] = kNan;
  exact[static_cast<std::size_t>(2 * kParallelChunk + 1)] = -kInf;
  exact[static_cast<std::size_t>(kParallelChunk + 8)] = -7.5;
  double sum_sq = 0.0, max_abs = 0.0;
  std::int64_t finite = 0;
  for (double e : exact) {
    if (!std::isfinite(e)) continue;
    sum_sq += e * e;
    max_abs = std::max(max_abs, std::fabs(e));
    ++finite;
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(finite));
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    for (int threads : {1, 3}) {
      Threads th(threads);
      const Reference r = make_reference(HostArray::from_f64(DType::f64, {kN}, exact), t);
      EXPECT_EQ(bits_of(r.rms), bits_of(rms));
      EXPECT_EQ(r.max_abs, 7.5);
      for (std::size_t i = 0; i < exact.size(); i += 4099) {
        if (std::isnan(exact[i])) continue;
        EXPECT_EQ(bits_of(r.exact[i]), bits_of(exact[i]));
        EXPECT_EQ(bits_of(r.rounded[i]), bits_of(round_to(exact[i], t)));
      }
    }
  }
}

TEST(HostParallel, DrawnInputsAreTheSameBytesOnAnyThreadCount) {
  for (DType t : {DType::f32, DType::bf16}) {
    for (Distribution d : {Distribution::contract, Distribution::wide, Distribution::uniform}) {
      TensorSpec spec;
      spec.name = "x";
      spec.dtype = t;
      spec.shape = {"N"};
      const Bindings b{{"N", kN}};
      std::vector<std::byte> first;
      for (int threads : {1, 2, 6}) {
        Threads th(threads);
        const HostArray a = generate_input(spec, {kN}, b, Stream(42), d);
        const std::vector<std::byte> bytes(a.bytes().begin(), a.bytes().end());
        if (first.empty()) first = bytes;
        EXPECT_EQ(bytes, first) << name_of(t) << " " << to_string(d) << " on " << threads << " threads";
      }
      // A value depends on its index alone, not on N: a draw small enough for one chunk (one serial pass)
      // is a prefix of the large one.
      const std::int64_t small = 5000;
      const HostArray one_pass = generate_input(spec, {small}, Bindings{{"N", small}}, Stream(42), d);
      EXPECT_EQ(std::memcmp(one_pass.data(), first.data(), one_pass.nbytes()), 0) << name_of(t) << " " << to_string(d);
    }
  }
}

}  // namespace
}  // namespace kgate
