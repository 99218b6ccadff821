// kgate/matrix.hpp: the detection matrix, the first of the audit's four defences (DESIGN.md section 3).
//
// Every positive control in a manifest is verified as a real candidate (its own worker process, its
// oracle in another) over many seeds, and the verdicts are counted per control and gate. The matrix holds
// when every broken control fails each of its intended gates on every seed and no correct control fails
// anything on any seed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kgate/report.hpp"

namespace kgate {

// The manifest could not be read: names the file and, where known, the control and field.
class ManifestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One [[control]] of the manifest, paths made absolute.
struct ControlEntry {
  std::string name;
  bool broken = false;             // kind = "broken" | "correct"
  std::vector<std::string> gates;  // gates = [...]: what a broken control must fail (empty for correct)
  std::string defect;              // one line
  std::string kernel;              // library exporting kgate_run ("lib.so" or "lib.so:symbol")
  std::string oracle;              // library exporting kgate_oracle
  std::string contract;            // TOML contract
};

// Reads a manifest; relative paths resolve against the manifest's own directory. Throws ManifestError for
// a malformed file, an unknown gate name, a broken control without gates or duplicate names.
std::vector<ControlEntry> load_manifest(const std::string& path);

// Where `kgate matrix` looks without --manifest: controls/manifest.toml (with its lib/) in the running
// executable's folder or the nearest folder above it (build/tools/kgate -> build/controls/manifest.toml).
// Nothing is compiled in, so a build tree copied to another machine still finds its own controls.
std::string default_manifest_path();

struct MatrixOptions {
  std::string manifest;                // empty: default_manifest_path()
  int seeds = 20;                      // seeds per control
  std::optional<std::uint64_t> seed;   // first seed (seeds are seed, seed+1, ...); none: a fresh one, printed
  int jobs = 2;                        // controls x seeds verified in parallel
  std::vector<std::string> controls;   // only these (by name); empty: all
  std::vector<std::string> gates;      // only these columns; empty: the twelve gates and baseline
  std::string json;                    // also write the counts as JSON to this file
  bool color = false;                  // ANSI colours in the table
  bool quiet = false;                  // no progress line on stderr
};

// Verdict counts of one cell, indexed by Verdict.
struct CellCounts {
  std::array<int, 7> by_verdict{};
  int count(Verdict v) const { return by_verdict[static_cast<std::size_t>(v)]; }
  int failed() const;   // FAIL, CRASH or TIMEOUT: the gate caught the candidate
  int passed() const;   // PASS or REFUSED (a clean refusal is no finding)
  int skipped() const;  // SKIP
  int errors() const;   // ERROR: the verifier or the oracle could not judge
  int total() const;
};

// The first seed of a cell that went against expectation, with what the gate said, so it can be rerun.
struct CellNote {
  std::string gate;
  std::uint64_t seed = 0;
  Verdict verdict = Verdict::pass;
  std::string summary;
};

struct MatrixRow {
  ControlEntry control;
  std::vector<CellCounts> cells;  // one per MatrixResult::gates
  std::vector<CellNote> notes;    // unexpected cells (intended gate not failing, correct control failing)
  int runs = 0;                   // verifications completed
  std::vector<std::string> errors;  // verifications that could not run at all (load failures), by seed
  double seconds = 0.0;
};

struct MatrixResult {
  std::vector<std::string> gates;  // column order
  std::vector<MatrixRow> rows;
  std::uint64_t first_seed = 0;
  int seeds = 0;
  double seconds = 0.0;
};

// Verifies every control over options.seeds seeds. progress(done, total) is called after each
// verification, from worker threads (serialised).
MatrixResult run_matrix(const std::vector<ControlEntry>& controls, const MatrixOptions& options,
                        const std::function<void(int, int)>& progress = {});

// What a matrix shows: one line per control that breaks the rule, and whether it holds overall.
struct MatrixJudgement {
  bool holds = true;
  std::vector<std::string> problems;
  std::string summary;  // the closing line
};
MatrixJudgement judge(const MatrixResult& m);

// The controls x gates table, then the judgement's problems and closing line.
std::string format_matrix(const MatrixResult& m, bool color);
std::string matrix_json(const MatrixResult& m);

// `kgate matrix`: load, run, print, optionally write JSON. Returns 0 when the matrix holds, 1 when it
// does not, 2 for bad usage or input (unreadable manifest, unknown control or gate name).
int run_matrix_command(const MatrixOptions& options);

}  // namespace kgate
