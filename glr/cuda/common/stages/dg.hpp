// Backward stage 5: from dG (the gradient of the in-chunk cumulative log-decay) to dg.
// G_i = g_0 + ... + g_i within a chunk, so dg_i = dG_i + ... + dG_{len-1}: a reverse cumulative sum.
// A per-head gate gamma has G_i = (i + 1) gamma, so d gamma = sum over chunks of sum_i dg_i: each chunk's
// sum goes to dgc, and DgHeadReduce adds the chunks in a fixed order (no atomics).
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc>
struct DgChunk {
  static constexpr int kThreads = 128;
  static constexpr const char* kName = "dg_revcumsum";
  using Args = StageArgs<Acc>;
  static std::size_t smem_bytes() { return 0; }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char*, Blk& blk) {
    const Problem& p = a.p;
    const ChunkInfo ci = locate_chunk(p, a.w.status, a.w.chunk_off, bi.x);
    if (!ci.valid) return;
    blk.each([&](int tid) {
      for (std::int64_t hv = tid; hv < p.HV; hv += kThreads) {
        Acc run = Acc(0), total = Acc(0);
        for (int i = ci.len - 1; i >= 0; --i) {
          run += a.w.dG[(ci.row0 + i) * p.HV + hv];
          if (p.gate == kGatePerToken)
            p.dg.store<Acc>(p.dg.at(ci.b, ci.t0 + i, hv, 0), run);
          else
            total += run;
        }
        if (p.gate == kGatePerHead) a.w.dgc[ci.c * p.HV + hv] = total;
      }
    });
  }
};

template <class Acc>
struct DgHeadReduce {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "dg_head_reduce";
  using Args = StageArgs<Acc>;
  struct Smem {
    Acc* part;  // (kThreads)
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      part = c.take<Acc>(kThreads);
      bytes = c.bytes();
    }
  };
  static std::size_t smem_bytes() { return Smem(nullptr).bytes; }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char* smem, Blk& blk) {
    const Problem& p = a.p;
    if (*a.w.status != 0) return;
    const std::int64_t hv = bi.x;
    const std::int64_t nc = total_chunks(p, a.w.chunk_off);
    Smem s(smem);
    blk.each([&](int tid) {
      Acc acc = Acc(0);
      for (std::int64_t c = tid; c < nc; c += kThreads) acc += a.w.dgc[c * p.HV + hv];
      s.part[tid] = acc;
    });
    blk.each([&](int tid) {
      if (tid != 0) return;
      Acc acc = Acc(0);
      for (int t = 0; t < kThreads; ++t) acc += s.part[t];
      p.dg.store<Acc>(hv * p.dg.s[2], acc);
    });
  }
};

}  // namespace glr::cuda
