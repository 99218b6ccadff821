// The bounds gate's optional deeper pass on the GPU: the candidate's worker runs under compute-sanitizer
// (memcheck, racecheck, initcheck or synccheck) for the bounds gate's calls, and what the tool reports
// becomes evidence (kind, kernel, address, size, thread and block). Where the tool is missing the pass is
// a SKIP that says so.
//
// memcheck runs with guard zones off: a write just past a buffer then leaves its allocation, which is what
// memcheck sees (inside a guard zone it would be an in-bounds access to memcheck). The other tools keep
// the guards, so the bounds gate's own check still runs beside them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kgate/contract.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/targets.hpp"

namespace kgate {

inline const std::vector<std::string> kSanitizerTools{"memcheck", "racecheck", "initcheck", "synccheck"};

// One record of a compute-sanitizer report.
struct SanitizerFinding {
  std::string tool;     // memcheck, racecheck, ...
  std::string kind;     // "Invalid __global__ write of size 4 bytes", "Race reported between ...", ...
  std::string kernel;   // "add_kernel(cctl::Vec<const float>, ...)" where the report names one
  std::string address;  // "0x7f0a1c000400" where given
  std::int64_t size = 0;  // access size in bytes where given
  std::string where;    // "by thread (3,0,0) in block (255,0,0)" and the nearest-allocation line
  bool api_error = false;  // "Program hit cudaError... on CUDA API call": a consequence, not an access
  std::string text;     // the record as printed
};

// Parses a compute-sanitizer log (with or without the "========= " prefix). Host backtraces are dropped.
std::vector<SanitizerFinding> parse_sanitizer_log(const std::string& tool, const std::string& log);

// The compute-sanitizer executable: $KGATE_COMPUTE_SANITIZER, then PATH, then $CUDA_HOME/bin,
// /usr/local/cuda/bin and the folder of nvcc. nullopt (and where it looked, in `looked`) when absent.
std::optional<std::string> find_compute_sanitizer(std::string* looked = nullptr);

struct SanitizerOptions {
  std::string tool = "memcheck";   // one of kSanitizerTools
  std::uint64_t seed = 1;          // the run seed of the bounds gate's cases
  double timeout_seconds = 120.0;  // per call: instrumented kernels are slow
  std::string log_dir;             // where the tool's log goes (default: $TMPDIR or /tmp); kept for a person
};

// Runs the bounds gate's cases (nominal and odd shapes) for `kernel` under the tool. The result is a
// GateResult named "bounds/<tool>": PASS when the tool found nothing, FAIL with the first finding as
// evidence (every finding in the detail), SKIP when the tool is missing, ERROR when it could not run.
GateResult run_sanitizer_pass(const Contract& contract, const EntrySpec& kernel, Oracle& oracle,
                              const SanitizerOptions& options);

}  // namespace kgate
