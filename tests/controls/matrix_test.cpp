// The detection matrix over every control in the manifest, one test per control: a broken control must
// fail each of its intended gates on every one of 20 seeds, a correct one must pass every gate on every
// seed. KGATE_MATRIX_SEED=N moves the seeds to N..N+19 (any run is a fresh sample of the claim).
#include <cstdlib>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "kgate/matrix.hpp"

namespace kgate {

// Test names and failure messages show the control, not its bytes.
void PrintTo(const ControlEntry& c, std::ostream* os) { *os << c.name; }

namespace {

constexpr int kSeeds = 20;

std::vector<ControlEntry> manifest_controls() {
  try {
    return load_manifest(KGATE_CONTROLS_MANIFEST);
  } catch (const std::exception&) {
    return {};  // ManifestLoads below reports why
  }
}

std::uint64_t first_seed() {
  const char* s = std::getenv("KGATE_MATRIX_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 1;
}

TEST(Matrix, ManifestLoads) {
  EXPECT_NO_THROW(load_manifest(KGATE_CONTROLS_MANIFEST));
  EXPECT_FALSE(manifest_controls().empty());
}

class Control : public ::testing::TestWithParam<ControlEntry> {};

TEST_P(Control, VerdictsHoldOnEverySeed) {
  MatrixOptions o;
  o.seeds = kSeeds;
  o.seed = first_seed();
  o.jobs = 1;  // ctest -j runs the controls side by side
  const MatrixResult m = run_matrix({GetParam()}, o);
  const MatrixJudgement j = judge(m);
  EXPECT_TRUE(j.holds) << format_matrix(m, false);
  ASSERT_EQ(m.rows.size(), 1u);
  EXPECT_EQ(m.rows[0].runs, kSeeds) << format_matrix(m, false);
}

INSTANTIATE_TEST_SUITE_P(Manifest, Control, ::testing::ValuesIn(manifest_controls()),
                         [](const ::testing::TestParamInfo<ControlEntry>& info) { return info.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Control);

}  // namespace
}  // namespace kgate
