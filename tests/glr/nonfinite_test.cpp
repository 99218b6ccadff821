// Where a NaN or Inf planted in one input may show up: the chunked algorithm against the oracle, with the
// rules docs/glr-math.md section 7 derives and glr/contracts/*.toml declare to kgate ([nonfinite]).
//
//   Never masked (every output): an element the oracle makes non-finite is non-finite, and a NaN stays NaN
//   when NaN was planted.
//   kgate's line rule: an element the oracle keeps finite may be non-finite only in an output with a T axis,
//   in a line (all indices but t fixed) where the oracle has a non-finite element of the same sequence;
//   forward outputs only from that element's chunk on (direction "forward"), backward outputs anywhere in
//   the sequence (direction "both"). Outputs without a T axis (ht, dh0, a per-head dg) follow the oracle
//   exactly.
//   Anchored at the planted element (backward): extra non-finite elements only in the planted element's
//   sequence (every sequence for a per-head gate) and its value heads (for dq, dk: their query/key head).
//
// Either way nothing crosses into another sequence, another head or another batch row. The chunked
// backward meets the line rule only because it never forms a sum that cancels exactly (the diagonal of
// the intra-chunk term, the last token's state term) and never lets the chunk's first gate into a decay
// between two of its tokens (Decay::Gr): each of those would carry a NaN into a line the exact backward
// keeps finite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "problem.hpp"

namespace glr::test {
namespace {

// Sites per input and value; GLR_NONFINITE_TRIALS raises it for a longer hunt.
int trials() {
  const char* env = std::getenv("GLR_NONFINITE_TRIALS");
  return env ? std::atoi(env) : 3;
}

// Which sequence each token belongs to, and its chunk inside that sequence.
struct TokenMap {
  std::vector<std::int64_t> seq, block;
  TokenMap(const Params& p) : seq(static_cast<std::size_t>(p.B * p.T)), block(seq.size()) {
    for (const Sequence& s : make_chunk_plan(p).sequences)
      for (std::int64_t i = 0; i < s.length; ++i) {
        const std::size_t at = static_cast<std::size_t>(s.batch * p.T + s.begin + i);
        seq[at] = s.index;
        block[at] = i / p.chunk;
      }
  }
};

// One output's elements as the rules see them: (sequence, token or -1, head, head kind) per flat index.
enum class Heads { qk, value };
struct Element {
  std::int64_t seq, t, head;
};
struct OutputMap {
  const char* name;
  Heads heads;
  bool has_t;
  std::vector<Element> at;
};

OutputMap token_output(const char* name, const Params& p, const TokenMap& tm, Heads heads, std::int64_t n_heads,
                       std::int64_t dim) {
  OutputMap m{name, heads, true, {}};
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t t = 0; t < p.T; ++t)
      for (std::int64_t h = 0; h < n_heads; ++h)
        for (std::int64_t d = 0; d < dim; ++d) m.at.push_back({tm.seq[static_cast<std::size_t>(b * p.T + t)], b * p.T + t, h});
  return m;
}
OutputMap state_output(const char* name, const Params& p) {
  OutputMap m{name, Heads::value, false, {}};
  for (std::int64_t n = 0; n < p.num_seqs(); ++n)
    for (std::int64_t hv = 0; hv < p.HV; ++hv)
      for (std::int64_t x = 0; x < p.K * p.V; ++x) m.at.push_back({n, -1, hv});
  return m;
}
OutputMap head_output(const char* name, const Params& p) {
  OutputMap m{name, Heads::value, false, {}};
  for (std::int64_t hv = 0; hv < p.HV; ++hv) m.at.push_back({-1, -1, hv});
  return m;
}

// Where the planted element sits: its sequence (-1: all), token (-1: none) and value heads.
struct Planted {
  std::int64_t seq = -1, t = -1;
  std::set<std::int64_t> value_heads;
};

std::string masked(const OutputMap& m, const std::vector<double>& got, const std::vector<double>& ref, bool nan) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) && std::isfinite(got[i]))
      return std::string(m.name) + ": oracle non-finite, got finite " + std::to_string(got[i]) + " at flat " + std::to_string(i);
    if (nan && std::isnan(ref[i]) && !std::isnan(got[i]))
      return std::string(m.name) + ": NaN became " + std::to_string(got[i]) + " at flat " + std::to_string(i);
  }
  return "";
}

// The forward rule, exactly as kgate applies it: per line, from the chunk of the line's first oracle
// non-finite element (in that sequence) onward.
std::string forward_rule(const OutputMap& m, const Params& p, const TokenMap& tm, const std::vector<double>& got,
                         const std::vector<double>& ref) {
  if (!m.has_t) {
    for (std::size_t i = 0; i < ref.size(); ++i)
      if (std::isfinite(ref[i]) && !std::isfinite(got[i])) return std::string(m.name) + ": must follow the oracle exactly";
    return "";
  }
  const std::size_t line = ref.size() / static_cast<std::size_t>(p.B * p.T);  // elements per token
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isfinite(got[i]) || !std::isfinite(ref[i])) continue;
    const std::size_t tok = i / line, within = i % line;
    bool ok = false;
    for (std::size_t u = 0; u < static_cast<std::size_t>(p.B * p.T); ++u)
      if (tm.seq[u] == tm.seq[tok] && !std::isfinite(ref[u * line + within]) && tm.block[u] <= tm.block[tok]) ok = true;
    if (!ok) return std::string(m.name) + ": non-finite outside the forward spread at token " + std::to_string(tok);
  }
  return "";
}

// kgate's line rule with direction "both": a line may go non-finite anywhere in a sequence where the
// oracle has a non-finite element of that line.
std::string line_rule_both(const OutputMap& m, const Params& p, const TokenMap& tm, const std::vector<double>& got,
                           const std::vector<double>& ref) {
  if (!m.has_t) {
    for (std::size_t i = 0; i < ref.size(); ++i)
      if (std::isfinite(ref[i]) && !std::isfinite(got[i])) return std::string(m.name) + ": must follow the oracle exactly";
    return "";
  }
  const std::size_t line = ref.size() / static_cast<std::size_t>(p.B * p.T);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isfinite(got[i]) || !std::isfinite(ref[i])) continue;
    const std::size_t tok = i / line, within = i % line;
    bool ok = false;
    for (std::size_t u = 0; u < static_cast<std::size_t>(p.B * p.T); ++u)
      if (tm.seq[u] == tm.seq[tok] && !std::isfinite(ref[u * line + within])) ok = true;
    if (!ok) return std::string(m.name) + ": non-finite outside kgate's line rule (both) at token " + std::to_string(tok);
  }
  return "";
}

// The backward rule: same sequence, same value heads (or their query/key head) as the planted element.
std::string backward_rule(const OutputMap& m, const Params& p, const Planted& pl, const std::vector<double>& got,
                          const std::vector<double>& ref) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isfinite(got[i]) || !std::isfinite(ref[i])) continue;
    const Element& e = m.at[i];
    bool head_ok = false;
    for (std::int64_t hv : pl.value_heads) head_ok |= (m.heads == Heads::value ? hv : p.qk_head(hv)) == e.head;
    // A per-head dg (seq -1) sums over every sequence of its head, so it may take the NaN of any of them.
    const bool seq_ok = pl.seq < 0 || e.seq < 0 || e.seq == pl.seq;
    const bool exact = !m.has_t && e.seq >= 0;  // dh0: exactly the oracle's set
    if (exact || !head_ok || !seq_ok)
      return std::string(m.name) + ": non-finite outside the backward spread at flat " + std::to_string(i) +
             " (sequence " + std::to_string(e.seq) + ", head " + std::to_string(e.head) + ")";
  }
  return "";
}

// What to plant in: the input, its layout kind, and how to locate a flat index in it.
enum class Kind { qk, value_tokens, value_scalars, state, per_head };
struct Site {
  const char* input;
  std::vector<double> Problem::*member;
  Kind kind;
};

Planted locate(const Params& p, const TokenMap& tm, Kind kind, std::size_t flat) {
  Planted pl;
  auto token = [&](std::int64_t per_token) {
    const std::int64_t bt = static_cast<std::int64_t>(flat) / per_token;
    pl.t = bt;
    pl.seq = tm.seq[static_cast<std::size_t>(bt)];
    return static_cast<std::int64_t>(flat) % per_token;
  };
  switch (kind) {
    case Kind::qk: {
      const std::int64_t h = token(p.H * p.K) / p.K;
      for (std::int64_t hv = h * p.group(); hv < (h + 1) * p.group(); ++hv) pl.value_heads.insert(hv);
      break;
    }
    case Kind::value_tokens: pl.value_heads.insert(token(p.HV * p.V) / p.V); break;
    case Kind::value_scalars: pl.value_heads.insert(token(p.HV)); break;
    case Kind::state:
      pl.seq = static_cast<std::int64_t>(flat) / (p.HV * p.K * p.V);
      pl.value_heads.insert(static_cast<std::int64_t>(flat) / (p.K * p.V) % p.HV);
      break;
    case Kind::per_head: pl.value_heads.insert(static_cast<std::int64_t>(flat)); break;  // every sequence
  }
  return pl;
}

class NonfiniteSpread : public testing::TestWithParam<Member> {};

TEST_P(NonfiniteSpread, StaysWithinTheDerivedRules) {
  const Member m = GetParam();
  // Packed sequences (one empty), grouped value heads, chunks of 4 so every sequence has several.
  const Params p = make_params(m, 1, 30, 2, 4, 4, 3, {0, 11, 11, 19, 30}, true, true, 4);
  const Problem base = random_problem(p, test_seed(300 + static_cast<std::uint64_t>(m)));
  const TokenMap tm(p);
  std::vector<Site> sites = {{"q", &Problem::q, Kind::qk},          {"k", &Problem::k, Kind::qk},
                             {"v", &Problem::v, Kind::value_tokens}, {"h0", &Problem::h0, Kind::state},
                             {"dout", &Problem::dout, Kind::value_tokens}, {"dht", &Problem::dht, Kind::state}};
  if (p.gate == Gate::per_token) sites.push_back({"g", &Problem::g, Kind::value_scalars});
  if (p.gate == Gate::per_head) sites.push_back({"g", &Problem::g, Kind::per_head});
  if (p.delta) sites.push_back({"beta", &Problem::beta, Kind::value_scalars});
  const OutputMap o = token_output("o", p, tm, Heads::value, p.HV, p.V), ht = state_output("ht", p);
  const OutputMap dq = token_output("dq", p, tm, Heads::qk, p.H, p.K), dk = token_output("dk", p, tm, Heads::qk, p.H, p.K);
  const OutputMap dv = token_output("dv", p, tm, Heads::value, p.HV, p.V), dh0 = state_output("dh0", p);
  const OutputMap dscalar = token_output("dbeta", p, tm, Heads::value, p.HV, 1);
  const OutputMap dg = p.gate == Gate::per_head ? head_output("dg", p) : token_output("dg", p, tm, Heads::value, p.HV, 1);

  std::mt19937_64 rng(base.seed);
  for (const Site& s : sites)
    for (double value : {double(NAN), double(INFINITY), -double(INFINITY)})
      for (int trial = 0; trial < trials(); ++trial) {
        Problem pr = base;
        std::vector<double>& x = pr.*s.member;
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, x.size() - 1)(rng);
        x[at] = value;
        const Planted pl = locate(p, tm, s.kind, at);
        const std::string where = std::string(s.input) + "[" + std::to_string(at) + "] = " + std::to_string(value) +
                                  " " + describe(pr);
        const bool nan = std::isnan(value);
        const Outputs ro = oracle_forward(pr), co = chunked_forward<double>(pr);
        const Grads rg = oracle_backward(pr), cg = chunked_backward<double>(pr);
        std::vector<std::string> errors = {masked(o, co.o, ro.o, nan), masked(ht, co.ht, ro.ht, nan),
                                           forward_rule(o, p, tm, co.o, ro.o), forward_rule(ht, p, tm, co.ht, ro.ht)};
        const std::pair<const OutputMap*, std::pair<const std::vector<double>*, const std::vector<double>*>> grads[] = {
            {&dq, {&cg.dq, &rg.dq}}, {&dk, {&cg.dk, &rg.dk}}, {&dv, {&cg.dv, &rg.dv}},
            {&dg, {&cg.dg, &rg.dg}}, {&dscalar, {&cg.dbeta, &rg.dbeta}}, {&dh0, {&cg.dh0, &rg.dh0}}};
        for (const auto& [map, pair] : grads) {
          if (pair.second->empty()) continue;
          errors.push_back(masked(*map, *pair.first, *pair.second, nan));
          errors.push_back(backward_rule(*map, p, pl, *pair.first, *pair.second));
          errors.push_back(line_rule_both(*map, p, tm, *pair.first, *pair.second));
        }
        for (const std::string& e : errors) EXPECT_EQ(e, "") << where;
      }
}

INSTANTIATE_TEST_SUITE_P(Glr, NonfiniteSpread,
                         testing::Values(Member::gated_deltanet, Member::deltanet, Member::mamba2, Member::retnet,
                                         Member::linear_attention),
                         [](const testing::TestParamInfo<Member>& i) { return std::string(name_of(i.param)); });

}  // namespace
}  // namespace glr::test
