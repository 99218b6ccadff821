// The detection matrix: the manifest of positive controls, their verification over many seeds, and the
// judgement of what the counts show. The table and JSON forms are in matrix_format.cpp.
#include "kgate/matrix.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "kgate/contract.hpp"
#include "kgate/oracle.hpp"
#include "kgate/rng.hpp"
#include "kgate/targets.hpp"
#include "kgate/verify.hpp"

namespace kgate {
namespace {

namespace fs = std::filesystem;

std::string where(const std::string& file, const toml::node& n) {
  return fmt::format("{}:{}:{}", file, n.source().begin.line, n.source().begin.column);
}

std::string required_string(const toml::table& t, std::string_view key, const std::string& file, const std::string& control) {
  const toml::node* n = t.get(key);
  if (!n) throw ManifestError(fmt::format("{}: control {}: missing {}", where(file, t), control, key));
  if (!n->is_string() || n->as_string()->get().empty())
    throw ManifestError(fmt::format("{}: control {}: {} must be a non-empty string", where(file, *n), control, key));
  return n->as_string()->get();
}

// "lib.so:symbol" keeps its symbol; only the library part is a path.
std::string resolve_entry(const std::string& text, const fs::path& dir) {
  const EntrySpec spec = parse_entry(text, "");
  const std::string lib = fs::path(spec.library).is_absolute() ? spec.library : (dir / spec.library).lexically_normal().string();
  return spec.symbol.empty() ? lib : lib + ":" + spec.symbol;
}

std::set<std::string> known_gates() {
  std::set<std::string> names;
  for (const GateInfo& g : list_gates()) names.insert(g.name);
  return names;
}

}  // namespace

int CellCounts::failed() const { return count(Verdict::fail) + count(Verdict::crash) + count(Verdict::timeout); }
int CellCounts::passed() const { return count(Verdict::pass) + count(Verdict::refused); }
int CellCounts::skipped() const { return count(Verdict::skip); }
int CellCounts::errors() const { return count(Verdict::error); }
int CellCounts::total() const {
  int n = 0;
  for (int c : by_verdict) n += c;
  return n;
}

std::vector<ControlEntry> load_manifest(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw ManifestError(fmt::format("{}: no such manifest file", path));
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw ManifestError(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, e.description()));
  }
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  const toml::array* list = root["control"].as_array();
  if (!list || list->empty()) throw ManifestError(fmt::format("{}: no [[control]] entries", path));
  const std::set<std::string> gates = known_gates();
  std::vector<ControlEntry> out;
  std::set<std::string> names;
  for (const toml::node& node : *list) {
    const toml::table* t = node.as_table();
    if (!t) throw ManifestError(fmt::format("{}: every control must be a table", where(path, node)));
    for (const auto& [key, value] : *t) {
      static const std::set<std::string_view> keys{"name", "kind", "gates", "defect", "kernel", "oracle", "contract"};
      if (!keys.count(key.str()))
        throw ManifestError(fmt::format("{}: unknown key '{}' (a control takes name, kind, gates, defect, kernel, oracle, contract)",
                                        where(path, value), key.str()));
    }
    ControlEntry c;
    c.name = required_string(*t, "name", path, "?");
    if (!names.insert(c.name).second) throw ManifestError(fmt::format("{}: control {} appears twice", where(path, *t), c.name));
    const std::string kind = required_string(*t, "kind", path, c.name);
    if (kind != "broken" && kind != "correct")
      throw ManifestError(fmt::format("{}: control {}: kind must be \"broken\" or \"correct\", got \"{}\"", where(path, *t), c.name, kind));
    c.broken = kind == "broken";
    if (const toml::array* g = (*t)["gates"].as_array()) {
      for (const toml::node& gn : *g) {
        const auto name = gn.value<std::string>();
        if (!name || !gates.count(*name))
          throw ManifestError(fmt::format("{}: control {}: unknown gate {} (see kgate list-gates)", where(path, gn), c.name,
                                          name ? "\"" + *name + "\"" : std::string("(not a string)")));
        c.gates.push_back(*name);
      }
    }
    if (c.broken && c.gates.empty())
      throw ManifestError(fmt::format("{}: broken control {} names no gates that must catch it", where(path, *t), c.name));
    if (!c.broken && !c.gates.empty())
      throw ManifestError(fmt::format("{}: correct control {} must pass every gate; it cannot list gates", where(path, *t), c.name));
    if (const toml::node* d = t->get("defect")) c.defect = d->value<std::string>().value_or("");
    c.kernel = resolve_entry(required_string(*t, "kernel", path, c.name), dir);
    c.oracle = resolve_entry(required_string(*t, "oracle", path, c.name), dir);
    const std::string contract = required_string(*t, "contract", path, c.name);
    c.contract = fs::path(contract).is_absolute() ? contract : (dir / contract).lexically_normal().string();
    out.push_back(std::move(c));
  }
  return out;
}

std::string default_manifest_path() {
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/tools/kgate, build/tests/controls/..., build/bench/kgate/...: walk up to the build root.
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
      candidates.push_back(d / "controls" / "manifest.toml");
  }
  for (const fs::path& p : candidates)
    if (fs::exists(p, ec) && fs::exists(p.parent_path() / "lib", ec)) return p.string();
  return candidates.empty() ? std::string("controls/manifest.toml") : candidates.front().string();
}

MatrixResult run_matrix(const std::vector<ControlEntry>& controls, const MatrixOptions& options,
                        const std::function<void(int, int)>& progress) {
  MatrixResult m;
  m.seeds = std::max(options.seeds, 1);
  m.first_seed = options.seed.value_or(fresh_seed());
  if (options.gates.empty()) {
    for (const GateInfo& g : list_gates()) m.gates.push_back(g.name);
  } else {
    m.gates = options.gates;
  }
  std::map<std::string, std::size_t> column;
  for (std::size_t g = 0; g < m.gates.size(); ++g) column[m.gates[g]] = g;

  // Contracts are read once, up front: a bad contract is a manifest problem, reported for its row.
  std::vector<std::optional<Contract>> contracts(controls.size());
  for (const ControlEntry& c : controls) {
    MatrixRow row;
    row.control = c;
    row.cells.resize(m.gates.size());
    m.rows.push_back(std::move(row));
  }
  for (std::size_t r = 0; r < controls.size(); ++r) {
    try {
      contracts[r] = load_contract(controls[r].contract);
    } catch (const std::exception& e) {
      m.rows[r].errors.push_back(fmt::format("contract: {}", e.what()));
    }
  }

  struct Item {
    std::size_t row;
    int k;
  };
  std::vector<Item> items;
  for (std::size_t r = 0; r < controls.size(); ++r)
    if (contracts[r])
      for (int k = 0; k < m.seeds; ++k) items.push_back({r, k});

  std::mutex mu;
  std::atomic<std::size_t> next{0};
  int done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&] {
    for (std::size_t i = next++; i < items.size(); i = next++) {
      const Item it = items[i];
      const ControlEntry& c = controls[it.row];
      const Contract& contract = *contracts[it.row];
      const std::uint64_t seed = m.first_seed + static_cast<std::uint64_t>(it.k);
      const auto s0 = std::chrono::steady_clock::now();
      std::optional<Report> report;
      std::string failure;
      try {
        TargetOptions to;
        to.timeout_seconds = contract.timeout_seconds;
        // A fresh worker per seed, as the audit gives every candidate: nothing a control keeps in its
        // process (a cache, a call counter) survives from one seed to the next.
        std::unique_ptr<Target> candidate = make_worker_target(parse_entry(c.kernel, "kgate_run"), to);
        std::unique_ptr<Oracle> oracle =
            make_target_oracle(make_worker_target(parse_entry(c.oracle, "kgate_oracle"), to), contract);
        VerifyOptions vo;
        vo.seed = seed;
        vo.gates = m.gates;
        vo.shrink = false;  // the matrix counts verdicts; the smallest failing shape is verify's business
        report = verify(contract, *candidate, *oracle, vo);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      std::lock_guard<std::mutex> lock(mu);
      MatrixRow& row = m.rows[it.row];
      row.seconds += seconds;
      if (!report) {
        row.errors.push_back(fmt::format("seed {}: {}", seed, failure));
      } else {
        ++row.runs;
        std::set<std::string> intended(c.gates.begin(), c.gates.end());
        for (const GateResult& g : report->gates) {
          auto col = column.find(g.gate);
          if (col == column.end()) continue;
          ++row.cells[col->second].by_verdict[static_cast<std::size_t>(g.verdict)];
          const bool caught = g.verdict == Verdict::fail || g.verdict == Verdict::crash || g.verdict == Verdict::timeout;
          const bool expected_fail = c.broken && intended.count(g.gate);
          const bool unexpected = g.gate != "baseline" &&
                                  (expected_fail ? !caught : (!c.broken && (caught || g.verdict == Verdict::error)));
          const bool noted = std::any_of(row.notes.begin(), row.notes.end(), [&](const CellNote& n) { return n.gate == g.gate; });
          if (unexpected && !noted) row.notes.push_back({g.gate, seed, g.verdict, g.summary});
        }
      }
      ++done;
      if (progress) progress(done, static_cast<int>(items.size()));
    }
  };
  const int jobs = std::clamp(options.jobs, 1, std::max(1, static_cast<int>(items.size())));
  std::vector<std::thread> pool;
  for (int j = 1; j < jobs; ++j) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (MatrixRow& row : m.rows)  // the first seed of each unexpected cell, whatever order threads ran in
    std::sort(row.notes.begin(), row.notes.end(), [&](const CellNote& a, const CellNote& b) {
      return column[a.gate] < column[b.gate];
    });
  return m;
}

MatrixJudgement judge(const MatrixResult& m) {
  MatrixJudgement j;
  int broken = 0, correct = 0, caught = 0, clean = 0;
  for (const MatrixRow& row : m.rows) {
    const ControlEntry& c = row.control;
    (c.broken ? broken : correct) += 1;
    bool ok = true;
    auto problem = [&](std::string text) {
      j.problems.push_back(fmt::format("{}: {}", c.name, text));
      ok = false;
    };
    for (const std::string& e : row.errors) problem(fmt::format("could not be verified ({})", e));
    if (row.runs < m.seeds && row.errors.empty()) problem(fmt::format("only {} of {} seeds verified", row.runs, m.seeds));
    auto note_of = [&](const std::string& gate) -> std::string {
      for (const CellNote& n : row.notes)
        if (n.gate == gate) return fmt::format("; first at seed {}: {} {}", n.seed, to_string(n.verdict), n.summary);
      return "";
    };
    for (std::size_t g = 0; g < m.gates.size() && row.runs > 0; ++g) {
      const std::string& gate = m.gates[g];
      const CellCounts& cell = row.cells[g];
      if (gate == "baseline") continue;  // not a gate: it shows what the field's test lets through
      const bool intended = std::find(c.gates.begin(), c.gates.end(), gate) != c.gates.end();
      if (c.broken && intended && cell.failed() < m.seeds)
        problem(fmt::format("intended gate {} caught it on {} of {} seeds ({} passed, {} skipped, {} errors){}", gate,
                            cell.failed(), m.seeds, cell.passed(), cell.skipped(), cell.errors(), note_of(gate)));
      if (!c.broken && (cell.failed() > 0 || cell.errors() > 0))
        problem(fmt::format("correct control flagged by {} on {} of {} seeds{}{}", gate, cell.failed(), m.seeds,
                            cell.errors() ? fmt::format(" ({} errors)", cell.errors()) : "", note_of(gate)));
    }
    if (c.broken) {
      for (const std::string& gate : c.gates)
        if (std::find(m.gates.begin(), m.gates.end(), gate) == m.gates.end())
          problem(fmt::format("intended gate {} was not run", gate));
    }
    if (ok) (c.broken ? caught : clean) += 1;
  }
  j.holds = j.problems.empty() && !m.rows.empty();
  if (j.holds)
    j.summary = fmt::format("MATRIX HOLDS: every broken control ({}) caught by its intended gates on every seed ({} seeds), "
                            "no correct control ({}) flagged.",
                            broken, m.seeds, correct);
  else
    j.summary = fmt::format("MATRIX DOES NOT HOLD: {} of {} broken controls caught on every seed, {} of {} correct controls "
                            "clean; {} problem{} above.",
                            caught, broken, clean, correct, j.problems.size(), j.problems.size() == 1 ? "" : "s");
  return j;
}

int run_matrix_command(const MatrixOptions& options) {
  const std::string path = options.manifest.empty() ? default_manifest_path() : options.manifest;
  std::vector<ControlEntry> controls;
  try {
    controls = load_manifest(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kgate matrix: %s%s\n", e.what(),
                 options.manifest.empty() ? " (build the controls first, or pass --manifest)" : "");
    return 2;
  }
  if (!options.controls.empty()) {
    std::vector<ControlEntry> chosen;
    for (const std::string& name : options.controls) {
      auto it = std::find_if(controls.begin(), controls.end(), [&](const ControlEntry& c) { return c.name == name; });
      if (it == controls.end()) {
        std::fprintf(stderr, "kgate matrix: no control named \"%s\" in %s\n", name.c_str(), path.c_str());
        return 2;
      }
      chosen.push_back(*it);
    }
    controls = std::move(chosen);
  }
  const std::set<std::string> gates = known_gates();
  for (const std::string& g : options.gates) {
    if (!gates.count(g)) {
      std::fprintf(stderr, "kgate matrix: unknown gate \"%s\" (see kgate list-gates)\n", g.c_str());
      return 2;
    }
  }
  if (options.seeds < 1) {
    std::fprintf(stderr, "kgate matrix: --seeds must be at least 1\n");
    return 2;
  }
  MatrixOptions o = options;
  if (!o.seed) o.seed = fresh_seed();
  const bool show_progress = !options.quiet && isatty(STDERR_FILENO);
  std::mutex mu;
  auto progress = [&](int done, int total) {
    if (!show_progress) return;
    std::lock_guard<std::mutex> lock(mu);
    std::fprintf(stderr, "\rverified %d of %d (control x seed)%s", done, total, done == total ? "\n" : "");
    std::fflush(stderr);
  };
  const MatrixResult m = run_matrix(controls, o, progress);
  std::fputs(format_matrix(m, options.color).c_str(), stdout);
  std::fflush(stdout);
  if (!options.json.empty()) {
    try {
      write_file_atomic(options.json, matrix_json(m));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kgate matrix: cannot write %s: %s\n", options.json.c_str(), e.what());
      return 2;
    }
  }
  return judge(m).holds ? 0 : 1;
}

}  // namespace kgate
