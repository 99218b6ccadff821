#include "support.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace kgate::security {

std::string fixture(const std::string& name) { return std::string(KGATE_SECURITY_FIXTURES) + "/" + name; }
// KGATE_SECURITY_CLI runs the suite against another kgate (an older build, to see each test fail there).
std::string kgate_cli() {
  const char* other = std::getenv("KGATE_SECURITY_CLI");
  return other && *other ? other : KGATE_CLI;
}
// KGATE_SECURITY_ISOLATE likewise for kgate-isolate.
std::string isolate_cli() {
  const char* other = std::getenv("KGATE_SECURITY_ISOLATE");
  return other && *other ? other : KGATE_ISOLATE;
}
std::string double_contract() { return KGATE_DOUBLE_CONTRACT; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + "kgate_security_" + stem + "_" + std::to_string(getpid());
}

ProcessRun run(std::vector<std::string> argv, double limit_seconds, const std::vector<std::string>& env,
        double kill_after_seconds) {
  static int counter = 0;
  const std::string base = temp_path("run" + std::to_string(counter++));
  const std::string out = base + ".out", err = base + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (std::string& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  ProcessRun r;
  pid_t pid;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = "posix_spawn failed";
    return r;
  }
  const auto start = std::chrono::steady_clock::now();
  int st = 0;
  bool killed_early = false;
  while (true) {
    const pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (kill_after_seconds > 0 && !killed_early && elapsed >= kill_after_seconds) {
      kill(pid, SIGKILL);
      killed_early = true;
    }
    if (elapsed >= limit_seconds && !r.timed_out) {
      kill(pid, SIGKILL);
      r.timed_out = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = read_file(out);
  r.err = read_file(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

ProcessRun run_handicapped(std::vector<std::string> args, bool deny_unshare, bool as_nobody) {
  const std::string out = temp_path("handicapped.out");
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    dup2(fd, 1);
    dup2(fd, 2);
    if (as_nobody && (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0))
      _exit(90);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (deny_unshare) {
      sock_filter f[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      };
      sock_fprog prog{4, f};
      if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) _exit(91);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(92);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ProcessRun r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  r.out = read_file(out);
  std::remove(out.c_str());
  return r;
}

std::vector<pid_t> processes_named(const std::string& name) {
  std::vector<pid_t> found;
  DIR* d = opendir("/proc");
  for (struct dirent* e; d && (e = readdir(d));) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string comm = read_file("/proc/" + std::string(e->d_name) + "/comm");
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm == name) found.push_back(pid);
  }
  if (d) closedir(d);
  return found;
}

std::size_t kill_processes_named(const std::string& name) {
  const std::vector<pid_t> pids = processes_named(name);
  for (pid_t p : pids) kill(p, SIGKILL);
  return pids.size();
}

}  // namespace kgate::security
