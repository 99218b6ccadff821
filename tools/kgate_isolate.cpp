// kgate-isolate [options] -- PROGRAM ARGS...: runs PROGRAM as kgate-worker runs a candidate (the same
// enter_isolation(), src/kgate/worker/isolation.hpp). The Python front-end starts its workers with it
// (python/kgate/isolation.py). Exit status: PROGRAM's own (or killed by the same signal); 125 when the
// options are wrong or isolation is impossible; 126 PROGRAM cannot be executed; 127 it was not found.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "worker/isolation.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kgate-isolate [options] -- PROGRAM ARGS...\n"
    "  --keep-fd N          PROGRAM keeps descriptor N (besides 0, 1, 2); repeatable\n"
    "  --scratch DIR        working directory and TMPDIR (emptied at exit); default a private tmpfs\n"
    "  --keep-in-scratch P  entries of --scratch whose names start with P stay there at exit (a tool's log)\n"
    "  --log FILE           PROGRAM's stdout and stderr go to FILE, at most --log-limit bytes\n"
    "  --log-stderr-only    with --log: stdout stays the caller's (a protocol channel)\n"
    "  --log-limit BYTES    default 67108864\n"
    "  --memory BYTES       RLIMIT_DATA and the size of each private tmpfs\n"
    "  --host-tmp           keep the host's /tmp instead of a private one\n"
    "  --visible PATH       keep PATH (under /tmp) visible, read-only, in the private /tmp; repeatable\n"
    "  --reach PATH         PATH must be readable by PROGRAM's uid (its interpreter, libraries): directories\n"
    "                       on the way it may not search are covered, inside PROGRAM's mount namespace,\n"
    "                       by an empty tmpfs with only the way to PATH bound back read-only; repeatable\n"
    "                       (PROGRAM itself, given with a '/', is always reached)\n"
    "  --uid N, --gid N     the unprivileged ids PROGRAM runs as when started as root (default 65534;\n"
    "                       0 is refused)\n"
    "  --clear-env          keep only PATH, LANG, LC_*, TERM (and --setenv)\n"
    "  --setenv NAME=VALUE  repeatable\n"
    "  --unsafe-no-isolation  run PROGRAM directly, unprotected (tests only)\n"
    "exit status: PROGRAM's (or the same signal); 125 bad options or isolation impossible; 126 cannot "
    "execute; 127 not found\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "kgate-isolate: error: %s\n%s", what.c_str(), kUsage);
  std::exit(kgate::kIsolationFailed);
}

template <typename T>
T number(std::string_view option, std::string_view text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    usage_error(std::string(option) + ": expected a non-negative integer, got \"" + std::string(text) + "\"");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  kgate::IsolationOptions o;
  o.on_failure = [](const std::string& why) { std::fprintf(stderr, "kgate-isolate: error: %s\n", why.c_str()); };
  bool unsafe = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--log-stderr-only") o.log_stdout = false;
    else if (a == "--host-tmp") o.private_tmp = false;
    else if (a == "--clear-env") o.clear_env = true;
    else if (a == "--unsafe-no-isolation") unsafe = true;
    else {
      if (i + 1 >= argc) usage_error(std::string(a) + " needs a value (or unknown option)");
      const std::string_view v = argv[++i];
      if (a == "--keep-fd") o.keep_fds.push_back(number<int>(a, v));
      else if (a == "--scratch") o.scratch = v;
      else if (a == "--keep-in-scratch") o.keep_in_scratch = v;
      else if (a == "--log") o.log = v;
      else if (a == "--log-limit") o.log_limit = number<std::size_t>(a, v);
      else if (a == "--memory") o.memory = number<std::size_t>(a, v);
      else if (a == "--visible") o.visible.emplace_back(v);
      else if (a == "--reach") o.reach.emplace_back(v);
      else if (a == "--uid") o.uid = number<uid_t>(a, v);
      else if (a == "--gid") o.gid = number<gid_t>(a, v);
      else if (a == "--setenv") {
        const std::size_t eq = v.find('=');
        if (eq == 0 || eq == std::string_view::npos) usage_error("--setenv: expected NAME=VALUE, got \"" + std::string(v) + "\"");
        o.setenv.emplace_back(std::string(v.substr(0, eq)), std::string(v.substr(eq + 1)));
      } else usage_error("unknown option " + std::string(a));
    }
  }
  if (i >= argc) usage_error("no PROGRAM after --");
  // PROGRAM itself stays reachable: under /tmp (the private /tmp would hide it) or under a directory the
  // unprivileged uid may not search (pyenv's Python under a 0700 /root).
  // Named relative to the caller's directory, not the scratch directory it runs in.
  std::string program = argv[i];
  if (program.find('/') != std::string::npos) {
    program = std::filesystem::absolute(program).lexically_normal().string();
    std::error_code ec;  // a missing PROGRAM stays exit 127 from execvp, not an isolation failure
    if (std::filesystem::exists(program, ec)) o.reach.push_back(program);
  }
  if (unsafe) {
    std::fprintf(stderr, "kgate-isolate: warning: --unsafe-no-isolation: %s runs unprotected\n", argv[i]);
    for (const auto& [k, v] : o.setenv) setenv(k.c_str(), v.c_str(), 1);
  } else {
    try {
      kgate::enter_isolation(o);
    } catch (const kgate::IsolationError& e) {
      std::fprintf(stderr, "kgate-isolate: error: cannot isolate %s: %s\n", argv[i], e.what());
      return kgate::kIsolationFailed;
    }
  }
  execvp(program.c_str(), argv + i);
  const int err = errno;
  std::fprintf(stderr, "kgate-isolate: error: cannot execute %s: %s\n", argv[i], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}
