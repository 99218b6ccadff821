// The chunked algorithm against the float64 oracle (the exact recurrence): in double it must agree to
// 1e-10 normwise relative error on every output and gradient, for every family member and every shape
// feature (packed sequences with odd lengths and an empty one, grouped value heads, T not a multiple of
// the chunk, T = 1, with and without initial/final states).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "problem.hpp"

namespace glr::test {
namespace {

constexpr Member kMembers[] = {Member::gated_deltanet, Member::deltanet, Member::mamba2, Member::retnet,
                               Member::linear_attention};

// The shapes every member is checked on.
struct Shape {
  const char* name;
  std::int64_t B, T, H, HV, K, V;
  std::vector<std::int64_t> cu_seqlens;
  bool states;  // h0 and ht on
  std::int64_t chunk;
};

std::vector<Shape> shapes() {
  return {
      {"batch_T_not_multiple_of_chunk", 2, 37, 2, 2, 16, 8, {}, true, 16},
      {"batch_no_states", 2, 37, 2, 2, 16, 8, {}, false, 16},
      {"T_multiple_of_chunk", 1, 48, 1, 1, 8, 12, {}, true, 16},
      {"T_1", 3, 1, 1, 2, 8, 8, {}, true, 16},
      {"gva_HV_2H", 2, 29, 2, 4, 8, 16, {}, true, 8},
      {"varlen_odd_and_empty", 1, 58, 1, 2, 16, 8, {0, 7, 7, 26, 27, 58}, true, 16},
      {"varlen_empty_first_and_last", 1, 21, 2, 2, 8, 8, {0, 0, 9, 21, 21}, false, 8},
      {"default_chunk_64", 1, 150, 1, 1, 32, 32, {}, true, kDefaultChunk},
  };
}

struct Case {
  Member member;
  Shape shape;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(name_of(info.param.member)) + "_" + info.param.shape.name;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Member m : kMembers)
    for (const Shape& s : shapes()) cases.push_back({m, s});
  return cases;
}

Problem make_problem(const Case& c, std::uint64_t salt) {
  const Shape& s = c.shape;
  Params p = make_params(c.member, s.B, s.T, s.H, s.HV, s.K, s.V, s.cu_seqlens, s.states, s.states, s.chunk);
  return random_problem(p, test_seed(salt));
}

class ChunkedVsOracle : public testing::TestWithParam<Case> {};

TEST_P(ChunkedVsOracle, DoubleForwardAgreesTo1e10) {
  const Problem pr = make_problem(GetParam(), 1);
  const Outputs ref = oracle_forward(pr), got = chunked_forward<double>(pr);
  EXPECT_LE(rel_err(got.o, ref.o), 1e-10) << describe(pr);
  EXPECT_LE(rel_err(got.ht, ref.ht), 1e-10) << describe(pr);
}

TEST_P(ChunkedVsOracle, DoubleBackwardAgreesTo1e10) {
  const Problem pr = make_problem(GetParam(), 2);
  const Grads ref = oracle_backward(pr), got = chunked_backward<double>(pr);
  EXPECT_LE(rel_err(got.dq, ref.dq), 1e-10) << describe(pr);
  EXPECT_LE(rel_err(got.dk, ref.dk), 1e-10) << describe(pr);
  EXPECT_LE(rel_err(got.dv, ref.dv), 1e-10) << describe(pr);
  EXPECT_LE(rel_err(got.dg, ref.dg), 1e-10) << describe(pr);
  EXPECT_LE(rel_err(got.dbeta, ref.dbeta), 1e-10) << describe(pr);
  EXPECT_LE(rel_err(got.dh0, ref.dh0), 1e-10) << describe(pr);
  std::printf("  %-50s dq %.1e dk %.1e dv %.1e dg %.1e db %.1e dh0 %.1e\n", describe(pr).c_str(),
              rel_err(got.dq, ref.dq), rel_err(got.dk, ref.dk), rel_err(got.dv, ref.dv), rel_err(got.dg, ref.dg),
              rel_err(got.dbeta, ref.dbeta), rel_err(got.dh0, ref.dh0));
}

INSTANTIATE_TEST_SUITE_P(Glr, ChunkedVsOracle, testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace glr::test
