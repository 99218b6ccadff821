// A non-finite input never leaves its sequence and head (issue 5's spread rule): NaN or Inf planted in one
// element of any input, every output element of another sequence (or batch row) or another head keeps
// exactly the bits of the clean run. Run on the host emulation of the CUDA stages, float and bf16 as on the
// GPU; the GPU test repeats a sample of it on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "case.hpp"

namespace glr::cudatest {
namespace {

// Which (sequence, head) an element of a tensor belongs to.
struct Owner {
  std::int64_t seq = -1;  // -1: every sequence (a per-head gate)
  std::int64_t head = 0;  // a value head, or a query/key head when key_head
  bool key_head = false;
};

std::vector<std::int64_t> token_seq(const Params& p) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(p.B * p.T));
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t t = 0; t < p.T; ++t) {
      std::int64_t n = b;
      if (p.varlen())
        for (n = 0; !(p.cu_seqlens[n] <= t && t < p.cu_seqlens[n + 1]); ++n) {
        }
      s[static_cast<std::size_t>(b * p.T + t)] = n;
    }
  return s;
}

// Owner of flat element i of a row-major tensor named `name`.
Owner owner(const Params& p, const std::vector<std::int64_t>& seq, const std::string& name, std::int64_t i) {
  if (name == "q" || name == "k" || name == "dq" || name == "dk") {
    const std::int64_t row = i / (p.H * p.K), h = (i / p.K) % p.H;
    return {seq[static_cast<std::size_t>(row)], h, true};
  }
  if (name == "v" || name == "o" || name == "dout" || name == "dv") {
    const std::int64_t row = i / (p.HV * p.V), hv = (i / p.V) % p.HV;
    return {seq[static_cast<std::size_t>(row)], hv, false};
  }
  if ((name == "g" || name == "dg") && p.gate == Gate::per_head) return {-1, i, false};
  if (name == "g" || name == "beta" || name == "dg" || name == "dbeta")
    return {seq[static_cast<std::size_t>(i / p.HV)], i % p.HV, false};
  // states [N, HV, K, V]
  return {i / (p.HV * p.K * p.V), (i / (p.K * p.V)) % p.HV, false};
}

// Whether an output element owned by `o` may be touched by a plant owned by `src`.
bool reachable(const Params& p, const Owner& src, const Owner& o) {
  if (src.seq >= 0 && o.seq >= 0 && src.seq != o.seq) return false;
  const std::int64_t g = p.group();
  auto key_of = [&](const Owner& x) { return x.key_head ? x.head : x.head / g; };
  if (src.key_head || o.key_head) return key_of(src) == key_of(o);
  return src.head == o.head;
}

struct Named {
  const char* name;
  std::vector<double>* values;
};

void plant_and_check(const Case& base, bool backward, const char* input, std::mt19937_64& rng, double value) {
  Case c = base;
  std::vector<double>* target = nullptr;
  for (auto [n, v] : {Named{"q", &c.q}, Named{"k", &c.k}, Named{"v", &c.v}, Named{"g", &c.g}, Named{"beta", &c.beta},
                      Named{"h0", &c.h0}, Named{"dout", &c.dout}, Named{"dht", &c.dht}})
    if (std::string(n) == input) target = v;
  if (target == nullptr || target->empty()) return;
  const std::int64_t site = std::uniform_int_distribution<std::int64_t>(0, target->size() - 1)(rng);
  (*target)[static_cast<std::size_t>(site)] = value;
  const Params& p = c.dense;
  const std::vector<std::int64_t> seq = token_seq(p);
  const Owner src = owner(p, seq, input, site);

  auto run = [&](const Case& x) {
    CallTensors t = make_call(x);
    if (backward)
      cuda::emulate_backward<float>(x.call, t.backward());
    else
      cuda::emulate_forward<float>(x.call, t.forward());
    return t;
  };
  const CallTensors clean = run(base), dirty = run(c);
  const std::vector<std::pair<const char*, std::pair<const HostTensor*, const HostTensor*>>> outs =
      backward ? decltype(outs){{"dq", {&clean.dq, &dirty.dq}},       {"dk", {&clean.dk, &dirty.dk}},
                                {"dv", {&clean.dv, &dirty.dv}},       {"dg", {&clean.dg, &dirty.dg}},
                                {"dbeta", {&clean.dbeta, &dirty.dbeta}}, {"dh0", {&clean.dh0, &dirty.dh0}}}
               : decltype(outs){{"o", {&clean.o, &dirty.o}}, {"ht", {&clean.ht, &dirty.ht}}};
  for (const auto& [name, pair] : outs) {
    if (pair.first->empty()) continue;
    const std::vector<double> a = pair.first->read(), b = pair.second->read();
    std::int64_t leaked = 0, first = -1;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (reachable(p, src, owner(p, seq, name, static_cast<std::int64_t>(i)))) continue;
      if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) {
        ++leaked;
        if (first < 0) first = static_cast<std::int64_t>(i);
      }
    }
    EXPECT_EQ(leaked, 0) << value << " in " << input << "[" << site << "] (sequence " << src.seq << ", "
                         << (src.key_head ? "key head " : "value head ") << src.head << ") changed " << leaked
                         << " elements of " << name << " outside them, first [" << first << "]: " << c.describe();
  }
}

TEST(Containment, NonFiniteInputsStayInTheirSequenceAndHead) {
  const std::vector<Shape> shapes = {
      {"packed_empty_H2_HV4", 1, 200, 2, 4, 64, 64, {0, 50, 50, 130, 131, 200}, true},
      {"batch_B3", 3, 70, 1, 2, 64, 64, {}, true},
  };
  std::mt19937_64 rng(test_seed(50));
  for (Member m : kMembers)
    for (const Shape& s : shapes) {
      const Case base = make_case(m, s, {}, {}, test_seed(51));
      for (bool backward : {false, true})
        for (const char* input : {"q", "k", "v", "g", "beta", "h0", "dout", "dht"}) {
          if (!backward && (std::string(input) == "dout" || std::string(input) == "dht")) continue;
          for (double value : {NAN, INFINITY, -INFINITY}) plant_and_check(base, backward, input, rng, value);
        }
    }
}

}  // namespace
}  // namespace glr::cudatest
