// glr/reference/oracle.hpp: the exact recurrence, token by token, and its exact backward.
//
// Per sequence n and value head hv (query/key head h = hv / (HV / H)), with S_{-1} = h0[n, hv] or 0:
//
//     P_t = e^{g_t} S_{t-1}                          the decayed state (g_t = 0 for gate = none)
//     u_t = beta_t (v_t - P_t^T k_t)                  delta members;  u_t = v_t otherwise (beta unused)
//     S_t = P_t + k_t u_t^T
//     o_t = scale S_t^T q_t,                          ht[n, hv] = S_last
//
// The backward is the same recurrence run in reverse (docs/glr-math.md, section 2): it carries dS, the
// gradient of the loss with respect to S_t, from dht back to dh0, and recomputes the states it needs from
// checkpoints, so its memory is O((T/64 + 64) K V) per head, never O(T K V).
//
// Real = double is the float64 oracle every other implementation is judged by. Real = float is the plain
// recurrence at single precision: the "same-precision reference" whose error the chunked float algorithm
// is compared with in the tests.
#pragma once

#include "glr/params.hpp"
#include "glr/tensors.hpp"

namespace glr::reference {

// Both validate p (Params::validate) and the pointers (check_pointers) before any work.
template <class Real>
void recurrent_forward(const Params& p, const ForwardTensors<Real>& t);
template <class Real>
void recurrent_backward(const Params& p, const BackwardTensors<Real>& t);

inline void oracle_forward(const Params& p, const ForwardTensors<double>& t) { recurrent_forward(p, t); }
inline void oracle_backward(const Params& p, const BackwardTensors<double>& t) { recurrent_backward(p, t); }

}  // namespace glr::reference
