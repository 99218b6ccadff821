// Structural properties of the CPU implementations that the error tests do not pin down: sequences of a
// packed batch are independent, an empty sequence passes its states through, strided tensors give the
// same bits as dense ones, bad pointers are named, the triangular solve inverts, and bf16 rounding is
// round-to-nearest-even exactly as kgate's conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "glr/reference/chunked.hpp"
#include "glr/reference/oracle.hpp"
#include "kgate/dtype.hpp"
#include "problem.hpp"

namespace glr::test {
namespace {

// A packed batch equals its sequences run one by one, bit for bit: nothing leaks across a boundary.
TEST(GlrStructure, PackedSequencesAreIndependent) {
  const std::vector<std::int64_t> cu = {0, 5, 5, 22, 31};
  for (Member m : {Member::gated_deltanet, Member::retnet}) {
    const Params packed = make_params(m, 1, 31, 1, 2, 8, 4, cu, true, true, 8);
    const Problem pr = random_problem(packed, test_seed(400));
    const Outputs all = chunked_forward<double>(pr);
    const Grads gall = chunked_backward<double>(pr);
    for (std::size_t n = 0; n + 1 < cu.size(); ++n) {
      const std::int64_t b = cu[n], len = cu[n + 1] - b;
      Params one = make_params(m, 1, len, 1, 2, 8, 4, {0, len}, true, true, 8);
      Problem sub;
      sub.p = one;
      auto slice = [&](const std::vector<double>& x, std::int64_t per_token) {
        return std::vector<double>(x.begin() + b * per_token, x.begin() + (b + len) * per_token);
      };
      auto state = [&](const std::vector<double>& x) {
        const std::int64_t per = 2 * 8 * 4;
        return std::vector<double>(x.begin() + static_cast<std::int64_t>(n) * per,
                                   x.begin() + static_cast<std::int64_t>(n + 1) * per);
      };
      sub.q = slice(pr.q, 8);
      sub.k = slice(pr.k, 8);
      sub.v = slice(pr.v, 2 * 4);
      sub.g = m == Member::retnet ? pr.g : slice(pr.g, 2);
      sub.beta = pr.beta.empty() ? pr.beta : slice(pr.beta, 2);
      sub.h0 = state(pr.h0);
      sub.dout = slice(pr.dout, 2 * 4);
      sub.dht = state(pr.dht);
      const Outputs one_out = chunked_forward<double>(sub);
      const Grads one_grad = chunked_backward<double>(sub);
      EXPECT_EQ(one_out.o, slice(all.o, 2 * 4)) << "sequence " << n;
      EXPECT_EQ(one_out.ht, state(all.ht)) << "sequence " << n;
      EXPECT_EQ(one_grad.dv, slice(gall.dv, 2 * 4)) << "sequence " << n;
      EXPECT_EQ(one_grad.dq, slice(gall.dq, 8)) << "sequence " << n;
      EXPECT_EQ(one_grad.dh0, state(gall.dh0)) << "sequence " << n;
      if (len == 0) {  // the empty sequence: ht = h0 and dh0 = dht, exactly
        EXPECT_EQ(state(all.ht), state(pr.h0));
        EXPECT_EQ(state(gall.dh0), state(pr.dht));
      }
    }
  }
}

// Same problem, inputs carved out of one fused, padded buffer (as q, k, v of a fused projection are) and
// outputs written with padding: the results are bitwise those of the dense layout, padding untouched.
TEST(GlrStructure, StridedTensorsGiveTheDenseBits) {
  for (Member m : {Member::gated_deltanet, Member::mamba2}) {
    const Params dense = make_params(m, 2, 13, 2, 2, 4, 4, {}, true, true, 4);
    const Problem pr = random_problem(dense, test_seed(401));
    const Outputs want = chunked_forward<double>(pr);
    const std::int64_t B = 2, T = 13, H = 2, K = 4, V = 4;
    // qkv [B, T, 3 + 1 (pad), H, K]: q, k, v interleaved per token.
    const std::int64_t tok = 4 * H * K;
    std::vector<double> qkv(static_cast<std::size_t>(B * T * tok), 7.0);
    for (std::int64_t bt = 0; bt < B * T; ++bt)
      for (std::int64_t x = 0; x < H * K; ++x) {
        qkv[static_cast<std::size_t>(bt * tok + x)] = pr.q[static_cast<std::size_t>(bt * H * K + x)];
        qkv[static_cast<std::size_t>(bt * tok + H * K + x)] = pr.k[static_cast<std::size_t>(bt * H * K + x)];
        qkv[static_cast<std::size_t>(bt * tok + 2 * H * K + x)] = pr.v[static_cast<std::size_t>(bt * H * V + x)];
      }
    Params p = dense;
    p.strides.q = p.strides.k = p.strides.v = {T * tok, tok, K, 1};
    const std::int64_t o_pad = 3;  // o rows padded by 3 elements per token
    p.strides.o = {T * (H * V + o_pad), H * V + o_pad, V, 1};
    p.validate(Pass::forward);
    std::vector<double> o(static_cast<std::size_t>(B * T * (H * V + o_pad)), -1.0), ht(want.ht.size());
    std::vector<double> g = pr.g, beta = pr.beta, h0 = pr.h0;
    ForwardTensors<double> t{qkv.data(), qkv.data() + H * K, qkv.data() + 2 * H * K,
                             g.empty() ? nullptr : g.data(), beta.empty() ? nullptr : beta.data(), h0.data(),
                             o.data(), ht.data()};
    reference::chunked_forward(p, t);
    for (std::int64_t bt = 0; bt < B * T; ++bt) {
      for (std::int64_t x = 0; x < H * V; ++x)
        EXPECT_EQ(o[static_cast<std::size_t>(bt * (H * V + o_pad) + x)], want.o[static_cast<std::size_t>(bt * H * V + x)]);
      for (std::int64_t x = H * V; x < H * V + o_pad; ++x) EXPECT_EQ(o[static_cast<std::size_t>(bt * (H * V + o_pad) + x)], -1.0);
    }
    EXPECT_EQ(ht, want.ht);
  }
}

TEST(GlrStructure, MissingOrExtraPointersAreNamed) {
  const Params p = make_params(Member::mamba2, 1, 4, 1, 1, 4, 4, {}, false, true);
  std::vector<double> buf(64, 0.5), out(64);
  ForwardTensors<double> t{buf.data(), buf.data(), buf.data(), buf.data(), nullptr, nullptr, out.data(), out.data()};
  EXPECT_NO_THROW(reference::oracle_forward(p, t));
  auto expect_named = [&](ForwardTensors<double> bad, const std::string& name) {
    try {
      reference::chunked_forward(p, bad);
      ADD_FAILURE() << "accepted; expected an error naming " << name;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), name) << e.what();
    }
  };
  auto bad = t;
  bad.g = nullptr;
  expect_named(bad, "g");
  bad = t;
  bad.beta = buf.data();  // mamba2 has no beta
  expect_named(bad, "beta");
  bad = t;
  bad.ht = nullptr;
  expect_named(bad, "ht");
  bad = t;
  bad.h0 = buf.data();  // no initial state declared
  expect_named(bad, "h0");
}

// (I + L) A = I on every chunk, to rounding: the solve is an inverse, not an approximation of one.
TEST(GlrStructure, SolveTrilInverts) {
  const Params p = make_params(Member::gated_deltanet, 1, 70, 1, 2, 16, 4, {}, false, false, 32);
  const Problem pr = random_problem(p, test_seed(402));
  std::vector<double> o(static_cast<std::size_t>(70 * 2 * 4));
  ForwardTensors<double> t{pr.q.data(), pr.k.data(), pr.v.data(), pr.g.data(), pr.beta.data(), nullptr, o.data(), nullptr};
  const auto in = reference::gather_forward<double>(p, t);
  const auto f = reference::chunked_forward_stages(p, in, {});
  double worst = 0;
  for (const Chunk& c : f.plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv)
      for (std::int64_t i = 0; i < c.length; ++i)
        for (std::int64_t j = 0; j < c.length; ++j) {
          double acc = j <= i ? f.A(0, c.begin + i, hv, j) : 0.0;  // (I + L) A, row i column j
          for (std::int64_t m = j; m < i; ++m) acc += f.L(0, c.begin + i, hv, m) * f.A(0, c.begin + m, hv, j);
          worst = std::max(worst, std::fabs(acc - (i == j ? 1.0 : 0.0)));
        }
  EXPECT_LE(worst, 1e-13);
}

TEST(GlrStructure, Bf16RoundingMatchesKgate) {
  std::mt19937_64 rng(test_seed(403));
  std::uniform_int_distribution<std::uint64_t> bits;
  std::vector<double> xs = {0.0, -0.0, 1.0, 1.00390625, 1.005859375 /* a tie: rounds to even */, 3.3895313892515355e38,
                            3.40282e38, -1e-40, 9.2e-41, 1e-45, INFINITY, -INFINITY};
  for (int i = 0; i < 20000; ++i) {
    double x;
    const std::uint64_t b = bits(rng);
    std::memcpy(&x, &b, sizeof x);
    if (std::isnan(x)) continue;
    xs.push_back(std::ldexp(std::fmod(x, 2.0), static_cast<int>(b % 300) - 150));  // the bf16 exponent range and around
  }
  for (double x : xs) {
    const double want = kgate::bf16_bits_to_f64(kgate::f64_to_bf16_bits(x));
    const double got = reference::round_bf16(x);
    EXPECT_TRUE(got == want && std::signbit(got) == std::signbit(want)) << x << ": glr " << got << ", kgate " << want;
  }
  EXPECT_TRUE(std::isnan(reference::round_bf16(NAN)));
}

}  // namespace
}  // namespace glr::test
