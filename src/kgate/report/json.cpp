// The JSON form of a report; the schema is docs/report.md.
#include <cmath>

#include <nlohmann/json.hpp>

#include "kgate/report.hpp"

#include <string>
#include <vector>

namespace kgate {
namespace {

using nlohmann::json;

json ratio_json(double r) {
  if (std::isnan(r)) return nullptr;
  if (std::isinf(r)) return "inf";  // JSON has no infinity; a string keeps it unmistakable
  return r;
}

json evidence_json(const Evidence& e) {
  json b = json::object();
  for (const auto& [k, v] : e.bindings) b[k] = v;
  return json{{"gate", e.gate},       {"seed", e.seed},         {"seed_str", std::to_string(e.seed)},
              {"bindings", b},        {"variant", e.variant},   {"tensor", e.tensor},
              {"index", e.index},     {"expected", e.expected}, {"got", e.got},
              {"detail", e.detail}};
}

json gate_json(const GateResult& g) {
  json excused = json::array();
  std::int64_t total = 0;
  for (const Excused& e : g.excused) {
    excused.push_back(json{{"reason", e.reason}, {"count", e.count}});
    total += e.count;
  }
  return json{{"gate", g.gate},
              {"verdict", to_string(g.verdict)},
              {"summary", g.summary},
              {"cases", g.cases},
              {"refused", g.refused},
              {"seconds", g.seconds},
              {"error_ratio", ratio_json(g.error_ratio)},
              {"evidence", g.evidence ? evidence_json(*g.evidence) : json(nullptr)},
              {"original", g.original ? evidence_json(*g.original) : json(nullptr)},
              {"output", g.output},
              {"finding", g.finding},
              {"out_of_domain", g.out_of_domain},
              {"counted", g.counted},
              {"attributed_to", g.attributed_to.empty() ? json(nullptr) : json(g.attributed_to)},
              {"precision_label", g.precision_label.empty() ? json(nullptr) : json(g.precision_label)},
              {"excused", excused},
              {"excused_total", total},
              {"candidate_calls", g.candidate_calls},
              {"candidate_seconds", g.candidate_seconds},
              {"shrink_runs", g.shrink_runs},
              {"oracle_evaluations", g.oracle_evaluations},
              {"oracle_reuses", g.oracle_reuses},
              {"reference_evaluations", g.reference_evaluations},
              {"label_evaluations", g.label_evaluations},
              {"oracle_seconds", g.oracle_seconds},
              {"input_draws", g.input_draws},
              {"draw_seconds", g.draw_seconds}};
}

}  // namespace

std::string to_json(const GateResult& g) {
  return gate_json(g).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string to_json(const Report& r) {
  json gates = json::array();
  for (const GateResult& g : r.gates) gates.push_back(gate_json(g));
  const json doc{{"schema", "kgate.report/1"},
                 {"kgate_version", r.kgate_version},
                 {"contract", r.contract},
                 {"op", r.op},
                 {"candidate", r.candidate},
                 {"oracle", r.oracle},
                 {"seed", r.seed},
                 {"seed_str", std::to_string(r.seed)},
                 {"exit_code", r.exit_code()},
                 {"source", r.source},
                 {"classification", to_string(classify(r))},
                 {"broken_reasons", broken_reasons(r)},
                 {"gates", gates}};
  // Replace invalid UTF-8 (a candidate's message or printout) instead of throwing mid-report.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace kgate
