// kgate-isolate against hostile programs: the guarantees python/kgate/isolation.py and kgate-worker share
// (src/kgate/worker/isolation.hpp). Each test names the attack fixture it runs; docs/security.md has the table.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "support.hpp"
#include "worker/guard_seed.hpp"

namespace kgate::security {
namespace {

std::atomic<int> g_usr1{0};

// Waits up to `seconds` for no process named `name` to be left; kills and counts any that stay.
std::size_t survivors(const std::string& name, double seconds = 3) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (processes_named(name).empty()) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return kill_processes_named(name);
}

ProcessRun isolate(std::vector<std::string> options, const std::vector<std::string>& program, double limit = 30) {
  options.insert(options.begin(), isolate_cli());
  options.push_back("--");
  options.insert(options.end(), program.begin(), program.end());
  return run(options, limit);
}

TEST(Isolate, CannotSignalAProcessOutsideItsTree) {
  signal(SIGUSR1, [](int) { ++g_usr1; });
  const ProcessRun r = isolate({}, {fixture("sec_signal_outside"), std::to_string(getpid())});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(g_usr1.load(), 0) << "the program signalled the test process: " << r.out;
  EXPECT_NE(r.out.find("kill(host pid) = -1"), std::string::npos) << r.out << r.err;
  // Signalling its parent (pid 1, the judge's side) ends it with SIGSYS, and the launcher ends the same way.
  EXPECT_EQ(r.signal, SIGSYS) << r.out << r.err;
  EXPECT_EQ(r.out.find("not stopped"), std::string::npos) << r.out;
}

TEST(Isolate, CannotTraceItsJudge) {
  const ProcessRun r = isolate({}, {fixture("sec_trace_judge")});
  EXPECT_EQ(r.signal, SIGSYS) << r.out << r.err;
  EXPECT_EQ(r.out.find("not stopped"), std::string::npos) << r.out;
}

TEST(Isolate, CannotReadItsJudgesMemory) {
  const ProcessRun r = isolate({}, {fixture("sec_read_judge_memory")});
  EXPECT_EQ(r.signal, SIGSYS) << r.out << r.err;
  EXPECT_EQ(r.out.find("not stopped"), std::string::npos) << r.out;
}

TEST(Isolate, SeesOnlyItsOwnTreeAndRunsUnprivileged) {
  const ProcessRun r = isolate({}, {fixture("sec_look_around")});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("pids=(\\d+) uid=(\\d+) gid=(\\d+) cwd=(\\S+) tmpdir=(\\S*) capeff=(\\S+)")))
      << r.out;
  EXPECT_EQ(m[1], "2") << "init and the program itself, nothing else";
  if (geteuid() == 0) {
    EXPECT_EQ(m[2], "65534");
    EXPECT_EQ(m[3], "65534");
  }
  EXPECT_EQ(m[4], "/tmp/kgate-scratch");
  EXPECT_EQ(m[5], "/tmp/kgate-scratch");
  EXPECT_EQ(m[6], "0000000000000000") << "no capabilities";
}

// A directory only root may enter (as pyenv's Python under a 0700 /root) holding the program and, beside
// it, what must stay secret: a root-only file and a world-readable one.
struct ClosedDirectory {
  std::filesystem::path dir, program, secret, other;
  ClosedDirectory() {
    dir = std::filesystem::path(fixture("sec_look_around")).parent_path() / ("closed-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "bin");
    program = dir / "bin" / "look_around";
    std::filesystem::copy_file(fixture("sec_look_around"), program);
    secret = dir / "secret.key";
    other = dir / "results.jsonl";
    for (const auto& [path, mode] : {std::pair{secret, 0600}, std::pair{other, 0644}}) {
      std::FILE* f = std::fopen(path.c_str(), "w");
      std::fputs("s3cret\n", f);
      std::fclose(f);
      chmod(path.c_str(), mode);
    }
    chmod(dir.c_str(), 0700);
  }
  ~ClosedDirectory() { std::filesystem::remove_all(dir); }
};

TEST(Isolate, AProgramUnderAClosedDirectoryRunsUnprivilegedAndSeesNothingElseThere) {
  if (geteuid() != 0) GTEST_SKIP() << "as non-root the program keeps the caller's uid (its own user namespace)";
  const ClosedDirectory c;
  // Before: kgate-isolate could not execute it (126) and the Python front-end kept uid 0 instead, which
  // owns, and so reads, root's files.
  const ProcessRun r = isolate({}, {c.program.string(), c.secret.string(), c.other.string(), c.dir.string(), "/root"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pids=2 uid=65534 gid=65534"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("open(" + c.secret.string() + ")=No such file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("open(" + c.other.string() + ")=No such file"), std::string::npos)
      << "only the way to the program is opened: " << r.out;
  EXPECT_NE(r.out.find("open(" + c.dir.string() + ")=Permission denied"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("open(/root)=Permission denied"), std::string::npos) << r.out;
  // The host's directory is untouched.
  struct stat st {};
  ASSERT_EQ(stat(c.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(Isolate, AProgramItsUidCannotReadIsRefusedNotRunAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another uid";
  const ClosedDirectory c;
  chmod(c.program.c_str(), 0700);  // the file itself: no covering mount can open it
  const ProcessRun r = isolate({}, {c.program.string(), c.secret.string()});
  EXPECT_EQ(r.status, 125) << r.out << r.err;
  EXPECT_EQ(r.out.find("s3cret"), std::string::npos);
  EXPECT_NE(r.err.find("cannot be read by uid 65534"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Nor as root without capabilities, which still owns root's files.
  const ProcessRun zero = isolate({"--uid", "0"}, {"/bin/cat", c.secret.string()});
  EXPECT_EQ(zero.status, 125) << zero.out << zero.err;
  EXPECT_EQ(zero.out.find("s3cret"), std::string::npos) << zero.out;
  EXPECT_NE(zero.err.find("uid and gid 0 are refused"), std::string::npos) << zero.err;
}

TEST(Isolate, EveryDescendantEndsWithTheProgram) {
  const std::string name = "kgsec-exit-" + std::to_string(getpid() % 1000);
  kill_processes_named(name);
  const ProcessRun r = isolate({}, {fixture("sec_outlive_launcher"), name, "exit"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(survivors(name), 0u) << "a setsid double fork outlived the program";
}

TEST(Isolate, EveryDescendantEndsWhenTheLauncherIsKilled) {
  const std::string name = "kgsec-kill-" + std::to_string(getpid() % 1000);
  kill_processes_named(name);
  const ProcessRun r = run({isolate_cli(), "--", fixture("sec_outlive_launcher"), name, "sleep"}, 30, {}, 2.0);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(survivors(name), 0u) << "a setsid double fork outlived the killed launcher";
}

TEST(Isolate, TmpShmAndScratchArePrivateAndGone) {
  std::filesystem::remove("/tmp/kgate-isolate-leftover");
  std::filesystem::remove("/dev/shm/kgate-isolate-leftover");
  const ProcessRun r = isolate({}, {fixture("sec_leave_files")});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(std::filesystem::exists("/tmp/kgate-isolate-leftover"));
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/kgate-isolate-leftover"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/kgate-scratch")) << "the default scratch is inside the private /tmp";

  const std::string scratch = temp_path("scratch");
  std::filesystem::create_directories(scratch);
  const ProcessRun s = isolate({"--scratch", scratch}, {fixture("sec_leave_files")});
  EXPECT_EQ(s.status, 0) << s.out << s.err;
  EXPECT_TRUE(std::filesystem::is_empty(scratch)) << "the host scratch directory was not emptied";
  std::filesystem::remove_all(scratch);
}

// A host scratch under /tmp keeps its path inside the private /tmp: a file written through the working
// directory's name lands in the working directory (torch's extension builds name it: ninja found no
// sources when only the cwd reached the scratch and its name led into the empty private /tmp).
TEST(Isolate, AHostScratchUnderTmpKeepsItsPath) {
  const std::string scratch = "/tmp/kgate_security_scratch_path_" + std::to_string(getpid());
  std::filesystem::create_directories(scratch);
  const ProcessRun r = isolate({"--scratch", scratch}, {"/bin/sh", "-c",
      "d=$(pwd -P); echo x > \"$d/probe\" 2>/dev/null; echo \"cwd=$d\"; "
      "if test -e ./probe; then echo resolved; else echo unresolved; fi"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cwd=" + scratch + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resolved\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("unresolved"), std::string::npos) << "the scratch's name led elsewhere: " << r.out;
  std::filesystem::remove_all(scratch);
}

// A host scratch anywhere keeps its path, writable, even below a folder the worker's uid may not search (the
// row job's 0700 folder): ninja stats a torch extension's sources by absolute path. Nothing else of that folder
// becomes visible.
TEST(Isolate, AHostScratchBelowAPrivateFolderKeepsItsPath) {
  const std::string top = std::filesystem::absolute("kgate_security_private_" + std::to_string(getpid())).string();
  const std::string scratch = top + "/scratch";
  std::filesystem::create_directories(scratch);
  std::filesystem::permissions(top, std::filesystem::perms::owner_all);  // 0700: root's alone
  { std::ofstream(top + "/secret") << "key\n"; }
  const ProcessRun r = isolate({"--scratch", scratch}, {"/bin/sh", "-c",
      "d=$(pwd -P); echo x > \"$d/probe\" && echo wrote; echo \"cwd=$d\"; "
      "if test -e \"$d/probe\" && test -e ./probe; then echo resolved; fi; "
      "if cat \"$d/../secret\" >/dev/null 2>&1; then echo read-secret; fi; id -u"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("wrote\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("cwd=" + scratch + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resolved\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("read-secret"), std::string::npos) << "the private folder's other files showed: " << r.out;
  std::filesystem::remove_all(top);
}

TEST(Isolate, OutputIsCappedInTheLog) {
  const std::string log = temp_path("flood.log");
  const ProcessRun r = isolate({"--log", log, "--log-limit", "4096"}, {fixture("sec_flood_output"), "8"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "") << "stdout went to the log";
  const std::string text = read_file(log);
  EXPECT_LE(text.size(), 4096u + 200u);
  EXPECT_NE(text.find("more bytes of output not kept"), std::string::npos);
  std::filesystem::remove(log);
}

TEST(Isolate, ExitStatusesAndBadOptions) {
  EXPECT_EQ(isolate({}, {"/bin/sh", "-c", "exit 7"}).status, 7);
  EXPECT_EQ(isolate({}, {"/bin/sh", "-c", "kill -SEGV $$"}).signal, SIGSEGV);
  EXPECT_EQ(isolate({}, {"/nonexistent/program"}).status, 127);
  const ProcessRun bad = run({isolate_cli(), "--log-limit", "-1", "--", "/bin/true"}, 10);
  EXPECT_EQ(bad.status, 125);
  EXPECT_EQ(bad.err.rfind("kgate-isolate: error: --log-limit", 0), 0u) << bad.err;
}

ProcessRun isolate_handicapped(bool deny_unshare, bool as_nobody, const std::vector<std::string>& program) {
  std::vector<std::string> args = {isolate_cli(), "--"};
  args.insert(args.end(), program.begin(), program.end());
  return run_handicapped(args, deny_unshare, as_nobody);
}

TEST(Isolate, WithoutNamespacesItRefusesWithOneLine) {
  const ProcessRun r = isolate_handicapped(true, false, {"/bin/sh", "-c", "echo ran unprotected"});
  EXPECT_EQ(r.status, 125) << r.out;
  EXPECT_EQ(r.out.find("ran unprotected"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("kgate-isolate: error: cannot isolate /bin/sh: unshare", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(Isolate, UnsafeFlagRunsUnprotectedAndSaysSo) {
  const ProcessRun r = run({isolate_cli(), "--unsafe-no-isolation", "--", "/bin/sh", "-c", "exit 3"}, 10);
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("runs unprotected"), std::string::npos) << r.err;
}

TEST(Isolate, NonRootUsesAUserNamespaceOrRefuses) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become nobody";
  const ProcessRun r = isolate_handicapped(false, true, {fixture("sec_look_around")});
  if (r.status == 125) {  // this kernel forbids unprivileged user namespaces: a clear refusal is the contract
    EXPECT_NE(r.out.find("no user namespaces"), std::string::npos) << r.out;
    return;
  }
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("pids=2 uid=0"), std::string::npos) << "root of its own user namespace: " << r.out;
  EXPECT_NE(r.out.find("capeff=0000000000000000"), std::string::npos) << r.out;
}

TEST(GuardSeed, IsSipHashOfTheSeedNotAnInvertibleMix) {
  // The reference vector of SipHash-2-4 (key 00..0f, message 00..07).
  EXPECT_EQ(siphash24_word(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, 0x0706050403020100ull), 0x93f5f5799a932462ull);
  EXPECT_NE(derive_guard_seed(1), derive_guard_seed(2));
}

}  // namespace
}  // namespace kgate::security
