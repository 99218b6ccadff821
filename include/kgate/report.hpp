// kgate/report.hpp: verdicts, evidence and their JSON and terminal forms.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kgate/tensor.hpp"

namespace kgate {

enum class Verdict { pass, fail, refused, skip, crash, timeout, error };
const char* to_string(Verdict v);  // "PASS", "FAIL", ...

// Everything needed to reproduce one failing case: `kgate verify ... --gates GATE --seed SEED` reaches it.
struct Evidence {
  std::string gate;
  std::uint64_t seed = 0;          // the case's own seed (derived from the run's seed)
  Bindings bindings;               // the shape
  std::string variant;             // what the case did: "NaN in x at [2, 7]", "second poison", ...
  std::string tensor;              // the offending output (or input, for immutability)
  Shape index;                     // first offending element
  std::string expected, got;       // as printed values (with raw bits where bits matter)
  std::string detail;              // a neighbourhood, a guard offset, a message
};

// Elements a gate did not hold against the candidate, and why (every summary states them).
struct Excused {
  std::string reason;   // "allowed by the spread rule", "working-precision reference non-finite too", ...
  std::int64_t count = 0;
};

struct GateResult {
  std::string gate;
  Verdict verdict = Verdict::pass;
  std::string summary;                   // one line for the table
  std::optional<Evidence> evidence;      // the smallest failing case found (shrunk), shown first
  std::optional<Evidence> original;      // the case as first found, when shrinking changed it
  double error_ratio = std::numeric_limits<double>::quiet_NaN();  // worst error / bound, where measured
  int cases = 0;                         // cases run
  int refused = 0;                       // of which cleanly refused
  double seconds = 0.0;
  std::string output;                    // candidate output excerpt from the failing call
  // What kind of finding the failure is: a Mismatch name ("error beyond the bound", "NaN masked",
  // "indeterminate form", ...), "crash", "timeout", "status" (a refusal or error status), "guard" ...;
  // empty when the gate did not fail.
  std::string finding;
  // The failing case perturbed an input out of the structure its source guarantees (inputs/structure.hpp):
  // reported, never counted as broken or as a violation.
  bool out_of_domain = false;
  // false when the finding is another gate's at the same magnitude (attributed_to names it): counted once.
  bool counted = true;
  std::string attributed_to;
  // The nearest lower precision whose reference run the failing output matches ("tf32", "fp16"), or empty.
  std::string precision_label;
  std::vector<Excused> excused;          // summed over every case the gate ran
  // Where the gate's seconds went (GateContext::Counters, this gate's share; shrinking included): the audit's
  // cost model of a row (docs/audit.md) is read from these.
  int candidate_calls = 0;
  double candidate_seconds = 0.0;
  int shrink_runs = 0;                   // re-runs of the failing case at smaller shapes (in the counts above)
  int oracle_evaluations = 0;            // float64 oracle runs (memo misses)
  int oracle_reuses = 0;                 // oracle lookups the memo answered
  int reference_evaluations = 0;         // working-precision reference runs
  int label_evaluations = 0;             // lower-precision label runs
  double oracle_seconds = 0.0;           // in the oracle and its reference/label runs
  int input_draws = 0;
  double draw_seconds = 0.0;
};

struct Report {
  std::string kgate_version;
  std::string contract;       // path
  std::string op;             // contract name
  std::string candidate;      // Target::describe()
  std::string oracle;
  std::uint64_t seed = 0;     // the run's seed
  std::vector<GateResult> gates;
  std::string source;         // the input source's describe()
  // 0 clean, 1 any gate FAIL/CRASH/TIMEOUT (a violation), 2 when only ERRORs spoiled it. Baseline is not
  // a gate and never counts.
  int exit_code() const;
};

// Whether a FAIL with this finding is a violation and never broken: the findings of the violation_only
// Mismatch kinds (compare.hpp: "indeterminate form", "non-finite value past the oracle's spread"). The one
// definition both the classification below and the verify loop read: a gate goes on past such a FAIL (and
// past an out_of_domain one, which does not count at all), so a later broken-class FAIL is what it reports.
bool violation_only(const std::string& finding);

// The audit's classification (DESIGN.md section 3), defined here and nowhere else (docs/report.md):
// a gate result counts when it is not baseline, is `counted` (not attributed to another gate) and is not
// `out_of_domain`. broken: a counted FAIL of a tolerance-free gate (except a violation_only finding), a
// counted CRASH, or a counted FAIL of oracle, shapes or accumulation with error_ratio >= 100 or with no
// bound behind it (a wrong shape, an error status, a refused nominal shape); violation: any other counted
// FAIL, CRASH or TIMEOUT; clean otherwise. TIMEOUT is a status: never broken.
enum class Classification { clean, incomplete, violation, broken };
const char* to_string(Classification c);  // "clean", "incomplete", "violation", "broken"
Classification classify(const Report& r);
// One line per gate result that makes the report broken ("nan: FAIL, tolerance-free gate"); empty unless
// classify(r) is broken.
std::vector<std::string> broken_reasons(const Report& r);
inline constexpr double kBrokenRatio = 100.0;
// Two tolerance findings are at the same magnitude when their error ratios are within this factor of each
// other and on the same side of kBrokenRatio (an attributed finding was never worse, by its ratio, than the
// oracle's own: a stream or layout column then shows only what the oracle gate does not already say).
inline constexpr double kSameMagnitude = 10.0;
// The freshness gate's finding when A, called again in new buffers after B, does not give A's first bits (a
// contract that promises determinism). State the calls carry (B's call, or a count of calls) and a result that
// depends on where the buffers sit both give it, and the determinism gate's property covers both: the same input,
// different bits. The gate's evidence says what A gave when called once more in its own first buffers, an
// observation, not a verdict on the cause (a result that varies from call to call can repeat A's bits there by
// chance).
inline constexpr const char* kFindingRepeatChanged = "same input, different bits after another call";
// Marks tolerance findings of other gates that the oracle gate already reports at the same magnitude as
// counted = false, attributed_to = "oracle"; and freshness's kFindingRepeatChanged as attributed_to =
// "determinism" when the determinism gate failed too (one defect, the same input's bits differing, counted once
// under the gate whose property it is). verify() calls it after each gate.
void attribute_findings(Report& r);

std::string to_json(const Report& r);            // one JSON document (schema in docs/report.md)
std::string to_json(const GateResult& g);        // one gate result, as it appears in the report's "gates"
std::string to_table(const Report& r, bool color);  // the terminal table, one row per gate, evidence after
// Writes `text` to `path` atomically (temp file + rename) so a reader never sees half a report.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace kgate
