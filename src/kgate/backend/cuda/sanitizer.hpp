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
#include "kgate/sanitizer_log.hpp"
#include "kgate/targets.hpp"

namespace kgate {

// kSanitizerTools, parse_sanitizer_log, find_compute_sanitizer and the verdict: kgate/sanitizer_log.hpp.

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
