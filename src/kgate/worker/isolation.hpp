// The one isolation design every front-end uses for candidate code: kgate-worker (the C++ WorkerTarget)
// calls enter_isolation() itself, and kgate-isolate (tools/kgate_isolate.cpp, the Python front-end's
// launcher) calls it and then executes its program. docs/security.md states what it defends and how.
//
// enter_isolation() turns the calling process into three:
//   launcher   (the caller's pid, outside): unshares a PID and a mount namespace, waits, and finally exits
//              exactly as the program did (same status, or killed by the same signal); killing it kills all.
//   init       (pid 1 inside, root, not dumpable): reaps orphans; when the program ends it exits, and the
//              kernel kills every process left in the namespace (setsid double forks included).
//   program    (pid 2 inside): gets a fresh /proc (only its own tree is visible), private tmpfs on /tmp and
//              /dev/shm, a private scratch directory as its working directory and TMPDIR, an unprivileged
//              uid when started as root (device nodes such as /dev/nvidia* stay usable when world rw; the
//              paths it must run, `reach`, made searchable for that uid in its own mount namespace only),
//              no capabilities, no_new_privs, and a seccomp filter: ptrace, process_vm_readv/writev,
//              pidfd_getfd, and any signal or pidfd aimed at pid 1 (the only process outside its tree it
//              can name) end it with SIGSYS, so an attack on its judge is a visible finding.
// enter_isolation() returns only in the program; the launcher and init never return from it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kgate {

struct IsolationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct IsolationOptions {
  std::vector<int> keep_fds;        // descriptors the program keeps besides 0, 1 and 2; every other is closed
  std::string scratch;              // empty: a private tmpfs directory; else this host directory, given to
                                    // the program's uid and removed by the launcher when it exits
  // Entries of the scratch directory whose names start with this are left there when the program ends (a
  // wrapper tool's log: the compute-sanitizer pass, kgate/kernelbench/sanitizer.py); empty: none.
  std::string keep_in_scratch;
  std::string log;                  // empty: output passes through; else stdout+stderr go here, capped
  bool log_stdout = true;           // with log: false leaves stdout to the caller (a protocol channel)
  std::size_t log_limit = std::size_t(64) << 20;  // bytes of output kept in the log
  std::size_t memory = 0;           // RLIMIT_DATA and the size of each private tmpfs; 0: no limit
  bool private_tmp = true;          // false: the host /tmp stays (read-only where Landlock is in force)
  std::vector<std::string> visible; // host paths under /tmp kept visible, read-only, in the private /tmp
  // Host paths the program's uid must reach (its executable, interpreter, libraries: pyenv's Python under a
  // 0700 /root). Started as root, every directory on the way that uid may not search is covered, in the
  // program's mount namespace only, by an empty read-only tmpfs holding just the next component, bound back
  // read-only; the rest of that directory (the driver's results, its key, its home) stays out of sight.
  // Each path must then be readable (a directory: searchable) by the uid, or isolation fails.
  std::vector<std::string> reach;
  uid_t uid = 65534;                // the program's uid and gid when started as root (nobody, nogroup);
                                    // never 0: root keeps owner access to root's files (refused)
  gid_t gid = 65534;
  bool clear_env = false;           // keep only PATH, LANG, LC_*, TERM, and what `setenv` adds
  std::vector<std::pair<std::string, std::string>> setenv;
  // Called in whichever process fails, with a one-line reason, before it exits 125 (the launcher, on a
  // failure after the fork, also prints it): kgate-worker answers its driver with it.
  std::function<void(const std::string&)> on_failure;
};

// Exit status of the launcher when isolation itself failed (as env(1) and timeout(1) use 125).
inline constexpr int kIsolationFailed = 125;

// See the header comment. Throws IsolationError before anything is forked when namespaces are unavailable
// (neither root nor unprivileged user namespaces), so nothing runs unprotected.
void enter_isolation(const IsolationOptions& options);

// The seccomp filter alone (enter_isolation installs it in the program); exposed for the tests.
void install_judge_filter();

}  // namespace kgate
