// glr/tensors.hpp: the tensors of one call, as pointers to element 0 laid out by Params::strides.
//
// One element type for every tensor keeps the CPU implementations simple (the oracle is all float64, the
// chunked CPU algorithm all in its working type). Pointers a problem does not use must be null: g for
// gate = none, beta and dbeta without the delta term, h0/dh0 without an initial state, ht/dht without a
// final state. Callers check that with check_pointers before any work.
#pragma once

#include "glr/params.hpp"

namespace glr {

template <class E>
struct ForwardTensors {
  const E* q = nullptr;     // [B, T, H, K]
  const E* k = nullptr;     // [B, T, H, K]
  const E* v = nullptr;     // [B, T, HV, V]
  const E* g = nullptr;     // [B, T, HV], or [HV] for a per-head gate; null for gate = none
  const E* beta = nullptr;  // [B, T, HV]; null without the delta term
  const E* h0 = nullptr;    // [N, HV, K, V]; null without an initial state
  E* o = nullptr;           // [B, T, HV, V]
  E* ht = nullptr;          // [N, HV, K, V]; null without a final state
};

template <class E>
struct BackwardTensors {
  // The forward's inputs, and the gradients of its outputs.
  const E* q = nullptr;
  const E* k = nullptr;
  const E* v = nullptr;
  const E* g = nullptr;
  const E* beta = nullptr;
  const E* h0 = nullptr;
  const E* dout = nullptr;  // [B, T, HV, V]
  const E* dht = nullptr;   // [N, HV, K, V]; null without a final state
  // The gradients of the forward's inputs.
  E* dq = nullptr;     // [B, T, H, K]: summed over the value heads of each group
  E* dk = nullptr;     // [B, T, H, K]: summed over the value heads of each group
  E* dv = nullptr;     // [B, T, HV, V]
  E* dg = nullptr;     // like g
  E* dbeta = nullptr;  // like beta
  E* dh0 = nullptr;    // like h0
};

// Throws InvalidArgument(name) if ptr is null where the problem needs a non-empty tensor (an empty one, as
// q of a T = 0 problem, may be null: PyTorch passes null for empty tensors), or set where the problem has
// none (a pointer set for an absent tensor is almost always a mixed-up family member).
void check_pointer(const char* name, const void* ptr, bool needed, std::int64_t elements);

namespace detail {
struct Counts {
  std::int64_t qk, v, g, scalar, state;
  explicit Counts(const Params& p)
      : qk(p.B * p.T * p.H * p.K), v(p.B * p.T * p.HV * p.V),
        g(p.gate == Gate::per_head ? p.HV : p.B * p.T * p.HV), scalar(p.B * p.T * p.HV),
        state(p.num_seqs() * p.HV * p.K * p.V) {}
};
}  // namespace detail

// Every pointer of a call against the problem, first bad one named.
template <class E>
void check_pointers(const Params& p, const ForwardTensors<E>& t) {
  const detail::Counts n(p);
  const bool has_g = p.gate != Gate::none;
  check_pointer("q", t.q, true, n.qk);
  check_pointer("k", t.k, true, n.qk);
  check_pointer("v", t.v, true, n.v);
  check_pointer("g", t.g, has_g, n.g);
  check_pointer("beta", t.beta, p.delta, n.scalar);
  check_pointer("h0", t.h0, p.initial_state, n.state);
  check_pointer("o", t.o, true, n.v);
  check_pointer("ht", t.ht, p.final_state, n.state);
}
template <class E>
void check_pointers(const Params& p, const BackwardTensors<E>& t) {
  const detail::Counts n(p);
  const bool has_g = p.gate != Gate::none;
  check_pointer("q", t.q, true, n.qk);
  check_pointer("k", t.k, true, n.qk);
  check_pointer("v", t.v, true, n.v);
  check_pointer("g", t.g, has_g, n.g);
  check_pointer("beta", t.beta, p.delta, n.scalar);
  check_pointer("h0", t.h0, p.initial_state, n.state);
  check_pointer("dout", t.dout, true, n.v);
  check_pointer("dht", t.dht, p.final_state, n.state);
  check_pointer("dq", t.dq, true, n.qk);
  check_pointer("dk", t.dk, true, n.qk);
  check_pointer("dv", t.dv, true, n.v);
  check_pointer("dg", t.dg, has_g, n.g);
  check_pointer("dbeta", t.dbeta, p.delta, n.scalar);
  check_pointer("dh0", t.dh0, p.initial_state, n.state);
}

}  // namespace glr
