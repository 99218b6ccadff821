// What a full verification costs on the GPU, in units of the field's standard test.
//
// Two workloads, each a correct CUDA control in its own worker process with its oracle in another:
//   add     z = x + y, f32, 16M elements (CPU float64 oracle)
//   matmul  C = A B, bf16 -> f32, 4096 x 4096 x 4096 on the tensor cores (GPU float64 oracle)
// For each, `baseline` (five allclose trials at the nominal shape) runs alone, then all twelve gates, in
// the same process against the same workers; worker start-up and CUDA context creation are excluded
// (compilation too: the libraries are prebuilt). Prints each gate's time and the total as multiples of one
// baseline check (medians over the repeats). The target is at most 20 baselines; this program reports
// whether it is met and never fails on a timing (exit 0 unless something could not run at all).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backend/cuda/cuda_backend.hpp"
#include "kgate/contract.hpp"
#include "kgate/oracle.hpp"
#include "kgate/targets.hpp"
#include "kgate/verify.hpp"

namespace {

constexpr double kTargetBaselines = 20.0;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Workload {
  std::string name, contract, kernel, oracle;
};

struct Measured {
  std::string name;
  double baseline = 0.0, total = 0.0;
  std::vector<std::pair<std::string, double>> gates;  // median seconds, DESIGN order
  std::map<std::string, std::string> verdicts;        // worst verdict seen per gate
  std::string error;
};

Measured measure(const Workload& w, int repeats, std::uint64_t seed) {
  Measured m;
  m.name = w.name;
  try {
    const kgate::Contract contract = kgate::load_contract(w.contract);
    kgate::TargetOptions to;
    to.timeout_seconds = contract.timeout_seconds;
    auto candidate = kgate::make_worker_target(kgate::parse_entry(w.kernel, "kgate_run"), to);
    auto oracle = kgate::make_target_oracle(kgate::make_worker_target(kgate::parse_entry(w.oracle, "kgate_oracle"), to),
                                            contract);
    std::vector<std::string> twelve;
    for (const kgate::GateInfo& g : kgate::list_gates())
      if (!g.is_baseline) twelve.push_back(g.name);
    std::vector<double> baselines, totals;
    std::map<std::string, std::vector<double>> per_gate;
    for (int r = 0; r < repeats; ++r) {
      kgate::VerifyOptions vo;
      vo.seed = seed + static_cast<std::uint64_t>(r);
      vo.gates = {"baseline"};
      const kgate::Report b = kgate::verify(contract, *candidate, *oracle, vo);
      baselines.push_back(b.gates.at(0).seconds);
      if (b.gates.at(0).verdict != kgate::Verdict::pass) m.verdicts["baseline"] = kgate::to_string(b.gates.at(0).verdict);

      vo.gates = twelve;
      const kgate::Report full = kgate::verify(contract, *candidate, *oracle, vo);
      double total = 0.0;
      for (const kgate::GateResult& g : full.gates) {
        per_gate[g.gate].push_back(g.seconds);
        total += g.seconds;
        std::string& v = m.verdicts[g.gate];
        if (v.empty() || g.verdict != kgate::Verdict::pass) v = kgate::to_string(g.verdict);
        if (g.verdict != kgate::Verdict::pass && g.verdict != kgate::Verdict::skip)
          std::fprintf(stderr, "%s: gate %s: %s: %s\n", w.name.c_str(), g.gate.c_str(), kgate::to_string(g.verdict),
                       g.summary.c_str());
      }
      totals.push_back(total);
      std::fprintf(stderr, "%s: repeat %d/%d: baseline %.3f s, all gates %.3f s (%.2f baselines):", w.name.c_str(),
                   r + 1, repeats, baselines.back(), total, total / baselines.back());
      for (const kgate::GateResult& g : full.gates)  // as it goes, so a run stopped later still has this one
        std::fprintf(stderr, " %s %.3f %s;", g.gate.c_str(), g.seconds, kgate::to_string(g.verdict));
      std::fprintf(stderr, "\n");
    }
    m.baseline = median(baselines);
    m.total = median(totals);
    for (const std::string& g : twelve) m.gates.emplace_back(g, median(per_gate[g]));
  } catch (const std::exception& e) {
    m.error = e.what();
  }
  return m;
}

std::string table(const std::vector<Measured>& all, int repeats) {
  std::ostringstream o;
  o << fmt::format("kgate GPU verification cost, in baselines (median of {} repeats; target <= {:.0f})\n", repeats,
                   kTargetBaselines);
  o << fmt::format("{:<14}", "gate");
  for (const Measured& m : all) o << fmt::format(" | {:>9} {:>7} {:<5}", m.name + " s", "x base", "");
  o << "\n";
  const Measured* first = nullptr;
  for (const Measured& m : all)
    if (m.error.empty()) first = first ? first : &m;
  if (!first) {
    for (const Measured& m : all) o << m.name << ": could not run: " << m.error << "\n";
    return o.str();
  }
  auto row = [&](const std::string& gate, auto seconds_of) {
    o << fmt::format("{:<14}", gate);
    for (const Measured& m : all) {
      if (!m.error.empty()) {
        o << fmt::format(" | {:>9} {:>7} {:<5}", "-", "-", "");
        continue;
      }
      const double s = seconds_of(m);
      auto v = m.verdicts.find(gate);
      o << fmt::format(" | {:>9.3f} {:>7.2f} {:<5}", s, m.baseline > 0 ? s / m.baseline : 0.0,
                       v == m.verdicts.end() || v->second == "PASS" ? "" : v->second);
    }
    o << "\n";
  };
  row("baseline", [](const Measured& m) { return m.baseline; });
  for (std::size_t g = 0; g < first->gates.size(); ++g) {
    const std::string name = first->gates[g].first;
    row(name, [&](const Measured& m) {
      for (const auto& [n, s] : m.gates)
        if (n == name) return s;
      return 0.0;
    });
  }
  row("total", [](const Measured& m) { return m.total; });
  for (const Measured& m : all) {
    if (!m.error.empty()) {
      o << fmt::format("{}: could not run: {}\n", m.name, m.error);
      continue;
    }
    const double x = m.baseline > 0 ? m.total / m.baseline : 0.0;
    o << fmt::format("{}: full verification = {:.1f} baselines: target {}\n", m.name, x,
                     x <= kTargetBaselines ? "met" : "NOT met");
  }
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  kgate::keep_large_allocations_in_heap();  // as the kgate command does
  CLI::App app{"Cost of a full kgate verification on the GPU, in baselines"};
  std::string controls_dir = KGATE_CUDA_CONTROLS_BUILD_DIR;  // build/controls/cuda
  std::string contracts_dir = KGATE_GPU_BENCH_CONTRACTS;
  int repeats = 3;
  std::uint64_t seed = 1;
  std::vector<std::string> only;
  std::string report;
  app.add_option("--controls-dir", controls_dir, "the built CUDA controls (build/controls/cuda)");
  app.add_option("--contracts-dir", contracts_dir, "the benchmark contracts (bench/gpu/contracts)");
  app.add_option("--repeats", repeats, "repeats of each measurement (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "run seed (repeat r uses seed + r)");
  app.add_option("--only", only, "workloads to run: add, matmul (default both)")->delimiter(',');
  app.add_option("--report", report, "also write the table to this file");
  CLI11_PARSE(app, argc, argv);

  std::string why;
  if (!kgate::cuda_device_available(&why)) {
    std::printf("SKIP: no GPU here (%s); the GPU benchmark needs one\n", why.c_str());
    return 0;
  }
  const std::vector<Workload> workloads{
      {"add", contracts_dir + "/add_f32_16m.toml", controls_dir + "/lib/cuda_add_f32.so",
       controls_dir + "/lib/cuda_oracle_add.so"},
      {"matmul", contracts_dir + "/matmul_bf16_4096.toml", controls_dir + "/lib/cuda_matmul_bf16_wmma.so",
       controls_dir + "/lib/cuda_oracle_matmul.so"},
  };
  std::vector<Measured> all;
  for (const Workload& w : workloads) {
    if (!only.empty() && std::find(only.begin(), only.end(), w.name) == only.end()) continue;
    all.push_back(measure(w, repeats, seed));
  }
  const std::string t = table(all, repeats);
  std::printf("%s", t.c_str());
  if (!report.empty()) std::ofstream(report) << t;
  for (const Measured& m : all)
    if (!m.error.empty()) return 1;
  return 0;
}
