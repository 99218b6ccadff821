// Stage 2 (delta members): per chunk and value head, the WY representation of the chunk's delta updates.
//
//     L = strictly_lower(diag(beta) (K K^T . Gamma)),   Gamma_ij = exp(Gr_i - Gr_j)  (cumsum.hpp)
//     A = (I + L)^-1                    forward substitution, one column per thread
//     W = A diag(beta e^G) K,   U = A diag(beta) V
//
// Padding rows (i >= len of a short last chunk) are loaded as zero with beta = 0, so L and A are block
// diagonal with an identity block there and nothing of the padding reaches a real row.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc, int K, int V>
struct WyFwd {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "wy_fwd";
  static constexpr int C = kChunk;
  using Args = StageArgs<Acc>;
  static_assert(C <= kThreads, "the triangular solve gives one column per thread");

  struct Smem {
    Acc* k;   // (C, K)
    Acc* v;   // (C, V)
    Acc* G;   // (C)
    Acc* Gr;  // (C)
    Acc* b;   // (C) beta
    Acc* bG;  // (C) beta e^G
    Acc* L;   // (C, C)
    Acc* A;   // (C, C)
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      k = c.take<Acc>(C * K);
      v = c.take<Acc>(C * V);
      G = c.take<Acc>(C);
      Gr = c.take<Acc>(C);
      b = c.take<Acc>(C);
      bG = c.take<Acc>(C);
      L = c.take<Acc>(C * C);
      A = c.take<Acc>(C * C);
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
    Smem s(smem);

    blk.each([&](int tid) {
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);
        s.k[e] = x.r < len ? p.k.load<Acc>(p.k.at(ci.b, ci.t0 + x.r, h, x.c)) : Acc(0);
      }
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);
        s.v[e] = x.r < len ? p.v.load<Acc>(p.v.at(ci.b, ci.t0 + x.r, hv, x.c)) : Acc(0);
      }
      for (int i = tid; i < C; i += kThreads) {
        s.G[i] = i < len ? w.G[(ci.row0 + i) * p.HV + hv] : Acc(0);
        s.Gr[i] = i < len ? w.Gr[(ci.row0 + i) * p.HV + hv] : Acc(0);
        s.b[i] = i < len ? p.beta.load<Acc>(p.beta.at(ci.b, ci.t0 + i, hv, 0)) : Acc(0);
      }
    });
    blk.each([&](int tid) {
      for (int i = tid; i < C; i += kThreads) s.bG[i] = s.b[i] * ex(s.G[i]);
      for (int e = tid; e < C * C; e += kThreads) {
        const RC x = split(e, C);  // (i, j)
        Acc l = Acc(0);
        if (x.c < x.r && x.r < len) {
          Acc dot = Acc(0);
          for (int d = 0; d < K; ++d) dot += s.k[x.r * K + d] * s.k[x.c * K + d];
          l = s.b[x.r] * ex(s.Gr[x.r] - s.Gr[x.c]) * dot;
        }
        s.L[e] = l;
      }
    });
    // (I + L) A = I, column j: A_jj = 1 and A_ij = -sum_{m=j}^{i-1} L_im A_mj for i > j.
    blk.each([&](int tid) {
      if (tid >= C) return;
      const int j = tid;
      for (int i = 0; i < C; ++i) {
        Acc x = Acc(0);
        if (i == j) {
          x = Acc(1);
        } else if (i > j) {
          Acc acc = Acc(0);
          for (int m = j; m < i; ++m) acc += s.L[i * C + m] * s.A[m * C + j];
          x = -acc;
        }
        s.A[i * C + j] = x;
      }
    });
    blk.each([&](int tid) {
      for (int e = tid; e < C * K; e += kThreads) {
        const RC x = split(e, K);  // (i, d)
        if (x.r >= len) continue;
        Acc acc = Acc(0);
        for (int j = 0; j <= x.r; ++j) acc += s.A[x.r * C + j] * s.bG[j] * s.k[j * K + x.c];
        w.W[((ci.row0 + x.r) * p.HV + hv) * K + x.c] = acc;
      }
      for (int e = tid; e < C * V; e += kThreads) {
        const RC x = split(e, V);  // (i, v)
        if (x.r >= len) continue;
        Acc acc = Acc(0);
        for (int j = 0; j <= x.r; ++j) acc += s.A[x.r * C + j] * s.b[j] * s.v[j * V + x.c];
        w.U[((ci.row0 + x.r) * p.HV + hv) * V + x.c] = acc;
      }
      Acc* A = w.A + (ci.c * p.HV + hv) * C * C;
      for (int e = tid; e < C * C; e += kThreads) A[e] = s.A[e];
    });
  }
};

}  // namespace glr::cuda
