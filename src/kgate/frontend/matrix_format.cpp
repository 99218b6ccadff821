// The detection matrix as a terminal table and as JSON.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kgate/matrix.hpp"

namespace kgate {
namespace {

// Short column heads keep thirteen columns and a control name inside ~130 characters.
const std::map<std::string, std::string> kHeads = {
    {"determinism", "determ"}, {"accumulation", "accum"}, {"immutability", "immut"}, {"coverage", "cover"},
    {"freshness", "fresh"},    {"baseline", "base"}};

std::string head_of(const std::string& gate) {
  auto it = kHeads.find(gate);
  return it == kHeads.end() ? gate : it->second;
}

// "20F", "3F17P", "19P1E": seeds that failed, passed, skipped, errored (zero counts left out).
std::string cell_text(const CellCounts& c) {
  std::string s;
  if (c.failed()) s += fmt::format("{}F", c.failed());
  if (c.passed()) s += fmt::format("{}P", c.passed());
  if (c.skipped()) s += fmt::format("{}S", c.skipped());
  if (c.errors()) s += fmt::format("{}E", c.errors());
  return s.empty() ? "-" : s;
}

enum class Tone { plain, good, bad, shown, dim };

const char* ansi(Tone t) {
  switch (t) {
    case Tone::good: return "\x1b[32m";
    case Tone::bad: return "\x1b[31;1m";
    case Tone::shown: return "\x1b[33m";
    case Tone::dim: return "\x1b[2m";
    case Tone::plain: return "";
  }
  return "";
}

std::string pad(const std::string& s, std::size_t width, Tone tone, bool color) {
  const std::string padded = s + std::string(width > s.size() ? width - s.size() : 0, ' ');
  if (!color || tone == Tone::plain) return padded;
  return std::string(ansi(tone)) + s + "\x1b[0m" + padded.substr(s.size());
}

}  // namespace

std::string format_matrix(const MatrixResult& m, bool color) {
  std::string out;
  out += fmt::format("Detection matrix: {} controls x {} gates, seeds {}..{} ({} per control), {:.1f} s\n", m.rows.size(),
                     m.gates.size(), m.first_seed, m.first_seed + static_cast<std::uint64_t>(m.seeds) - 1, m.seeds,
                     m.seconds);
  out += "cell: seeds that FAILED (F, incl. CRASH/TIMEOUT), PASSED (P, incl. REFUSED), SKIPPED (S), ERROR (E);\n"
         "[..] marks a gate the broken control must fail on every seed. base = baseline, the field's test (not a gate).\n\n";

  std::size_t name_w = 7;
  for (const MatrixRow& r : m.rows) name_w = std::max(name_w, r.control.name.size());
  std::vector<std::vector<std::string>> cells(m.rows.size(), std::vector<std::string>(m.gates.size()));
  std::vector<std::size_t> width(m.gates.size());
  for (std::size_t g = 0; g < m.gates.size(); ++g) {
    width[g] = head_of(m.gates[g]).size();
    for (std::size_t r = 0; r < m.rows.size(); ++r) {
      const ControlEntry& c = m.rows[r].control;
      const bool intended = std::find(c.gates.begin(), c.gates.end(), m.gates[g]) != c.gates.end();
      cells[r][g] = intended ? "[" + cell_text(m.rows[r].cells[g]) + "]" : cell_text(m.rows[r].cells[g]);
      width[g] = std::max(width[g], cells[r][g].size());
    }
  }

  std::string head = pad("control", name_w + 2, Tone::plain, false) + pad("kind", 9, Tone::plain, false);
  for (std::size_t g = 0; g < m.gates.size(); ++g) head += pad(head_of(m.gates[g]), width[g] + 2, Tone::plain, false);
  while (!head.empty() && head.back() == ' ') head.pop_back();
  out += head + "\n";
  for (std::size_t r = 0; r < m.rows.size(); ++r) {
    const MatrixRow& row = m.rows[r];
    const ControlEntry& c = row.control;
    std::string line = pad(c.name, name_w + 2, Tone::plain, false) + pad(c.broken ? "broken" : "correct", 9, Tone::plain, false);
    for (std::size_t g = 0; g < m.gates.size(); ++g) {
      const CellCounts& cell = row.cells[g];
      const bool intended = std::find(c.gates.begin(), c.gates.end(), m.gates[g]) != c.gates.end();
      Tone tone = Tone::plain;
      if (m.gates[g] == "baseline") tone = Tone::dim;
      else if (intended) tone = cell.failed() == m.seeds ? Tone::good : Tone::bad;
      else if (!c.broken && (cell.failed() || cell.errors())) tone = Tone::bad;
      else if (cell.failed() || cell.errors()) tone = Tone::shown;
      line += pad(cells[r][g], width[g] + 2, tone, color);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }

  const MatrixJudgement j = judge(m);
  if (!j.problems.empty()) {
    out += "\nproblems:\n";
    for (const std::string& p : j.problems) out += "  " + p + "\n";
  }
  out += "\n" + j.summary + "\n";
  return out;
}

std::string matrix_json(const MatrixResult& m) {
  using nlohmann::json;
  json doc;
  doc["first_seed"] = m.first_seed;
  doc["seeds"] = m.seeds;
  doc["seconds"] = m.seconds;
  doc["gates"] = m.gates;
  json rows = json::array();
  for (const MatrixRow& r : m.rows) {
    json row;
    row["name"] = r.control.name;
    row["kind"] = r.control.broken ? "broken" : "correct";
    row["intended"] = r.control.gates;
    row["defect"] = r.control.defect;
    row["kernel"] = r.control.kernel;
    row["oracle"] = r.control.oracle;
    row["contract"] = r.control.contract;
    row["runs"] = r.runs;
    row["seconds"] = r.seconds;
    row["errors"] = r.errors;
    json cells = json::object();
    for (std::size_t g = 0; g < m.gates.size(); ++g) {
      json cell = json::object();
      for (Verdict v : {Verdict::pass, Verdict::fail, Verdict::refused, Verdict::skip, Verdict::crash, Verdict::timeout,
                        Verdict::error})
        cell[to_string(v)] = r.cells[g].count(v);
      cells[m.gates[g]] = cell;
    }
    row["cells"] = cells;
    json notes = json::array();
    for (const CellNote& n : r.notes)
      notes.push_back({{"gate", n.gate}, {"seed", n.seed}, {"verdict", to_string(n.verdict)}, {"summary", n.summary}});
    row["unexpected"] = notes;
    rows.push_back(row);
  }
  doc["controls"] = rows;
  const MatrixJudgement j = judge(m);
  doc["holds"] = j.holds;
  doc["problems"] = j.problems;
  doc["summary"] = j.summary;
  return doc.dump(2) + "\n";
}

}  // namespace kgate
