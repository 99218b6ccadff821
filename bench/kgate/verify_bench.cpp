// How much a full verification costs, in units of the field's standard test.
//
// Verifies the correct elementwise control (silu_f32) at one million elements with all twelve gates, and
// runs `baseline` (five allclose trials at the one nominal shape) alone in the same process against the
// same worker. Prints the median over several repeats of each gate's time and of the total, each as a
// multiple of one baseline check. The target is a total of at most 30 baselines; this program reports
// whether it is met and never fails on a timing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <map>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kgate/contract.hpp"
#include "kgate/matrix.hpp"
#include "kgate/oracle.hpp"
#include "kgate/targets.hpp"
#include "kgate/verify.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  kgate::keep_large_allocations_in_heap();  // as the kgate command does
  CLI::App app{"Cost of a full kgate verification, in baselines (median of repeats)"};
  std::int64_t elements = 1 << 20;
  int repeats = 5;
  std::uint64_t seed = 1;
  std::string controls_dir = std::filesystem::path(kgate::default_manifest_path()).parent_path().string();
  app.add_option("--elements", elements, "N of the silu_f32 control")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "repeats of each measurement (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "run seed (repeat r uses seed + r)");
  app.add_option("--controls-dir", controls_dir, "the built controls (build/controls)");
  CLI11_PARSE(app, argc, argv);

  kgate::Contract contract = kgate::load_contract(controls_dir + "/cpu/contracts/silu_f32.toml");
  for (kgate::DimSpec& d : contract.dims) {
    if (d.name != "N") continue;
    d.nominal = elements;
    d.max = std::max(d.max, elements);
    d.large = elements;
  }
  kgate::TargetOptions to;
  to.timeout_seconds = 120.0;
  auto candidate = kgate::make_worker_target(kgate::parse_entry(controls_dir + "/lib/ctl_silu_f32.so", "kgate_run"), to);
  auto oracle = kgate::make_target_oracle(
      kgate::make_worker_target(kgate::parse_entry(controls_dir + "/lib/oracle_silu.so", "kgate_oracle"), to), contract);

  std::vector<std::string> twelve;
  for (const kgate::GateInfo& g : kgate::list_gates())
    if (!g.is_baseline) twelve.push_back(g.name);

  std::vector<double> baseline;
  std::map<std::string, std::vector<double>> per_gate;
  std::map<std::string, std::string> verdicts;
  std::vector<double> totals, walls;
  for (int r = 0; r < repeats; ++r) {
    kgate::VerifyOptions vo;
    vo.seed = seed + static_cast<std::uint64_t>(r);
    vo.gates = {"baseline"};
    const kgate::Report b = kgate::verify(contract, *candidate, *oracle, vo);
    baseline.push_back(b.gates.at(0).seconds);

    vo.gates = twelve;
    const auto t0 = std::chrono::steady_clock::now();
    const kgate::Report full = kgate::verify(contract, *candidate, *oracle, vo);
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    double total = 0.0;
    for (const kgate::GateResult& g : full.gates) {
      per_gate[g.gate].push_back(g.seconds);
      total += g.seconds;
      std::string& v = verdicts[g.gate];
      if (v.empty() || g.verdict != kgate::Verdict::pass) v = kgate::to_string(g.verdict);
    }
    totals.push_back(total);
  }

  const double base = median(baseline);
  double load[1] = {0.0};
  getloadavg(load, 1);
  std::printf("kgate verification cost: silu_f32 at N = %lld, %d repeats (medians), seeds %llu..%llu\n",
              static_cast<long long>(elements), repeats, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed + repeats - 1));
  std::printf("machine: %u hardware threads, load average %.1f at the end\n", std::thread::hardware_concurrency(), load[0]);
  std::printf("baseline (one check, 5 trials at the nominal shape): %.4f s\n\n", base);
  std::printf("%-14s %10s %12s  %s\n", "gate", "seconds", "x baseline", "verdict");
  for (const std::string& g : twelve) {
    const double s = median(per_gate[g]);
    std::printf("%-14s %10.4f %12.2f  %s\n", g.c_str(), s, s / base, verdicts[g].c_str());
  }
  const double total = median(totals);
  std::printf("%-14s %10.4f %12.2f\n", "total", total, total / base);
  const double wall = median(walls);
  std::printf("%-14s %10.4f %12.2f  (verify() end to end, gates plus what runs between them)\n\n", "wall", wall, wall / base);
  std::printf("target: the whole verification costs at most 30 baselines: %s (%.1f)\n", total / base <= 30.0 ? "met" : "NOT met",
              total / base);
  return 0;
}
