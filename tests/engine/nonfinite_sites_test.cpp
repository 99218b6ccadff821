// One NaN (one Inf) per case. Two defects a kernel shows only for a NaN at its first element, caught by the
// nan gate at every seed: with the first, last and random sites planted in one case, the oracle's non-finite
// set and the allowed spread were the union of the three, and a random site in the first site's row covered
// for both (the old gate passed each at the seeds below; a glr backward forming a decay from G instead of Gr
// passed that way at seeds 1 and 3). Then the correct softmax stays clean at those seeds, and the gates' case
// counts, labels and skips say what ran.
#include <gtest/gtest.h>

#include "kgate/compare.hpp"
#include "kgate/inputs.hpp"
#include "kit.hpp"

namespace kgate::test {
namespace {

constexpr std::int64_t kRows = 4, kCols = 40;  // softmax_contract()'s nominal R and N

// The seeds from 1 up at which the nan gate's random site in x lands in `row` (its draw: the first, last and
// a random element of x from the run's stream, as GateContext::gate_stream and run_injection derive it).
std::vector<std::uint64_t> seeds_with_random_site_in_row(std::int64_t row, int count) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t seed = 1; static_cast<int>(out.size()) < count; ++seed) {
    const Stream site = Stream(seed).child("gate").child("nan").child("x").child("site");
    if (injection_positions(kRows * kCols, site, 3).at(2) / kCols == row) out.push_back(seed);
  }
  return out;
}

// softmax_kernel with each row's max taken over `max_rows(r)` (first row, count) and x[0, 0] read through
// `first`.
template <class MaxRows, class First>
std::int32_t softmax_variant(const kgate_call& c, MaxRows max_rows, First first) {
  const DLTensor& x = in(c, 0);
  const std::int64_t rows = x.shape[0], n = x.shape[1];
  auto at = [&](std::int64_t r, std::int64_t j) {
    const float v = static_cast<float>(load2(x, r, j));
    return r == 0 && j == 0 ? first(v) : v;
  };
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto [r0, nr] = max_rows(r, rows);
    float m = -INFINITY;
    for (std::int64_t q = r0; q < r0 + nr; ++q)
      for (std::int64_t j = 0; j < n; ++j) {
        const float v = at(q, j);
        if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
      }
    float s = 0;
    for (std::int64_t j = 0; j < n; ++j) s += (row[static_cast<std::size_t>(j)] = std::exp(at(r, j) - m));
    for (std::int64_t j = 0; j < n; ++j) store2(out(c, 0), r, j, row[static_cast<std::size_t>(j)] / s);
  }
  return KGATE_OK;
}

std::pair<std::int64_t, std::int64_t> own_row(std::int64_t r, std::int64_t) { return {r, 1}; }
float as_loaded(float v) { return v; }

// Defect: the first element is read through a guard that zeroes NaN (a tile prologue's padding check), so a
// NaN at x[0, 0] alone is masked; a NaN anywhere else poisons its row. Gate: nan (NaN masked).
std::int32_t softmax_masks_nan_at_origin(const kgate_call& c) {
  return softmax_variant(c, own_row, [](float v) { return std::isnan(v) ? 0.0f : v; });
}

// Defect: rows 0 and 1 share one max (the first block reduces both before normalising either). The values
// hardly change (any shift cancels), but a NaN in row 0 makes row 1 NaN where the oracle's row 1 is finite.
// Gate: nan (non-finite value past the oracle's spread).
std::int32_t softmax_first_rows_share_a_max(const kgate_call& c) {
  return softmax_variant(
      c, [](std::int64_t r, std::int64_t rows) { return r < 2 && rows >= 2 ? std::pair<std::int64_t, std::int64_t>{0, 2} : own_row(r, rows); },
      as_loaded);
}

void expect_first_site_fails(EntryFn kernel, std::uint64_t seed, const std::string& finding) {
  const Report r = run(softmax(), std::move(kernel), seed, {"nan"});
  const GateResult& g = r.gates.at(0);
  ASSERT_EQ(g.verdict, Verdict::fail) << "seed " << seed << ": " << g.summary;
  EXPECT_EQ(g.finding, finding) << g.summary;
  ASSERT_TRUE(g.evidence.has_value());
  EXPECT_NE(g.evidence->variant.find("NaN in x at first site [0, 0]=nan"), std::string::npos) << g.evidence->variant;
}

TEST(NonfiniteSites, AMaskedNanAtTheFirstElementFailsWhereverTheRandomSiteFalls) {
  std::vector<std::uint64_t> seeds = seeds_with_random_site_in_row(0, 3);  // the one-case planting passed these
  for (std::uint64_t s : {2, 3, 101}) seeds.push_back(s);
  for (std::uint64_t seed : seeds) expect_first_site_fails(softmax_masks_nan_at_origin, seed, "NaN masked");
}

TEST(NonfiniteSites, ANanSpreadFromTheFirstElementFailsWhereverTheRandomSiteFalls) {
  std::vector<std::uint64_t> seeds = seeds_with_random_site_in_row(1, 3);  // the one-case planting passed these
  for (std::uint64_t s : {2, 3, 101}) seeds.push_back(s);
  for (std::uint64_t seed : seeds)
    expect_first_site_fails(softmax_first_rows_share_a_max, seed, to_string(Mismatch::spread));
}

TEST(NonfiniteSites, TheCorrectSoftmaxStaysCleanAndEverySiteIsACase) {
  std::vector<std::uint64_t> seeds = seeds_with_random_site_in_row(0, 2);
  for (std::uint64_t s : seeds_with_random_site_in_row(1, 2)) seeds.push_back(s);
  for (std::uint64_t seed : seeds) {
    const Report r = run(softmax(), softmax_kernel, seed, {"nan", "inf"});
    ASSERT_EQ(r.exit_code(), 0) << "seed " << seed << ": " << verdicts(r);
    EXPECT_EQ(find(r, "nan")->cases, 3) << "x's first, last and random site";
    EXPECT_EQ(find(r, "inf")->cases, 3 + 2) << "an Inf at each site, a near-max value of each sign";
    EXPECT_EQ(find(r, "nan")->summary.rfind("3 cases", 0), 0u) << find(r, "nan")->summary;
  }
}

TEST(NonfiniteSites, ASiteTheShapeCannotHoldIsASkippedCaseThatSaysWhy) {
  Subject one = elementwise();  // x, y of M x N; at M = N = 1 each has only a first site
  for (DimSpec& d : one.contract.dims) d.nominal = 1;
  const Report r = run(one, elementwise_kernel, 5, {"nan", "inf"});
  const GateResult* nan = find(r, "nan");
  EXPECT_EQ(nan->verdict, Verdict::pass) << nan->summary;
  EXPECT_EQ(nan->cases, 6);
  EXPECT_EQ(nan->summary, "6 cases, 4 skipped (x has 1 element at M=1 N=1: no last site apart from the first)");
  const GateResult* inf = find(r, "inf");
  EXPECT_EQ(inf->verdict, Verdict::pass) << inf->summary;
  EXPECT_EQ(inf->cases, 10);
  EXPECT_NE(inf->summary.find("4 skipped"), std::string::npos) << inf->summary;
}

}  // namespace
}  // namespace kgate::test
