// Stage 3: the forward state pass, chunk after chunk along one sequence, for one value head and one
// slice of Vt state columns (the columns of S are independent: S_{c+1}[:, v] needs only S_c[:, v]).
//
//     store S_c                          (the state entering chunk c, for the output and the backward)
//     V_new = U - W S_c                  (delta members; otherwise V_new = V)
//     S_{c+1} = e^{G_L} S_c + (K . e^{Gr_L - Gr})^T V_new     G_L = G of the chunk's last token
//
// The final state goes to ht; a sequence with no tokens passes h0 (or zero) straight through.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc, int K, int V>
struct StateFwd {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "state_fwd";
  static constexpr int C = kChunk;
  static constexpr int Vt = 16;  // state columns per block: more blocks for the one sequential stage
  static constexpr int kVTiles = V / Vt;
  using Args = StageArgs<Acc>;
  static_assert(V % Vt == 0, "V must be a multiple of the column slice");

  struct Smem {
    Acc* S;   // (K, Vt) the running state slice
    Acc* Wc;  // (C, K)  W of the chunk
    Acc* Kd;  // (C, K)  k_j e^{Gr_L - Gr_j}
    Acc* Uc;  // (C, Vt) U (or V) slice
    Acc* Dc;  // (C, Vt) V_new slice
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      S = c.take<Acc>(K * Vt);
      Wc = c.take<Acc>(C * K);
      Kd = c.take<Acc>(C * K);
      Uc = c.take<Acc>(C * Vt);
      Dc = c.take<Acc>(C * Vt);
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
    Smem s(smem);

    blk.each([&](int tid) {
      for (int e = tid; e < K * Vt; e += kThreads) {
        const RC x = split(e, Vt);  // (d, vv)
        s.S[e] = p.h0.p ? p.h0.load<Acc>(p.h0.at(sq.n, hv, x.r, v0 + x.c)) : Acc(0);
      }
    });
    for (std::int64_t ic = 0; ic < sq.nchunks; ++ic) {
      const std::int64_t c = sq.c0 + ic, t0 = sq.t0(ic), row0 = sq.b * p.T + t0;
      const int len = sq.len(ic);
      const Acc GL = w.G[(row0 + len - 1) * p.HV + hv], GrL = w.Gr[(row0 + len - 1) * p.HV + hv];
      blk.each([&](int tid) {
        Acc* Sg = w.S + (c * p.HV + hv) * K * V;
        for (int e = tid; e < K * Vt; e += kThreads) {
          const RC x = split(e, Vt);
          Sg[x.r * V + v0 + x.c] = s.S[e];
        }
        for (int e = tid; e < C * K; e += kThreads) {
          const RC x = split(e, K);  // (j, d)
          const bool in = x.r < len;
          const Acc Grj = in ? w.Gr[(row0 + x.r) * p.HV + hv] : Acc(0);
          s.Kd[e] = in ? p.k.load<Acc>(p.k.at(sq.b, t0 + x.r, h, x.c)) * ex(GrL - Grj) : Acc(0);
          if (p.delta) s.Wc[e] = in ? w.W[((row0 + x.r) * p.HV + hv) * K + x.c] : Acc(0);
        }
        for (int e = tid; e < C * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (j, vv)
          Acc u = Acc(0);
          if (x.r < len)
            u = p.delta ? w.U[((row0 + x.r) * p.HV + hv) * V + v0 + x.c]
                        : p.v.load<Acc>(p.v.at(sq.b, t0 + x.r, hv, v0 + x.c));
          s.Uc[e] = u;
        }
      });
      blk.each([&](int tid) {
        for (int e = tid; e < C * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (j, vv)
          Acc dn = s.Uc[e];
          if (p.delta) {
            Acc ws = Acc(0);
            for (int d = 0; d < K; ++d) ws += s.Wc[x.r * K + d] * s.S[d * Vt + x.c];
            dn -= ws;
          }
          s.Dc[e] = dn;
          if (x.r < len) w.Vn[((row0 + x.r) * p.HV + hv) * V + v0 + x.c] = dn;
        }
      });
      const Acc decay = ex(GL);
      blk.each([&](int tid) {
        for (int e = tid; e < K * Vt; e += kThreads) {
          const RC x = split(e, Vt);  // (d, vv)
          Acc acc = Acc(0);
          for (int j = 0; j < len; ++j) acc += s.Kd[j * K + x.r] * s.Dc[j * Vt + x.c];
          s.S[e] = decay * s.S[e] + acc;
        }
      });
    }
    if (!p.ht.p) return;
    blk.each([&](int tid) {
      for (int e = tid; e < K * Vt; e += kThreads) {
        const RC x = split(e, Vt);
        p.ht.store<Acc>(p.ht.at(sq.n, hv, x.r, v0 + x.c), s.S[e]);
      }
    });
  }
};

}  // namespace glr::cuda
