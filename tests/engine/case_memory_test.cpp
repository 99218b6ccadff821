// The memory one case may take (issues 14/18): the engine's estimate per case, and the limit it is checked
// against, which is the machine's (KGATE_CASE_MEMORY, else 3/4 of its memory), not a constant 8 GiB. Nothing
// here allocates a case: the check runs while the contract is read.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "kgate/contract.hpp"

namespace kgate {
namespace {

// a100 L2/T34's derived contract: y0 alone has 2^30 f32 elements at the nominal shape, also the largest.
const char* kT34 = R"([op]
name = "kernelbench_task"

[dims.batch_size]
nominal = 128
min = 1
max = 128

[dims.in_channels]
nominal = 32
min = 1
max = 32

[[inputs]]
name = "x0"
dtype = "f32"
shape = ["batch_size", "in_channels", 16, 32, 32]

[[outputs]]
name = "y0"
dtype = "f32"
shape = ["batch_size", 64, 32, 64, 64]
reduced = ["in_channels"]

[limits]
max_case_elements = 1073741824
)";
constexpr std::int64_t kT34Bytes = (std::int64_t{128} * 32 * 16 * 32 * 32 + std::int64_t{128} * 64 * 32 * 64 * 64) * 24;

std::string refusal(const std::string& text, std::int64_t limit) {
  try {
    (void)parse_contract(text, "t34.toml", CaseMemoryLimit{limit, "the test's limit"});
  } catch (const ContractError& e) {
    return e.what();
  }
  return "";
}

TEST(CaseMemory, TheEstimateIsEachElementInItsDtypeAndFloat64Twice) {
  const Contract c = parse_contract(kT34, "t34.toml", CaseMemoryLimit{0, "not checked"});
  EXPECT_EQ(case_bytes_per_element(DType::f32), 24);
  EXPECT_EQ(case_bytes_per_element(DType::bf16), 20);
  EXPECT_EQ(case_bytes(c, c.nominal()), kT34Bytes);
  EXPECT_EQ(largest_case_bytes(c), kT34Bytes);
  EXPECT_GT(kT34Bytes, std::int64_t{8} << 30);  // what the old constant refused
}

TEST(CaseMemory, ANominalCaseBeyondTheOld8GiBIsAcceptedWhereTheLimitHoldsIt) {
  EXPECT_EQ(refusal(kT34, kT34Bytes), "");
  EXPECT_EQ(refusal(kT34, std::int64_t{96} << 30), "");
}

TEST(CaseMemory, ANominalCaseTheMachineCannotHoldIsItsOwnOneLineMessage) {
  const std::string m = refusal(kT34, kT34Bytes - 1);
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.rfind("t34.toml:", 0), 0u) << m;
  EXPECT_NE(m.find("field 'outputs[0].shape': the nominal case"), std::string::npos) << m;
  EXPECT_NE(m.find("y0 has 1073741824 elements"), std::string::npos) << m;
  EXPECT_NE(m.find("the test's limit; this machine cannot judge it"), std::string::npos) << m;
}

TEST(CaseMemory, ARangeReachingPastTheLimitIsToldToLowerMax) {
  std::string wide = kT34;
  wide.replace(wide.find("nominal = 128"), 13, "nominal = 64");
  const std::string m = refusal(wide, kT34Bytes / 2);
  EXPECT_NE(m.find("field 'limits.max_case_elements': the largest case needs about"), std::string::npos) << m;
  EXPECT_NE(m.find("lower max or max_case_elements"), std::string::npos) << m;
  EXPECT_EQ(refusal(wide, kT34Bytes), "");
}

TEST(CaseMemory, TheDefaultLimitIsTheMachinesOrKgateCaseMemory) {
  const char* before = std::getenv("KGATE_CASE_MEMORY");
  const std::string saved = before ? before : "";
  unsetenv("KGATE_CASE_MEMORY");
  const CaseMemoryLimit machine = case_memory_limit();
  EXPECT_GT(machine.bytes, 0);
  EXPECT_EQ(machine.why.rfind("3/4 of this machine's", 0), 0u) << machine.why;
  setenv("KGATE_CASE_MEMORY", std::to_string(kT34Bytes).c_str(), 1);
  EXPECT_EQ(case_memory_limit().bytes, kT34Bytes);
  EXPECT_NO_THROW((void)parse_contract(kT34, "t34.toml"));
  setenv("KGATE_CASE_MEMORY", std::to_string(kT34Bytes - 1).c_str(), 1);
  EXPECT_THROW((void)parse_contract(kT34, "t34.toml"), ContractError);
  for (const char* bad : {"8G", "-1", "1000", "0x400000000", ""}) {
    setenv("KGATE_CASE_MEMORY", bad, 1);
    if (*bad == '\0') {
      EXPECT_EQ(case_memory_limit().bytes, machine.bytes);  // empty: unset
      continue;
    }
    EXPECT_THROW((void)case_memory_limit(), std::invalid_argument) << bad;
    try {
      (void)parse_contract(kT34, "t34.toml");
      ADD_FAILURE() << bad;
    } catch (const ContractError& e) {
      EXPECT_NE(std::string(e.what()).find("t34.toml: KGATE_CASE_MEMORY must be a decimal number of bytes"),
                std::string::npos)
          << e.what();
    }
  }
  if (before) setenv("KGATE_CASE_MEMORY", saved.c_str(), 1);
  else unsetenv("KGATE_CASE_MEMORY");
}

}  // namespace
}  // namespace kgate
