// The manifest reader, and the shipped manifest itself: every gate has a broken control that must trip
// it, every library and contract it names exists and loads.
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "kgate/contract.hpp"
#include "kgate/matrix.hpp"
#include "kgate/targets.hpp"
#include "kgate/verify.hpp"

namespace kgate {
namespace {

namespace fs = std::filesystem;

class TempManifest {
 public:
  explicit TempManifest(const std::string& text) {
    dir_ = fs::temp_directory_path() / fs::path("kgate_manifest_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                                "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream(dir_ / "manifest.toml") << text;
  }
  ~TempManifest() { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "manifest.toml").string(); }
  fs::path dir() const { return dir_; }

 private:
  fs::path dir_;
};

const char* kOne = R"(
[[control]]
name = "a"
kind = "broken"
gates = ["nan"]
defect = "drops NaN"
kernel = "lib/a.so"
oracle = "/abs/oracle.so:my_oracle"
contract = "c/a.toml"
)";

TEST(Manifest, ResolvesPathsAgainstItsOwnDirectory) {
  TempManifest t(kOne);
  const std::vector<ControlEntry> c = load_manifest(t.path());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name, "a");
  EXPECT_TRUE(c[0].broken);
  EXPECT_EQ(c[0].gates, std::vector<std::string>{"nan"});
  EXPECT_EQ(c[0].defect, "drops NaN");
  EXPECT_EQ(c[0].kernel, (t.dir() / "lib/a.so").string());
  EXPECT_EQ(c[0].oracle, "/abs/oracle.so:my_oracle");  // absolute kept, symbol kept
  EXPECT_EQ(c[0].contract, (t.dir() / "c/a.toml").string());
}

void expect_rejected(const std::string& text, const std::string& needle) {
  TempManifest t(text);
  try {
    load_manifest(t.path());
    ADD_FAILURE() << "accepted a manifest that should fail with: " << needle;
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.toml"), std::string::npos) << e.what();
  }
}

std::string with(const std::string& from, const std::string& to) {
  std::string s = kOne;
  s.replace(s.find(from), from.size(), to);
  return s;
}

TEST(Manifest, RejectsWhatCannotBeJudged) {
  expect_rejected(with("gates = [\"nan\"]", "gates = [\"nann\"]"), "unknown gate \"nann\"");
  expect_rejected(with("gates = [\"nan\"]", ""), "names no gates");
  expect_rejected(with("kind = \"broken\"", "kind = \"correct\""), "cannot list gates");
  expect_rejected(with("kind = \"broken\"", "kind = \"bad\""), "kind must be");
  expect_rejected(with("defect =", "defects ="), "unknown key 'defects'");
  expect_rejected(with("kernel = \"lib/a.so\"\n", ""), "missing kernel");
  expect_rejected(std::string(kOne) + kOne, "appears twice");
  expect_rejected("title = 1\n", "no [[control]]");
  expect_rejected("[[control]\n", "manifest.toml:1");
}

TEST(Manifest, MissingFileIsNamed) {
  try {
    load_manifest("/nonexistent/kgate/manifest.toml");
    ADD_FAILURE() << "a missing manifest was accepted";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kgate/manifest.toml: no such manifest file"), std::string::npos) << e.what();
  }
}

// The shipped manifest, as the build lays it out.
class Shipped : public ::testing::Test {
 protected:
  void SetUp() override { controls_ = load_manifest(KGATE_CONTROLS_MANIFEST); }
  std::vector<ControlEntry> controls_;
};

TEST_F(Shipped, EveryGateHasABrokenControlThatMustTripIt) {
  std::set<std::string> intended;
  for (const ControlEntry& c : controls_) intended.insert(c.gates.begin(), c.gates.end());
  for (const GateInfo& g : list_gates()) {
    if (g.is_baseline) continue;
    EXPECT_TRUE(intended.count(g.name)) << "no broken control is meant to fail gate " << g.name;
  }
}

TEST_F(Shipped, HasCorrectControlsForEveryOperatorFamily) {
  std::set<std::string> correct_contracts, all_contracts;
  for (const ControlEntry& c : controls_) {
    all_contracts.insert(c.contract);
    if (!c.broken) correct_contracts.insert(c.contract);
  }
  EXPECT_GE(correct_contracts.size(), 3u);
  // A broken control judged against a contract no correct control passes would prove nothing about
  // false positives there.
  EXPECT_EQ(correct_contracts, all_contracts);
}

TEST_F(Shipped, EveryLibraryAndContractLoads) {
  for (const ControlEntry& c : controls_) {
    SCOPED_TRACE(c.name);
    EXPECT_NO_THROW(load_contract(c.contract));
    EXPECT_NO_THROW(probe_entry(parse_entry(c.kernel, "kgate_run")));
    EXPECT_NO_THROW(probe_entry(parse_entry(c.oracle, "kgate_oracle")));
  }
}

TEST(Manifest, DefaultPathFindsTheBuildTree) {
  // The test binary lives in build/tests/controls/, so the walk up reaches build/controls/manifest.toml.
  EXPECT_EQ(fs::weakly_canonical(default_manifest_path()), fs::weakly_canonical(KGATE_CONTROLS_MANIFEST));
}

}  // namespace
}  // namespace kgate
