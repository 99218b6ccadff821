// kgate/targets.hpp: the Target implementations and the loader for C ABI libraries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kgate/abi.h"
#include "kgate/target.hpp"

namespace kgate {

// A library or symbol could not be used: missing file, not a shared library, missing symbol, ABI version
// mismatch. The message names the path and the symbol.
class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The library's own code crashed or hung while it loaded (a constructor, kgate_abi_version, kgate_device):
// a defect of the library rather than bad input, so front-ends report it as CRASH or TIMEOUT.
class LoadCrash : public LoadError {
 public:
  LoadCrash(const std::string& what, CallOutcome outcome, std::string output)
      : LoadError(what), outcome_(outcome), output_(std::move(output)) {}
  CallOutcome outcome() const { return outcome_; }    // crashed or timed_out
  const std::string& output() const { return output_; }  // what it printed while loading, cut at a limit

 private:
  CallOutcome outcome_;
  std::string output_;
};

// "path/lib.so" or "path/lib.so:symbol".
struct EntrySpec {
  std::string library;
  std::string symbol;
};
EntrySpec parse_entry(std::string_view text, std::string_view default_symbol);

// What dlopen + dlsym found, checked: kgate_abi_version() == KGATE_ABI_VERSION and the entry exists.
struct LoadedEntry {
  void* handle = nullptr;
  kgate_entry_fn entry = nullptr;
  DLDeviceType device = kDLCPU;  // from kgate_device() if exported
};
// Loads in the calling process (the worker uses this; the driver uses probe_entry).
LoadedEntry load_entry(const EntrySpec& spec);
// Checks a library in a throwaway child process, so a hostile constructor cannot touch the driver.
// Throws LoadError with the reason; returns the device the entry takes.
DLDeviceType probe_entry(const EntrySpec& spec, double timeout_seconds = 10.0);

// How long a worker under a launch prefix gets to quit before it is killed.
inline constexpr double kToolGraceSeconds = 30.0;

struct TargetOptions {
  std::uint64_t guard_seed = 0x6b67617465ull;  // guard-zone pattern
  std::size_t guard_bytes = 64 * 1024;         // each side of every buffer
  double timeout_seconds = 10.0;               // per call, in the worker
  std::size_t output_limit = 64 * 1024;        // bytes of the callee's stdout+stderr kept per call
  // A command the worker runs under, its first word an absolute path: {"/usr/local/cuda/bin/compute-sanitizer",
  // "--tool", "memcheck", "--log-file", "/tmp/x.{start}.log"} (the bounds gate's sanitizer pass). Empty: run
  // directly. "{start}" in an argument becomes the number of workers this target started before (0, 1, ...):
  // a worker replaced after a crash must not overwrite the log of the one that saw it. Under a prefix a
  // worker is stopped by asking it to quit (up to kToolGraceSeconds) rather than killed, so the tool can
  // finish its log.
  std::vector<std::string> launch_prefix;
  // Bytes of private writable memory the worker may map (RLIMIT_DATA, set before the library loads); a
  // candidate that wants more sees its allocations fail. 0: no limit. Device memory is not counted.
  std::size_t memory_limit_bytes = 0;
};

// Runs the entry in a child process (a fresh `kgate worker`), on the device the library names.
std::unique_ptr<Target> make_worker_target(const EntrySpec& spec, const TargetOptions& options);

// Runs a function in this process on the CPU, with guarded host buffers but no isolation: for tests and
// for trusted code (oracles built into kgate).
using EntryFn = std::function<std::int32_t(const kgate_call& call)>;
std::unique_ptr<Target> make_inprocess_target(std::string name, EntryFn fn, const TargetOptions& options = {});

}  // namespace kgate
