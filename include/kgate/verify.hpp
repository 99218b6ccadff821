// kgate/verify.hpp: run the gates of a contract against a target and collect a report.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kgate/contract.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/source.hpp"
#include "kgate/target.hpp"

namespace kgate {

struct VerifyOptions {
  std::optional<std::uint64_t> seed;   // none: a fresh secret seed, printed in the report
  std::vector<std::string> gates;      // names; empty: the twelve gates then baseline
  double tolerance_scale = 1.0;        // multiplies every tolerance (the threshold sweep)
  bool shrink = true;                  // reduce a failing case to the smallest failing shape
  // Called after each gate finishes, before the next starts (the CLI rewrites its JSON file here, so a
  // verdict once reached is never lost).
  std::function<void(const GateResult&)> on_result;
  // Where ordinary input sets come from; null: the contract's domains (make_contract_source). Not owned.
  InputSource* source = nullptr;
};

struct GateInfo {
  std::string name;
  std::string property;  // one sentence
  std::string method;    // how it is checked
  bool tolerance_free = false;
  bool is_baseline = false;
};
// The twelve gates in DESIGN.md order, then baseline.
std::vector<GateInfo> list_gates();

// Throws std::invalid_argument for an unknown gate name.
Report verify(const Contract& contract, Target& candidate, Oracle& oracle, const VerifyOptions& options);

// Tunes glibc's malloc for verification: every case allocates input, output and reference arrays as large
// as the tensors, which glibc serves from mmap above its threshold (at most 32 MB) and unmaps on free, so
// each case pays a page fault and a kernel zeroing per page. This keeps blocks up to 256 MB in the heap and
// never trims it below 1 GB, so a case reuses the previous one's pages. Process-wide: the programs that
// drive verification (kgate, kgate-worker, the benchmarks) call it at start; a library embedding kgate
// may choose not to. No-op off glibc.
void keep_large_allocations_in_heap();

}  // namespace kgate
