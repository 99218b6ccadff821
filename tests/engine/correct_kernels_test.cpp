// No false positives: the correct elementwise op, row softmax and matmul pass every gate, over many seeds.
#include <gtest/gtest.h>

#include "kit.hpp"

namespace kgate::test {
namespace {

constexpr int kSeeds = 20;

void expect_clean(const Subject& s, EntryFn kernel) {
  for (int seed = 1; seed <= kSeeds; ++seed) {
    const Report r = run(s, kernel, static_cast<std::uint64_t>(seed) * 7919);
    for (const GateResult& g : r.gates) {
      const bool ok = g.verdict == Verdict::pass || g.verdict == Verdict::skip;
      EXPECT_TRUE(ok) << s.contract.name << " seed " << r.seed << ": " << g.gate << " " << to_string(g.verdict) << ": "
                      << g.summary << "\n" << to_table(r, false);
      if (!ok) return;
    }
    EXPECT_EQ(r.exit_code(), 0);
    EXPECT_EQ(classify(r), Classification::clean);
  }
}

TEST(CorrectKernels, ElementwisePassesEveryGate) { expect_clean(elementwise(), elementwise_kernel); }
TEST(CorrectKernels, SoftmaxPassesEveryGate) { expect_clean(softmax(), softmax_kernel); }
TEST(CorrectKernels, MatmulPassesEveryGate) { expect_clean(matmul(), matmul_kernel); }

TEST(CorrectKernels, EveryGateRanAndOnlyInapplicableOnesSkipped) {
  const Report r = run(elementwise(), elementwise_kernel, 11);
  ASSERT_EQ(r.gates.size(), 13u);
  // An elementwise op reduces nothing: accumulation is the one gate that cannot apply.
  for (const GateResult& g : r.gates)
    if (!concurrency_unexercised(g))
      EXPECT_EQ(g.verdict, g.gate == "accumulation" ? Verdict::skip : Verdict::pass) << g.gate << ": " << g.summary;
  const Report m = run(matmul(), matmul_kernel, 11);
  for (const GateResult& g : m.gates)
    if (!concurrency_unexercised(g)) EXPECT_EQ(g.verdict, Verdict::pass) << g.gate << ": " << g.summary;
}

}  // namespace
}  // namespace kgate::test
