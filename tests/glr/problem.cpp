#include "problem.hpp"

#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>

#include "glr/reference/oracle.hpp"

namespace glr::test {

namespace {

std::int64_t token_count(const Params& p, std::int64_t heads, std::int64_t dim) { return p.B * p.T * heads * dim; }
std::int64_t state_count(const Params& p) { return p.num_seqs() * p.HV * p.K * p.V; }
std::int64_t gate_count(const Params& p) { return p.gate == Gate::per_head ? p.HV : p.B * p.T * p.HV; }

template <class Real>
std::vector<Real> cast(const std::vector<double>& x) {
  return std::vector<Real>(x.begin(), x.end());
}
template <class Real>
std::vector<double> widen(const std::vector<Real>& x) {
  return std::vector<double>(x.begin(), x.end());
}
template <class Real>
const Real* ptr_or_null(const std::vector<Real>& x) {
  return x.empty() ? nullptr : x.data();
}
template <class Real>
Real* ptr_or_null(std::vector<Real>& x) {
  return x.empty() ? nullptr : x.data();
}

// The problem's inputs in type Real, held so that the pointers stay valid.
template <class Real>
struct Cast {
  std::vector<Real> q, k, v, g, beta, h0, dout, dht;
  explicit Cast(const Problem& pr)
      : q(cast<Real>(pr.q)), k(cast<Real>(pr.k)), v(cast<Real>(pr.v)), g(cast<Real>(pr.g)),
        beta(cast<Real>(pr.beta)), h0(cast<Real>(pr.h0)), dout(cast<Real>(pr.dout)), dht(cast<Real>(pr.dht)) {}
};

template <class Real>
struct OutputBuffers {
  std::vector<Real> o, ht;
  explicit OutputBuffers(const Params& p)
      : o(static_cast<std::size_t>(token_count(p, p.HV, p.V))),
        ht(p.final_state ? static_cast<std::size_t>(state_count(p)) : 0) {}
  Outputs widen() const { return {glr::test::widen(o), glr::test::widen(ht)}; }
};

template <class Real>
struct GradBuffers {
  std::vector<Real> dq, dk, dv, dg, dbeta, dh0;
  explicit GradBuffers(const Params& p)
      : dq(static_cast<std::size_t>(token_count(p, p.H, p.K))), dk(dq.size()),
        dv(static_cast<std::size_t>(token_count(p, p.HV, p.V))),
        dg(p.gate != Gate::none ? static_cast<std::size_t>(gate_count(p)) : 0),
        dbeta(p.delta ? static_cast<std::size_t>(p.B * p.T * p.HV) : 0),
        dh0(p.initial_state ? static_cast<std::size_t>(state_count(p)) : 0) {}
  Grads widen() const {
    using glr::test::widen;
    return {widen(dq), widen(dk), widen(dv), widen(dg), widen(dbeta), widen(dh0)};
  }
};

template <class Real>
ForwardTensors<Real> forward_tensors(const Cast<Real>& in, OutputBuffers<Real>& out) {
  return {in.q.data(), in.k.data(), in.v.data(), ptr_or_null(in.g), ptr_or_null(in.beta), ptr_or_null(in.h0),
          out.o.data(), ptr_or_null(out.ht)};
}

template <class Real>
BackwardTensors<Real> backward_tensors(const Cast<Real>& in, GradBuffers<Real>& out) {
  return {in.q.data(),         in.k.data(),         in.v.data(),         ptr_or_null(in.g),
          ptr_or_null(in.beta), ptr_or_null(in.h0),  in.dout.data(),      ptr_or_null(in.dht),
          out.dq.data(),        out.dk.data(),       out.dv.data(),       ptr_or_null(out.dg),
          ptr_or_null(out.dbeta), ptr_or_null(out.dh0)};
}

}  // namespace

Problem random_problem(const Params& p, std::uint64_t seed) {
  Problem pr;
  pr.p = p;
  pr.seed = seed;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto normals = [&](std::int64_t n, double sd) {
    std::vector<double> x(static_cast<std::size_t>(n));
    for (double& e : x) e = sd * normal(rng);
    return x;
  };
  pr.q = normals(token_count(p, p.H, p.K), 1.0);
  pr.k = normals(token_count(p, p.H, p.K), 1.0);
  for (std::size_t row = 0; row * p.K < pr.k.size(); ++row) {  // L2-normalise each key
    double n2 = 0;
    for (std::int64_t a = 0; a < p.K; ++a) n2 += pr.k[row * p.K + a] * pr.k[row * p.K + a];
    for (std::int64_t a = 0; a < p.K; ++a) pr.k[row * p.K + a] /= std::sqrt(n2);
  }
  pr.v = normals(token_count(p, p.HV, p.V), 1.0);
  if (p.gate != Gate::none) {
    // Per token: log-decays in [-0.7, -0.01] (chunk-end decays down to e^-45 at C = 64). Per head: RetNet's
    // log(1 - 2^-(5+x)) range, stretched a little.
    pr.g.resize(static_cast<std::size_t>(gate_count(p)));
    for (double& e : pr.g) e = p.gate == Gate::per_token ? -(0.01 + 0.69 * unit(rng)) : -(0.005 + 0.3 * unit(rng));
  }
  if (p.delta) {
    pr.beta.resize(static_cast<std::size_t>(p.B * p.T * p.HV));
    for (double& e : pr.beta) e = 1.0 / (1.0 + std::exp(-normal(rng)));  // sigmoid, as the models do
  }
  if (p.initial_state) pr.h0 = normals(state_count(p), 0.5);
  pr.dout = normals(token_count(p, p.HV, p.V), 1.0);
  if (p.final_state) pr.dht = normals(state_count(p), 1.0);
  return pr;
}

Outputs oracle_forward(const Problem& pr) {
  Cast<double> in(pr);
  OutputBuffers<double> out(pr.p);
  reference::oracle_forward(pr.p, forward_tensors(in, out));
  return out.widen();
}

Grads oracle_backward(const Problem& pr) {
  Cast<double> in(pr);
  GradBuffers<double> out(pr.p);
  reference::oracle_backward(pr.p, backward_tensors(in, out));
  return out.widen();
}

template <class Real>
Outputs chunked_forward(const Problem& pr, reference::ChunkedOptions opt) {
  Cast<Real> in(pr);
  OutputBuffers<Real> out(pr.p);
  reference::chunked_forward(pr.p, forward_tensors(in, out), opt);
  return out.widen();
}

template <class Real>
Grads chunked_backward(const Problem& pr, reference::ChunkedOptions opt) {
  Cast<Real> in(pr);
  GradBuffers<Real> out(pr.p);
  reference::chunked_backward(pr.p, backward_tensors(in, out), opt);
  return out.widen();
}

template Outputs chunked_forward<float>(const Problem&, reference::ChunkedOptions);
template Outputs chunked_forward<double>(const Problem&, reference::ChunkedOptions);
template Grads chunked_backward<float>(const Problem&, reference::ChunkedOptions);
template Grads chunked_backward<double>(const Problem&, reference::ChunkedOptions);

Outputs recurrent_forward_f32(const Problem& pr) {
  Cast<float> in(pr);
  OutputBuffers<float> out(pr.p);
  reference::recurrent_forward(pr.p, forward_tensors(in, out));
  return out.widen();
}

Grads recurrent_backward_f32(const Problem& pr) {
  Cast<float> in(pr);
  GradBuffers<float> out(pr.p);
  reference::recurrent_backward(pr.p, backward_tensors(in, out));
  return out.widen();
}

double rel_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  const std::size_t n = std::min(x.size(), ref.size());
  for (std::size_t i = 0; i < n; ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (x.size() != ref.size()) return INFINITY;
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

std::string describe(const Problem& pr) {
  const Params& p = pr.p;
  std::ostringstream s;
  s << (p.delta ? "delta" : "no-delta") << " gate="
    << (p.gate == Gate::none ? "none" : p.gate == Gate::per_token ? "per_token" : "per_head") << " B=" << p.B
    << " T=" << p.T << " H=" << p.H << " HV=" << p.HV << " K=" << p.K << " V=" << p.V << " C=" << p.chunk
    << " h0=" << p.initial_state << " ht=" << p.final_state;
  if (p.varlen()) {
    s << " cu_seqlens=[";
    for (std::size_t i = 0; i < p.cu_seqlens.size(); ++i) s << (i ? "," : "") << p.cu_seqlens[i];
    s << "]";
  }
  s << " seed=" << pr.seed;
  return s.str();
}

std::uint64_t test_seed(std::uint64_t salt) {
  std::uint64_t base = 0x9e3779b97f4a7c15ull;
  if (const char* env = std::getenv("GLR_TEST_SEED")) base = std::strtoull(env, nullptr, 0);
  std::uint64_t z = base + salt * 0xbf58476d1ce4e5b9ull;  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace glr::test
