// glr/reference/inputs.hpp: a call's strided inputs gathered into the dense arrays the CPU implementations
// compute in. The oracle and the chunked algorithm share it, so both read their inputs the same way.
#pragma once

#include <vector>

#include "glr/params.hpp"
#include "glr/reference/dense.hpp"
#include "glr/tensors.hpp"

namespace glr::reference {
namespace io {

using Shape = std::vector<std::int64_t>;

inline Shape token_shape(const Params& p, std::int64_t heads, std::int64_t dim) { return {p.B, p.T, heads, dim}; }
inline Shape scalar_shape(const Params& p) { return {p.B, p.T, p.HV}; }
inline Shape gate_shape(const Params& p) { return p.gate == Gate::per_head ? Shape{p.HV} : scalar_shape(p); }
inline Shape state_shape(const Params& p) { return {p.num_seqs(), p.HV, p.K, p.V}; }

inline Shape strides_of(const TokenStrides& s) { return {s.batch, s.token, s.head, s.dim}; }
inline Shape strides_of(const ScalarStrides& s) { return {s.batch, s.token, s.head}; }
inline Shape gate_strides(const Params& p, const ScalarStrides& s) {
  return p.gate == Gate::per_head ? Shape{s.head} : strides_of(s);
}
inline Shape strides_of(const StateStrides& s) { return {s.seq, s.head, s.k, s.v}; }

}  // namespace io

// The inputs of a call, dense. Absent tensors stay empty.
template <class Real>
struct Inputs {
  Dense<Real> q, k;     // [B, T, H, K]
  Dense<Real> v;        // [B, T, HV, V]
  Dense<Real> g;        // [B, T, HV] or [HV]
  Dense<Real> beta;     // [B, T, HV]
  Dense<Real> h0;       // [N, HV, K, V]
  Dense<Real> dout;     // [B, T, HV, V] (backward)
  Dense<Real> dht;      // [N, HV, K, V] (backward)
};

template <class Real, class E>
Inputs<Real> gather_inputs(const Params& p, const E* q, const E* k, const E* v, const E* g, const E* beta,
                           const E* h0) {
  const Strides& s = p.strides;
  using namespace io;
  Inputs<Real> in;
  in.q = gather<Real>(q, token_shape(p, p.H, p.K), strides_of(s.q));
  in.k = gather<Real>(k, token_shape(p, p.H, p.K), strides_of(s.k));
  in.v = gather<Real>(v, token_shape(p, p.HV, p.V), strides_of(s.v));
  if (g) in.g = gather<Real>(g, gate_shape(p), gate_strides(p, s.g));
  if (beta) in.beta = gather<Real>(beta, scalar_shape(p), strides_of(s.beta));
  if (h0) in.h0 = gather<Real>(h0, state_shape(p), strides_of(s.h0));
  return in;
}

template <class Real, class E>
Inputs<Real> gather_forward(const Params& p, const ForwardTensors<E>& t) {
  return gather_inputs<Real>(p, t.q, t.k, t.v, t.g, t.beta, t.h0);
}

template <class Real, class E>
Inputs<Real> gather_backward(const Params& p, const BackwardTensors<E>& t) {
  using namespace io;
  Inputs<Real> in = gather_inputs<Real>(p, t.q, t.k, t.v, t.g, t.beta, t.h0);
  in.dout = gather<Real>(t.dout, token_shape(p, p.HV, p.V), strides_of(p.strides.dout));
  if (t.dht) in.dht = gather<Real>(t.dht, state_shape(p), strides_of(p.strides.dht));
  return in;
}

// The value of the log-decay of token (b, t) for value head hv (0 for gate = none).
template <class Real>
Real gate_at(const Params& p, const Dense<Real>& g, std::int64_t b, std::int64_t t, std::int64_t hv) {
  switch (p.gate) {
    case Gate::none: return Real(0);
    case Gate::per_token: return g(b, t, hv);
    case Gate::per_head: return g(hv);
  }
  return Real(0);
}

}  // namespace glr::reference
