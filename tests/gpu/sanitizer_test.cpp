// The bounds gate's compute-sanitizer pass. The log parser is tested everywhere on reports written the way
// compute-sanitizer writes them (memcheck, racecheck, initcheck, synccheck, and an API error); the pass
// itself runs where there is a GPU and the tool: the tail-overrun control must FAIL under memcheck with the
// kernel and access named, the correct controls must PASS under memcheck and racecheck.
#include <string>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/sanitizer.hpp"
#include "kgate/oracle.hpp"
#include "sanitizer_logs/read_log.hpp"

namespace kgate {
namespace {

// The tool's logs in tests/gpu/sanitizer_logs (the engine's parser tests and the Python audit's test read them too):
// memcheck.log, a write past a buffer and the launch failure it causes; racecheck.log, a race report.
using test::sanitizer_log;

const std::string kRacecheckLog = sanitizer_log("racecheck.log");

const char* kInitcheckLog = R"(========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 8 bytes
=========     at scratch_kernel(double*, long)+0x90 in s.cu:7
=========     by thread (3,0,0) in block (1,0,0)
=========     Address 0x7f00aa001018
=========
========= ERROR SUMMARY: 1 error
)";

const char* kSynccheckLog = R"(========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at 0x2f0 in sync.cu:21:tail_sync(float*, int)
=========     by thread (37,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
)";

TEST(SanitizerLog, MemcheckRecordGivesKindKernelAddressSizeAndWhere) {
  const auto f = parse_sanitizer_log("memcheck", sanitizer_log("memcheck.log"));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, "Invalid __global__ write of size 4 bytes");
  EXPECT_EQ(f[0].kernel, "add_kernel(cctl::Vec<const float>, cctl::Vec<const float>, cctl::Vec<float>)");
  EXPECT_EQ(f[0].address, "0x7f3e5c000a0c");
  EXPECT_EQ(f[0].size, 4);
  EXPECT_NE(f[0].where.find("by thread (131,0,0) in block (0,0,0)"), std::string::npos) << f[0].where;
  EXPECT_NE(f[0].where.find("1 bytes after the nearest allocation"), std::string::npos) << f[0].where;
  EXPECT_EQ(f[0].text.find("Host Frame"), std::string::npos) << "host backtraces are dropped";
  EXPECT_FALSE(f[0].api_error);
  EXPECT_TRUE(f[1].api_error) << "the launch failure is a consequence, not an access";
}

TEST(SanitizerLog, RacecheckInitcheckSynccheckRecords) {
  const auto race = parse_sanitizer_log("racecheck", kRacecheckLog);
  ASSERT_EQ(race.size(), 1u);
  EXPECT_NE(race[0].kind.find("Race reported between Write access"), std::string::npos);
  EXPECT_EQ(race[0].kernel, "reduce<float>(float const*, float*, int)");
  const auto init = parse_sanitizer_log("initcheck", kInitcheckLog);
  ASSERT_EQ(init.size(), 1u);
  EXPECT_EQ(init[0].size, 8);
  EXPECT_EQ(init[0].kernel, "scratch_kernel(double*, long)");
  EXPECT_EQ(init[0].address, "0x7f00aa001018");
  const auto sync = parse_sanitizer_log("synccheck", kSynccheckLog);
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_EQ(sync[0].kernel, "tail_sync(float*, int)");
}

TEST(SanitizerLog, CleanLogAndApplicationOutputGiveNothing) {
  EXPECT_TRUE(parse_sanitizer_log("memcheck", "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n").empty());
  EXPECT_TRUE(parse_sanitizer_log("memcheck", "hello from the application\nInvalid but not a record\n").empty());
}

TEST(SanitizerPass, UnknownToolIsAnError) {
  Contract c;
  auto oracle = make_function_oracle("none", [](const std::vector<HostArray>&, const Bindings&, const Attrs&) {
    return std::vector<HostArray>{};
  });
  SanitizerOptions o;
  o.tool = "leakcheck";
  const GateResult g = run_sanitizer_pass(c, EntrySpec{"x.so", "kgate_run"}, *oracle, o);
  EXPECT_EQ(g.verdict, Verdict::error);
  EXPECT_NE(g.summary.find("memcheck"), std::string::npos) << g.summary;
}

class SanitizerOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no GPU here, sanitizer pass skipped: " << why;
    std::string looked;
    if (!find_compute_sanitizer(&looked)) GTEST_SKIP() << "no compute-sanitizer here (looked at " << looked << ")";
  }
  GateResult pass(const std::string& control, const std::string& oracle_lib, const std::string& contract,
                  const std::string& tool) {
    const std::string dir = KGATE_CUDA_CONTROLS_DIR;
    const Contract c = load_contract(dir + "/contracts/" + contract);
    TargetOptions to;
    to.timeout_seconds = 120;
    auto oracle = make_target_oracle(make_worker_target(parse_entry(dir + "/" + oracle_lib, "kgate_oracle"), to), c);
    SanitizerOptions o;
    o.tool = tool;
    const GateResult g = run_sanitizer_pass(c, parse_entry(dir + "/lib/" + control, "kgate_run"), *oracle, o);
    std::printf("%s under %s: %s: %s\n%s\n", control.c_str(), tool.c_str(), to_string(g.verdict), g.summary.c_str(),
                g.evidence ? g.evidence->detail.c_str() : "");
    return g;
  }
};

TEST_F(SanitizerOnGpu, MemcheckCatchesTheMissingTailGuard) {
  const GateResult g = pass("cuda_add_no_tail_guard.so", "lib/cuda_oracle_add.so", "add_f32.toml", "memcheck");
  ASSERT_EQ(g.verdict, Verdict::fail) << g.summary << "\n" << g.output;
  ASSERT_TRUE(g.evidence);
  EXPECT_NE(g.evidence->detail.find("add_kernel"), std::string::npos) << g.evidence->detail;
  EXPECT_NE(g.evidence->got.find("Invalid __global__"), std::string::npos) << g.evidence->got;
}

TEST_F(SanitizerOnGpu, CorrectControlsPassMemcheckAndRacecheck) {
  EXPECT_EQ(pass("cuda_add_f32.so", "lib/cuda_oracle_add.so", "add_f32.toml", "memcheck").verdict, Verdict::pass);
  EXPECT_EQ(pass("cuda_softmax_f32.so", "../lib/oracle_softmax.so", "softmax_f32.toml", "racecheck").verdict, Verdict::pass);
}

}  // namespace
}  // namespace kgate
