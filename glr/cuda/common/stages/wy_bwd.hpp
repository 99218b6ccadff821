// Backward stage 4, the WY backward (delta members): the gradient through U = A diag(beta) V and
// W = A diag(beta e^G) K, and through A = (I + L)^-1 with L = strictly_lower(diag(beta)(K K^T . Gamma)).
// dU = dV_new and dW come from the previous stages.
//
//     X = A^T dW,  Y = A^T dU                         gradients of diag(beta e^G) K and diag(beta) V
//     dA = dW (diag(beta e^G) K)^T + dU (diag(beta) V)^T
//     dL = -A^T dA A^T, kept strictly lower;  F = dL . Gamma;  Z = F . (K K^T)   Gamma_ij = e^{Gr_i - Gr_j}
//     dv_j    = beta_j Y_j
//     dk_j   += beta_j e^{G_j} X_j + sum_i E_ji k_i + sum_i E_ij k_i,        E_ij = beta_i F_ij
//     dbeta_j = e^{G_j} k_j . X_j + v_j . Y_j + sum_i Z_ji
//     dG_j   += beta_j e^{G_j} k_j . X_j + beta_j sum_i Z_ji - sum_i beta_i Z_ij
//
// Without the delta rule V_new = V, so dv = dV_new and nothing else changes.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc, int K, int V>
struct WyBwd {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "wy_bwd";
  static constexpr int C = kChunk;
  static constexpr int KV = K > V ? K : V;
  using Args = StageArgs<Acc>;
  static_assert(C <= kThreads, "per-row phases give one row per thread");

  struct Smem {
    Acc* A;   // (C, C)
    Acc* k;   // (C, K)
    Acc* v;   // (C, V)
    Acc* D1;  // (C, K) dW, then (C, V) Y = A^T dU
    Acc* D2;  // (C, V) dU
    Acc* X;   // (C, K) A^T dW
    Acc* T1;  // (C, C) dA, then dL, then Z / beta_i
    Acc* T2;  // (C, C) dA A^T, then F
    Acc* b;   // (C)
    Acc* G;   // (C)
    Acc* Gr;  // (C)
    Acc* bG;  // (C)
    Acc* kx;  // (C) k_j . X_j
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      A = c.take<Acc>(C * C);
      k = c.take<Acc>(C * K);
      v = c.take<Acc>(C * V);
      D1 = c.take<Acc>(C * KV);
      D2 = c.take<Acc>(C * V);
      X = c.take<Acc>(C * K);
      T1 = c.take<Acc>(C * C);
      T2 = c.take<Acc>(C * C);
      b = c.take<Acc>(C);
      G = c.take<Acc>(C);
      Gr = c.take<Acc>(C);
      bG = c.take<Acc>(C);
      kx = c.take<Acc>(C);
      bytes = c.bytes();
    }
  };
  static std::size_t smem_bytes() { return Smem(nullptr).bytes; }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char* smem, Blk& blk) {
    const Problem& p = a.p;
    const Work<Acc>& w = a.w;
    const ChunkInfo ci = locate_chunk(p, w.status, w.chunk_off, bi.x);
    if (!ci.valid) return;
    const std::int64_t hv = bi.y, h = hv / p.group;
    const int len = ci.len;
    auto tok = [&](int i) { return ((ci.row0 + i) * p.HV + hv); };  // row of the per-token workspace

    if (!p.delta) {
      blk.each([&](int tid) {
        for (int e = tid; e < C * V; e += kThreads) {
          const RC x = split(e, V);
          if (x.r < len) p.dv.store<Acc>(p.dv.at(ci.b, ci.t0 + x.r, hv, x.c), w.dVn[tok(x.r) * V + x.c]);
        }
      });
      return;
    }
    Smem s(smem);
    blk.each([&](int tid) {
      const Acc* Ag = w.A + (ci.c * p.HV + hv) * C * C;
      for (int e = tid; e < C * C; e += kThreads) s.A[e] = Ag[e];
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);
        const bool in = x.r < len;
        s.k[e] = in ? p.k.load<Acc>(p.k.at(ci.b, ci.t0 + x.r, h, x.c)) : Acc(0);
        s.D1[e] = in ? w.dW[tok(x.r) * K + x.c] : Acc(0);
      }
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);
        const bool in = x.r < len;
        s.v[e] = in ? p.v.load<Acc>(p.v.at(ci.b, ci.t0 + x.r, hv, x.c)) : Acc(0);
        s.D2[e] = in ? w.dVn[tok(x.r) * V + x.c] : Acc(0);
      }
      for (int i = tid; i < C; i += kThreads) {
        const bool in = i < len;
        s.G[i] = in ? w.G[tok(i)] : Acc(0);
        s.Gr[i] = in ? w.Gr[tok(i)] : Acc(0);
        s.b[i] = in ? p.beta.load<Acc>(p.beta.at(ci.b, ci.t0 + i, hv, 0)) : Acc(0);
        s.bG[i] = s.b[i] * ex(s.G[i]);
      }
    });
    // dA (rows i, columns j)
    blk.each([&](int tid) {
      for (int e = tid; e < C * C; e += kThreads) {
        const RC x = split(e, C);
        Acc da = Acc(0);
        if (x.r < len && x.c < len) {
          Acc dk = Acc(0), dv = Acc(0);
          for (int d = 0; d < K; ++d) dk += s.D1[x.r * K + d] * s.k[x.c * K + d];
          for (int u = 0; u < V; ++u) dv += s.D2[x.r * V + u] * s.v[x.c * V + u];
          da = s.bG[x.c] * dk + s.b[x.c] * dv;
        }
        s.T1[e] = da;
      }
    });
    // X = A^T dW; T2 = dA A^T  (A lower triangular: A_ij = 0 for j > i)
    blk.each([&](int tid) {
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);  // (j, d)
        Acc acc = Acc(0);
        for (int i = x.r; i < len; ++i) acc += s.A[i * C + x.r] * s.D1[i * K + x.c];
        s.X[e] = acc;
      }
      for (int e = tid; e < C * C; e += kThreads) {
        const RC x = split(e, C);  // (i, j)
        Acc acc = Acc(0);
        if (x.r < len && x.c < len)
          for (int m = 0; m <= x.c; ++m) acc += s.T1[x.r * C + m] * s.A[x.c * C + m];
        s.T2[e] = acc;
      }
    });
    // kx; Y = A^T dU into D1 (dW is consumed); T1 = dL = -A^T (dA A^T)
    blk.each([&](int tid) {
      for (int j = tid; j < C; j += kThreads) {
        Acc acc = Acc(0);
        for (int d = 0; d < K; ++d) acc += s.k[j * K + d] * s.X[j * K + d];
        s.kx[j] = acc;
      }
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);  // (j, u)
        Acc acc = Acc(0);
        for (int i = x.r; i < len; ++i) acc += s.A[i * C + x.r] * s.D2[i * V + x.c];
        s.D1[e] = acc;
      }
      for (int e = tid; e < C * C; e += kThreads) {
        const RC x = split(e, C);  // (i, j)
        Acc acc = Acc(0);
        for (int m = x.r; m < len; ++m) acc += s.A[m * C + x.r] * s.T2[m * C + x.c];
        s.T1[e] = -acc;
      }
    });
    // F = dL . Gamma, strictly lower
    blk.each([&](int tid) {
      for (int e = tid; e < C * C; e += kThreads) {
        const RC x = split(e, C);
        s.T2[e] = (x.c < x.r && x.r < len) ? s.T1[e] * ex(s.Gr[x.r] - s.Gr[x.c]) : Acc(0);
      }
    });
    // T1 = F . (K K^T)  (beta_i T1_ij = dL_ij L_ij)
    blk.each([&](int tid) {
      for (int e = tid; e < C * C; e += kThreads) {
        const RC x = split(e, C);
        Acc z = Acc(0);
        if (x.c < x.r && x.r < len) {
          Acc dot = Acc(0);
          for (int d = 0; d < K; ++d) dot += s.k[x.r * K + d] * s.k[x.c * K + d];
          z = s.T2[e] * dot;
        }
        s.T1[e] = z;
      }
    });
    // dk (read-modify-write of this block's own rows of dkp) and dv
    blk.each([&](int tid) {
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);  // (m, d)
        const int m = x.r;
        if (m >= len) continue;
        Acc below = Acc(0), above = Acc(0);
        for (int j = 0; j < m; ++j) below += s.T2[m * C + j] * s.k[j * K + x.c];
        for (int i = m + 1; i < len; ++i) above += s.b[i] * s.T2[i * C + m] * s.k[i * K + x.c];
        const std::int64_t wo = tok(m) * K + x.c;
        w.dkp[wo] = w.dkp[wo] + s.bG[m] * s.X[e] + s.b[m] * below + above;
      }
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);
        if (x.r < len) p.dv.store<Acc>(p.dv.at(ci.b, ci.t0 + x.r, hv, x.c), s.b[x.r] * s.D1[e]);
      }
    });
    blk.each([&](int tid) {
      const int i = tid;
      if (i >= len) return;
      Acc vy = Acc(0), row = Acc(0), col = Acc(0);
      for (int u = 0; u < V; ++u) vy += s.v[i * V + u] * s.D1[i * V + u];
      for (int j = 0; j < i; ++j) row += s.T1[i * C + j];
      for (int m = i + 1; m < len; ++m) col += s.b[m] * s.T1[m * C + i];
      p.dbeta.store<Acc>(p.dbeta.at(ci.b, ci.t0 + i, hv, 0), ex(s.G[i]) * s.kx[i] + vy + row);
      w.dG[tok(i)] = w.dG[tok(i)] + s.bG[i] * s.kx[i] + s.b[i] * row - col;
    });
  }
};

}  // namespace glr::cuda
