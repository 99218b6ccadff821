// The chunked algorithm in float, and in float with bf16-stored intermediates, against the float64 oracle,
// with error bounds derived in docs/glr-math.md section 6 (normwise relative error per tensor, u = unit
// roundoff):
//
//   float:  err <= 4 err(recurrence in float) + 4 u_f32 sqrt(C) (1 + Gmax)
//     The first term is the error the same-precision plain recurrence makes on the same inputs: it prices
//     the conditioning of the problem and reordered sums, times a safety factor of 4. The second is the one
//     error source the chunked form adds: decays formed as exp(G_i - G_j) from in-chunk cumulative sums,
//     whose rounding grows like u sqrt(C) |G| (Gmax: the largest |G| at any chunk's end), doubled for the
//     two ends and again for safety.
//   bf16 storage:  err <= 4 u_bf16 = 2^-6
//     Each stored tensor carries a relative rounding of at most u_bf16 = 2^-8; an output sees a few of them
//     in sequence (A, W or U, S_start, V_new; the backward a few more), which the factor 4 covers on these
//     shapes (T <= 256).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "problem.hpp"

namespace glr::test {
namespace {

constexpr double kF32 = 0x1p-24;   // unit roundoff of float
constexpr double kBf16 = 0x1p-8;   // unit roundoff of bfloat16

struct Case {
  Member member;
  const char* name;
  std::int64_t B, T, H, HV, K, V;
  std::vector<std::int64_t> cu_seqlens;
  std::int64_t chunk;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Member m : {Member::gated_deltanet, Member::deltanet, Member::mamba2, Member::retnet,
                   Member::linear_attention}) {
    out.push_back({m, "small", 2, 37, 2, 2, 16, 8, {}, 16});
    out.push_back({m, "gva_chunk64", 1, 256, 1, 2, 64, 64, {}, 64});
    out.push_back({m, "varlen", 1, 150, 1, 1, 32, 32, {0, 63, 63, 150}, 64});
  }
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(name_of(info.param.member)) + "_" + info.param.name;
}

Problem make_problem(const Case& c) {
  const Params p = make_params(c.member, c.B, c.T, c.H, c.HV, c.K, c.V, c.cu_seqlens, true, true, c.chunk);
  return random_problem(p, test_seed(200 + static_cast<std::uint64_t>(c.member)));
}

// The largest |G| at the end of any chunk: the log-decay magnitude the cumulative sums reach.
double max_chunk_log_decay(const Problem& pr) {
  const ChunkPlan plan = make_chunk_plan(pr.p);
  double worst = 0;
  if (pr.p.gate == Gate::none) return 0;
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < pr.p.HV; ++hv) {
      double G = 0;
      for (std::int64_t t = c.begin; t < c.begin + c.length; ++t)
        G += pr.p.gate == Gate::per_head ? pr.g[hv] : pr.g[(c.batch * pr.p.T + t) * pr.p.HV + hv];
      worst = std::max(worst, std::fabs(G));
    }
  return worst;
}

struct Named {
  const char* name;
  const std::vector<double>* got;
  const std::vector<double>* plain;  // the float recurrence's result
  const std::vector<double>* ref;
};

class ChunkedPrecision : public testing::TestWithParam<Case> {};

TEST_P(ChunkedPrecision, FloatWithinDerivedBound) {
  const Problem pr = make_problem(GetParam());
  const double decay_term = 4 * kF32 * std::sqrt(static_cast<double>(pr.p.chunk)) * (1 + max_chunk_log_decay(pr));
  const Outputs ref = oracle_forward(pr), got = chunked_forward<float>(pr), plain = recurrent_forward_f32(pr);
  const Grads gref = oracle_backward(pr), ggot = chunked_backward<float>(pr), gplain = recurrent_backward_f32(pr);
  const Named all[] = {{"o", &got.o, &plain.o, &ref.o},           {"ht", &got.ht, &plain.ht, &ref.ht},
                       {"dq", &ggot.dq, &gplain.dq, &gref.dq},    {"dk", &ggot.dk, &gplain.dk, &gref.dk},
                       {"dv", &ggot.dv, &gplain.dv, &gref.dv},    {"dg", &ggot.dg, &gplain.dg, &gref.dg},
                       {"dbeta", &ggot.dbeta, &gplain.dbeta, &gref.dbeta},
                       {"dh0", &ggot.dh0, &gplain.dh0, &gref.dh0}};
  for (const Named& n : all) {
    if (n.ref->empty()) continue;
    const double err = rel_err(*n.got, *n.ref), plain_err = rel_err(*n.plain, *n.ref);
    const double bound = 4 * plain_err + decay_term;
    EXPECT_LE(err, bound) << n.name << ": chunked float error " << err << ", float recurrence " << plain_err
                          << ", " << describe(pr);
    EXPECT_GT(err, 0.0) << n.name << ": a float computation that is exact is not running in float";
    std::printf("  %-6s chunked f32 %.2e  recurrence f32 %.2e  bound %.2e\n", n.name, err, plain_err, bound);
  }
}

TEST_P(ChunkedPrecision, Bf16StorageWithinDerivedBound) {
  const Problem pr = make_problem(GetParam());
  reference::ChunkedOptions opt;
  opt.storage = reference::Storage::bf16;
  const Outputs ref = oracle_forward(pr), got = chunked_forward<float>(pr, opt);
  const Grads gref = oracle_backward(pr), ggot = chunked_backward<float>(pr, opt);
  const Named all[] = {{"o", &got.o, nullptr, &ref.o},          {"ht", &got.ht, nullptr, &ref.ht},
                       {"dq", &ggot.dq, nullptr, &gref.dq},     {"dk", &ggot.dk, nullptr, &gref.dk},
                       {"dv", &ggot.dv, nullptr, &gref.dv},     {"dg", &ggot.dg, nullptr, &gref.dg},
                       {"dbeta", &ggot.dbeta, nullptr, &gref.dbeta}, {"dh0", &ggot.dh0, nullptr, &gref.dh0}};
  for (const Named& n : all) {
    if (n.ref->empty()) continue;
    const double err = rel_err(*n.got, *n.ref);
    EXPECT_LE(err, 4 * kBf16) << n.name << " " << describe(pr);
    std::printf("  %-6s chunked f32 + bf16 storage %.2e  bound %.2e\n", n.name, err, 4 * kBf16);
  }
  // The rounding is really applied: o reads stored V_new (and, with the delta term, A, W, U).
  EXPECT_GT(rel_err(got.o, ref.o), 16 * kF32 * 64) << "bf16 storage left o at float accuracy";
}

INSTANTIATE_TEST_SUITE_P(Glr, ChunkedPrecision, testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace glr::test
