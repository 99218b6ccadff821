// Backward stage 3: dq, dk (all but the WY part), dW and dG of one chunk and value head, from the state
// entering the chunk S, the gradient of the state leaving it dS, V_new, dV_new and dO:
//
//     dP     = scale (dO V_new^T) . Gamma . causal mask                      (C, C)
//     dq     = scale e^G . (dO S^T) + dP K
//     dk     = e^{G_L - G} . (V_new dS^T) + dP^T Q                          (+ WY part, next stage)
//     dW     = -dV_new S^T                                                   (delta members)
//     dG_i   = q_i . dq_i - k_i . dk_i + [i = L] (e^{G_L} <S, dS> + sum_j k_j . dk_state_j)
//
// The dG identity: every factor e^{G_i - G_j} pairs +G_i with a query (or the row of the decayed state)
// and -G_j with a key, so d/dG_i collects q_i . dq_i minus k_i . dk_i; the chunk-end decay e^{G_L} adds
// the last row's term. The WY stage adds the gradient through W and L.
//
// Thread layout: thread tid owns column d = tid % K of rows rg, rg + NRG, ... (rg = tid / K, NRG = 256 / K)
// of every (C, K) result, and pairs tid, tid + 256, ... of the (C, C) dP. The sums over V run in slices of
// Vt, accumulated in registers across slices.
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
  static_assert(kThreads % K == 0 && C % NRG == 0 && (C * C) % kThreads == 0 && V % Vt == 0,
                "thread layout needs K | 256, C * C a multiple of 256 and Vt | V");

  struct Regs {
    Acc q[R];         // sum_v dO_iv S_dv
    Acc ks[R];        // sum_v Vn_iv dS_dv
    Acc wv[R];        // sum_v dVn_iv S_dv
    Acc pp[kPairs];   // sum_v dO_iv Vn_jv
    Acc lastS;        // this thread's share of <S, dS>
    Acc rs;           // this thread's share of sum_j k_j . dk_state_j
  };

  static constexpr int kSliceElems = 2 * K * Ld + 3 * C * Ld;
  static constexpr int kUnion = kSliceElems > 2 * C * K ? kSliceElems : 2 * C * K;

  struct Smem {
    Acc* q;    // (C, K)
    Acc* k;    // (C, K)
    Acc* G;    // (C)
    Acc* dP;   // (C, C)
    Acc* red;  // (2, kThreads) per-thread partials of <S, dS> and sum_j k_j . dk_state_j
    // V slices during the accumulation, then the finished dq and dk rows for the dG dot products
    Acc* St;   // (K, Ld)
    Acc* dSt;  // (K, Ld)
    Acc* dOt;  // (C, Ld)
    Acc* Dt;   // (C, Ld)  V_new
    Acc* dDt;  // (C, Ld)  dV_new
    Acc* dqs;  // (C, K)   aliases the slices
    Acc* dks;  // (C, K)
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      q = c.take<Acc>(C * K);
      k = c.take<Acc>(C * K);
      G = c.take<Acc>(C);
      dP = c.take<Acc>(C * C);
      red = c.take<Acc>(2 * kThreads);
      Acc* u = c.take<Acc>(kUnion);
      bytes = c.bytes();
      St = u;
      dSt = St + K * Ld;
      dOt = dSt + K * Ld;
      Dt = dOt + C * Ld;
      dDt = Dt + C * Ld;
      dqs = u;
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
    const int len = ci.len;
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
      for (int i = tid; i < C; i += kThreads) s.G[i] = i < len ? w.G[(ci.row0 + i) * p.HV + hv] : Acc(0);
      Regs& r = regs[tid];
      GLR_UNROLL for (int j = 0; j < R; ++j) r.q[j] = r.ks[j] = r.wv[j] = Acc(0);
      GLR_UNROLL for (int m = 0; m < kPairs; ++m) r.pp[m] = Acc(0);
      r.lastS = r.rs = Acc(0);
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
          s.dOt[x.r * Ld + x.c] = in ? p.dout.load<Acc>(p.dout.at(ci.b, ci.t0 + x.r, hv, v0 + x.c)) : Acc(0);
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
    blk.each([&](int tid) {
      const Regs& r = regs[tid];
      GLR_UNROLL for (int m = 0; m < kPairs; ++m) {
        const int e = tid + kThreads * m;
        const RC x = split(e, C);  // (i, j)
        s.dP[e] = (x.c <= x.r && x.r < len) ? scale * ex(s.G[x.r] - s.G[x.c]) * r.pp[m] : Acc(0);
      }
    });
    const Acc GL = s.G[len - 1];
    blk.each([&](int tid) {
      Regs& r = regs[tid];
      const int d = tid % K;
      GLR_UNROLL for (int j = 0; j < R; ++j) {
        const int i = row_of(tid, j);
        Acc dq = Acc(0), dk = Acc(0);
        if (i < len) {
          Acc pk = Acc(0), pq = Acc(0);
          for (int m = 0; m <= i; ++m) pk += s.dP[i * C + m] * s.k[m * K + d];
          for (int m = i; m < len; ++m) pq += s.dP[m * C + i] * s.q[m * K + d];
          dq = scale * ex(s.G[i]) * r.q[j] + pk;
          const Acc dk_state = ex(GL - s.G[i]) * r.ks[j];
          dk = dk_state + pq;
          r.rs += s.k[i * K + d] * dk_state;
          const std::int64_t wo = ((ci.row0 + i) * p.HV + hv) * K + d;
          w.dqp[wo] = dq;
          w.dkp[wo] = dk;
          if (p.delta) w.dW[wo] = -r.wv[j];
        }
        s.dqs[i * K + d] = dq;
        s.dks[i * K + d] = dk;
      }
      s.red[tid] = r.lastS;
      s.red[kThreads + tid] = r.rs;
    });
    blk.each([&](int tid) {
      const int i = tid;
      if (i >= len) return;
      Acc qd = Acc(0), kd = Acc(0);
      for (int d = 0; d < K; ++d) {
        qd += s.q[i * K + d] * s.dqs[i * K + d];
        kd += s.k[i * K + d] * s.dks[i * K + d];
      }
      Acc dg = qd - kd;
      if (i == len - 1) {
        Acc sds = Acc(0), rs = Acc(0);
        for (int t = 0; t < kThreads; ++t) {
          sds += s.red[t];
          rs += s.red[kThreads + t];
        }
        dg += ex(GL) * sds + rs;
      }
      w.dG[(ci.row0 + i) * p.HV + hv] = dg;
    });
  }
};

}  // namespace glr::cuda
