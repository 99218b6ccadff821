// What isolation costs per call: round trips through a worker process next to the same calls on an
// in-process target, median of many repeats. Two workloads: an empty call (one element in, one out), and
// the round trip every gate case makes on a 1M-element f32 tensor (4 MB write + call + 4 MB read).
// Measures and prints; never fails on a timing.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kgate/matrix.hpp"
#include "kgate/targets.hpp"

namespace {

using kgate::BufferId;
using kgate::DType;
using kgate::Layout;

double median_us(int repeats, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Costs {
  double empty_call, write_4mb, call_1m, read_4mb, round_trip_4mb, write_64mb;
};

// silu over n f32 elements, dense: the control's own kernel, so the call itself costs the same on both.
Costs measure(kgate::Target& t, int repeats) {
  Costs c{};
  auto call_on = [&](std::int64_t n, BufferId in, BufferId out) {
    kgate::CallRequest req;
    req.invocations.push_back({{{in, Layout::dense(DType::f32, {n})}}, {{out, Layout::dense(DType::f32, {n})}}, {}});
    const kgate::CallResult r = t.call(req);
    if (r.outcome != kgate::CallOutcome::completed || r.results[0].status != KGATE_OK)
      throw std::runtime_error("the control's call did not complete: " + r.detail);
  };
  {
    const BufferId in = t.alloc(4), out = t.alloc(4);
    const std::vector<std::byte> one(4);
    t.write(in, 0, one);
    c.empty_call = median_us(repeats, [&] { call_on(1, in, out); });
  }
  {
    const std::int64_t n = 1 << 20;
    std::vector<float> x(n);
    for (std::int64_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i));
    const auto bytes = std::as_bytes(std::span(x));
    const BufferId in = t.alloc(bytes.size()), out = t.alloc(bytes.size());
    c.write_4mb = median_us(repeats, [&] { t.write(in, 0, bytes); });
    c.call_1m = median_us(repeats, [&] { call_on(n, in, out); });
    c.read_4mb = median_us(repeats, [&] { (void)t.read(out, 0, bytes.size()); });
    c.round_trip_4mb = median_us(repeats, [&] {
      t.write(in, 0, bytes);
      call_on(n, in, out);
      (void)t.read(out, 0, bytes.size());
    });
    std::vector<std::byte> big(std::size_t(64) << 20, std::byte{1});
    const BufferId b = t.alloc(big.size());
    c.write_64mb = median_us(std::max(3, repeats / 10), [&] { t.write(b, 0, big); });
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-call overhead of the worker process against an in-process target"};
  int repeats = 200;
  std::string controls_dir = std::filesystem::path(kgate::default_manifest_path()).parent_path().string();
  app.add_option("--repeats", repeats, "repeats per measurement (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--controls-dir", controls_dir, "the built controls (build/controls)");
  bool keep_mmap = false;
  app.add_flag("--glibc-default-malloc", keep_mmap, "leave glibc's mmap threshold alone in this process");
  CLI11_PARSE(app, argc, argv);
  if (!keep_mmap) {  // as the kgate command does (tools/kgate.cpp): large arrays stay in the heap
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }

  const kgate::EntrySpec spec = kgate::parse_entry(controls_dir + "/lib/ctl_silu_f32.so", "kgate_run");
  kgate::LoadedEntry loaded = kgate::load_entry(spec);  // the same kernel, called directly, for the in-process side
  auto inproc = kgate::make_inprocess_target("ctl_silu_f32", [&](const kgate_call& c) { return loaded.entry(&c); });
  auto worker = kgate::make_worker_target(spec, {});

  const Costs w = measure(*worker, repeats), p = measure(*inproc, repeats);
  std::printf("%-34s %12s %12s %12s\n", "median of repeats (us)", "worker", "in-process", "overhead");
  auto row = [](const char* what, double a, double b) { std::printf("%-34s %12.1f %12.1f %12.1f\n", what, a, b, a - b); };
  row("empty call (1 element)", w.empty_call, p.empty_call);
  row("4 MB write", w.write_4mb, p.write_4mb);
  row("call on 1M elements (outputs back)", w.call_1m, p.call_1m);
  row("4 MB read", w.read_4mb, p.read_4mb);
  row("4 MB write + call + 4 MB read", w.round_trip_4mb, p.round_trip_4mb);
  row("64 MB write", w.write_64mb, p.write_64mb);
  return 0;
}
