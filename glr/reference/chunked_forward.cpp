// The forward stages of the chunked algorithm (docs/glr-math.md section 3). Loops run chunk by chunk and
// value head by value head, the grid a CUDA kernel launches; inside, i and j are positions in the chunk
// (tokens c.begin + i), a and b index K, and e indexes V.
#include <cmath>

#include "glr/reference/chunked.hpp"

namespace glr::reference {

namespace {
std::int64_t last(const Chunk& c) { return c.begin + c.length - 1; }
}  // namespace

template <class Real>
Decay<Real> chunk_local_cumsum(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in) {
  Decay<Real> d{Dense<Real>({p.B, p.T, p.HV}), Dense<Real>({p.B, p.T, p.HV})};
  if (p.gate == Gate::none) return d;
  const Real floor = log_decay_floor<Real>();
  // `g < floor ? floor : g` keeps NaN (the comparison is false), unlike std::fmax, which would drop it.
  auto gate = [&](std::int64_t b, std::int64_t t, std::int64_t hv) {
    const Real g = p.gate == Gate::per_head ? in.g(hv) : in.g(b, t, hv);
    return g < floor ? floor : g;
  };
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const Real g0 = gate(c.batch, c.begin, hv);
      Real acc = 0;  // Gr_i
      for (std::int64_t i = 0; i < c.length; ++i) {
        const std::int64_t t = c.begin + i;
        // A constant gate multiplies instead of summing: exact up to one rounding, as a kernel would do it.
        if (i > 0) acc = p.gate == Gate::per_head ? static_cast<Real>(i) * g0 : acc + gate(c.batch, t, hv);
        d.Gr(c.batch, t, hv) = acc;
        d.G(c.batch, t, hv) = g0 + acc;
      }
    }
  return d;
}

template <class Real>
Dense<Real> chunk_scaled_kkt(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G) {
  const std::int64_t C = p.chunk, K = p.K;
  Dense<Real> L({p.B, p.T, p.HV, C});
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = c.batch;
      for (std::int64_t i = 0; i < c.length; ++i) {
        const std::int64_t ti = c.begin + i;
        const Real* ki = in.k.ptr(b, ti, h);
        Real* row = L.ptr(b, ti, hv);
        for (std::int64_t j = 0; j < i; ++j) {
          const std::int64_t tj = c.begin + j;
          const Real* kj = in.k.ptr(b, tj, h);
          Real dot = 0;
          for (std::int64_t a = 0; a < K; ++a) dot += ki[a] * kj[a];
          row[j] = in.beta(b, ti, hv) * dot * G.between(b, ti, tj, hv);
        }
      }
    }
  return L;
}

template <class Real>
Dense<Real> solve_tril(const Params& p, const ChunkPlan& plan, const Dense<Real>& L, Storage storage) {
  const std::int64_t C = p.chunk;
  Dense<Real> A({p.B, p.T, p.HV, C});
  std::vector<Real> X(static_cast<std::size_t>(C * C));  // the chunk's inverse, unrounded while it is built
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t n = c.length, b = c.batch;
      // Row i of (I + L) X = I:  X_ij = delta_ij - sum_{j <= m < i} L_im X_mj.
      for (std::int64_t i = 0; i < n; ++i) {
        const Real* Li = L.ptr(b, c.begin + i, hv);
        for (std::int64_t j = 0; j <= i; ++j) {
          Real acc = i == j ? Real(1) : Real(0);
          for (std::int64_t m = j; m < i; ++m) acc -= Li[m] * X[static_cast<std::size_t>(m * C + j)];
          X[static_cast<std::size_t>(i * C + j)] = acc;
        }
      }
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j <= i; ++j)
          A(b, c.begin + i, hv, j) = stored(X[static_cast<std::size_t>(i * C + j)], storage);
    }
  return A;
}

template <class Real>
void recompute_w_u(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                   const Dense<Real>& A, Storage storage, Dense<Real>& W, Dense<Real>& U) {
  const std::int64_t K = p.K, V = p.V;
  W = Dense<Real>({p.B, p.T, p.HV, K});
  U = Dense<Real>({p.B, p.T, p.HV, V});
  std::vector<Real> w(static_cast<std::size_t>(K)), u(static_cast<std::size_t>(V));
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = c.batch;
      for (std::int64_t i = 0; i < c.length; ++i) {
        const std::int64_t ti = c.begin + i;
        std::fill(w.begin(), w.end(), Real(0));
        std::fill(u.begin(), u.end(), Real(0));
        for (std::int64_t j = 0; j <= i; ++j) {
          const std::int64_t tj = c.begin + j;
          const Real beta = in.beta(b, tj, hv);
          const Real aw = A(b, ti, hv, j) * beta * G.from_start(b, tj, hv);
          const Real au = A(b, ti, hv, j) * beta;
          const Real* kj = in.k.ptr(b, tj, h);
          const Real* vj = in.v.ptr(b, tj, hv);
          for (std::int64_t a = 0; a < K; ++a) w[a] += aw * kj[a];
          for (std::int64_t e = 0; e < V; ++e) u[e] += au * vj[e];
        }
        for (std::int64_t a = 0; a < K; ++a) W(b, ti, hv, a) = stored(w[a], storage);
        for (std::int64_t e = 0; e < V; ++e) U(b, ti, hv, e) = stored(u[e], storage);
      }
    }
}

template <class Real>
void chunk_state_forward(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                         const Dense<Real>& U, const Dense<Real>& W, Storage storage, Dense<Real>& S_start,
                         Dense<Real>& V_new, Dense<Real>& ht) {
  const std::int64_t K = p.K, V = p.V;
  S_start = Dense<Real>({plan.num_chunks(), p.HV, K, V});
  V_new = Dense<Real>({p.B, p.T, p.HV, V});
  ht = Dense<Real>({p.num_seqs(), p.HV, K, V});
  std::vector<Real> S(static_cast<std::size_t>(K * V));  // the running state, kept in Real ("registers")
  for (const Sequence& seq : plan.sequences)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = seq.batch;
      if (p.initial_state)
        std::copy_n(in.h0.ptr(seq.index, hv), K * V, S.begin());
      else
        std::fill(S.begin(), S.end(), Real(0));
      for (std::int64_t ci = seq.first_chunk; ci < seq.first_chunk + seq.num_chunks; ++ci) {
        const Chunk& c = plan.chunks[static_cast<std::size_t>(ci)];
        Real* Ss = S_start.ptr(ci, hv);
        for (std::int64_t x = 0; x < K * V; ++x) Ss[x] = stored(S[x], storage);
        // V_new = U - W S_start (delta members); V_new = v otherwise.
        for (std::int64_t i = 0; i < c.length; ++i) {
          const std::int64_t ti = c.begin + i;
          const Real* u = p.delta ? U.ptr(b, ti, hv) : in.v.ptr(b, ti, hv);
          Real* vn = V_new.ptr(b, ti, hv);
          for (std::int64_t e = 0; e < V; ++e) {
            Real acc = u[e];
            if (p.delta)
              for (std::int64_t a = 0; a < K; ++a) acc -= W(b, ti, hv, a) * Ss[a * V + e];
            vn[e] = p.delta ? stored(acc, storage) : acc;  // without the delta term V_new is v itself
          }
        }
        // S <- e^{G_last} S + sum_i e^{G_last - G_i} k_i V_new_i^T.
        const Real decay = G.from_start(b, last(c), hv);
        for (std::int64_t x = 0; x < K * V; ++x) S[x] *= decay;
        for (std::int64_t i = 0; i < c.length; ++i) {
          const std::int64_t ti = c.begin + i;
          const Real w = G.between(b, last(c), ti, hv);
          const Real* ki = in.k.ptr(b, ti, h);
          const Real* vn = V_new.ptr(b, ti, hv);
          for (std::int64_t a = 0; a < K; ++a) {
            const Real wk = w * ki[a];
            for (std::int64_t e = 0; e < V; ++e) S[a * V + e] += wk * vn[e];
          }
        }
      }
      std::copy(S.begin(), S.end(), ht.ptr(seq.index, hv));
    }
}

template <class Real>
Dense<Real> chunk_output(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                         const Dense<Real>& S_start, const Dense<Real>& V_new) {
  const std::int64_t K = p.K, V = p.V;
  const Real scale = static_cast<Real>(p.scale);
  Dense<Real> o({p.B, p.T, p.HV, V});
  std::vector<Real> acc(static_cast<std::size_t>(V)), qs(static_cast<std::size_t>(K));
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = c.batch;
      const Real* Ss = S_start.ptr(c.index, hv);
      for (std::int64_t i = 0; i < c.length; ++i) {
        const std::int64_t ti = c.begin + i;
        // The scale goes onto q before any product (as the kernels load it), so no partial sum grows past
        // the output's own magnitude by more than the reduction itself.
        const Real* qi = in.q.ptr(b, ti, h);
        for (std::int64_t a = 0; a < K; ++a) qs[a] = scale * qi[a];
        // The inter-chunk part, e^{G_i} q_i^T S_start ...
        const Real gi = G.from_start(b, ti, hv);
        std::fill(acc.begin(), acc.end(), Real(0));
        for (std::int64_t a = 0; a < K; ++a) {
          const Real qa = gi * qs[a];
          for (std::int64_t e = 0; e < V; ++e) acc[e] += qa * Ss[a * V + e];
        }
        // ... and the intra-chunk part, sum_{j <= i} Gamma_ij (q_i . k_j) V_new_j.
        for (std::int64_t j = 0; j <= i; ++j) {
          const std::int64_t tj = c.begin + j;
          const Real* kj = in.k.ptr(b, tj, h);
          Real dot = 0;
          for (std::int64_t a = 0; a < K; ++a) dot += qs[a] * kj[a];
          const Real m = dot * G.between(b, ti, tj, hv);
          const Real* vn = V_new.ptr(b, tj, hv);
          for (std::int64_t e = 0; e < V; ++e) acc[e] += m * vn[e];
        }
        std::copy(acc.begin(), acc.end(), o.ptr(b, ti, hv));
      }
    }
  return o;
}

#define GLR_INSTANTIATE_FORWARD(Real)                                                                        \
  template Decay<Real> chunk_local_cumsum(const Params&, const ChunkPlan&, const Inputs<Real>&);             \
  template Dense<Real> chunk_scaled_kkt(const Params&, const ChunkPlan&, const Inputs<Real>&,                \
                                        const Decay<Real>&);                                                  \
  template Dense<Real> solve_tril(const Params&, const ChunkPlan&, const Dense<Real>&, Storage);             \
  template void recompute_w_u(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&,      \
                              const Dense<Real>&, Storage, Dense<Real>&, Dense<Real>&);                       \
  template void chunk_state_forward(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&, \
                                    const Dense<Real>&, const Dense<Real>&, Storage, Dense<Real>&,            \
                                    Dense<Real>&, Dense<Real>&);                                              \
  template Dense<Real> chunk_output(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&, \
                                    const Dense<Real>&, const Dense<Real>&);
GLR_INSTANTIATE_FORWARD(float)
GLR_INSTANTIATE_FORWARD(double)

}  // namespace glr::reference
