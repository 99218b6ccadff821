#include "kit.hpp"

#include <fmt/format.h>

namespace kgate::test {

DimSpec dim(const std::string& name, std::int64_t min, std::int64_t max, std::int64_t nominal, std::int64_t multiple_of) {
  DimSpec d;
  d.name = name;
  d.min = min;
  d.max = max;
  d.nominal = nominal;
  d.multiple_of = multiple_of;
  return d;
}

TensorSpec tensor(const std::string& name, DType t, std::vector<std::string> shape) {
  TensorSpec s;
  s.name = name;
  s.dtype = t;
  s.shape = std::move(shape);
  return s;
}

Contract elementwise_contract() {
  Contract c;
  c.name = "relu_mul";
  c.dims = {dim("M", 1, 64, 4), dim("N", 1, 512, 48)};
  c.inputs = {tensor("x", DType::f32, {"M", "N"}), tensor("y", DType::f32, {"M", "N"})};
  for (TensorSpec& t : c.inputs) t.strided = true;
  c.outputs = {tensor("z", DType::f32, {"M", "N"})};
  return c;
}

Contract softmax_contract() {
  Contract c;
  c.name = "softmax";
  c.working_precision = DType::f32;
  c.dims = {dim("R", 1, 64, 4), dim("N", 1, 2048, 40)};
  c.inputs = {tensor("x", DType::bf16, {"R", "N"})};
  c.inputs[0].domain.b = 2.0;  // normal, std 2: logits with some spread
  c.outputs = {tensor("y", DType::bf16, {"R", "N"})};
  c.outputs[0].reduced = {"N"};
  return c;
}

Contract matmul_contract() {
  Contract c;
  c.name = "matmul";
  c.working_precision = DType::f32;
  c.dims = {dim("M", 1, 48, 6), dim("K", 1, 4096, 24), dim("N", 1, 48, 10)};
  c.inputs = {tensor("a", DType::f16, {"M", "K"}), tensor("b", DType::f16, {"K", "N"})};
  c.inputs[1].strided = true;
  c.outputs = {tensor("c", DType::f32, {"M", "N"})};
  c.outputs[0].reduced = {"K"};
  return c;
}

namespace {

double relu64(double x) { return x > 0 || std::isnan(x) ? x : 0.0; }

}  // namespace

std::unique_ptr<Oracle> elementwise_oracle() {
  return make_function_oracle("relu_mul f64", [](const std::vector<HostArray>& in, const Bindings&, const Attrs&) {
    HostArray z(DType::f64, in[0].shape());
    for (std::int64_t i = 0; i < z.numel(); ++i) z.set(i, relu64(in[0].get(i)) * in[1].get(i));
    return std::vector<HostArray>{std::move(z)};
  });
}

std::unique_ptr<Oracle> softmax_oracle() {
  return make_function_oracle("softmax f64", [](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
    const std::int64_t rows = b.at("R"), n = b.at("N");
    HostArray y(DType::f64, in[0].shape());
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY;
      for (std::int64_t j = 0; j < n; ++j) {
        const double x = in[0].get(r * n + j);
        if (std::isnan(x) || x > m) m = std::isnan(m) ? m : x;
      }
      double s = 0;
      for (std::int64_t j = 0; j < n; ++j) s += std::exp(in[0].get(r * n + j) - m);
      for (std::int64_t j = 0; j < n; ++j) y.set(r * n + j, std::exp(in[0].get(r * n + j) - m) / s);
    }
    return std::vector<HostArray>{std::move(y)};
  });
}

std::unique_ptr<Oracle> matmul_oracle() {
  return make_function_oracle("matmul f64", [](const std::vector<HostArray>& in, const Bindings& b, const Attrs&) {
    const std::int64_t m = b.at("M"), k = b.at("K"), n = b.at("N");
    const std::vector<double> a = in[0].to_f64(), bb = in[1].to_f64();
    HostArray c(DType::f64, {m, n});
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p) s += a[static_cast<std::size_t>(i * k + p)] * bb[static_cast<std::size_t>(p * n + j)];
        c.set(i * n + j, s);
      }
    return std::vector<HostArray>{std::move(c)};
  });
}

std::int32_t elementwise_kernel(const kgate_call& c) {
  const std::int64_t n = count(in(c, 0));
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(load(in(c, 0), i)), y = static_cast<float>(load(in(c, 1), i));
    store(out(c, 0), i, relu(x) * y);
  }
  return KGATE_OK;
}

std::int32_t softmax_kernel(const kgate_call& c) {
  const DLTensor& x = in(c, 0);
  const std::int64_t rows = x.shape[0], n = x.shape[1];
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (std::int64_t j = 0; j < n; ++j) {
      const float v = static_cast<float>(load2(x, r, j));
      row[static_cast<std::size_t>(j)] = v;
      if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
    }
    float s = 0;
    for (float& v : row) s += (v = std::exp(v - m));
    for (std::int64_t j = 0; j < n; ++j) store2(out(c, 0), r, j, row[static_cast<std::size_t>(j)] / s);
  }
  return KGATE_OK;
}

std::int32_t matmul_kernel(const kgate_call& c) {
  const DLTensor &a = in(c, 0), &b = in(c, 1);
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc += static_cast<float>(load2(a, i, p)) * static_cast<float>(load2(b, p, j));
      store2(out(c, 0), i, j, acc);
    }
  return KGATE_OK;
}

Subject elementwise() { return {elementwise_contract(), elementwise_oracle()}; }
Subject softmax() { return {softmax_contract(), softmax_oracle()}; }
Subject matmul() { return {matmul_contract(), matmul_oracle()}; }

Report run(const Subject& s, EntryFn kernel, std::uint64_t seed, std::vector<std::string> gates, bool shrink) {
  auto target = make_inprocess_target(s.contract.name, std::move(kernel));
  VerifyOptions o;
  o.seed = seed;
  o.gates = std::move(gates);
  o.shrink = shrink;
  return verify(s.contract, *target, *s.oracle, o);
}

const GateResult* find(const Report& r, const std::string& gate) {
  for (const GateResult& g : r.gates)
    if (g.gate == gate) return &g;
  return nullptr;
}

std::string verdicts(const Report& r) {
  std::string s;
  for (const GateResult& g : r.gates) s += fmt::format("{}={} ", g.gate, to_string(g.verdict));
  for (const GateResult& g : r.gates)
    if (g.verdict != Verdict::pass) s += fmt::format("\n  {}: {}", g.gate, g.summary);
  return s;
}

bool concurrency_unexercised(const GateResult& g) {
  return g.gate == "stream" && g.verdict == Verdict::skip &&
         g.summary.find("concurrency not exercised") != std::string::npos;
}

std::vector<std::string> failing(const Report& r) {
  std::vector<std::string> out;
  for (const GateResult& g : r.gates)
    if (g.gate != "baseline" && (g.verdict == Verdict::fail || g.verdict == Verdict::crash || g.verdict == Verdict::timeout))
      out.push_back(g.gate);
  return out;
}

}  // namespace kgate::test
