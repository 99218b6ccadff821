#include "worker/isolation.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

extern char** environ;

namespace kgate {
namespace {

std::string sys_text(const std::string& what) { return fmt::format("{}: {}", what, std::strerror(errno)); }

[[noreturn]] void fail_in_child(const IsolationOptions& o, const std::string& why) {
  if (o.on_failure) o.on_failure(why);
  _exit(kIsolationFailed);
}

void write_file(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw IsolationError(sys_text(fmt::format("open {}", path)));
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  errno = err;
  if (n != static_cast<ssize_t>(text.size())) throw IsolationError(sys_text(fmt::format("write {}", path)));
}

// Closes every descriptor from `from` up except those listed.
void close_all_except(int from, std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned lo = static_cast<unsigned>(from);
  for (int k : keep) {
    if (k < from) continue;
    if (static_cast<unsigned>(k) > lo) syscall(SYS_close_range, lo, static_cast<unsigned>(k) - 1, 0u);
    lo = static_cast<unsigned>(k) + 1;
  }
  syscall(SYS_close_range, lo, ~0u, 0u);
}

bool under(const std::string& path, const char* dir) {
  const std::string d = std::string(dir) + "/";
  return path == dir || path.compare(0, d.size(), d) == 0;
}

std::string tmpfs_options(const IsolationOptions& o, const char* mode) {
  return o.memory ? fmt::format("mode={},size={}", mode, o.memory) : fmt::format("mode={}", mode);
}

// Recreates `path` (a directory or a file of the host) inside the fresh tmpfs and binds the host's, read-only.
void keep_visible(const std::string& path, int host_fd, bool is_dir) {
  std::error_code ec;
  std::filesystem::create_directories(is_dir ? path : std::filesystem::path(path).parent_path().string(), ec);
  if (!is_dir) close(open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  const std::string source = fmt::format("/proc/self/fd/{}", host_fd);
  if (mount(source.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    throw IsolationError(sys_text("bind " + path));
  if (mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    throw IsolationError(sys_text("read-only " + path));
}

bool searchable_by(const struct stat& st, uid_t uid, gid_t gid) {
  if (st.st_uid == uid) return st.st_mode & S_IXUSR;
  if (st.st_gid == gid) return st.st_mode & S_IXGRP;
  return st.st_mode & S_IXOTH;
}

// The first directory on the way to `path` (its ancestors, not `path` itself) that uid/gid may not search,
// and the component under it; nullopt when every one may be searched or the way ends early (a missing
// path fails the check after the uid is dropped).
std::optional<std::pair<std::string, std::string>> first_block(const std::filesystem::path& path, uid_t uid, gid_t gid) {
  std::filesystem::path dir = "/";
  for (const std::filesystem::path& part : path.relative_path()) {
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
    if (!searchable_by(st, uid, gid)) return std::make_pair(dir.string(), part.string());
    dir /= part;
  }
  return std::nullopt;
}

// Makes each of `reach` (absolute paths) reachable by uid inside this mount namespace: a directory on the way the uid may
// not search (root's 0700 home) is covered by an empty tmpfs (mode 0711, then read-only) in which only the
// components some path needs are bound back, read-only, at their own paths (so an interpreter's absolute
// RUNPATH and prefix stay valid). The host's directory is untouched; everything else in it stays hidden.
void open_the_way(const std::vector<std::string>& reach, uid_t uid, gid_t gid) {
  std::vector<std::filesystem::path> paths;
  for (const std::string& p : reach) {
    const std::filesystem::path lexical = std::filesystem::path(p).lexically_normal();
    paths.push_back(lexical);
    std::error_code ec;  // a symlink on the way: its target's ancestors count too
    const std::filesystem::path real = std::filesystem::canonical(lexical, ec);
    if (!ec && real != lexical) paths.push_back(real);
  }
  for (int round = 0; round < 32; ++round) {  // one level of nested blocked directories per round
    std::map<std::string, std::set<std::string>> blocked;
    for (const auto& p : paths)
      if (auto b = first_block(p, uid, gid)) blocked[b->first].insert(b->second);
    if (blocked.empty()) return;
    for (const auto& [dir, children] : blocked) {
      if (dir == "/") throw IsolationError(fmt::format("/ is not searchable by uid {}", uid));
      std::vector<std::tuple<std::string, int, bool>> keep;  // opened before the tmpfs hides them
      for (const std::string& child : children) {
        const std::string path = (std::filesystem::path(dir) / child).string();
        const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
        if (fd < 0) continue;  // missing: the check after the uid is dropped says so
        struct stat st {};
        fstat(fd, &st);
        keep.emplace_back(path, fd, S_ISDIR(st.st_mode));
      }
      if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=65536") != 0)
        throw IsolationError(sys_text("cover " + dir));
      for (const auto& [path, fd, is_dir] : keep) {
        keep_visible(path, fd, is_dir);
        close(fd);
      }
      if (mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711") != 0)
        throw IsolationError(sys_text("read-only " + dir));
    }
  }
  throw IsolationError("directories not searchable by the program's uid nest too deep");
}

// After the uid is dropped: every path of `reach` can be read (a directory: searched) by it.
void check_reach(const std::vector<std::string>& reach, uid_t uid) {
  for (const std::string& p : reach) {
    struct stat st {};
    const bool exists = stat(p.c_str(), &st) == 0;
    if (!exists || access(p.c_str(), S_ISDIR(st.st_mode) ? (R_OK | X_OK) : R_OK) != 0)
      throw IsolationError(sys_text(fmt::format("{} cannot be read by uid {} (it must run as an unprivileged uid, never "
                                                "as root: make it readable by others)", p, uid)));
  }
}

void drop_capabilities() {
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);  // EINVAL past the last: harmless
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &header, data) != 0) throw IsolationError(sys_text("capset"));
}

void set_environment(const IsolationOptions& o, const std::string& scratch, bool dropped_uid) {
  if (o.clear_env) {
    std::vector<std::string> drop;
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      const std::string name(entry.substr(0, entry.find('=')));
      if (name != "PATH" && name != "LANG" && name != "TERM" && name.rfind("LC_", 0) != 0) drop.push_back(name);
    }
    for (const std::string& name : drop) unsetenv(name.c_str());
  }
  setenv("TMPDIR", scratch.c_str(), 1);
  // The unprivileged uid has no home of its own; caches written there (Triton's, CUDA's) stay private.
  if (dropped_uid) setenv("HOME", scratch.c_str(), 1);
  for (const auto& [k, v] : o.setenv) setenv(k.c_str(), v.c_str(), 1);
}

// The program's side, as root in its namespaces (or root of its own user namespace). Any failure ends
// it with kIsolationFailed after on_failure: nothing runs half-isolated.
void set_up_program(const IsolationOptions& o, bool real_root, int output_fd) {
  try {
    setsid();  // its own session: a kill(0, ...) reaches its own tree only
    std::vector<std::string> reach;  // absolute before any chdir
    for (const std::string& p : o.reach) reach.push_back(std::filesystem::absolute(p).lexically_normal().string());
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) throw IsolationError(sys_text("make / private"));
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      throw IsolationError(sys_text("mount /proc"));
    // Host paths under /tmp that must stay reachable (a candidate library kept there), opened before
    // the private /tmp hides them.
    std::vector<std::tuple<std::string, int, bool>> visible;
    std::vector<std::string> wanted = o.visible;  // what the program must reach stays visible too
    wanted.insert(wanted.end(), reach.begin(), reach.end());
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    for (const std::string& p : wanted) {
      const std::string abs = std::filesystem::absolute(p).lexically_normal().string();
      if (!under(abs, "/tmp")) continue;  // elsewhere it stays visible anyway
      const int fd = open(abs.c_str(), O_PATH | O_CLOEXEC);
      if (fd < 0) throw IsolationError(sys_text("open " + abs));
      struct stat st {};
      fstat(fd, &st);
      visible.emplace_back(abs, fd, S_ISDIR(st.st_mode));
    }
    // A host scratch directory is entered before /tmp is covered. One under /tmp is bound back, writable,
    // at its own path inside the private /tmp: a program that names its working directory (a compiler
    // driver, ninja's absolute paths) must find it there, not only through its cwd.
    std::string scratch = o.scratch;
    int scratch_fd = -1;
    if (!scratch.empty()) {
      if (real_root && chown(scratch.c_str(), o.uid, o.gid) != 0) throw IsolationError(sys_text("chown " + scratch));
      if (chdir(scratch.c_str()) != 0) throw IsolationError(sys_text("chdir " + scratch));
      scratch = std::filesystem::absolute(scratch).lexically_normal().string();
      if (o.private_tmp && under(scratch, "/tmp")) {
        scratch_fd = open(scratch.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (scratch_fd < 0) throw IsolationError(sys_text("open " + scratch));
      }
    }
    if (o.private_tmp) {
      if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options(o, "1777").c_str()) != 0)
        throw IsolationError(sys_text("mount a private /tmp"));
      for (const auto& [path, fd, is_dir] : visible) {
        keep_visible(path, fd, is_dir);
        close(fd);
      }
      if (scratch_fd >= 0) {
        std::error_code ec;
        std::filesystem::create_directories(scratch, ec);
        const std::string source = fmt::format("/proc/self/fd/{}", scratch_fd);
        if (mount(source.c_str(), scratch.c_str(), nullptr, MS_BIND, nullptr) != 0)
          throw IsolationError(sys_text("bind " + scratch));
        if (mount(nullptr, scratch.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, nullptr) != 0)
          throw IsolationError(sys_text("remount " + scratch));
        close(scratch_fd);
        if (chdir(scratch.c_str()) != 0) throw IsolationError(sys_text("chdir " + scratch));
      }
    }
    if (access("/dev/shm", F_OK) == 0 &&
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options(o, "1777").c_str()) != 0)
      throw IsolationError(sys_text("mount a private /dev/shm"));
    if (real_root && !scratch.empty() && scratch_fd < 0) {
      // A host scratch elsewhere keeps its path too: its ancestors the uid may not search (the driver's 0700
      // folders) are covered like any reached path's, which shows the uid nothing but the way to it, and the
      // scratch is bound back, writable, on top (open_the_way binds what it keeps read-only). Before, torch's
      // extension builds in a scratch under the audit's work folder failed: ninja stats sources by their
      // absolute path, and uid 65534 could not search the row job's 0700 folder above it (H200, 2026-12-03).
      const int fd = open(scratch.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) throw IsolationError(sys_text("open " + scratch));
      reach.push_back(scratch);
      open_the_way(reach, o.uid, o.gid);
      const std::string source = fmt::format("/proc/self/fd/{}", fd);
      if (mount(source.c_str(), scratch.c_str(), nullptr, MS_BIND, nullptr) != 0)
        throw IsolationError(sys_text("bind " + scratch));
      if (mount(nullptr, scratch.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, nullptr) != 0)
        throw IsolationError(sys_text("remount " + scratch));
      close(fd);
      if (chdir(scratch.c_str()) != 0) throw IsolationError(sys_text("chdir " + scratch));
    } else if (real_root) {
      open_the_way(reach, o.uid, o.gid);
    }
    if (scratch.empty()) {
      scratch = o.private_tmp ? "/tmp/kgate-scratch" : "/dev/shm/kgate-scratch";
      if (mkdir(scratch.c_str(), 0700) != 0) throw IsolationError(sys_text("mkdir " + scratch));
      if (real_root && chown(scratch.c_str(), o.uid, o.gid) != 0) throw IsolationError(sys_text("chown " + scratch));
      if (chdir(scratch.c_str()) != 0) throw IsolationError(sys_text("chdir " + scratch));
    }
    set_environment(o, scratch, real_root);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (o.memory) {
      // RLIMIT_DATA rather than RLIMIT_AS: a CUDA context reserves address space it never backs.
      const rlimit data{o.memory, o.memory};
      if (setrlimit(RLIMIT_DATA, &data) != 0) throw IsolationError(sys_text("setrlimit(RLIMIT_DATA)"));
    }
    if (real_root) {
      if (setgroups(0, nullptr) != 0) throw IsolationError(sys_text("setgroups"));
      if (setresgid(o.gid, o.gid, o.gid) != 0) throw IsolationError(sys_text("setresgid"));
      for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
      if (setresuid(o.uid, o.uid, o.uid) != 0) throw IsolationError(sys_text("setresuid"));
      check_reach(reach, o.uid);
    }
    drop_capabilities();  // root of a user namespace keeps none either (it could unmount the private /proc)
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw IsolationError(sys_text("no_new_privs"));
    install_judge_filter();
  } catch (const std::exception& e) {
    fail_in_child(o, fmt::format("cannot isolate: {}", e.what()));
  }
  std::vector<int> keep = o.keep_fds;
  if (output_fd >= 0) {
    if (o.log_stdout) dup2(output_fd, 1);
    dup2(output_fd, 2);
    close(output_fd);
  }
  close_all_except(3, keep);
}

[[noreturn]] void run_init(pid_t program, int status_fd) {
  // Nothing but the status pipe: the output pipe's end of file must come when the program's tree is gone.
  close_all_except(0, {status_fd});
  prctl(PR_SET_DUMPABLE, 0);
  while (true) {
    int status = 0;
    const pid_t r = waitpid(-1, &status, 0);
    if (r == program) {
      (void)!write(status_fd, &status, sizeof status);
      _exit(0);  // as pid 1 leaves, the kernel kills every process left in the namespace
    }
    if (r < 0 && errno == ECHILD) _exit(0);
  }
}

volatile sig_atomic_t g_init_pid = 0;
volatile sig_atomic_t g_stop_signal = 0;

void forward_stop(int sig) {
  g_stop_signal = sig;
  if (g_init_pid > 0) kill(g_init_pid, SIGKILL);
}

[[noreturn]] void exit_like(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
  _exit(128 + sig);  // a signal whose default is not to end the process
}

// The launcher: copies the program's output into the log within its limit, waits for init, and exits
// as the program did.
[[noreturn]] void supervise(const IsolationOptions& o, pid_t init, int status_fd, int output_fd, int log_fd) {
  std::vector<int> keep = {status_fd};
  if (output_fd >= 0) keep.push_back(output_fd);
  if (log_fd >= 0) keep.push_back(log_fd);
  keep.push_back(2);  // its own last words, if any
  close_all_except(0, keep);
  g_init_pid = init;
  struct sigaction sa {};
  sa.sa_handler = forward_stop;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, init, 0));
  std::size_t kept = 0, dropped = 0;
  auto copy = [&]() -> bool {  // false at end of file
    char buf[65536];
    const ssize_t n = read(output_fd, buf, sizeof buf);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    const std::size_t take = std::min<std::size_t>(static_cast<std::size_t>(n), o.log_limit - kept);
    if (take) (void)!write(log_fd, buf, take);
    kept += take;
    dropped += static_cast<std::size_t>(n) - take;
    return true;
  };
  bool output_open = output_fd >= 0;
  bool init_alive = true;
  while (init_alive) {
    pollfd p[2];
    nfds_t n = 0;
    if (pidfd >= 0) p[n++] = {pidfd, POLLIN, 0};
    const nfds_t out_at = n;
    if (output_open) p[n++] = {output_fd, POLLIN, 0};
    const int r = poll(p, n, pidfd >= 0 ? -1 : 50);
    if (r < 0 && errno != EINTR) break;
    if (output_open && r > 0 && (p[out_at].revents & (POLLIN | POLLHUP))) output_open = copy();
    if (pidfd >= 0 && r > 0 && (p[0].revents & POLLIN)) init_alive = false;
    if (pidfd < 0 && waitpid(init, nullptr, WNOHANG | __WNOTHREAD) == init) break;
  }
  int status = 0;
  const ssize_t got = read(status_fd, &status, sizeof status);  // init wrote it before leaving, or died
  while (output_open) output_open = copy();  // every writer is gone with the namespace
  if (dropped) {
    const std::string note = fmt::format("\n[kgate-isolate: {} more bytes of output not kept (log limit {} bytes)]\n",
                                         dropped, o.log_limit);
    (void)!write(log_fd, note.data(), note.size());
  }
  int init_status;
  while (waitpid(init, &init_status, 0) < 0 && errno == EINTR) {
  }
  if (!o.scratch.empty()) {
    std::error_code ec;  // files the program made are removed with it; nothing else is in there
    for (const auto& entry : std::filesystem::directory_iterator(o.scratch, ec))
      if (o.keep_in_scratch.empty() || entry.path().filename().string().rfind(o.keep_in_scratch, 0) != 0)
        std::filesystem::remove_all(entry.path(), ec);
  }
  // A wait status of just a signal number reads as "killed by that signal".
  if (g_stop_signal) exit_like(g_stop_signal);  // the launcher was told to stop: it ends as told
  if (got != sizeof status) exit_like(SIGKILL);  // init was killed: the program did not finish
  exit_like(status);
}

}  // namespace

void install_judge_filter() {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "install_judge_filter: add this architecture's AUDIT_ARCH"
#endif
  std::vector<sock_filter> f;
  auto kill_process = [&] { f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)); };
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  kill_process();  // another ABI (int 0x80) would dodge the numbers below
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));  // x32 numbers
  kill_process();
#endif
  // Reading or steering another process: never needed by a kernel, always an attack.
  for (long nr : {long(SYS_ptrace), long(SYS_process_vm_readv), long(SYS_process_vm_writev), 438L /* pidfd_getfd */}) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1));
    kill_process();
  }
  // Pid 1 is init, the one process outside its own tree the program can name (getppid() of the program
  // and of every orphan): a signal or pidfd aimed at it is an attempt on the judge.
  for (long nr : {long(SYS_kill), long(SYS_tkill), long(SYS_tgkill), long(SYS_rt_sigqueueinfo),
                  long(SYS_rt_tgsigqueueinfo), 434L /* pidfd_open */}) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 4));
    f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));  // low half of a pid_t
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 1));
    kill_process();
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw IsolationError(sys_text("no_new_privs"));
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) throw IsolationError(sys_text("seccomp"));
}

void enter_isolation(const IsolationOptions& o) {
  const pid_t parent = getppid();
  const bool real_root = geteuid() == 0;
  if (real_root && (o.uid == 0 || o.gid == 0))
    throw IsolationError("uid and gid 0 are refused: root without capabilities still owns root's files (the "
                         "driver's results and key); give the program an unprivileged uid");
  if (!o.scratch.empty() && !std::filesystem::is_directory(o.scratch))
    throw IsolationError(fmt::format("--scratch {}: not a directory", o.scratch));
  int log_fd = -1;
  if (!o.log.empty()) {
    log_fd = open(o.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (log_fd < 0) throw IsolationError(sys_text("--log " + o.log));
  }
  // Dies with whoever started it: a driver killed outright takes its workers with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kIsolationFailed);
  if (!real_root) {
    // Without root, a user namespace grants what the mounts need; its root maps to this uid, and the
    // program drops every capability it holds there.
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER) != 0)
      throw IsolationError(sys_text("no user namespaces for a non-root user (run as root, enable "
                                    "kernel.unprivileged_userns_clone, or pass --unsafe-no-isolation): unshare"));
    write_file("/proc/self/setgroups", "deny");
    write_file("/proc/self/uid_map", fmt::format("0 {} 1", uid));
    write_file("/proc/self/gid_map", fmt::format("0 {} 1", gid));
  }
  prctl(PR_SET_DUMPABLE, 0);  // only now: a non-dumpable process cannot write its own uid_map
  if (unshare(CLONE_NEWPID) != 0) throw IsolationError(sys_text("unshare(CLONE_NEWPID)"));
  int status_pipe[2], output_pipe[2] = {-1, -1};
  if (pipe2(status_pipe, O_CLOEXEC) != 0) throw IsolationError(sys_text("pipe"));
  if (log_fd >= 0 && pipe2(output_pipe, O_CLOEXEC) != 0) throw IsolationError(sys_text("pipe"));
  std::fflush(nullptr);
  const pid_t launcher = getpid();
  const pid_t init = fork();
  if (init < 0) throw IsolationError(sys_text("fork"));
  if (init > 0) {
    close(status_pipe[1]);
    if (output_pipe[1] >= 0) close(output_pipe[1]);
    supervise(o, init, status_pipe[0], output_pipe[0], log_fd);
  }
  // init, pid 1 of the new namespace. Its parent is outside, so getppid() says 0: whether the launcher
  // died before PDEATHSIG was set shows instead as the status pipe's read end being gone.
  (void)launcher;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  close(status_pipe[0]);
  pollfd orphaned{status_pipe[1], 0, 0};
  if (poll(&orphaned, 1, 0) > 0 && (orphaned.revents & POLLERR)) _exit(kIsolationFailed);
  if (output_pipe[0] >= 0) close(output_pipe[0]);
  if (log_fd >= 0) close(log_fd);
  if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) fail_in_child(o, sys_text("cannot isolate: unshare(CLONE_NEWNS)"));
  const pid_t program = fork();
  if (program < 0) fail_in_child(o, sys_text("cannot isolate: fork"));
  if (program > 0) {
    if (output_pipe[1] >= 0) close(output_pipe[1]);
    run_init(program, status_pipe[1]);
  }
  close(status_pipe[1]);
  set_up_program(o, real_root, output_pipe[1]);
}

}  // namespace kgate
