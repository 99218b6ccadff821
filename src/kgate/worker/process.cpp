#include "worker/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "kgate/target.hpp"

extern char** environ;

namespace kgate {
namespace {

// A failed close is not actionable here; the descriptor is gone either way.
void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

[[noreturn]] void sys_fail(const char* what) {
  throw TargetError(fmt::format("starting the worker: {}: {}", what, std::strerror(errno)));
}

// Moves a descriptor to 10 or above so that none of the spawn's dup2 targets (0-4) is ever its own
// source, where dup2 would keep the close-on-exec flag.
int high_fd(int fd) {
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (moved < 0) sys_fail("fcntl(F_DUPFD_CLOEXEC)");
  ::close(fd);
  return moved;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    const char* text = strsignal(sig);
    return abbrev ? fmt::format("SIG{} ({})", abbrev, text ? text : "signal") : fmt::format("signal {}", sig);
  }
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  return fmt::format("wait status {:#x}", status);
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

bool executable(const std::string& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; }

}  // namespace

void OutputCapture::append(const char* data, std::size_t n) {
  total_ += n;
  const std::size_t to_head = std::min(n, half_ - std::min(half_, head_.size()));
  head_.append(data, to_head);
  data += to_head;
  n -= to_head;
  if (n == 0) return;
  if (n >= half_) {
    tail_.assign(data + n - half_, half_);
    return;
  }
  tail_.append(data, n);
  if (tail_.size() > 2 * half_) tail_.erase(0, tail_.size() - half_);  // amortised: erase rarely, in bulk
}

std::string OutputCapture::excerpt() const {
  const std::string tail = tail_.size() > half_ ? tail_.substr(tail_.size() - half_) : tail_;
  const std::size_t shown = head_.size() + tail.size();
  if (shown >= total_) return head_ + tail;
  return fmt::format("{}\n[... {} bytes not shown ...]\n{}", head_, total_ - shown, tail);
}

void OutputCapture::clear() {
  head_.clear();
  tail_.clear();
  total_ = 0;
}

std::string find_worker_executable() {
  std::vector<std::string> looked;
  if (const char* env = std::getenv("KGATE_WORKER"); env && *env) {
    if (executable(env)) return env;
    throw TargetError(fmt::format("KGATE_WORKER={} is not an executable file", env));
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string beside = (self.parent_path() / "kgate-worker").string();
    if (executable(beside)) return beside;
    looked.push_back(beside);
  }
#ifdef KGATE_WORKER_PATH
  if (executable(KGATE_WORKER_PATH)) return KGATE_WORKER_PATH;
  looked.push_back(KGATE_WORKER_PATH);
#endif
  throw TargetError(fmt::format("cannot find the kgate-worker executable (looked at {}); set KGATE_WORKER to its path",
                                fmt::join(looked, ", ")));
}

WorkerProcess::WorkerProcess(const std::string& exe, const std::vector<std::string>& args, int arena_fd,
                             std::size_t output_limit, bool isolated)
    : output_(output_limit) {
  if (!isolated) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = fmt::format("{}/kgate-worker-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(templ.data())) sys_fail("mkdtemp");
    dir_ = templ;
  }

  int sv[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) sys_fail("socketpair");
  if (pipe2(out, O_CLOEXEC) != 0) {
    ::close(sv[0]), ::close(sv[1]);
    sys_fail("pipe2");
  }
  channel_ = high_fd(sv[0]);
  output_fd_ = high_fd(out[0]);
  int child_channel = high_fd(sv[1]);
  int child_output = high_fd(out[1]);
  int child_arena = fcntl(arena_fd, F_DUPFD_CLOEXEC, 10);
  if (child_arena < 0) sys_fail("fcntl(F_DUPFD_CLOEXEC)");

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, child_output, 1);
  posix_spawn_file_actions_adddup2(&fa, child_output, 2);
  posix_spawn_file_actions_adddup2(&fa, child_channel, 3);
  posix_spawn_file_actions_adddup2(&fa, child_arena, 4);
  posix_spawn_file_actions_addclosefrom_np(&fa, 5);  // whatever the driver leaked without O_CLOEXEC
  posix_spawn_file_actions_addchdir_np(&fa, dir_.empty() ? "/" : dir_.c_str());

  // Own process group, so a timeout kills whatever the candidate forked too; default signal handling
  // and an empty mask whatever the driver set for itself.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e)
    if (dir_.empty() || std::strncmp(*e, "TMPDIR=", 7) != 0) env_strings.emplace_back(*e);
  if (!dir_.empty()) env_strings.push_back("TMPDIR=" + dir_);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings{exe};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  const int rc = posix_spawn(&pid_, exe.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close_fd(child_channel);
  close_fd(child_output);
  close_fd(child_arena);
  if (rc != 0) {
    reaped_ = true;
    close_fd(channel_);
    close_fd(output_fd_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    errno = rc;
    sys_fail(exe.c_str());
  }
  fcntl(output_fd_, F_SETFL, fcntl(output_fd_, F_GETFL) | O_NONBLOCK);
  fcntl(output_fd_, F_SETPIPE_SZ, 1 << 20);  // fewer wake-ups when a candidate floods; best effort
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));  // -1 on kernels before 5.3: we poll then
}

WorkerProcess::~WorkerProcess() {
  kill_now();
  close_fd(channel_);
  close_fd(output_fd_);
  close_fd(pidfd_);
  std::error_code ec;  // a candidate may have left files it made unremovable; nothing to do about it
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

bool WorkerProcess::read_output() {
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(output_fd_, buf, sizeof buf);
    if (n > 0) {
      output_.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0;  // 0 is end of file; EAGAIN means drained for now
  }
}

bool WorkerProcess::read_channel() {
  std::byte buf[65536];
  while (true) {
    const ssize_t n = ::recv(channel_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      inbox_.insert(inbox_.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

bool WorkerProcess::parse_frame(wire::Frame& out) {
  if (inbox_.size() < wire::kHeaderBytes) return false;
  std::uint32_t magic, op;
  std::uint64_t bytes;
  std::memcpy(&magic, inbox_.data(), 4);
  std::memcpy(&op, inbox_.data() + 4, 4);
  std::memcpy(&bytes, inbox_.data() + 8, 8);
  if (magic != wire::kMagic) throw wire::ProtocolError("a frame without the protocol's magic number");
  if (bytes > wire::kMaxPayload) throw wire::ProtocolError(fmt::format("a frame claiming {} bytes", bytes));
  if (inbox_.size() < wire::kHeaderBytes + bytes) return false;
  out.op = static_cast<wire::Op>(op);
  out.payload.assign(inbox_.begin() + wire::kHeaderBytes, inbox_.begin() + wire::kHeaderBytes + bytes);
  inbox_.erase(inbox_.begin(), inbox_.begin() + wire::kHeaderBytes + bytes);
  return true;
}

bool WorkerProcess::send(const wire::Frame& f, Clock::time_point deadline) {
  if (reaped_ || channel_ < 0) return false;
  std::vector<std::byte> bytes(wire::kHeaderBytes + f.payload.size());
  const std::uint32_t magic = wire::kMagic, op = static_cast<std::uint32_t>(f.op);
  const std::uint64_t n = f.payload.size();
  std::memcpy(bytes.data(), &magic, 4);
  std::memcpy(bytes.data() + 4, &op, 4);
  std::memcpy(bytes.data() + 8, &n, 8);
  if (n) std::memcpy(bytes.data() + wire::kHeaderBytes, f.payload.data(), n);
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t k = ::send(channel_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      sent += static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A worker stuck writing its output would never read this: keep draining while we wait.
      pollfd p[2] = {{channel_, POLLOUT, 0}, {output_fd_, POLLIN, 0}};
      const int ms = ms_until(deadline);
      if (ms == 0) return false;
      if (::poll(p, output_fd_ >= 0 ? 2 : 1, ms) > 0 && (p[1].revents & (POLLIN | POLLHUP)) && !read_output())
        close_fd(output_fd_);
      continue;
    }
    return false;  // EPIPE, ECONNRESET: it is gone
  }
  return true;
}

void WorkerProcess::reap(bool block) {
  if (reaped_) return;
  int status = 0;
  pid_t r;
  do r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0) return;
  reaped_ = true;
  death_ = r == pid_ ? describe_status(status) : "exit status unknown (the process was reaped elsewhere)";
}

void WorkerProcess::await_exit(Clock::time_point until) {
  while (!reaped_) {
    reap(false);
    if (reaped_) return;
    const int ms = ms_until(until);
    if (ms == 0) return;
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      ::poll(&p, 1, ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 5)));
    }
  }
}

void WorkerProcess::kill_now() {
  if (reaped_) return;
  ::kill(-pid_, SIGKILL);  // the group: whatever the candidate forked dies with it
  ::kill(pid_, SIGKILL);
  reap(true);
}

void WorkerProcess::drain_after_death() {
  if (output_fd_ < 0) return;
  // Everything that could still write was in the killed group, so end of file comes quickly; a child
  // that escaped the group (setsid) gets a bounded wait, not an unbounded one.
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (true) {
    if (!read_output()) break;
    pollfd p{output_fd_, POLLIN, 0};
    if (::poll(&p, 1, ms_until(until)) <= 0) break;
  }
}

void WorkerProcess::drain_output() {
  if (output_fd_ >= 0 && !read_output()) close_fd(output_fd_);
}

WorkerProcess::Event WorkerProcess::receive(wire::Frame& out, Clock::time_point deadline) {
  bool channel_open = channel_ >= 0 && !reaped_;
  while (true) {
    if (parse_frame(out)) return Event::frame;
    if (!channel_open || reaped_) {
      // An isolated worker's pid is its launcher, which learns how the worker ended from the namespace's
      // init a moment after the channel closes: let it exit with that status before killing it.
      await_exit(Clock::now() + std::chrono::milliseconds(1000));
      ::kill(-pid_, SIGKILL);
      reap(true);
      drain_after_death();
      return Event::died;
    }
    const int ms = ms_until(deadline);
    if (ms == 0) {
      const bool was_alive = !reaped_;
      kill_now();
      drain_after_death();
      if (!was_alive) return Event::died;
      return Event::timed_out;
    }
    pollfd p[3];
    nfds_t n = 0;
    p[n++] = {channel_, POLLIN, 0};
    const nfds_t out_at = output_fd_ >= 0 ? n++ : 99;
    if (out_at != 99) p[out_at] = {output_fd_, POLLIN, 0};
    const nfds_t pid_at = pidfd_ >= 0 ? n++ : 99;
    if (pid_at != 99) p[pid_at] = {pidfd_, POLLIN, 0};
    // Without a pidfd, wake up now and then to notice a death that left the channel open (a forked
    // child holding fd 3).
    const int r = ::poll(p, n, pidfd_ >= 0 ? ms : std::min(ms, 50));
    if (r < 0 && errno != EINTR) throw TargetError(fmt::format("poll on the worker: {}", std::strerror(errno)));
    if (out_at != 99 && (p[out_at].revents & (POLLIN | POLLHUP)) && !read_output()) close_fd(output_fd_);
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) channel_open = read_channel();
    if (pid_at != 99 && (p[pid_at].revents & POLLIN)) {
      read_channel();  // a reply written just before exiting still counts
      channel_open = false;
      reap(true);
    }
    if (pidfd_ < 0) reap(false);
  }
}

void WorkerProcess::terminate(std::chrono::milliseconds grace) {
  if (reaped_) return;
  wire::Frame quit{wire::Op::quit, {}};
  const auto until = Clock::now() + grace;
  if (send(quit, until)) {
    while (!reaped_ && Clock::now() < until) {
      reap(false);
      if (reaped_) break;
      if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        ::poll(&p, 1, ms_until(until));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  ::kill(-pid_, SIGKILL);  // stragglers the candidate forked, even after a clean exit
  kill_now();
}

}  // namespace kgate
