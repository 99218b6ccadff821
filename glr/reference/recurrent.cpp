// The exact recurrence and its hand-written reverse-time backward (glr/reference/oracle.hpp states the
// forward; docs/glr-math.md section 2 derives the backward line by line).
#include <algorithm>
#include <cmath>
#include <vector>

#include "glr/chunks.hpp"
#include "glr/reference/inputs.hpp"
#include "glr/reference/oracle.hpp"

namespace glr::reference {

namespace {

// States are K x V, row-major: S[i * V + j] couples key dim i with value dim j.
template <class Real>
using State = std::vector<Real>;

// Where one (sequence, value head) pair reads its inputs.
template <class Real>
struct Lane {
  const Params& p;
  const Inputs<Real>& in;
  std::int64_t b, hv, h;  // batch row, value head, its query/key head

  const Real* q(std::int64_t t) const { return in.q.ptr(b, t, h); }
  const Real* k(std::int64_t t) const { return in.k.ptr(b, t, h); }
  const Real* v(std::int64_t t) const { return in.v.ptr(b, t, hv); }
  Real decay(std::int64_t t) const {
    return p.gate == Gate::none ? Real(1) : std::exp(gate_at(p, in.g, b, t, hv));
  }
  Real beta(std::int64_t t) const { return p.delta ? in.beta(b, t, hv) : Real(1); }
};

// One step: P = decay * S_prev; u = beta (v - P^T k) (or v); S = P + k u^T. Returns P in `P`, u in `u`,
// and r = P^T k in `r` (delta members), all of which the backward needs again.
template <class Real>
void step(const Lane<Real>& lane, std::int64_t t, const State<Real>& S_prev, State<Real>& P, State<Real>& S,
          std::vector<Real>& r, std::vector<Real>& u) {
  const std::int64_t K = lane.p.K, V = lane.p.V;
  const Real a = lane.decay(t);
  const Real* k = lane.k(t);
  const Real* v = lane.v(t);
  for (std::int64_t i = 0; i < K * V; ++i) P[i] = a * S_prev[i];
  if (lane.p.delta) {
    const Real beta = lane.beta(t);
    for (std::int64_t j = 0; j < V; ++j) {
      Real acc = 0;
      for (std::int64_t i = 0; i < K; ++i) acc += P[i * V + j] * k[i];
      r[j] = acc;
      u[j] = beta * (v[j] - acc);
    }
  } else {
    for (std::int64_t j = 0; j < V; ++j) u[j] = v[j];
  }
  for (std::int64_t i = 0; i < K; ++i)
    for (std::int64_t j = 0; j < V; ++j) S[i * V + j] = P[i * V + j] + k[i] * u[j];
}

template <class Real>
State<Real> initial_state(const Params& p, const Inputs<Real>& in, std::int64_t n, std::int64_t hv) {
  State<Real> S(static_cast<std::size_t>(p.K * p.V), Real(0));
  if (p.initial_state) std::copy_n(in.h0.ptr(n, hv), p.K * p.V, S.begin());
  return S;
}

// Checkpoint spacing of the backward: the states at every kBlock-th step are kept, the ones in between
// recomputed one block at a time (recomputation repeats the same operations, so it is bitwise exact).
constexpr std::int64_t kBlock = 64;

}  // namespace

template <class Real>
void recurrent_forward(const Params& p, const ForwardTensors<Real>& t) {
  p.validate(Pass::forward);
  check_pointers(p, t);
  const Inputs<Real> in = gather_forward<Real>(p, t);
  const ChunkPlan plan = make_chunk_plan(p);
  Dense<Real> o(io::token_shape(p, p.HV, p.V));
  Dense<Real> ht(io::state_shape(p));
  const std::size_t KV = static_cast<std::size_t>(p.K * p.V);
  State<Real> P(KV), S_next(KV);
  std::vector<Real> r(static_cast<std::size_t>(p.V)), u(static_cast<std::size_t>(p.V));
  for (const Sequence& seq : plan.sequences) {
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const Lane<Real> lane{p, in, seq.batch, hv, p.qk_head(hv)};
      State<Real> S = initial_state(p, in, seq.index, hv);
      for (std::int64_t tt = seq.begin; tt < seq.begin + seq.length; ++tt) {
        step(lane, tt, S, P, S_next, r, u);
        S.swap(S_next);
        const Real* q = lane.q(tt);
        Real* out = o.ptr(seq.batch, tt, hv);
        for (std::int64_t j = 0; j < p.V; ++j) {
          Real acc = 0;
          for (std::int64_t i = 0; i < p.K; ++i) acc += S[i * p.V + j] * q[i];
          out[j] = static_cast<Real>(p.scale) * acc;
        }
      }
      std::copy(S.begin(), S.end(), ht.ptr(seq.index, hv));
    }
  }
  scatter(o, t.o, io::strides_of(p.strides.o));
  if (p.final_state) scatter(ht, t.ht, io::strides_of(p.strides.ht));
}

template <class Real>
void recurrent_backward(const Params& p, const BackwardTensors<Real>& t) {
  p.validate(Pass::backward);
  check_pointers(p, t);
  const Inputs<Real> in = gather_backward<Real>(p, t);
  const ChunkPlan plan = make_chunk_plan(p);
  const Real scale = static_cast<Real>(p.scale);
  const std::int64_t K = p.K, V = p.V;
  const std::size_t KV = static_cast<std::size_t>(K * V);

  Dense<Real> dq(io::token_shape(p, p.H, K)), dk(io::token_shape(p, p.H, K));
  Dense<Real> dv(io::token_shape(p, p.HV, V));
  Dense<Real> dg(io::gate_shape(p)), dbeta(io::scalar_shape(p));
  Dense<Real> dh0(io::state_shape(p));

  State<Real> P(KV), S(KV), dS(KV), dP(KV);
  std::vector<Real> r(static_cast<std::size_t>(V)), u(static_cast<std::size_t>(V));
  std::vector<Real> du(static_cast<std::size_t>(V)), dr(static_cast<std::size_t>(V));
  std::vector<State<Real>> before;  // before[i]: the state entering step block_begin + i

  for (const Sequence& seq : plan.sequences) {
    const std::int64_t end = seq.begin + seq.length;
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const Lane<Real> lane{p, in, seq.batch, hv, p.qk_head(hv)};
      // Forward sweep keeping the checkpoints: the state entering every kBlock-th step.
      std::vector<State<Real>> checkpoints;
      State<Real> cur = initial_state(p, in, seq.index, hv);
      for (std::int64_t tt = seq.begin; tt < end; ++tt) {
        if ((tt - seq.begin) % kBlock == 0) checkpoints.push_back(cur);
        step(lane, tt, cur, P, S, r, u);
        cur.swap(S);
      }
      // dS starts as the gradient of the final state.
      if (p.final_state)
        std::copy_n(in.dht.ptr(seq.index, hv), KV, dS.begin());
      else
        std::fill(dS.begin(), dS.end(), Real(0));

      for (std::int64_t blk = static_cast<std::int64_t>(checkpoints.size()) - 1; blk >= 0; --blk) {
        const std::int64_t b0 = seq.begin + blk * kBlock, b1 = std::min(end, b0 + kBlock);
        before.assign(1, checkpoints[static_cast<std::size_t>(blk)]);
        for (std::int64_t tt = b0; tt + 1 < b1; ++tt) {
          step(lane, tt, before.back(), P, S, r, u);
          before.push_back(S);
        }
        for (std::int64_t tt = b1 - 1; tt >= b0; --tt) {
          step(lane, tt, before[static_cast<std::size_t>(tt - b0)], P, S, r, u);  // P, r, u, S = S_t
          const Real* q = lane.q(tt);
          const Real* k = lane.k(tt);
          const Real* v = lane.v(tt);
          const Real* dout = in.dout.ptr(seq.batch, tt, hv);
          // o_t = scale S_t^T q_t: dS_t += scale q_t do_t^T, dq_t += scale S_t do_t.
          Real* dq_t = dq.ptr(seq.batch, tt, lane.h);
          for (std::int64_t i = 0; i < K; ++i) {
            Real acc = 0;
            for (std::int64_t j = 0; j < V; ++j) {
              dS[i * V + j] += scale * q[i] * dout[j];
              acc += S[i * V + j] * dout[j];
            }
            dq_t[i] += scale * acc;
          }
          // S_t = P_t + k_t u_t^T: dP = dS, dk += dS u, du = dS^T k.
          Real* dk_t = dk.ptr(seq.batch, tt, lane.h);
          for (std::int64_t i = 0; i < K; ++i) {
            Real acc = 0;
            for (std::int64_t j = 0; j < V; ++j) acc += dS[i * V + j] * u[j];
            dk_t[i] += acc;
          }
          for (std::int64_t j = 0; j < V; ++j) {
            Real acc = 0;
            for (std::int64_t i = 0; i < K; ++i) acc += dS[i * V + j] * k[i];
            du[j] = acc;
          }
          dP = dS;
          Real* dv_t = dv.ptr(seq.batch, tt, hv);
          if (p.delta) {
            // u = beta (v - r), r = P^T k: dv = beta du, dbeta = du . (v - r), dr = -beta du,
            // dP += k dr^T, dk += P dr.
            const Real beta = lane.beta(tt);
            Real db = 0;
            for (std::int64_t j = 0; j < V; ++j) {
              dv_t[j] = beta * du[j];
              db += du[j] * (v[j] - r[j]);
              dr[j] = -beta * du[j];
            }
            dbeta(seq.batch, tt, hv) = db;
            for (std::int64_t i = 0; i < K; ++i) {
              Real acc = 0;
              for (std::int64_t j = 0; j < V; ++j) {
                dP[i * V + j] += k[i] * dr[j];
                acc += P[i * V + j] * dr[j];
              }
              dk_t[i] += acc;
            }
          } else {
            for (std::int64_t j = 0; j < V; ++j) dv_t[j] = du[j];
          }
          // P = e^{g} S_prev: dg = <P, dP>, dS_prev = e^{g} dP.
          if (p.gate != Gate::none) {
            Real acc = 0;
            for (std::size_t i = 0; i < KV; ++i) acc += P[i] * dP[i];
            if (p.gate == Gate::per_token)
              dg(seq.batch, tt, hv) = acc;
            else
              dg(hv) += acc;
          }
          const Real a = lane.decay(tt);
          for (std::size_t i = 0; i < KV; ++i) dS[i] = a * dP[i];
        }
      }
      std::copy(dS.begin(), dS.end(), dh0.ptr(seq.index, hv));
    }
  }
  const Strides& s = p.strides;
  scatter(dq, t.dq, io::strides_of(s.dq));
  scatter(dk, t.dk, io::strides_of(s.dk));
  scatter(dv, t.dv, io::strides_of(s.dv));
  if (p.gate != Gate::none) scatter(dg, t.dg, io::gate_strides(p, s.dg));
  if (p.delta) scatter(dbeta, t.dbeta, io::strides_of(s.dbeta));
  if (p.initial_state) scatter(dh0, t.dh0, io::strides_of(s.dh0));
}

template void recurrent_forward<double>(const Params&, const ForwardTensors<double>&);
template void recurrent_forward<float>(const Params&, const ForwardTensors<float>&);
template void recurrent_backward<double>(const Params&, const BackwardTensors<double>&);
template void recurrent_backward<float>(const Params&, const BackwardTensors<float>&);

}  // namespace glr::reference
