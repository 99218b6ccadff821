// Bad arguments and hostile contracts (issue 15, C++ path): each a one-line error naming what and where,
// exit status 2, before anything is allocated or any worker starts, and no report written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support.hpp"

namespace kgate::security {
namespace {

const char* kKernel = "sec_kill_other_workers.so";  // correct y = 2 x; never reached by these tests

void expect_bad_input(const ProcessRun& r, const std::string& phrase) {
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("kgate: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal"), std::string::npos) << r.err;
}

ProcessRun verify_with(const std::string& contract, const std::vector<std::string>& more = {}) {
  std::vector<std::string> a = {kgate_cli(), "verify", "--contract", contract, "--kernel", fixture(kKernel)};
  a.insert(a.end(), more.begin(), more.end());
  return run(a, 60);
}

// A copy of double.toml with `dims` and `limits` replaced.
std::string contract_with(const std::string& stem, const std::string& dims, const std::string& shape,
                          const std::string& limits = "timeout = 2") {
  const std::string path = temp_path(stem) + ".toml";
  std::ofstream(path) << "[op]\nname = \"double_f32\"\n\n" << dims
                      << "\n[[inputs]]\nname = \"x\"\ndtype = \"f32\"\nshape = [" << shape
                      << "]\n\n[[outputs]]\nname = \"y\"\ndtype = \"f32\"\nshape = [" << shape << "]\n\n[limits]\n"
                      << limits << "\n";
  return path;
}

const std::string kDimN = "[dims.N]\nmin = 1\nmax = 2048\nnominal = 256\n";

TEST(BadInput, SeedMustBeADecimalOrHexIntegerIn64Bits) {
  expect_bad_input(verify_with(double_contract(), {"--seed", "-1"}), "--seed \"-1\"");
  expect_bad_input(verify_with(double_contract(), {"--seed", "18446744073709551616"}), "out of range");
  expect_bad_input(verify_with(double_contract(), {"--seed", ""}), "--seed \"\"");
  expect_bad_input(verify_with(double_contract(), {"--seed", "12abc"}), "--seed \"12abc\"");
  expect_bad_input(verify_with(double_contract(), {"--seed", " 7"}), "--seed \" 7\"");
  // In range: decimal, hexadecimal, and the largest.
  for (const char* ok : {"18446744073709551615", "0x5eed5eed", "0"}) {
    const ProcessRun r = verify_with(double_contract(), {"--seed", ok, "--gates", "determinism"});
    EXPECT_EQ(r.status, 0) << ok << ": " << r.err;
  }
}

TEST(BadInput, DimArithmeticThatOverflowsIsAnErrorWithItsPosition) {
  const std::string a = contract_with("dim_overflow_a", kDimN, "\"N*4611686018427387904\"");
  expect_bad_input(verify_with(a), a + ":12:");
  expect_bad_input(verify_with(a), "overflows 64 bits");
  const std::string b = contract_with("dim_overflow_b", kDimN, "\"N*9223372036854775807\"");
  expect_bad_input(verify_with(b), b + ":12:");
  const std::string c = contract_with("numel_overflow", "[dims.N]\nmin = 1\nmax = 4294967296\nnominal = 4\n",
                                      "\"N\", \"N\", \"N\"", "timeout = 2\nmax_case_elements = 64");
  expect_bad_input(verify_with(c), "overflows 64 bits");
  for (const std::string& p : {a, b, c}) std::filesystem::remove(p);
}

TEST(BadInput, AHugeLargestCaseIsRefusedBeforeAllocating) {
  const std::string p = contract_with("huge", "[dims.N]\nmin = 1\nmax = 4000000000\nnominal = 256\n", "\"N\"",
                                      "timeout = 2\nmax_case_elements = 4000000000");
  const ProcessRun r = verify_with(p, {"--gates", "shapes"});
  expect_bad_input(r, "bytes");
  std::filesystem::remove(p);
}

TEST(BadInput, ContractMustBeASmallRegularFile) {
  expect_bad_input(verify_with("/dev/zero"), "/dev/zero: not a regular file");
  expect_bad_input(verify_with("/tmp"), "not a regular file");
  const std::string big = temp_path("big") + ".toml";
  {
    std::ofstream out(big);
    out << "# " << std::string((1 << 20) + 10, 'x') << "\n";
  }
  expect_bad_input(verify_with(big), "larger than");
  std::filesystem::remove(big);
}

TEST(BadInput, TimeoutsAreBounded) {
  const std::string p = contract_with("timeout", kDimN, "\"N\"", "timeout = 1e308");
  expect_bad_input(verify_with(p), p + ":");
  expect_bad_input(verify_with(p), "limits.timeout");
  expect_bad_input(verify_with(double_contract(), {"--timeout", "1e308"}), "--timeout");
  expect_bad_input(verify_with(double_contract(), {"--timeout", "0"}), "--timeout");
  std::filesystem::remove(p);
}

TEST(BadInput, WithoutNamespacesVerifyRefusesUnlessToldUnsafe) {
  const std::vector<std::string> args = {kgate_cli(), "verify", "--contract", double_contract(), "--kernel",
                                         fixture(kKernel), "--gates", "determinism"};
  const ProcessRun r = run_handicapped(args, true, false);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out.rfind("kgate: error: kernel: cannot isolate the worker: ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // Unprotected, only an honest candidate: kKernel would SIGKILL every kgate-worker on the host.
  std::vector<std::string> unsafe = {kgate_cli(), "verify", "--contract", double_contract(), "--kernel",
                                     fixture("sec_honest.so"), "--gates", "determinism", "--unsafe-no-isolation"};
  const ProcessRun u = run_handicapped(unsafe, true, false);
  EXPECT_EQ(u.status, 0) << u.out;
  EXPECT_NE(u.out.find("(cpu, NOT isolated)"), std::string::npos) << "the report says so: " << u.out;
}

TEST(BadInput, NoReportIsWrittenForBadInput) {
  const std::string json = temp_path("bad_input.json");
  std::filesystem::remove(json);
  expect_bad_input(verify_with(double_contract(), {"--seed", "-1", "--json", json}), "--seed");
  EXPECT_FALSE(std::filesystem::exists(json));
  EXPECT_FALSE(std::filesystem::exists(json + ".partial"));
}

}  // namespace
}  // namespace kgate::security
