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
};

struct Report {
  std::string kgate_version;
  std::string contract;       // path
  std::string op;             // contract name
  std::string candidate;      // Target::describe()
  std::string oracle;
  std::uint64_t seed = 0;     // the run's seed
  std::vector<GateResult> gates;
  // 0 clean, 1 any gate FAIL/CRASH/TIMEOUT (a violation), 2 when only ERRORs spoiled it. Baseline is not
  // a gate and never counts.
  int exit_code() const;
};

// The audit's classification (DESIGN.md section 3). broken: a gate failed with no tolerance to blame (a
// tolerance-free check, a crash, a timeout) or with an error at least 100x its bound; violation: any other
// failing gate; clean otherwise. Baseline never counts.
enum class Classification { clean, violation, broken };
const char* to_string(Classification c);  // "clean", "violation", "broken beyond tolerance"
Classification classify(const Report& r);
inline constexpr double kBrokenRatio = 100.0;

std::string to_json(const Report& r);            // one JSON document (schema in docs/report.md)
std::string to_table(const Report& r, bool color);  // the terminal table, one row per gate, evidence after
// Writes `text` to `path` atomically (temp file + rename) so a reader never sees half a report.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace kgate
