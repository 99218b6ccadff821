// The bounds gate's compute-sanitizer pass, the parts every front-end shares: the tools, where the
// executable is, the command a worker starts under, the log's records, and the bounds/<tool> result drawn
// from them. Host code only, so the Python module (kgate._core) uses the same parser and verdict as the C++
// CLI; the C++ pass that starts the worker is backend/cuda/sanitizer.hpp, the Python one
// kgate/kernelbench/sanitizer.py.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kgate/report.hpp"

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

// The words a worker starts under: the tool, writing its report to `log_file` (not to the worker's output,
// which the candidate writes too), about the worker alone.
std::vector<std::string> sanitizer_launch_prefix(const std::string& exe, const std::string& tool,
                                                 const std::string& log_file);

// The result named "bounds/<tool>" of the bounds gate's calls run under the tool: `logs` (name, text) are
// the tool's logs, one per worker it started, `bounds` the bounds gate's own result in that run. FAIL with
// the first access the tool reported as evidence (every one listed in the detail); else the bounds gate's
// verdict under the tool (PASS when it passed and the tool reported nothing; ERROR when it passed and the
// tool left no log at all; FAIL when its guards caught a write), except that a CRASH or TIMEOUT with no record of the tool's is ERROR (the pass could not run),
// saying what the tool saw of it. `seed` is the run seed, for evidence the bounds gate did not give. The
// caller sets `seconds`.
GateResult sanitizer_result(const std::string& tool, const std::vector<std::pair<std::string, std::string>>& logs,
                            const GateResult& bounds, std::uint64_t seed);

// The result when compute-sanitizer is not installed: SKIP, saying where it looked.
GateResult sanitizer_missing(const std::string& tool, const std::string& looked);

}  // namespace kgate
