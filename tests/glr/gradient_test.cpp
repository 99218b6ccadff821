// The hand-written backward against central finite differences of the forward, in double, on small
// problems: every gradient (dq, dk, dv, dg, dbeta, dh0) of both the oracle and the chunked algorithm must
// match to 1e-6 normwise relative error.
//
// The loss is L = <o, dout> + <ht, dht> with random dout, dht, so its gradient is exactly what the
// backward computes from (dout, dht). Step: h = 1e-5 on O(1) inputs gives a truncation error ~h^2 = 1e-10
// relative and a cancellation error ~eps |L| / h = 1e-11, both far below the 1e-6 bound, so a failure
// means a wrong formula, not a noisy difference.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "problem.hpp"

namespace glr::test {
namespace {

double loss(const Problem& pr) {
  const Outputs out = oracle_forward(pr);
  double L = 0;
  for (std::size_t i = 0; i < out.o.size(); ++i) L += out.o[i] * pr.dout[i];
  for (std::size_t i = 0; i < out.ht.size(); ++i) L += out.ht[i] * pr.dht[i];
  return L;
}

// The central difference of the loss with respect to every element of the input `member` selects.
std::vector<double> finite_difference(Problem pr, std::vector<double> Problem::*member) {
  constexpr double h = 1e-5;
  std::vector<double>& x = pr.*member;
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double up = loss(pr);
    x[i] = x0 - h;
    const double down = loss(pr);
    x[i] = x0;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

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
    out.push_back({m, "batch_gva", 2, 9, 1, 2, 4, 3, {}, 4});
    out.push_back({m, "varlen_empty", 1, 13, 2, 2, 3, 4, {0, 6, 6, 13}, 4});
  }
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(name_of(info.param.member)) + "_" + info.param.name;
}

class FiniteDifferences : public testing::TestWithParam<Case> {};

TEST_P(FiniteDifferences, EveryGradientMatches) {
  const Case& c = GetParam();
  const Params p = make_params(c.member, c.B, c.T, c.H, c.HV, c.K, c.V, c.cu_seqlens, true, true, c.chunk);
  const Problem pr = random_problem(p, test_seed(100 + static_cast<std::uint64_t>(c.member)));
  const Grads oracle = oracle_backward(pr);
  const Grads chunked = chunked_backward<double>(pr);
  struct Item {
    const char* name;
    std::vector<double> Problem::*input;
    std::vector<double> Grads::*grad;
  };
  std::vector<Item> items = {{"dq", &Problem::q, &Grads::dq}, {"dk", &Problem::k, &Grads::dk},
                             {"dv", &Problem::v, &Grads::dv}, {"dh0", &Problem::h0, &Grads::dh0}};
  if (p.gate != Gate::none) items.push_back({"dg", &Problem::g, &Grads::dg});
  if (p.delta) items.push_back({"dbeta", &Problem::beta, &Grads::dbeta});
  for (const Item& it : items) {
    const std::vector<double> fd = finite_difference(pr, it.input);
    ASSERT_FALSE(fd.empty()) << it.name;
    const double e_oracle = rel_err(oracle.*it.grad, fd), e_chunked = rel_err(chunked.*it.grad, fd);
    EXPECT_LE(e_oracle, 1e-6) << it.name << " (oracle) " << describe(pr);
    EXPECT_LE(e_chunked, 1e-6) << it.name << " (chunked) " << describe(pr);
    RecordProperty(std::string(it.name) + "_oracle_vs_fd", std::to_string(e_oracle));
    std::printf("  %-6s oracle %.1e chunked %.1e\n", it.name, e_oracle, e_chunked);
  }
}

INSTANTIATE_TEST_SUITE_P(Glr, FiniteDifferences, testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace glr::test
