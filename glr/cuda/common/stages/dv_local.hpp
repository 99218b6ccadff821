// Backward stage 1: the local part of the gradient of V_new, which needs no state gradient:
//
//     dU_local = M^T dO,    M = tril(Gamma . (scale Q) K^T)   (q scaled as loaded, as in the output)
//
// The reverse-state stage adds (K . e^{G_L - G}) dS to it, chunk by chunk.
#pragma once

#include "output.hpp"

namespace glr::cuda {

template <class Acc, int K, int V>
struct DvLocal {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "dv_local";
  static constexpr int C = kChunk;
  using Args = StageArgs<Acc>;

  struct Smem {
    Acc* q;   // (C, K) scale q
    Acc* k;   // (C, K)
    Acc* G;   // (C)
    Acc* Gr;  // (C)
    Acc* M;   // (C, C)
    Acc* dO;  // (C, V)
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      q = c.take<Acc>(C * K);
      k = c.take<Acc>(C * K);
      G = c.take<Acc>(C);
      Gr = c.take<Acc>(C);
      M = c.take<Acc>(C * C);
      dO = c.take<Acc>(C * V);
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
    const Acc scale = static_cast<Acc>(p.scale);
    Smem s(smem);

    blk.each([&](int tid) {
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);
        const bool in = x.r < len;
        s.q[e] = in ? scale * p.q.load<Acc>(p.q.at(ci.b, ci.t0 + x.r, h, x.c)) : Acc(0);
        s.k[e] = in ? p.k.load<Acc>(p.k.at(ci.b, ci.t0 + x.r, h, x.c)) : Acc(0);
      }
      for (int i = tid; i < C; i += kThreads) {
        s.G[i] = i < len ? w.G[(ci.row0 + i) * p.HV + hv] : Acc(0);
        s.Gr[i] = i < len ? w.Gr[(ci.row0 + i) * p.HV + hv] : Acc(0);
      }
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);
        s.dO[e] = x.r < len ? p.dout.load<Acc>(p.dout.at(ci.b, ci.t0 + x.r, hv, x.c)) : Acc(0);
      }
    });
    blk.each([&](int tid) { causal_scores<Acc, K, C, kThreads>(tid, len, s.q, s.k, s.Gr, s.M); });
    blk.each([&](int tid) {
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);  // (j, v)
        if (x.r >= len) continue;
        Acc acc = Acc(0);
        for (int i = x.r; i < len; ++i) acc += s.M[i * C + x.r] * s.dO[i * V + x.c];
        w.dUl[((ci.row0 + x.r) * p.HV + hv) * V + x.c] = acc;
      }
    });
  }
};

}  // namespace glr::cuda
