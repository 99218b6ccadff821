// What the fault suite needs around a child process: run it with captured output and a wall-clock limit,
// and find processes on the host by name after it is gone.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kgate::security {

struct ProcessRun {
  int status = -1;        // exit status, or 128 + signal
  int signal = 0;         // the signal that ended it, 0 if it exited
  bool timed_out = false; // the limit was reached and it was SIGKILLed
  std::string out, err;
};

// Runs argv[0] with argv; env entries "NAME=VALUE" are added. After `limit_seconds` the process is
// SIGKILLed (timed_out). `on_started(pid)` runs once the child exists (to kill it early, say).
ProcessRun run(std::vector<std::string> argv, double limit_seconds, const std::vector<std::string>& env = {},
        double kill_after_seconds = 0);

// Runs argv in a child that first loses the right to create namespaces (a seccomp filter making unshare
// fail with EPERM, as on a machine without them) and, when `as_nobody`, drops to uid 65534 first.
// Output: stdout and stderr together in `out`.
ProcessRun run_handicapped(std::vector<std::string> argv, bool deny_unshare, bool as_nobody);

std::string fixture(const std::string& name);  // a built fixture: library or program
std::string kgate_cli();
std::string isolate_cli();
std::string double_contract();

// Host pids whose /proc/PID/comm is `name` (comm is at most 15 characters).
std::vector<pid_t> processes_named(const std::string& name);
// Kills them (so one failing test does not leave sleepers behind) and returns how many there were.
std::size_t kill_processes_named(const std::string& name);

std::string read_file(const std::string& path);
std::string temp_path(const std::string& stem);  // unique per test process

}  // namespace kgate::security
