// Stage 4: the output of one chunk and value head, from the state entering the chunk and V_new:
//
//     O = (scale Q . e^G) S_c + M V_new,    M = tril(Gamma . (scale Q) K^T) (diagonal included),
//     Gamma_ij = exp(Gr_i - Gr_j)
//
// q is scaled as it is loaded, before any product: a q near the largest bf16 (3.4e38) times a state of
// order 1 would overflow fp32 in a dot product whose scaled result the float64 oracle keeps finite.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

// M_ij = e^{Gr_i - Gr_j} q_i . k_j for j <= i < len, else 0: shared by the output and the local dv (both
// pass q already multiplied by scale).
template <class Acc, int K, int C, int kThreads>
GLR_HD GLR_INLINE void causal_scores(int tid, int len, const Acc* q, const Acc* k, const Acc* Gr, Acc* M) {
  for (int e = tid; e < C * C; e += kThreads) {
    const RC x = split(e, C);  // (i, j)
    Acc m = Acc(0);
    if (x.c <= x.r && x.r < len) {
      Acc dot = Acc(0);
      for (int d = 0; d < K; ++d) dot += q[x.r * K + d] * k[x.c * K + d];
      m = ex(Gr[x.r] - Gr[x.c]) * dot;
    }
    M[e] = m;
  }
}

template <class Acc, int K, int V>
struct OutputFwd {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "output";
  static constexpr int C = kChunk;
  using Args = StageArgs<Acc>;

  struct Smem {
    Acc* q;  // (C, K) scale q
    Acc* k;  // (C, K)
    Acc* G;  // (C)
    Acc* Gr; // (C)
    Acc* M;  // (C, C)
    Acc* S;  // (K, V) state entering the chunk
    Acc* D;  // (C, V) V_new
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      q = c.take<Acc>(C * K);
      k = c.take<Acc>(C * K);
      G = c.take<Acc>(C);
      Gr = c.take<Acc>(C);
      M = c.take<Acc>(C * C);
      S = c.take<Acc>(K * V);
      D = c.take<Acc>(C * V);
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
      const Acc* Sg = w.S + (ci.c * p.HV + hv) * K * V;
      for (int e = tid; e < K * V; e += kThreads) s.S[e] = Sg[e];
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);
        s.D[e] = x.r < len ? w.Vn[((ci.row0 + x.r) * p.HV + hv) * V + x.c] : Acc(0);
      }
    });
    blk.each([&](int tid) { causal_scores<Acc, K, C, kThreads>(tid, len, s.q, s.k, s.Gr, s.M); });
    blk.each([&](int tid) {
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);  // (i, v)
        if (x.r >= len) continue;
        Acc inter = Acc(0), intra = Acc(0);
        for (int d = 0; d < K; ++d) inter += s.q[x.r * K + d] * s.S[d * V + x.c];
        for (int j = 0; j <= x.r; ++j) intra += s.M[x.r * C + j] * s.D[j * V + x.c];
        p.o.store<Acc>(p.o.at(ci.b, ci.t0 + x.r, hv, x.c), ex(s.G[x.r]) * inter + intra);
      }
    });
  }
};

}  // namespace glr::cuda
