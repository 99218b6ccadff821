// The driver's side of one worker process: spawning it bare, talking to it with every wait bounded, and
// killing and reaping it. Knows the framing but not what the frames mean (worker_target.cpp does).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "worker/protocol.hpp"

namespace kgate {

using Clock = std::chrono::steady_clock;

// What a process printed, kept within a budget: the first and the last half of the budget, with the
// total counted, so a candidate printing megabytes neither blocks nor floods the report.
class OutputCapture {
 public:
  explicit OutputCapture(std::size_t limit) : half_(limit / 2) {}
  void append(const char* data, std::size_t n);
  std::string excerpt() const;
  std::size_t total() const { return total_; }
  void clear();

 private:
  std::size_t half_;
  std::string head_, tail_;
  std::size_t total_ = 0;
};

// The worker executable: $KGATE_WORKER, else kgate-worker beside this executable, else the path baked
// in at build time. Throws TargetError naming every place it looked.
std::string find_worker_executable();

class WorkerProcess {
 public:
  // Starts `executable args...` in a new process group, with stdin on /dev/null, stdout and stderr on one
  // captured pipe, the command channel as fd 3, the arena as fd 4, and no other descriptor. An isolated
  // worker makes its own private scratch directory (isolation.hpp), which nothing outlives; one that is
  // not gets a fresh directory here (also its TMPDIR), removed when this object goes.
  WorkerProcess(const std::string& executable, const std::vector<std::string>& args, int arena_fd,
                std::size_t output_limit, bool isolated);
  ~WorkerProcess();  // kills and reaps it if still running, then removes its directory (if it made one)
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  enum class Event { frame, died, timed_out };
  // Sends a frame; false if the worker is gone or stopped reading (receive() then says how it ended).
  bool send(const wire::Frame& frame, Clock::time_point deadline);
  // Waits for the next frame, draining the output pipe meanwhile. On death or timeout the whole process
  // group is killed and reaped; death() says how it ended. Throws wire::ProtocolError on a malformed frame.
  Event receive(wire::Frame& out, Clock::time_point deadline);
  // Takes what is already in the output pipe without waiting (the worker flushes before it replies).
  void drain_output();
  // Asks it to quit, waits up to `grace`, then kills the group. Idempotent.
  void terminate(std::chrono::milliseconds grace);
  void kill_now();  // SIGKILL the group and reap

  bool alive() const { return !reaped_; }
  pid_t pid() const { return pid_; }
  const std::string& directory() const { return dir_; }
  const std::string& death() const { return death_; }  // "SIGSEGV (Segmentation fault)", "exit status 3", ...
  OutputCapture& output() { return output_; }

 private:
  bool parse_frame(wire::Frame& out);
  bool read_output();  // false at end of file
  bool read_channel(); // false when the worker closed it
  void reap(bool block);
  void await_exit(Clock::time_point until);  // reaps it if it exits by then
  void drain_after_death();

  pid_t pid_ = -1;
  int channel_ = -1, output_fd_ = -1, pidfd_ = -1;
  std::string dir_;
  bool reaped_ = false;
  std::string death_;
  OutputCapture output_;
  std::vector<std::byte> inbox_;
};

}  // namespace kgate
