// Positive controls for the memory and concurrency gates: determinism, immutability, coverage, bounds,
// freshness, stream, layout. Each kernel plants one defect and its gate fails.
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kit.hpp"

namespace kgate::test {
namespace {

constexpr std::uint64_t kSeeds[] = {7, 4242, 1u << 30};

void expect_fails(const Subject& s, const EntryFn& kernel, const std::string& gate,
                  std::optional<std::vector<std::string>> exactly = std::nullopt) {
  for (std::uint64_t seed : kSeeds) {
    const Report r = run(s, kernel, seed);
    const GateResult* g = find(r, gate);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->verdict, Verdict::fail) << gate << " seed " << seed << ": " << verdicts(r);
    ASSERT_TRUE(g->evidence.has_value());
    EXPECT_EQ(r.exit_code(), 1);
    if (exactly) {
      EXPECT_EQ(failing(r), *exactly) << verdicts(r);
    }
  }
}

float relu_mul_at(const kgate_call& c, std::int64_t i) {
  return relu(static_cast<float>(load(in(c, 0), i))) * static_cast<float>(load(in(c, 1), i));
}

// Defect: the last bit depends on where the output happens to live (whether it is 32-byte aligned, as a
// kernel with a peeled vector loop might round differently).
std::int32_t address_dependent(const kgate_call& c) {
  const bool odd = (reinterpret_cast<std::uintptr_t>(out(c, 0).data) >> 4) & 1;
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
    const float v = relu_mul_at(c, i);
    store(out(c, 0), i, odd ? std::nextafter(v, INFINITY) : v);
  }
  return KGATE_OK;
}

TEST(BrokenKernels, DeterminismCatchesAddressDependentResults) {
  expect_fails(elementwise(), address_dependent, "determinism");
  const Report r = run(elementwise(), address_dependent, 9);
  EXPECT_EQ(find(r, "oracle")->verdict, Verdict::pass) << "one ulp is within any bound";
  EXPECT_EQ(classify(r), Classification::broken) << "but no bound explains different bits";
}

// Defect: the kernel uses an input as scratch space once it is done with it.
std::int32_t scribbles_on_input(const kgate_call& c) {
  elementwise_kernel(c);
  const std::int64_t last = count(in(c, 0)) - 1;
  auto* x = static_cast<float*>(in(c, 0).data);
  x[offset_of(in(c, 0), last)] = 0.0f;
  return KGATE_OK;
}

TEST(BrokenKernels, ImmutabilityCatchesAWriteToAnInput) {
  expect_fails(elementwise(), scribbles_on_input, "immutability", std::vector<std::string>{"immutability"});
}

// Defect: only non-zero results are written, on the assumption that the output arrives zeroed.
std::int32_t sparse_writer(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
    const float v = relu_mul_at(c, i);
    if (v != 0.0f) store(out(c, 0), i, v);
  }
  return KGATE_OK;
}

TEST(BrokenKernels, CoverageCatchesUnwrittenElements) {
  // Freshness fails too, rightly: B's zeros are never written, so A's results stay in A's buffers.
  expect_fails(elementwise(), sparse_writer, "coverage", std::vector<std::string>{"coverage", "freshness"});
  const Report r = run(elementwise(), sparse_writer, 1, {"coverage"});
  EXPECT_NE(r.gates[0].evidence->detail.find("never written"), std::string::npos) << r.gates[0].evidence->detail;
}

// Defect: an output that accumulates into whatever the buffer held (reads before it writes).
std::int32_t accumulates_into_output(const kgate_call& c) {
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
    const double before = load(out(c, 0), i);
    store(out(c, 0), i, (std::isnan(before) ? 0.0 : before) * 0.0 + relu_mul_at(c, i) + (std::isnan(before) ? 1.0 : 0.0));
  }
  return KGATE_OK;
}

TEST(BrokenKernels, CoverageCatchesReadsBeforeWrites) {
  const Report r = run(elementwise(), accumulates_into_output, 1, {"coverage"});
  ASSERT_EQ(r.gates[0].verdict, Verdict::fail) << r.gates[0].summary;
  EXPECT_NE(r.gates[0].evidence->detail.find("read before written"), std::string::npos) << r.gates[0].evidence->detail;
}

// Defect: an off-by-one store loop writes one element past the end of the output.
std::int32_t one_past_the_end(const kgate_call& c) {
  elementwise_kernel(c);
  auto* z = static_cast<float*>(out(c, 0).data);
  z[count(out(c, 0))] = 0.0f;
  return KGATE_OK;
}

TEST(BrokenKernels, BoundsCatchesAWriteOnePastTheEnd) {
  expect_fails(elementwise(), one_past_the_end, "bounds", std::vector<std::string>{"bounds"});
  const Report r = run(elementwise(), one_past_the_end, 2, {"bounds"});
  EXPECT_NE(r.gates[0].evidence->detail.find("past the end of output z"), std::string::npos) << r.gates[0].evidence->detail;
}

// Defect: results cached by input address (a "memoising" kernel that never looks at the values again).
struct PointerCache {
  std::mutex mu;
  std::map<const void*, std::vector<float>> results;
};

EntryFn pointer_cached() {
  auto cache = std::make_shared<PointerCache>();
  return [cache](const kgate_call& c) -> std::int32_t {
    const std::int64_t n = count(in(c, 0));
    std::vector<float> r;
    {
      std::lock_guard<std::mutex> lock(cache->mu);
      auto it = cache->results.find(in(c, 0).data);
      if (it != cache->results.end() && static_cast<std::int64_t>(it->second.size()) == n) r = it->second;
    }
    if (r.empty()) {
      for (std::int64_t i = 0; i < n; ++i) r.push_back(relu_mul_at(c, i));
      std::lock_guard<std::mutex> lock(cache->mu);
      cache->results[in(c, 0).data] = r;
    }
    for (std::int64_t i = 0; i < n; ++i) store(out(c, 0), i, r[static_cast<std::size_t>(i)]);
    return KGATE_OK;
  };
}

TEST(BrokenKernels, FreshnessCatchesResultsCachedByPointer) {
  for (std::uint64_t seed : kSeeds) {
    const Report r = run(elementwise(), pointer_cached(), seed, {"freshness"});
    EXPECT_EQ(r.gates[0].verdict, Verdict::fail) << r.gates[0].summary;
    EXPECT_NE(r.gates[0].evidence->detail.find("stale"), std::string::npos);
  }
}

// Defect: the last bits of every result move with a count of the calls (split reductions whose partial sums land
// in whatever order the hardware finishes them): accurate, but never the same bits twice in a row.
EntryFn call_counted() {
  auto calls = std::make_shared<std::atomic<unsigned>>(0);
  return [calls](const kgate_call& c) -> std::int32_t {
    const unsigned nudge = calls->fetch_add(1) % 4;
    for (std::int64_t i = 0; i < count(in(c, 0)); ++i) {
      float v = relu_mul_at(c, i);
      for (unsigned k = 0; k < nudge; ++k) v = std::nextafter(v, std::numeric_limits<float>::infinity());
      store(out(c, 0), i, v);
    }
    return KGATE_OK;
  };
}

TEST(BrokenKernels, FreshnessSeesTheSameInputsBitsChangeAndDeterminismOwnsIt) {
  for (std::uint64_t seed : kSeeds) {
    const Report alone = run(elementwise(), call_counted(), seed, {"freshness"});
    ASSERT_EQ(alone.gates[0].verdict, Verdict::fail) << alone.gates[0].summary;
    EXPECT_EQ(alone.gates[0].finding, kFindingRepeatChanged);
    EXPECT_TRUE(alone.gates[0].counted) << "no determinism result to count it under";
    const std::string& detail = alone.gates[0].evidence->detail;
    EXPECT_NE(detail.find("A once more in A's own first buffers gave"), std::string::npos) << detail;
    EXPECT_EQ(detail.find("stale"), std::string::npos) << "not a stale result: " << detail;

    const Report both = run(elementwise(), call_counted(), seed, {"determinism", "freshness"});
    ASSERT_EQ(both.gates.size(), 2u);
    EXPECT_EQ(both.gates[0].verdict, Verdict::fail) << both.gates[0].summary;
    EXPECT_EQ(both.gates[1].verdict, Verdict::fail) << both.gates[1].summary;
    EXPECT_FALSE(both.gates[1].counted);
    EXPECT_EQ(both.gates[1].attributed_to, "determinism");
    EXPECT_EQ(classify(both), Classification::broken);
  }
}

// Defect: a static scratch buffer shared by every call; fine alone, garbage when two calls overlap.
std::int32_t shared_scratch(const kgate_call& c) {
  static std::vector<float> scratch(1 << 16);
  const std::int64_t n = count(in(c, 0));
  for (std::int64_t i = 0; i < n; ++i) scratch[static_cast<std::size_t>(i)] = relu_mul_at(c, i);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // long enough for the other call to overwrite it
  for (std::int64_t i = 0; i < n; ++i) store(out(c, 0), i, scratch[static_cast<std::size_t>(i)]);
  return KGATE_OK;
}

TEST(BrokenKernels, StreamCatchesSharedScratchBetweenConcurrentCalls) {
  expect_fails(elementwise(), shared_scratch, "stream", std::vector<std::string>{"stream"});
}

// Defect: inputs read as if contiguous, whatever their strides say.
std::int32_t ignores_strides(const kgate_call& c) {
  const auto* x = static_cast<const float*>(in(c, 0).data);
  const auto* y = static_cast<const float*>(in(c, 1).data);
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i) store(out(c, 0), i, relu(x[i]) * y[i]);
  return KGATE_OK;
}

TEST(BrokenKernels, LayoutCatchesIgnoredStrides) {
  expect_fails(elementwise(), ignores_strides, "layout", std::vector<std::string>{"layout"});
}

// Defect: pointers rounded down to a 16-byte boundary, as a kernel that assumes float4-aligned bases does.
// (Rounding to 64 bytes would be caught by determinism too: its moved run is only 16-byte aligned.)
template <class T>
T* aligned_down(void* p) {
  return reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{15});
}

std::int32_t assumes_alignment(const kgate_call& c) {
  const float* x = aligned_down<const float>(in(c, 0).data);
  const float* y = aligned_down<const float>(in(c, 1).data);
  float* z = aligned_down<float>(out(c, 0).data);
  for (std::int64_t i = 0; i < count(in(c, 0)); ++i)
    z[offset_of(out(c, 0), i)] = relu(x[offset_of(in(c, 0), i)]) * y[offset_of(in(c, 1), i)];
  return KGATE_OK;
}

TEST(BrokenKernels, LayoutCatchesAnIgnoredBaseOffset) {
  expect_fails(elementwise(), assumes_alignment, "layout", std::vector<std::string>{"layout"});
}

// A kernel that refuses what it does not support is never failed by the layout gate.
std::int32_t refuses_strides(const kgate_call& c) {
  for (int i = 0; i < c.n_inputs; ++i) {
    const DLTensor& t = c.inputs[i];
    if (t.strides[1] != 1 || t.strides[0] != t.shape[1] || (reinterpret_cast<std::uintptr_t>(t.data) & 15)) {
      std::snprintf(c.message, c.message_capacity, "contiguous, 16-byte aligned inputs only");
      return KGATE_REFUSED;
    }
  }
  if (reinterpret_cast<std::uintptr_t>(out(c, 0).data) & 15) return KGATE_REFUSED;
  return elementwise_kernel(c);
}

TEST(BrokenKernels, LayoutRefusalIsRefused) {
  const Report r = run(elementwise(), refuses_strides, 3);
  EXPECT_EQ(find(r, "layout")->verdict, Verdict::refused) << verdicts(r);
  EXPECT_TRUE(failing(r).empty()) << verdicts(r);
  EXPECT_EQ(r.exit_code(), 0);
}

}  // namespace
}  // namespace kgate::test
