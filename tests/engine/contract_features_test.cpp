// Contract features end to end: a spread rule that lets a chunked scan widen NaN to its chunk, integer
// outputs through every gate, and attrs reaching both kernel and oracle.
#include <algorithm>

#include <gtest/gtest.h>

#include "kit.hpp"

namespace kgate::test {
namespace {

// y[b, t] = sum_{s <= t} x[b, s]: the oracle's NaN runs forward from where it was planted.
Contract scan_contract(bool block_rule) {
  Contract c;
  c.name = "scan";
  c.dims = {dim("B", 1, 8, 2), dim("T", 1, 256, 40)};
  c.inputs = {tensor("x", DType::f32, {"B", "T"})};
  c.outputs = {tensor("y", DType::f32, {"B", "T"})};
  c.outputs[0].reduced = {"T"};
  if (block_rule) {
    c.spread.exact = false;
    c.spread.dim = "T";
    c.spread.block = 8;
  }
  return c;
}

std::unique_ptr<Oracle> scan_oracle() {
  return make_function_oracle("scan f64", [](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
    const std::int64_t rows = b.at("B"), n = b.at("T");
    HostArray y(DType::f64, {rows, n});
    for (std::int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::int64_t t = 0; t < n; ++t) y.set(r * n + t, s += in[0].get(r * n + t));
    }
    return std::vector<HostArray>{std::move(y)};
  });
}

// A chunked scan: each chunk of 8 computes its prefix as (chunk total) - (suffix after t), so a NaN
// anywhere in a chunk reaches every position of that chunk, earlier ones included. Within f32 bounds
// otherwise (the subtraction costs a few ulps of the chunk total).
std::int32_t chunked_scan(const kgate_call& c) {
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  for (std::int64_t r = 0; r < rows; ++r) {
    double carry = 0;
    for (std::int64_t c0 = 0; c0 < n; c0 += 8) {
      const std::int64_t c1 = std::min(n, c0 + 8);
      double total = 0;
      for (std::int64_t t = c0; t < c1; ++t) total += load2(in(c, 0), r, t);
      double suffix = 0;
      for (std::int64_t t = c1; t-- > c0;) {
        store2(out(c, 0), r, t, static_cast<float>(carry + total - suffix));
        suffix += load2(in(c, 0), r, t);
      }
      carry += total;
    }
  }
  return KGATE_OK;
}

// The same, but a NaN anywhere poisons the next row too.
std::int32_t leaky_scan(const kgate_call& c) {
  chunked_scan(c);
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  for (std::int64_t r = 0; r + 1 < rows; ++r) {
    bool nan = false;
    for (std::int64_t t = 0; t < n; ++t) nan = nan || std::isnan(load2(in(c, 0), r, t));
    if (nan) store2(out(c, 0), r + 1, 0, NAN);
  }
  return KGATE_OK;
}

Report run_scan(bool block_rule, EntryFn k, std::vector<std::string> gates) {
  const Subject s{scan_contract(block_rule), scan_oracle()};
  return run(s, std::move(k), 31, std::move(gates));
}

TEST(SpreadRule, AChunkWideNanIsAllowedOnlyWhereTheContractSaysSo) {
  EXPECT_EQ(run_scan(true, chunked_scan, {"nan", "oracle"}).exit_code(), 0);
  const Report exact = run_scan(false, chunked_scan, {"nan"});
  ASSERT_EQ(exact.gates[0].verdict, Verdict::fail) << exact.gates[0].summary;
  EXPECT_NE(exact.gates[0].evidence->detail.find("past the oracle's spread"), std::string::npos);
  const Report leak = run_scan(true, leaky_scan, {"nan"});
  ASSERT_EQ(leak.gates[0].verdict, Verdict::fail) << "nothing spreads across lines";
  EXPECT_EQ(leak.gates[0].evidence->index.back(), 0);
}

// Row argmax: an integer output, no float output at all.
Contract argmax_contract() {
  Contract c;
  c.name = "argmax";
  c.dims = {dim("R", 1, 32, 5), dim("N", 1, 300, 24)};
  c.inputs = {tensor("x", DType::f32, {"R", "N"})};
  c.outputs = {tensor("i", DType::i64, {"R"})};
  return c;
}

std::unique_ptr<Oracle> argmax_oracle() {
  return make_function_oracle("argmax f64", [](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
    const std::int64_t rows = b.at("R"), n = b.at("N");
    HostArray idx(DType::i64, {rows});
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < n; ++j)
        if (in[0].get(r * n + j) > in[0].get(r * n + best)) best = j;
      idx.set(r, static_cast<double>(best));
    }
    return std::vector<HostArray>{std::move(idx)};
  });
}

std::int32_t argmax_kernel(const kgate_call& c) {
  const std::int64_t rows = in(c, 0).shape[0], n = in(c, 0).shape[1];
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < n; ++j)
      if (static_cast<float>(load2(in(c, 0), r, j)) > static_cast<float>(load2(in(c, 0), r, best))) best = j;
    store(out(c, 0), r, static_cast<double>(best));
  }
  return KGATE_OK;
}

TEST(IntegerOutputs, ACorrectArgmaxPassesAndAnOffByOneFails) {
  const Subject s{argmax_contract(), argmax_oracle()};
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const Report r = run(s, argmax_kernel, seed);
    for (const GateResult& g : r.gates) {
      const bool skips = g.gate == "nan" || g.gate == "inf" || g.gate == "accumulation";
      if (concurrency_unexercised(g)) continue;  // calls of microseconds on a loaded machine
      EXPECT_EQ(g.verdict, skips ? Verdict::skip : Verdict::pass) << g.gate << ": " << g.summary;
    }
  }
  const Report bad = run(s, [](const kgate_call& c) {
    argmax_kernel(c);
    store(out(c, 0), 0, load(out(c, 0), 0) + 1);
    return KGATE_OK;
  }, 1, {"oracle"});
  ASSERT_EQ(bad.gates[0].verdict, Verdict::fail);
  EXPECT_TRUE(std::isinf(bad.gates[0].error_ratio)) << "integers are exact: any difference is unbounded";
}

TEST(Attrs, ReachTheKernelAndTheOracleByName) {
  Contract c = elementwise_contract();
  c.attrs = {{"alpha", 2.5}};
  auto oracle = make_function_oracle("alpha", [](const std::vector<HostArray>& in, const Bindings&, const Attrs& a) {
    HostArray z(DType::f64, in[0].shape());
    for (std::int64_t i = 0; i < z.numel(); ++i) z.set(i, a.at(0).second * in[0].get(i));
    return std::vector<HostArray>{std::move(z)};
  });
  const Subject s{c, std::move(oracle)};
  auto scaled = [](const kgate_call& k) -> std::int32_t {
    if (k.n_attrs != 1 || std::string(k.attrs[0].name) != "alpha") return KGATE_ERROR;
    for (std::int64_t i = 0; i < count(in(k, 0)); ++i)
      store(out(k, 0), i, static_cast<float>(k.attrs[0].value) * static_cast<float>(load(in(k, 0), i)));
    return KGATE_OK;
  };
  EXPECT_EQ(run(s, scaled, 6, {"oracle", "shapes", "layout"}).exit_code(), 0);
  auto ignores = [](const kgate_call& k) -> std::int32_t {
    for (std::int64_t i = 0; i < count(in(k, 0)); ++i) store(out(k, 0), i, 2.0f * static_cast<float>(load(in(k, 0), i)));
    return KGATE_OK;
  };
  EXPECT_EQ(run(s, ignores, 6, {"oracle"}).gates[0].verdict, Verdict::fail);
}

}  // namespace
}  // namespace kgate::test
