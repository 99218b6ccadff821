// Isolation: a candidate running in a worker process can crash, hang, flood its output, refuse, exit,
// fork, or scribble on the protocol channel, and each ends as its own outcome while the target keeps
// working after reset(). Also: the worker starts bare (empty directory, no inherited descriptors) and
// tensor bytes cross intact.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "kgate/targets.hpp"

namespace kgate {
namespace {

std::string fixture(const char* name) { return std::string(KGATE_FIXTURES) + "/" + name + ".so"; }

enum Mode { ok = 0, segfault = 1, abort_ = 2, loop = 3, flood = 4, refuse = 5, exit3 = 6, fork_crash = 7,
            forge = 8, inspect = 9, say_and_abort = 10, error = 11, overrun = 12, tamper = 13, hog = 14 };

TargetOptions quick() {
  TargetOptions o;
  o.timeout_seconds = 1.0;
  o.output_limit = 4096;
  o.guard_bytes = 256;
  return o;
}

class Worker : public ::testing::Test {
 protected:
  void SetUp() override { target = make_worker_target({fixture("fx_behave"), "kgate_run"}, quick()); }

  // One call of y = 2x on n f32 elements, in fresh buffers, with the given mode.
  CallResult run(Mode mode, std::int64_t n = 1000, Attrs extra = {}, std::vector<std::byte> poison = {}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i) - 3.0f;
    const std::size_t bytes = x.size() * sizeof(float);
    const BufferId in = target->alloc(bytes), out = target->alloc(bytes);
    target->write(in, 0, std::as_bytes(std::span(x)));
    CallRequest req;
    Invocation inv;
    inv.inputs.push_back({in, Layout::dense(DType::f32, {n})});
    inv.outputs.push_back({out, Layout::dense(DType::f32, {n})});
    inv.attrs = {{"mode", static_cast<double>(mode)}};
    inv.attrs.insert(inv.attrs.end(), extra.begin(), extra.end());
    req.invocations.push_back(inv);
    req.poison = std::move(poison);
    return target->call(req);
  }

  static void expect_doubled(const CallResult& r, std::int64_t n = 1000) {
    ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
    ASSERT_EQ(r.results.size(), 1u);
    ASSERT_EQ(r.results[0].status, KGATE_OK) << r.results[0].message;
    const HostArray& y = r.results[0].outputs.at(0);
    ASSERT_EQ(y.shape(), (Shape{n}));
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(y.get(i), 2.0 * (0.5 * static_cast<double>(i) - 3.0)) << i;
  }

  // After any crash or timeout: unusable until reset(), then correct again.
  void expect_recovers() {
    EXPECT_FALSE(target->healthy());
    EXPECT_THROW(target->alloc(16), TargetError);
    target->reset();
    EXPECT_TRUE(target->healthy());
    expect_doubled(run(ok));
  }

  std::unique_ptr<Target> target;
};

TEST_F(Worker, CorrectCallReturnsTheOutputs) {
  EXPECT_EQ(target->device(), kDLCPU);
  // Without root the worker keeps the caller's uid outside its namespaces, and says so.
  EXPECT_EQ(target->describe(), geteuid() == 0 ? "fx_behave.so:kgate_run (cpu, isolated)"
                                               : "fx_behave.so:kgate_run (cpu, isolated, as the caller's uid)");
  const CallResult r = run(ok);
  expect_doubled(r);
  EXPECT_TRUE(r.guards.empty());
  EXPECT_EQ(r.output_bytes, 0u);
  EXPECT_TRUE(target->healthy());
}

TEST_F(Worker, SegfaultIsACrashNamingTheSignal) {
  const CallResult r = run(segfault);
  EXPECT_EQ(r.outcome, CallOutcome::crashed);
  EXPECT_EQ(r.detail, "SIGSEGV (Segmentation fault)");
  expect_recovers();
}

TEST_F(Worker, AbortIsACrashWithWhatItPrinted) {
  const CallResult r = run(say_and_abort);
  EXPECT_EQ(r.outcome, CallOutcome::crashed);
  EXPECT_EQ(r.detail, "SIGABRT (Aborted)");
  EXPECT_NE(r.output.find("behave: about to abort on purpose"), std::string::npos) << r.output;
  expect_recovers();
}

TEST_F(Worker, InfiniteLoopTimesOutAtTheLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  const CallResult r = run(loop);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.outcome, CallOutcome::timed_out);
  EXPECT_EQ(r.detail, "timeout after 1.0 s");
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 2.5);
  expect_recovers();
}

TEST_F(Worker, FloodOfOutputIsCutAndCountedWithoutBlocking) {
  const auto t0 = std::chrono::steady_clock::now();
  const CallResult r = run(flood, 1000, {{"megabytes", 8}});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_doubled(r);
  EXPECT_EQ(r.output_bytes, 8u << 20);
  EXPECT_LE(r.output.size(), 4096u + 64u);
  EXPECT_NE(r.output.find("bytes not shown"), std::string::npos);
  EXPECT_LT(took, 1.0);  // well inside the time limit: the pipe never filled up
  // The next call's output starts afresh.
  EXPECT_EQ(run(ok).output_bytes, 0u);
}

TEST_F(Worker, RefusalAndErrorCarryTheMessageAndLeaveOutputsAlone) {
  const std::vector<std::byte> poison = {std::byte{0xde}, std::byte{0xad}, std::byte{0xbe}, std::byte{0xef}};
  const CallResult r = run(refuse, 16, {}, poison);
  ASSERT_EQ(r.outcome, CallOutcome::completed);
  EXPECT_EQ(r.results[0].status, KGATE_REFUSED);
  EXPECT_EQ(r.results[0].message, "shape not supported: N must be a multiple of 4");
  const HostArray& y = r.results[0].outputs.at(0);
  for (std::int64_t i = 0; i < 16; ++i) EXPECT_EQ(std::memcmp(y.data() + 4 * i, poison.data(), 4), 0) << i;
  const CallResult e = run(error);
  EXPECT_EQ(e.results[0].status, KGATE_ERROR);
  EXPECT_EQ(e.results[0].message, "internal failure on purpose");
  EXPECT_TRUE(target->healthy());
}

TEST_F(Worker, ExitInTheMiddleOfACallIsACrash) {
  const CallResult r = run(exit3);
  EXPECT_EQ(r.outcome, CallOutcome::crashed);
  EXPECT_EQ(r.detail, "exit status 3");
  expect_recovers();
}

TEST_F(Worker, CrashIsSeenEvenWhenAForkedChildKeepsTheChannelOpen) {
  const auto t0 = std::chrono::steady_clock::now();
  const CallResult r = run(fork_crash);
  EXPECT_EQ(r.outcome, CallOutcome::crashed);
  EXPECT_EQ(r.detail, "SIGSEGV (Segmentation fault)");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.9);  // not a timeout
  expect_recovers();
}

TEST_F(Worker, GarbageOnTheChannelIsAProtocolCrash) {
  const CallResult r = run(forge);
  EXPECT_EQ(r.outcome, CallOutcome::crashed);
  EXPECT_EQ(r.detail.rfind("the worker broke the protocol: ", 0), 0u) << r.detail;
  expect_recovers();
}

TEST_F(Worker, OverrunShowsInTheGuards) {
  const CallResult r = run(overrun, 64);
  ASSERT_EQ(r.outcome, CallOutcome::completed);
  ASSERT_EQ(r.guards.size(), 1u);
  EXPECT_EQ(r.guards[0].offset, 64 * 4);  // the first byte after the payload
  EXPECT_NE(r.guards[0].expected, r.guards[0].found);
}

TEST(WorkerStart, BareDirectoryAndNoInheritedDescriptors) {
  // A descriptor the driver leaked without O_CLOEXEC must not reach the candidate.
  const int leaked = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 0);
  std::string dir;
  {
    auto t = make_worker_target({fixture("fx_behave"), "kgate_run"}, quick());
    const BufferId in = t->alloc(4), out = t->alloc(4);
    CallRequest req;
    req.invocations.push_back({{{in, Layout::dense(DType::f32, {1})}}, {{out, Layout::dense(DType::f32, {1})}},
                               {{"mode", static_cast<double>(inspect)}}});
    const CallResult r = t->call(req);
    ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
    const std::string m = r.results[0].message;
    std::smatch parts;
    ASSERT_TRUE(std::regex_match(m, parts, std::regex("cwd=(\\S+) entries=(\\d+) fds=(.*) tmpdir=(\\S*)"))) << m;
    dir = parts[1];
    // Isolated (docs/security.md): a private scratch directory inside the worker's own tmpfs /tmp.
    EXPECT_EQ(dir, "/tmp/kgate-scratch");
    EXPECT_EQ(parts[2], "0") << "the worker's directory was not empty";
    EXPECT_EQ(parts[3], "0 1 2 3 4 ") << "stdin, stdout, stderr, the channel and the arena, nothing else";
    EXPECT_EQ(parts[4], dir) << "TMPDIR points into the worker's own directory";
    EXPECT_FALSE(std::filesystem::exists(dir + "/left-behind.txt")) << "the scratch directory is the host's";
  }
  ::close(leaked);
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the worker's directory outlived it";
}

bool landlock_available() {
  return syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION) >= 1;
}

// The candidate may read anything, but it cannot change what judges it: no file outside its own
// directory can be created, even beside its own library.
TEST_F(Worker, CannotWriteOutsideItsDirectory) {
  if (!landlock_available()) GTEST_SKIP() << "this kernel has no Landlock; the worker runs without the sandbox";
  const std::string planted = std::string(KGATE_FIXTURES) + "/tampered-by-candidate";
  std::remove(planted.c_str());
  const CallResult r = run(tamper, 4);
  ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
  EXPECT_EQ(r.results[0].message, "Permission denied");
  EXPECT_FALSE(std::filesystem::exists(planted));
  std::remove(planted.c_str());
}

TEST(WorkerStart, MemoryLimitStopsAHog) {
  TargetOptions o = quick();
  o.memory_limit_bytes = std::size_t(256) << 20;
  auto t = make_worker_target({fixture("fx_behave"), "kgate_run"}, o);
  auto hog_call = [&](double megabytes) {
    const BufferId in = t->alloc(4), out = t->alloc(4);
    CallRequest req;
    req.invocations.push_back({{{in, Layout::dense(DType::f32, {1})}}, {{out, Layout::dense(DType::f32, {1})}},
                               {{"mode", static_cast<double>(hog)}, {"megabytes", megabytes}}});
    return t->call(req);
  };
  const CallResult big = hog_call(1024);
  ASSERT_EQ(big.outcome, CallOutcome::completed) << big.detail;
  EXPECT_EQ(big.results[0].status, KGATE_ERROR);
  EXPECT_EQ(big.results[0].message, "allocation failed");
  const CallResult small = hog_call(16);
  ASSERT_EQ(small.outcome, CallOutcome::completed) << small.detail;
  EXPECT_EQ(small.results[0].status, KGATE_OK) << small.results[0].message;
}

TEST(WorkerStart, ConstructorCrashIsALoadCrash) {
  try {
    make_worker_target({fixture("fx_ctor_crash"), "kgate_run"}, quick());
    FAIL() << "started a worker on a library whose constructor segfaults";
  } catch (const LoadCrash& e) {
    EXPECT_EQ(e.outcome(), CallOutcome::crashed);
    EXPECT_NE(std::string(e.what()).find("crashed while loading: SIGSEGV"), std::string::npos) << e.what();
  }
}

TEST(WorkerStart, StaticLoadErrorsAreLoadErrors) {
  try {
    make_worker_target({fixture("fx_abi7"), "kgate_run"}, quick());
    FAIL();
  } catch (const LoadCrash&) {
    FAIL() << "an ABI mismatch is not a crash";
  } catch (const LoadError& e) {
    EXPECT_EQ(std::string(e.what()), fixture("fx_abi7") + ": built against ABI 7, this kgate speaks ABI 1");
  }
}

TEST_F(Worker, LargeBuffersCrossIntact) {
  const std::size_t bytes = std::size_t(64) << 20;
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  const BufferId id = target->alloc(bytes);
  target->write(id, 0, data);
  EXPECT_EQ(target->read(id, 0, bytes), data);
  EXPECT_EQ(target->read(id, bytes - 3, 3), std::vector<std::byte>(data.end() - 3, data.end()));
  EXPECT_TRUE(target->check_guards(id).empty());
}

TEST_F(Worker, InvalidRequestsThrowButLeaveTheWorkerHealthy) {
  EXPECT_THROW(target->read(12345, 0, 4), TargetError);
  const BufferId id = target->alloc(8);
  EXPECT_THROW(target->write(id, 4, std::vector<std::byte>(8)), TargetError);
  CallRequest req;
  req.invocations.push_back({{{id, Layout::dense(DType::f32, {100})}}, {{id, Layout::dense(DType::f32, {1})}}, {}});
  EXPECT_THROW(target->call(req), TargetError);  // the layout runs past the buffer
  EXPECT_TRUE(target->healthy());
  expect_doubled(run(ok));
}

TEST_F(Worker, ResetOfAHealthyWorkerDropsItsBuffers) {
  const BufferId id = target->alloc(16);
  target->reset();
  EXPECT_TRUE(target->healthy());
  EXPECT_THROW(target->read(id, 0, 16), TargetError);
  expect_doubled(run(ok));
}

TEST_F(Worker, ConcurrentInvocationsInOneCall) {
  const std::int64_t n = 4096;
  std::vector<float> a(n, 1.5f), b(n, -4.0f);
  CallRequest req;
  for (const auto* x : {&a, &b}) {
    const BufferId in = target->alloc(n * 4), out = target->alloc(n * 4);
    target->write(in, 0, std::as_bytes(std::span(*x)));
    req.invocations.push_back({{{in, Layout::dense(DType::f32, {n})}}, {{out, Layout::dense(DType::f32, {n})}}, {}});
  }
  const CallResult r = target->call(req);
  ASSERT_EQ(r.outcome, CallOutcome::completed);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].outputs[0].get(n - 1), 3.0);
  EXPECT_EQ(r.results[1].outputs[0].get(0), -8.0);
}

// A launch prefix (compute-sanitizer in the bounds gate's pass) gets one log per worker through
// "{start}", so the worker that replaces a crashed one cannot truncate the log that saw the crash, and a
// worker under a prefix is asked to quit, so the wrapper lives to write what follows the worker's exit.
TEST(WorkerUnderPrefix, EachWorkerGetsItsOwnLogAndTheWrapperOutlivesIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("kgate_prefix_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  TargetOptions o = quick();
  o.launch_prefix = {"/bin/sh", "-c", R"(echo started > "$0"; "$@"; echo "worker exited $?" >> "$0")",
                     (dir / "w.{start}.log").string()};
  const auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  {
    std::unique_ptr<Target> target = make_worker_target({fixture("fx_behave"), "kgate_run"}, o);
    const auto call = [&](Mode mode) {
      const std::int64_t n = 64;
      std::vector<float> x(n, 1.0f);
      const BufferId in = target->alloc(n * 4), out = target->alloc(n * 4);
      target->write(in, 0, std::as_bytes(std::span(x)));
      CallRequest req;
      req.invocations.push_back({{{in, Layout::dense(DType::f32, {n})}},
                                 {{out, Layout::dense(DType::f32, {n})}},
                                 {{"mode", static_cast<double>(mode)}}});
      return target->call(req);
    };
    EXPECT_EQ(call(ok).outcome, CallOutcome::completed);
    EXPECT_EQ(call(segfault).outcome, CallOutcome::crashed);
    target->reset();
    const CallResult r = call(ok);
    ASSERT_EQ(r.outcome, CallOutcome::completed) << r.detail;
    EXPECT_EQ(r.results.at(0).outputs.at(0).get(63), 2.0);
  }
  // The first worker (the prober's, if any, runs outside the prefix) saw the crash: 128 + SIGSEGV.
  std::vector<std::string> logs;
  for (int i = 0; fs::exists(dir / ("w." + std::to_string(i) + ".log")); ++i)
    logs.push_back(read(dir / ("w." + std::to_string(i) + ".log")));
  ASSERT_EQ(logs.size(), 2u) << "one log per worker started under the prefix";
  EXPECT_EQ(logs[0], "started\nworker exited 139\n");
  EXPECT_EQ(logs[1], "started\nworker exited 0\n") << "the last worker was asked to quit, not killed with its wrapper";
  EXPECT_FALSE(fs::exists(dir / "w.{start}.log"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kgate
