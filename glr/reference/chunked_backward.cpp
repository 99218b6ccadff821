// The backward stages of the chunked algorithm (docs/glr-math.md section 4). Same conventions as
// chunked_forward.cpp: i, j positions in the chunk, a, b' index K (written a, d), e indexes V.
#include <cmath>

#include "glr/reference/chunked.hpp"

namespace glr::reference {

namespace {
std::int64_t last(const Chunk& c) { return c.begin + c.length - 1; }

template <class Real>
Real dot(const Real* x, const Real* y, std::int64_t n) {
  Real acc = 0;
  for (std::int64_t a = 0; a < n; ++a) acc += x[a] * y[a];
  return acc;
}
}  // namespace

template <class Real>
Dense<Real> chunk_local_dv(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                           Storage storage) {
  const std::int64_t K = p.K, V = p.V;
  const Real scale = static_cast<Real>(p.scale);
  Dense<Real> dV_local({p.B, p.T, p.HV, V});
  std::vector<Real> acc(static_cast<std::size_t>(V));
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = c.batch;
      for (std::int64_t j = 0; j < c.length; ++j) {
        const std::int64_t tj = c.begin + j;
        std::fill(acc.begin(), acc.end(), Real(0));
        // dV_local_j = sum_{i >= j} Gamma_ij ((scale q_i) . k_j) dO_i (the scale on q first, as in the forward).
        const Real* kj = in.k.ptr(b, tj, h);
        for (std::int64_t i = j; i < c.length; ++i) {
          const std::int64_t ti = c.begin + i;
          const Real* qi = in.q.ptr(b, ti, h);
          Real qk = 0;
          for (std::int64_t a = 0; a < K; ++a) qk += (scale * qi[a]) * kj[a];
          const Real m = qk * G.between(b, ti, tj, hv);
          const Real* dO = in.dout.ptr(b, ti, hv);
          for (std::int64_t e = 0; e < V; ++e) acc[e] += m * dO[e];
        }
        for (std::int64_t e = 0; e < V; ++e) dV_local(b, tj, hv, e) = stored(acc[e], storage);
      }
    }
  return dV_local;
}

template <class Real>
void chunk_state_backward(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                          const Dense<Real>& W, const Dense<Real>& dV_local, Storage storage,
                          Dense<Real>& dS_end, Dense<Real>& dV_new, Dense<Real>& dh0) {
  const std::int64_t K = p.K, V = p.V;
  const Real scale = static_cast<Real>(p.scale);
  dS_end = Dense<Real>({plan.num_chunks(), p.HV, K, V});
  dV_new = Dense<Real>({p.B, p.T, p.HV, V});
  dh0 = Dense<Real>({p.num_seqs(), p.HV, K, V});
  std::vector<Real> dS(static_cast<std::size_t>(K * V));  // the running state gradient, in Real
  for (const Sequence& seq : plan.sequences)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = seq.batch;
      if (p.final_state)
        std::copy_n(in.dht.ptr(seq.index, hv), K * V, dS.begin());
      else
        std::fill(dS.begin(), dS.end(), Real(0));
      for (std::int64_t ci = seq.first_chunk + seq.num_chunks - 1; ci >= seq.first_chunk; --ci) {
        const Chunk& c = plan.chunks[static_cast<std::size_t>(ci)];
        Real* dSe = dS_end.ptr(ci, hv);
        for (std::int64_t x = 0; x < K * V; ++x) dSe[x] = stored(dS[x], storage);
        // dV_new_i = dV_local_i + e^{G_last - G_i} dS_end^T k_i.
        for (std::int64_t i = 0; i < c.length; ++i) {
          const std::int64_t ti = c.begin + i;
          const Real w = G.between(b, last(c), ti, hv);
          const Real* ki = in.k.ptr(b, ti, h);
          for (std::int64_t e = 0; e < V; ++e) {
            Real acc = 0;
            for (std::int64_t a = 0; a < K; ++a) acc += ki[a] * dSe[a * V + e];
            dV_new(b, ti, hv, e) = stored(dV_local(b, ti, hv, e) + w * acc, storage);
          }
        }
        // dS <- e^{G_last} dS + scale sum_i e^{G_i} q_i dO_i^T - sum_i W_i dV_new_i^T.
        const Real decay = G.from_start(b, last(c), hv);
        for (std::int64_t x = 0; x < K * V; ++x) dS[x] *= decay;
        for (std::int64_t i = 0; i < c.length; ++i) {
          const std::int64_t ti = c.begin + i;
          const Real sq = scale * G.from_start(b, ti, hv);
          const Real* qi = in.q.ptr(b, ti, h);
          const Real* dO = in.dout.ptr(b, ti, hv);
          const Real* dvn = dV_new.ptr(b, ti, hv);
          for (std::int64_t a = 0; a < K; ++a) {
            const Real qa = sq * qi[a];
            for (std::int64_t e = 0; e < V; ++e) dS[a * V + e] += qa * dO[e];
            // Skipped, not multiplied by W = 0, without the delta term: 0 * NaN would carry a NaN of
            // dV_new into dS where the exact backward has none.
            if (!p.delta) continue;
            const Real wa = W(b, ti, hv, a);
            for (std::int64_t e = 0; e < V; ++e) dS[a * V + e] -= wa * dvn[e];
          }
        }
      }
      std::copy(dS.begin(), dS.end(), dh0.ptr(seq.index, hv));
    }
}

template <class Real>
void chunk_dqkwg(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                 const Dense<Real>& S_start, const Dense<Real>& V_new, const Dense<Real>& dS_end,
                 const Dense<Real>& dV_new, Storage storage, Dense<Real>& dq_hv, Dense<Real>& dk_hv,
                 Dense<Real>& dW, Dense<Real>& dG) {
  const std::int64_t K = p.K, V = p.V, C = p.chunk;
  const Real scale = static_cast<Real>(p.scale);
  dq_hv = Dense<Real>({p.B, p.T, p.HV, K});
  dk_hv = Dense<Real>({p.B, p.T, p.HV, K});
  dW = p.delta ? Dense<Real>({p.B, p.T, p.HV, K}) : Dense<Real>();
  dG = Dense<Real>({p.B, p.T, p.HV});
  // dP_ij = dM_ij Gamma_ij (q_i . k_j) for j <= i, dM_ij = scale dO_i . V_new_j: the intra-chunk attention's
  // contribution to d/dG_i (row sums) and d/dG_j (column sums, negated).
  std::vector<Real> dA(static_cast<std::size_t>(C * C));  // dM_ij Gamma_ij
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = c.batch, n = c.length;
      const Real* Ss = S_start.ptr(c.index, hv);
      const Real* dSe = dS_end.ptr(c.index, hv);
      Real dG_last = 0;  // every d/dG_last term, added to the chunk's last token at the end
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j <= i; ++j) {
          const std::int64_t ti = c.begin + i, tj = c.begin + j;
          dA[static_cast<std::size_t>(i * C + j)] =
              scale * dot(in.dout.ptr(b, ti, hv), V_new.ptr(b, tj, hv), V) * G.between(b, ti, tj, hv);
        }
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t ti = c.begin + i;
        const Real* qi = in.q.ptr(b, ti, h);
        const Real* ki = in.k.ptr(b, ti, h);
        const Real* dO = in.dout.ptr(b, ti, hv);
        const Real* vn = V_new.ptr(b, ti, hv);
        const Real* dvn = dV_new.ptr(b, ti, hv);
        const Real gi = G.from_start(b, ti, hv);
        const Real wi = G.between(b, last(c), ti, hv);
        Real* dq = dq_hv.ptr(b, ti, hv);
        Real* dk = dk_hv.ptr(b, ti, hv);
        Real dGi = 0;
        for (std::int64_t a = 0; a < K; ++a) {
          // Through o's inter-chunk part: dq_i = scale e^{G_i} S_start dO_i.
          Real sdo = 0, sdv = 0, dsv = 0;
          for (std::int64_t e = 0; e < V; ++e) {
            sdo += Ss[a * V + e] * dO[e];
            sdv += Ss[a * V + e] * dvn[e];
            dsv += dSe[a * V + e] * vn[e];
          }
          dq[a] = scale * gi * sdo;
          // Through the state update: dk_i = e^{G_last - G_i} dS_end V_new_i.
          dk[a] = wi * dsv;
          if (p.delta) dW(b, ti, hv, a) = stored(-sdv, storage);  // V_new = U - W S_start
          dGi += qi[a] * dq[a];
          // e^{G_last - G_i} gives -k_i . dk_i to dG_i and +k_i . dk_i to dG_last. For i = last the two cancel
          // exactly, so neither is added: the sum would be NaN - NaN for a NaN in V_new_last, which the
          // exact dg does not depend on.
          if (ti != last(c)) {
            dGi -= ki[a] * dk[a];
            dG_last += ki[a] * dk[a];
          }
        }
        // Through o's intra-chunk part: dq_i += sum_{j<=i} dA_ij k_j, dk_i += sum_{m>=i} dA_mi q_m.
        for (std::int64_t j = 0; j <= i; ++j) {
          const Real* kj = in.k.ptr(b, c.begin + j, h);
          const Real d = dA[static_cast<std::size_t>(i * C + j)];
          for (std::int64_t a = 0; a < K; ++a) dq[a] += d * kj[a];
          // Gamma_ij gives +dp to dG_i and -dp to dG_j; on the diagonal (Gamma_ii = 1) they cancel exactly, and
          // are skipped for the same reason as above.
          if (j == i) continue;
          const Real dp = d * dot(qi, kj, K);
          dGi += dp;
          dG(b, c.begin + j, hv) -= dp;
        }
        for (std::int64_t m = i; m < n; ++m) {
          const Real* qm = in.q.ptr(b, c.begin + m, h);
          const Real d = dA[static_cast<std::size_t>(m * C + i)];
          for (std::int64_t a = 0; a < K; ++a) dk[a] += d * qm[a];
        }
        dG(b, ti, hv) += dGi;
      }
      // S_next = e^{G_last} S_start + ...: d/dG_last += e^{G_last} <S_start, dS_end>.
      dG_last += G.from_start(b, last(c), hv) * dot(Ss, dSe, K * V);
      dG(b, last(c), hv) += dG_last;
    }
  if (p.gate == Gate::none) dG = Dense<Real>();
}

template <class Real>
void wy_backward(const Params& p, const ChunkPlan& plan, const Inputs<Real>& in, const Decay<Real>& G,
                 const Dense<Real>& A, const Dense<Real>& dW, const Dense<Real>& dV_new, Dense<Real>& dk_wy,
                 Dense<Real>& dv, Dense<Real>& dbeta, Dense<Real>& dG_wy) {
  const std::int64_t K = p.K, V = p.V, C = p.chunk;
  dk_wy = Dense<Real>({p.B, p.T, p.HV, K});
  dv = Dense<Real>({p.B, p.T, p.HV, V});
  dbeta = Dense<Real>({p.B, p.T, p.HV});
  dG_wy = Dense<Real>({p.B, p.T, p.HV});
  const auto at = [C](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>(i * C + j); };
  std::vector<Real> dAm(static_cast<std::size_t>(C * C)), T1(dAm.size()), dL(dAm.size());
  std::vector<Real> dKb(static_cast<std::size_t>(K)), dVb(static_cast<std::size_t>(V));
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      const std::int64_t h = p.qk_head(hv), b = c.batch, n = c.length;
      auto tok = [&](std::int64_t i) { return c.begin + i; };
      auto Aij = [&](std::int64_t i, std::int64_t j) { return A(b, tok(i), hv, j); };
      auto beta = [&](std::int64_t i) { return in.beta(b, tok(i), hv); };
      auto eG = [&](std::int64_t i) { return G.from_start(b, tok(i), hv); };
      // dA_ij = dW_i . (beta_j e^{G_j} k_j) + dU_i . (beta_j v_j), j <= i (dU = dV_new: V_new = U - W S).
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j <= i; ++j)
          dAm[at(i, j)] = beta(j) * (eG(j) * dot(dW.ptr(b, tok(i), hv), in.k.ptr(b, tok(j), h), K) +
                                     dot(dV_new.ptr(b, tok(i), hv), in.v.ptr(b, tok(j), hv), V));
      // Through W = A Kb and U = A Vb: dKb_j = sum_{i>=j} A_ij dW_i, dVb_j = sum_{i>=j} A_ij dU_i.
      for (std::int64_t j = 0; j < n; ++j) {
        std::fill(dKb.begin(), dKb.end(), Real(0));
        std::fill(dVb.begin(), dVb.end(), Real(0));
        for (std::int64_t i = j; i < n; ++i) {
          const Real a_ij = Aij(i, j);
          const Real* dw = dW.ptr(b, tok(i), hv);
          const Real* du = dV_new.ptr(b, tok(i), hv);
          for (std::int64_t a = 0; a < K; ++a) dKb[a] += a_ij * dw[a];
          for (std::int64_t e = 0; e < V; ++e) dVb[e] += a_ij * du[e];
        }
        const Real eg = eG(j), bj = beta(j);
        const Real* kj = in.k.ptr(b, tok(j), h);
        const Real* vj = in.v.ptr(b, tok(j), hv);
        for (std::int64_t e = 0; e < V; ++e) dv(b, tok(j), hv, e) = bj * dVb[e];
        for (std::int64_t a = 0; a < K; ++a) dk_wy(b, tok(j), hv, a) = bj * eg * dKb[a];
        const Real kdk = eg * dot(dKb.data(), kj, K);
        dbeta(b, tok(j), hv) = dot(dVb.data(), vj, V) + kdk;
        dG_wy(b, tok(j), hv) = bj * kdk;
      }
      // Through A = (I + L)^-1: dL = -A^T dA A^T, strictly lower. T1 = dA A^T, then dL = -A^T T1.
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          Real acc = 0;  // sum_m dA_im A_jm, m <= min(i, j)
          for (std::int64_t m = 0; m <= std::min(i, j); ++m) acc += dAm[at(i, m)] * Aij(j, m);
          T1[at(i, j)] = acc;
        }
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < i; ++j) {
          Real acc = 0;  // sum_m A_mi T1_mj, m >= i
          for (std::int64_t m = i; m < n; ++m) acc += Aij(m, i) * T1[at(m, j)];
          dL[at(i, j)] = -acc;
        }
      // L_ij = beta_i (k_i . k_j) Gamma_ij, j < i.
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < i; ++j) {
          const Real* ki = in.k.ptr(b, tok(i), h);
          const Real* kj = in.k.ptr(b, tok(j), h);
          const Real gamma = G.between(b, tok(i), tok(j), hv);
          const Real kk = dot(ki, kj, K);
          const Real d = dL[at(i, j)];
          dbeta(b, tok(i), hv) += d * kk * gamma;
          const Real dlg = d * beta(i) * kk * gamma;  // dL_ij L_ij
          dG_wy(b, tok(i), hv) += dlg;
          dG_wy(b, tok(j), hv) -= dlg;
          const Real E = d * beta(i) * gamma;
          for (std::int64_t a = 0; a < K; ++a) {
            dk_wy(b, tok(i), hv, a) += E * kj[a];
            dk_wy(b, tok(j), hv, a) += E * ki[a];
          }
        }
    }
}

template <class Real>
Dense<Real> chunk_reverse_cumsum(const Params& p, const ChunkPlan& plan, const Dense<Real>& dG,
                                 const Dense<Real>& dG_wy) {
  Dense<Real> dg({p.B, p.T, p.HV});
  for (const Chunk& c : plan.chunks)
    for (std::int64_t hv = 0; hv < p.HV; ++hv) {
      Real acc = 0;
      for (std::int64_t i = c.length - 1; i >= 0; --i) {
        const std::int64_t t = c.begin + i;
        acc += dG(c.batch, t, hv) + (dG_wy.empty() ? Real(0) : dG_wy(c.batch, t, hv));
        dg(c.batch, t, hv) = acc;
      }
    }
  return dg;
}

template <class Real>
void reduce_gradients(const Params& p, const ChunkPlan& plan, const Dense<Real>& dq_hv, const Dense<Real>& dk_hv,
                      const Dense<Real>& dk_wy, const Dense<Real>& dg_token, Dense<Real>& dq, Dense<Real>& dk,
                      Dense<Real>& dg) {
  const std::int64_t K = p.K, group = p.group();
  dq = Dense<Real>({p.B, p.T, p.H, K});
  dk = Dense<Real>({p.B, p.T, p.H, K});
  for (const Chunk& c : plan.chunks)
    for (std::int64_t t = c.begin; t < c.begin + c.length; ++t)
      for (std::int64_t h = 0; h < p.H; ++h)
        for (std::int64_t hv = h * group; hv < (h + 1) * group; ++hv)
          for (std::int64_t a = 0; a < K; ++a) {
            dq(c.batch, t, h, a) += dq_hv(c.batch, t, hv, a);
            dk(c.batch, t, h, a) += dk_hv(c.batch, t, hv, a) + (dk_wy.empty() ? Real(0) : dk_wy(c.batch, t, hv, a));
          }
  if (p.gate != Gate::per_head) {
    dg = dg_token;
    return;
  }
  dg = Dense<Real>({p.HV});
  for (const Chunk& c : plan.chunks)
    for (std::int64_t t = c.begin; t < c.begin + c.length; ++t)
      for (std::int64_t hv = 0; hv < p.HV; ++hv) dg(hv) += dg_token(c.batch, t, hv);
}

#define GLR_INSTANTIATE_BACKWARD(Real)                                                                        \
  template Dense<Real> chunk_local_dv(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&, \
                                      Storage);                                                                \
  template void chunk_state_backward(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&, \
                                     const Dense<Real>&, const Dense<Real>&, Storage, Dense<Real>&,            \
                                     Dense<Real>&, Dense<Real>&);                                              \
  template void chunk_dqkwg(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&,         \
                            const Dense<Real>&, const Dense<Real>&, const Dense<Real>&, const Dense<Real>&,   \
                            Storage, Dense<Real>&, Dense<Real>&, Dense<Real>&, Dense<Real>&);                 \
  template void wy_backward(const Params&, const ChunkPlan&, const Inputs<Real>&, const Decay<Real>&,         \
                            const Dense<Real>&, const Dense<Real>&, const Dense<Real>&, Dense<Real>&,         \
                            Dense<Real>&, Dense<Real>&, Dense<Real>&);                                        \
  template Dense<Real> chunk_reverse_cumsum(const Params&, const ChunkPlan&, const Dense<Real>&,              \
                                            const Dense<Real>&);                                               \
  template void reduce_gradients(const Params&, const ChunkPlan&, const Dense<Real>&, const Dense<Real>&,     \
                                 const Dense<Real>&, const Dense<Real>&, Dense<Real>&, Dense<Real>&,          \
                                 Dense<Real>&);
GLR_INSTANTIATE_BACKWARD(float)
GLR_INSTANTIATE_BACKWARD(double)

}  // namespace glr::reference
