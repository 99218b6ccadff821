#include "case.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "common/hd.hpp"
#include "glr/reference/oracle.hpp"

namespace glr::cudatest {

namespace {

using Dims = std::vector<std::int64_t>;

std::int64_t product(const Dims& d) {
  std::int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}

// Calls f(flat, offset) over every element, row-major.
template <class F>
void for_each(const Dims& shape, const Dims& strides, std::int64_t offset, F&& f) {
  const std::int64_t n = product(shape);
  Dims idx(shape.size(), 0);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    std::int64_t off = offset;
    for (std::size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    f(flat, off);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

double round_to(DType t, double x) {
  double buf = 0;
  cuda::store_elem<double>(&buf, t, 0, x);
  return cuda::load_elem<double>(&buf, t, 0);
}

Dims dense_strides(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

HostTensor tensor(DType dt, Dims shape, Dims strides, bool offset) {
  HostTensor t;
  t.dt = dt;
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  t.offset = offset ? 1 : 0;
  std::int64_t span = t.offset + 1;
  for (std::size_t d = 0; d < t.shape.size(); ++d) span += (t.shape[d] - 1) * t.strides[d];
  const std::int64_t bytes = span * cuda::dtype_size(dt);
  t.storage.assign(static_cast<std::size_t>((bytes + 7) / 8 + 1), 0.0);
  return t;
}

// The call's strides for each tensor kind, and the Params fields they go to.
struct Strider {
  const Case& c;
  bool strided() const { return c.layout.strided; }
  Dims token(std::int64_t heads, std::int64_t dim) const {
    const auto& s = c.shape;
    if (!strided()) return dense_strides({s.B, s.T, heads, dim});
    return {heads * s.T * dim, dim, s.T * dim, 1};  // memory order [B, heads, T, dim]
  }
  Dims scalar() const {
    const auto& s = c.shape;
    if (!strided()) return dense_strides({s.B, s.T, s.HV});
    return {s.T * (s.HV + 3), s.HV + 3, 1};
  }
  Dims gate() const {
    if (c.dense.gate == Gate::per_head) return {strided() ? 2 : 1};
    return scalar();
  }
  Dims state() const {
    const auto& s = c.shape;
    const std::int64_t N = c.dense.num_seqs();
    if (!strided()) return dense_strides({N, s.HV, s.K, s.V});
    const std::int64_t row = s.V + 4;
    return {s.HV * s.K * row, s.K * row, row, 1};
  }
};

TokenStrides tok(const Dims& d) { return {d[0], d[1], d[2], d[3]}; }
ScalarStrides sca(const Dims& d) { return d.size() == 1 ? ScalarStrides{0, 0, d[0]} : ScalarStrides{d[0], d[1], d[2]}; }
StateStrides sta(const Dims& d) { return {d[0], d[1], d[2], d[3]}; }

Dims gate_shape(const Params& p) { return p.gate == Gate::per_head ? Dims{p.HV} : Dims{p.B, p.T, p.HV}; }
Dims state_shape(const Params& p) { return {p.num_seqs(), p.HV, p.K, p.V}; }

template <class T>
const T* or_null(const std::vector<T>& x) {
  return x.empty() ? nullptr : x.data();
}
template <class T>
T* or_null(std::vector<T>& x) {
  return x.empty() ? nullptr : x.data();
}

}  // namespace

std::int64_t HostTensor::numel() const { return product(shape); }
void* HostTensor::data() {
  return reinterpret_cast<char*>(storage.data()) + offset * cuda::dtype_size(dt);
}
const void* HostTensor::data() const {
  return reinterpret_cast<const char*>(storage.data()) + offset * cuda::dtype_size(dt);
}
void HostTensor::poison() { std::memset(storage.data(), 0xff, bytes()); }
void HostTensor::write(const std::vector<double>& dense) {
  void* base = storage.data();
  for_each(shape, strides, offset,
           [&](std::int64_t flat, std::int64_t off) { cuda::store_elem<double>(base, dt, off, dense[flat]); });
}
std::vector<double> HostTensor::read() const {
  std::vector<double> out(static_cast<std::size_t>(numel()));
  const void* base = storage.data();
  for_each(shape, strides, offset,
           [&](std::int64_t flat, std::int64_t off) { out[flat] = cuda::load_elem<double>(base, dt, off); });
  return out;
}

const char* member_name(Member m) { return name_of(m); }

double unit_roundoff(DType t) {
  switch (t) {
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::f64: return std::ldexp(1.0, -53);
  }
  return 1;
}

std::uint64_t test_seed(std::uint64_t salt) {
  std::uint64_t base = 0x5eed0c0da5eedull;
  if (const char* env = std::getenv("GLR_TEST_SEED")) base = std::strtoull(env, nullptr, 0);
  std::uint64_t z = base + (salt + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Case make_case(Member m, const Shape& s, const Dtypes& dt, const Layout& layout, std::uint64_t seed) {
  Case c;
  c.member = m;
  c.shape = s;
  c.dt = dt;
  c.layout = layout;
  c.seed = seed;
  c.dense = make_params(m, s.B, s.T, s.H, s.HV, s.K, s.V, s.cu_seqlens, s.states, s.states, kDefaultChunk);
  c.call = c.dense;
  const Strider st{c};
  Strides& cs = c.call.strides;
  cs.q = cs.k = cs.dq = cs.dk = tok(st.token(s.H, s.K));
  cs.v = cs.o = cs.dout = cs.dv = tok(st.token(s.HV, s.V));
  cs.g = cs.dg = sca(st.gate());
  cs.beta = cs.dbeta = sca(st.scalar());
  cs.h0 = cs.ht = cs.dht = cs.dh0 = sta(st.state());
  c.call.validate(Pass::backward, Backend::gpu);

  const Params& p = c.dense;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto draw = [&](std::int64_t n, DType t, auto&& gen) {
    std::vector<double> x(static_cast<std::size_t>(n));
    for (double& e : x) e = round_to(t, gen());
    return x;
  };
  const std::int64_t nqk = p.B * p.T * p.H * p.K, nv = p.B * p.T * p.HV * p.V;
  c.q = draw(nqk, dt.x, [&] { return normal(rng); });
  c.k.resize(static_cast<std::size_t>(nqk));
  for (std::int64_t row = 0; row * p.K < nqk; ++row) {  // L2-normalised keys, then rounded
    double n2 = 0;
    std::vector<double> r(static_cast<std::size_t>(p.K));
    for (auto& e : r) {
      e = normal(rng);
      n2 += e * e;
    }
    for (std::int64_t a = 0; a < p.K; ++a) c.k[row * p.K + a] = round_to(dt.x, r[a] / std::sqrt(n2));
  }
  c.v = draw(nv, dt.x, [&] { return normal(rng); });
  if (p.gate == Gate::per_token) c.g = draw(p.B * p.T * p.HV, dt.gate, [&] { return -(0.01 + 0.69 * unit(rng)); });
  if (p.gate == Gate::per_head) c.g = draw(p.HV, dt.gate, [&] { return -(0.005 + 0.3 * unit(rng)); });
  if (p.delta) c.beta = draw(p.B * p.T * p.HV, dt.gate, [&] { return 1.0 / (1.0 + std::exp(-normal(rng))); });
  const std::int64_t ns = p.num_seqs() * p.HV * p.K * p.V;
  if (s.states) c.h0 = draw(ns, dt.state, [&] { return 0.5 * normal(rng); });
  c.dout = draw(nv, dt.x, [&] { return normal(rng); });
  if (s.states) c.dht = draw(ns, dt.state, [&] { return normal(rng); });
  return c;
}

std::string Case::describe() const {
  std::ostringstream o;
  o << member_name(member) << " " << shape.name << " B=" << shape.B << " T=" << shape.T << " H=" << shape.H
    << " HV=" << shape.HV << " K=" << shape.K << " V=" << shape.V << " states=" << shape.states;
  if (!shape.cu_seqlens.empty()) {
    o << " cu_seqlens=[";
    for (std::size_t i = 0; i < shape.cu_seqlens.size(); ++i) o << (i ? "," : "") << shape.cu_seqlens[i];
    o << "]";
  }
  o << " x=" << cuda::name_of(dt.x) << " gate=" << cuda::name_of(dt.gate) << " state=" << cuda::name_of(dt.state)
    << (layout.strided ? " strided" : "") << (layout.offset ? " offset" : "") << " seed=" << seed;
  return o.str();
}

Results oracle(const Case& c, bool backward) {
  const Params& p = c.dense;
  Results r;
  const std::int64_t nqk = p.B * p.T * p.H * p.K, nv = p.B * p.T * p.HV * p.V;
  const std::int64_t ns = p.num_seqs() * p.HV * p.K * p.V;
  const std::size_t ng = c.g.size(), nb = c.beta.size();
  if (!backward) {
    r.o.resize(static_cast<std::size_t>(nv));
    if (p.final_state) r.ht.resize(static_cast<std::size_t>(ns));
    glr::ForwardTensors<double> t{c.q.data(), c.k.data(), c.v.data(), or_null(c.g), or_null(c.beta),
                                  or_null(c.h0), r.o.data(), or_null(r.ht)};
    reference::oracle_forward(p, t);
    return r;
  }
  r.dq.resize(static_cast<std::size_t>(nqk));
  r.dk.resize(static_cast<std::size_t>(nqk));
  r.dv.resize(static_cast<std::size_t>(nv));
  r.dg.resize(ng);
  r.dbeta.resize(nb);
  if (p.initial_state) r.dh0.resize(static_cast<std::size_t>(ns));
  glr::BackwardTensors<double> t{c.q.data(),  c.k.data(),       c.v.data(),       or_null(c.g),
                                 or_null(c.beta), or_null(c.h0), c.dout.data(),    or_null(c.dht),
                                 r.dq.data(), r.dk.data(),      r.dv.data(),      or_null(r.dg),
                                 or_null(r.dbeta), or_null(r.dh0)};
  reference::oracle_backward(p, t);
  return r;
}

CallTensors make_call(const Case& c) {
  const Params& p = c.dense;
  const Strider st{c};
  const bool off = c.layout.offset;
  const Dtypes& d = c.dt;
  CallTensors t;
  auto in = [&](HostTensor& h, DType dt, Dims shape, Dims strides, const std::vector<double>& values) {
    if (values.empty()) return;
    h = tensor(dt, std::move(shape), std::move(strides), off);
    h.poison();  // padding between strided elements stays NaN: a read of it would show
    h.write(values);
  };
  auto out = [&](HostTensor& h, bool present, DType dt, Dims shape, Dims strides) {
    if (!present) return;
    h = tensor(dt, std::move(shape), std::move(strides), off);
    h.poison();
  };
  const Dims qk{p.B, p.T, p.H, p.K}, vv{p.B, p.T, p.HV, p.V}, sc{p.B, p.T, p.HV};
  in(t.q, d.x, qk, st.token(p.H, p.K), c.q);
  in(t.k, d.x, qk, st.token(p.H, p.K), c.k);
  in(t.v, d.x, vv, st.token(p.HV, p.V), c.v);
  in(t.g, d.gate, gate_shape(p), st.gate(), c.g);
  in(t.beta, d.gate, sc, st.scalar(), c.beta);
  in(t.h0, d.state, state_shape(p), st.state(), c.h0);
  in(t.dout, d.x, vv, st.token(p.HV, p.V), c.dout);
  in(t.dht, d.state, state_shape(p), st.state(), c.dht);
  out(t.o, true, d.x, vv, st.token(p.HV, p.V));
  out(t.ht, p.final_state, d.state, state_shape(p), st.state());
  out(t.dq, true, d.x, qk, st.token(p.H, p.K));
  out(t.dk, true, d.x, qk, st.token(p.H, p.K));
  out(t.dv, true, d.x, vv, st.token(p.HV, p.V));
  out(t.dg, p.gate != Gate::none, d.gate, gate_shape(p), st.gate());
  out(t.dbeta, p.delta, d.gate, sc, st.scalar());
  out(t.dh0, p.initial_state, d.state, state_shape(p), st.state());
  return t;
}

namespace {
cuda::In in_of(const HostTensor& h) { return h.empty() ? cuda::In{} : cuda::In{h.data(), h.dt}; }
cuda::Out out_of(HostTensor& h) { return h.empty() ? cuda::Out{} : cuda::Out{h.data(), h.dt}; }
std::vector<double> read_or_empty(const HostTensor& h) { return h.empty() ? std::vector<double>{} : h.read(); }
}  // namespace

cuda::ForwardTensors CallTensors::forward() {
  return {in_of(q), in_of(k), in_of(v), in_of(g), in_of(beta), in_of(h0), out_of(o), out_of(ht)};
}
cuda::BackwardTensors CallTensors::backward() {
  return {in_of(q),    in_of(k),   in_of(v),     in_of(g),     in_of(beta),     in_of(h0),
          in_of(dout), in_of(dht), out_of(dq),   out_of(dk),   out_of(dv),      out_of(dg),
          out_of(dbeta), out_of(dh0)};
}
Results CallTensors::read(bool backward) const {
  Results r;
  if (!backward) {
    r.o = read_or_empty(o);
    r.ht = read_or_empty(ht);
    return r;
  }
  r.dq = read_or_empty(dq);
  r.dk = read_or_empty(dk);
  r.dv = read_or_empty(dv);
  r.dg = read_or_empty(dg);
  r.dbeta = read_or_empty(dbeta);
  r.dh0 = read_or_empty(dh0);
  return r;
}

std::string diff_results(const Results& a, const Results& b) {
  std::string msg;
  const std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>> outs[] = {
      {"o", {&a.o, &b.o}},   {"ht", {&a.ht, &b.ht}}, {"dq", {&a.dq, &b.dq}},          {"dk", {&a.dk, &b.dk}},
      {"dv", {&a.dv, &b.dv}}, {"dg", {&a.dg, &b.dg}}, {"dbeta", {&a.dbeta, &b.dbeta}}, {"dh0", {&a.dh0, &b.dh0}}};
  for (const auto& [name, pr] : outs) {
    const std::vector<double>&x = *pr.first, &y = *pr.second;
    if (x.size() != y.size()) {
      msg += std::string(" ") + name + ": sizes " + std::to_string(x.size()) + " vs " + std::to_string(y.size());
      continue;
    }
    std::size_t n = 0, first = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0 && n++ == 0) first = i;
    if (n)
      msg += std::string(" ") + name + ": " + std::to_string(n) + " of " + std::to_string(x.size()) +
             " differ, first at " + std::to_string(first) + " (" + std::to_string(x[first]) + " vs " +
             std::to_string(y[first]) + ")";
  }
  return msg;
}

double rel_err(const std::vector<double>& x, const std::vector<double>& ref) {
  if (x.size() != ref.size()) return NAN;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return NAN;
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

template <class Acc>
std::vector<StageError> stage_errors(const Case& c, const cuda::Work<Acc>& w, bool backward) {
  const Params& p = c.dense;
  glr::BackwardTensors<double> t{c.q.data(), c.k.data(), c.v.data(), or_null(c.g), or_null(c.beta), or_null(c.h0),
                                 c.dout.data(), or_null(c.dht)};
  const auto in = reference::gather_backward<double>(p, t);
  const auto ref = reference::chunked_backward_stages<double>(p, in, {});
  const auto& f = ref.forward;
  const std::int64_t HV = p.HV, K = p.K, V = p.V, C = p.chunk, rows = p.B * p.T;
  const std::int64_t chunks = f.plan.num_chunks();
  auto mine = [](const Acc* x, std::int64_t n) { return std::vector<double>(x, x + n); };
  auto sum = [](const reference::Dense<double>& a, const reference::Dense<double>& b) {
    std::vector<double> s = a.values();
    if (!b.empty())
      for (std::size_t i = 0; i < s.size(); ++i) s[i] += b.values()[i];
    return s;
  };
  std::vector<StageError> e;
  e.push_back({"G", rel_err(mine(w.G, rows * HV), f.G.G.values())});
  e.push_back({"Gr", rel_err(mine(w.Gr, rows * HV), f.G.Gr.values())});
  if (p.delta) {
    std::vector<double> a, r;  // the valid lower triangle of every chunk's A
    for (const Chunk& ch : f.plan.chunks)
      for (std::int64_t hv = 0; hv < HV; ++hv)
        for (std::int64_t i = 0; i < ch.length; ++i)
          for (std::int64_t j = 0; j <= i; ++j) {
            a.push_back(w.A[((ch.index * HV + hv) * C + i) * C + j]);
            r.push_back(f.A(ch.batch, ch.begin + i, hv, j));
          }
    e.push_back({"A", rel_err(a, r)});
    e.push_back({"W", rel_err(mine(w.W, rows * HV * K), f.W.values())});
    e.push_back({"U", rel_err(mine(w.U, rows * HV * V), f.U.values())});
  }
  e.push_back({"S_start", rel_err(mine(w.S, chunks * HV * K * V), f.S_start.values())});
  e.push_back({"V_new", rel_err(mine(w.Vn, rows * HV * V), f.V_new.values())});
  if (!backward) return e;
  e.push_back({"dV_local", rel_err(mine(w.dUl, rows * HV * V), ref.dV_local.values())});
  e.push_back({"dS_end", rel_err(mine(w.dS, chunks * HV * K * V), ref.dS_end.values())});
  e.push_back({"dV_new", rel_err(mine(w.dVn, rows * HV * V), ref.dV_new.values())});
  e.push_back({"dq_hv", rel_err(mine(w.dqp, rows * HV * K), ref.dq_hv.values())});
  e.push_back({"dk_hv+dk_wy", rel_err(mine(w.dkp, rows * HV * K), sum(ref.dk_hv, ref.dk_wy))});
  if (p.delta) e.push_back({"dW", rel_err(mine(w.dW, rows * HV * K), ref.dW.values())});
  // (without a gate the reference leaves dG empty; the kernels compute it and nothing reads it)
  if (p.gate != Gate::none) e.push_back({"dG+dG_wy", rel_err(mine(w.dG, rows * HV), sum(ref.dG, ref.dG_wy))});
  return e;
}

template std::vector<StageError> stage_errors<float>(const Case&, const cuda::Work<float>&, bool);
template std::vector<StageError> stage_errors<double>(const Case&, const cuda::Work<double>&, bool);

}  // namespace glr::cudatest
