// Backward stage 3: dq, dk (all but the WY part), dW and dG of one chunk and value head, from the state
// entering the chunk S, the gradient of the state leaving it dS, V_new, dV_new and dO
// (Gamma_ij = e^{Gr_i - Gr_j}, cumsum.hpp):
//
//     dP       = (scale dO V_new^T) . Gamma . causal mask                      (C, C)
//     dq       = e^G . (scale dO S^T) + dP K                                   (the first term: dq_inter)
//     dk       = e^{Gr_L - Gr} . (V_new dS^T) + dP^T Q                         (the first term: dk_state;
//                                                                               the WY part: next stage)
//     dW       = -dV_new S^T                                                   (delta members)
//     dG_i     = q_i . dq_inter_i + sum_{j<i} dp_ij - sum_{m>i} dp_mi - [i != L] k_i . dk_state_i
//     dG_L    += sum_{j != L} k_j . dk_state_j + e^{G_L} <S, dS>,     dp_ij = dP_ij (q_i . k_j)
//
// dG is d/dG_i, term by term as glr/reference's chunk_dqkwg writes it: e^{G_i} gives q_i . dq_inter_i,
// Gamma_ij gives +dp_ij to i and -dp_ij to j, e^{Gr_L - Gr_i} gives -k_i . dk_state_i to i and + to L.
// The terms that cancel exactly (the diagonal of Gamma, i = L in the state term) are left out, never
// added and subtracted: a NaN in V_new there would otherwise reach a dg the exact backward keeps finite.
// The WY stage adds the gradient through W and L.
//
// dO is scaled as it is loaded (as q is in the forward), so a dO near the largest bf16 cannot overflow an
// fp32 dot product whose scaled value the float64 oracle keeps finite.
//
// Thread layout: thread tid owns column d = tid % K of rows rg, rg + NRG, ... (rg = tid / K, NRG = 256 / K)
// of every (C, K) result, and pairs tid, tid + 256, ... of the (C, C) matrices. The sums over V run in
// slices of Vt, accumulated in registers across slices.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc, int K, int V>
struct Dqkwg {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "dqkwg";
  static constexpr int C = kChunk;
  static constexpr int Vt = 32;
  static constexpr int Ld = Vt + 1;  // padded row of a slice: threads of a warp read 32 different rows
  static constexpr int NRG = kThreads / K;
  static constexpr int R = C / NRG;  // rows per thread
  static constexpr int kPairs = C * C / kThreads;
  using Args = StageArgs<Acc>;
  static_assert(kThreads % K == 0 && C % NRG == 0 && (C * C) % kThreads == 0 && V % Vt == 0 && C <= kThreads,
                "thread layout needs K | 256, C * C a multiple of 256, Vt | V and a row per thread");

  struct Regs {
    Acc q[R];         // sum_v scale dO_iv S_dv
    Acc ks[R];        // sum_v Vn_iv dS_dv
    Acc wv[R];        // sum_v dVn_iv S_dv
    Acc pp[kPairs];   // sum_v scale dO_iv Vn_jv
    Acc lastS;        // this thread's share of <S, dS>
  };

  static constexpr int kSliceElems = 2 * K * Ld + 3 * C * Ld;
  static constexpr int kUnion = kSliceElems > 2 * C * K ? kSliceElems : 2 * C * K;

  struct Smem {
    Acc* q;    // (C, K)
    Acc* k;    // (C, K)
    Acc* G;    // (C)
    Acc* Gr;   // (C)
    Acc* dP;   // (C, C)
    Acc* dp;   // (C, C) dP_ij (q_i . k_j), strictly lower
    Acc* red;  // (kThreads) per-thread partials of <S, dS>
    Acc* row;  // (C) dG_i without the chunk-end terms
    Acc* kds;  // (C) k_i . dk_state_i
    // V slices during the accumulation, then dq_inter and dk_state rows for the dG dot products
    Acc* St;   // (K, Ld)
    Acc* dSt;  // (K, Ld)
    Acc* dOt;  // (C, Ld)  scale dO
    Acc* Dt;   // (C, Ld)  V_new
    Acc* dDt;  // (C, Ld)  dV_new
    Acc* dqi;  // (C, K)   dq_inter, aliases the slices
    Acc* dks;  // (C, K)   dk_state
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      q = c.take<Acc>(C * K);
      k = c.take<Acc>(C * K);
      G = c.take<Acc>(C);
      Gr = c.take<Acc>(C);
      dP = c.take<Acc>(C * C);
      dp = c.take<Acc>(C * C);
      red = c.take<Acc>(kThreads);
      row = c.take<Acc>(C);
      kds = c.take<Acc>(C);
      Acc* u = c.take<Acc>(kUnion);
      bytes = c.bytes();
      St = u;
      dSt = St + K * Ld;
      dOt = dSt + K * Ld;
      Dt = dOt + C * Ld;
      dDt = Dt + C * Ld;
      dqi = u;
      dks = u + C * K;
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
    const int len = ci.len, L = len - 1;
    const Acc scale = static_cast<Acc>(p.scale);
    Smem s(smem);
    typename Blk::template Regs<Regs> regs(blk);
    const Acc* Sg = w.S + (ci.c * p.HV + hv) * K * V;
    const Acc* dSg = w.dS + (ci.c * p.HV + hv) * K * V;
    auto row_of = [](int tid, int r) { return tid / K + NRG * r; };

    blk.each([&](int tid) {
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);
        const bool in = x.r < len;
        s.q[e] = in ? p.q.load<Acc>(p.q.at(ci.b, ci.t0 + x.r, h, x.c)) : Acc(0);
        s.k[e] = in ? p.k.load<Acc>(p.k.at(ci.b, ci.t0 + x.r, h, x.c)) : Acc(0);
      }
      for (int i = tid; i < C; i += kThreads) {
        s.G[i] = i < len ? w.G[(ci.row0 + i) * p.HV + hv] : Acc(0);
        s.Gr[i] = i < len ? w.Gr[(ci.row0 + i) * p.HV + hv] : Acc(0);
      }
      Regs& r = regs[tid];
      GLR_UNROLL for (int j = 0; j < R; ++j) r.q[j] = r.ks[j] = r.wv[j] = Acc(0);
      GLR_UNROLL for (int m = 0; m < kPairs; ++m) r.pp[m] = Acc(0);
      r.lastS = Acc(0);
    });
    for (int v0 = 0; v0 < V; v0 += Vt) {
      blk.each([&](int tid) {
        for (int e = tid; e < K * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (d, vv)
          s.St[x.r * Ld + x.c] = Sg[x.r * V + v0 + x.c];
          s.dSt[x.r * Ld + x.c] = dSg[x.r * V + v0 + x.c];
        }
        for (int e = tid; e < C * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (i, vv)
          const bool in = x.r < len;
          const std::int64_t wo = ((ci.row0 + x.r) * p.HV + hv) * V + v0 + x.c;
          s.dOt[x.r * Ld + x.c] = in ? scale * p.dout.load<Acc>(p.dout.at(ci.b, ci.t0 + x.r, hv, v0 + x.c)) : Acc(0);
          s.Dt[x.r * Ld + x.c] = in ? w.Vn[wo] : Acc(0);
          s.dDt[x.r * Ld + x.c] = in && p.delta ? w.dVn[wo] : Acc(0);
        }
      });
      blk.each([&](int tid) {
        Regs& r = regs[tid];
        const int d = tid % K;
        const Acc* Sd = s.St + d * Ld;
        const Acc* dSd = s.dSt + d * Ld;
        GLR_UNROLL for (int j = 0; j < R; ++j) {
          const int i = row_of(tid, j);
          Acc aq = Acc(0), ak = Acc(0), aw = Acc(0);
          for (int vv = 0; vv < Vt; ++vv) {
            aq += s.dOt[i * Ld + vv] * Sd[vv];
            ak += s.Dt[i * Ld + vv] * dSd[vv];
            aw += s.dDt[i * Ld + vv] * Sd[vv];
          }
          r.q[j] += aq;
          r.ks[j] += ak;
          r.wv[j] += aw;
        }
        GLR_UNROLL for (int m = 0; m < kPairs; ++m) {
          const RC x = split(tid + kThreads * m, C);  // (i, j)
          if (x.c > x.r) continue;
          Acc acc = Acc(0);
          for (int vv = 0; vv < Vt; ++vv) acc += s.dOt[x.r * Ld + vv] * s.Dt[x.c * Ld + vv];
          r.pp[m] += acc;
        }
        for (int vv = tid / K; vv < Vt; vv += NRG) r.lastS += Sd[vv] * dSd[vv];
      });
    }
    // dP, and dp = dP . (Q K^T) below the diagonal (the pairs that carry a Gamma)
    blk.each([&](int tid) {
      const Regs& r = regs[tid];
      GLR_UNROLL for (int m = 0; m < kPairs; ++m) {
        const int e = tid + kThreads * m;
        const RC x = split(e, C);  // (i, j)
        const bool causal = x.c <= x.r && x.r < len;
        const Acc dP = causal ? ex(s.Gr[x.r] - s.Gr[x.c]) * r.pp[m] : Acc(0);
        s.dP[e] = dP;
        Acc dp = Acc(0);
        if (causal && x.c < x.r) {
          Acc qk = Acc(0);
          for (int d = 0; d < K; ++d) qk += s.q[x.r * K + d] * s.k[x.c * K + d];
          dp = dP * qk;
        }
        s.dp[e] = dp;
      }
      s.red[tid] = r.lastS;
    });
    const Acc GL = s.G[L], GrL = s.Gr[L];
    blk.each([&](int tid) {
      Regs& r = regs[tid];
      const int d = tid % K;
      GLR_UNROLL for (int j = 0; j < R; ++j) {
        const int i = row_of(tid, j);
        Acc dq_inter = Acc(0), dk_state = Acc(0);
        if (i < len) {
          Acc pk = Acc(0), pq = Acc(0);
          for (int m = 0; m <= i; ++m) pk += s.dP[i * C + m] * s.k[m * K + d];
          for (int m = i; m < len; ++m) pq += s.dP[m * C + i] * s.q[m * K + d];
          dq_inter = ex(s.G[i]) * r.q[j];
          dk_state = ex(GrL - s.Gr[i]) * r.ks[j];
          const std::int64_t wo = ((ci.row0 + i) * p.HV + hv) * K + d;
          w.dqp[wo] = dq_inter + pk;
          w.dkp[wo] = dk_state + pq;
          if (p.delta) w.dW[wo] = -r.wv[j];
        }
        s.dqi[i * K + d] = dq_inter;
        s.dks[i * K + d] = dk_state;
      }
    });
    blk.each([&](int tid) {
      const int i = tid;
      if (i >= len) return;
      Acc qd = Acc(0), kd = Acc(0), rows = Acc(0), cols = Acc(0);
      for (int d = 0; d < K; ++d) {
        qd += s.q[i * K + d] * s.dqi[i * K + d];
        kd += s.k[i * K + d] * s.dks[i * K + d];
      }
      for (int j = 0; j < i; ++j) rows += s.dp[i * C + j];
      for (int m = i + 1; m < len; ++m) cols += s.dp[m * C + i];
      s.kds[i] = kd;
      s.row[i] = i == L ? qd + rows - cols : qd + rows - cols - kd;
    });
    blk.each([&](int tid) {
      const int i = tid;
      if (i >= len) return;
      Acc dg = s.row[i];
      if (i == L) {
        Acc kds = Acc(0), sds = Acc(0);
        for (int j = 0; j < L; ++j) kds += s.kds[j];
        for (int t = 0; t < kThreads; ++t) sds += s.red[t];
        dg += kds + ex(GL) * sds;
      }
      w.dG[(ci.row0 + i) * p.HV + hv] = dg;
    });
  }
};

}  // namespace glr::cuda
