// Backward stage 2, the reverse-state stage: the state gradient, chunk by chunk from the last to the
// first, for one sequence, value head and slice of Vt columns. With dS the gradient of the state leaving
// the chunk (dht, or zero, at the end of the sequence):
//
//     store dS                                           (for dq/dk/dw/dg)
//     dV_new = dU_local + (K . e^{Gr_L - Gr}) dS        (dU in DESIGN.md)
//     dS <- e^{G_L} dS + scale (Q . e^G)^T dO - W^T dV_new      (no W term without the delta rule)
//
// What is left in dS at the start of the sequence is dh0.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc, int K, int V>
struct StateBwd {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "state_bwd";
  static constexpr int C = kChunk;
  static constexpr int Vt = 16;
  static constexpr int kVTiles = V / Vt;
  using Args = StageArgs<Acc>;
  static_assert(V % Vt == 0, "V must be a multiple of the column slice");

  struct Smem {
    Acc* dS;   // (K, Vt)
    Acc* Qe;   // (C, K)  scale q_j e^{G_j}
    Acc* Kd;   // (C, K)  k_j e^{Gr_L - Gr_j}
    Acc* Wc;   // (C, K)
    Acc* dO;   // (C, Vt)
    Acc* dD;   // (C, Vt) dU_local, then dV_new
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      dS = c.take<Acc>(K * Vt);
      Qe = c.take<Acc>(C * K);
      Kd = c.take<Acc>(C * K);
      Wc = c.take<Acc>(C * K);
      dO = c.take<Acc>(C * Vt);
      dD = c.take<Acc>(C * Vt);
      bytes = c.bytes();
    }
  };
  static std::size_t smem_bytes() { return Smem(nullptr).bytes; }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char* smem, Blk& blk) {
    const Problem& p = a.p;
    const Work<Acc>& w = a.w;
    const SeqInfo sq = locate_seq(p, w.status, w.chunk_off, bi.x);
    if (!sq.valid) return;
    const std::int64_t hv = bi.y, h = hv / p.group;
    const int v0 = bi.z * Vt;
    const Acc scale = static_cast<Acc>(p.scale);
    Smem s(smem);

    blk.each([&](int tid) {
      for (int e = tid; e < K * Vt; e += kThreads) {
        const RC x = split(e, Vt);  // (d, vv)
        s.dS[e] = p.dht.p ? p.dht.load<Acc>(p.dht.at(sq.n, hv, x.r, v0 + x.c)) : Acc(0);
      }
    });
    for (std::int64_t ic = sq.nchunks - 1; ic >= 0; --ic) {
      const std::int64_t c = sq.c0 + ic, t0 = sq.t0(ic), row0 = sq.b * p.T + t0;
      const int len = sq.len(ic);
      const Acc GL = w.G[(row0 + len - 1) * p.HV + hv], GrL = w.Gr[(row0 + len - 1) * p.HV + hv];
      blk.each([&](int tid) {
        Acc* dSg = w.dS + (c * p.HV + hv) * K * V;
        for (int e = tid; e < K * Vt; e += kThreads) {
          const RC x = split(e, Vt);
          dSg[x.r * V + v0 + x.c] = s.dS[e];
        }
        for (int e = tid; e < C * K; e += kThreads) {
          const RC x = split(e, K);  // (j, d)
          const bool in = x.r < len;
          const Acc Gj = in ? w.G[(row0 + x.r) * p.HV + hv] : Acc(0);
          const Acc Grj = in ? w.Gr[(row0 + x.r) * p.HV + hv] : Acc(0);
          s.Qe[e] = in ? scale * p.q.load<Acc>(p.q.at(sq.b, t0 + x.r, h, x.c)) * ex(Gj) : Acc(0);
          s.Kd[e] = in ? p.k.load<Acc>(p.k.at(sq.b, t0 + x.r, h, x.c)) * ex(GrL - Grj) : Acc(0);
          if (p.delta) s.Wc[e] = in ? w.W[((row0 + x.r) * p.HV + hv) * K + x.c] : Acc(0);
        }
        for (int e = tid; e < C * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (j, vv)
          const bool in = x.r < len;
          s.dO[e] = in ? p.dout.load<Acc>(p.dout.at(sq.b, t0 + x.r, hv, v0 + x.c)) : Acc(0);
          s.dD[e] = in ? w.dUl[((row0 + x.r) * p.HV + hv) * V + v0 + x.c] : Acc(0);
        }
      });
      blk.each([&](int tid) {
        for (int e = tid; e < C * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (j, vv): each thread updates only its own elements of dD
          if (x.r >= len) continue;
          Acc acc = Acc(0);
          for (int d = 0; d < K; ++d) acc += s.Kd[x.r * K + d] * s.dS[d * Vt + x.c];
          const Acc dn = s.dD[e] + acc;
          s.dD[e] = dn;
          w.dVn[((row0 + x.r) * p.HV + hv) * V + v0 + x.c] = dn;
        }
      });
      const Acc decay = ex(GL);
      blk.each([&](int tid) {
        for (int e = tid; e < K * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (d, vv)
          Acc qo = Acc(0), wd = Acc(0);
          for (int j = 0; j < len; ++j) qo += s.Qe[j * K + x.r] * s.dO[j * Vt + x.c];
          if (p.delta)
            for (int j = 0; j < len; ++j) wd += s.Wc[j * K + x.r] * s.dD[j * Vt + x.c];
          s.dS[e] = decay * s.dS[e] + qo - wd;
        }
      });
    }
    if (!p.dh0.p) return;
    blk.each([&](int tid) {
      for (int e = tid; e < K * Vt; e += kThreads) {
        const RC x = split(e, Vt);
        p.dh0.store<Acc>(p.dh0.at(sq.n, hv, x.r, v0 + x.c), s.dS[e]);
      }
    });
  }
};

}  // namespace glr::cuda
