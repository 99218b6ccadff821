// Stage 1: in-chunk cumulative log-decay G_i = g_0 + ... + g_i (per token and value head), restarting at
// every chunk. Gate none writes 0; a per-head gate gamma writes (i + 1) gamma (exact, no running sum).
//
// Each g is clamped below at the CPU reference's log_decay_floor (-128 in float, -1024 in double), where
// exp is already 0: no decay changes, but g = -Inf stays a clean reset instead of the NaN of
// exp(G_i - G_j) = exp(-Inf + Inf). `g < floor ? floor : g` keeps a NaN g NaN.
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc>
struct Cumsum {
  static constexpr int kThreads = 128;
  static constexpr const char* kName = "cumsum";
  using Args = StageArgs<Acc>;
  static std::size_t smem_bytes() { return 0; }

  GLR_HD static Acc clamp(Acc g) {
    const Acc floor = sizeof(Acc) >= sizeof(double) ? Acc(-1024) : Acc(-128);
    return g < floor ? floor : g;
  }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char*, Blk& blk) {
    const Problem& p = a.p;
    const ChunkInfo ci = locate_chunk(p, a.w.status, a.w.chunk_off, bi.x);
    if (!ci.valid) return;
    blk.each([&](int tid) {
      for (std::int64_t hv = tid; hv < p.HV; hv += kThreads) {  // one value head per thread
        Acc acc = Acc(0);
        const Acc gamma = p.gate == kGatePerHead ? clamp(p.g.load<Acc>(hv * p.g.s[2])) : Acc(0);
        for (int i = 0; i < ci.len; ++i) {
          if (p.gate == kGatePerToken)
            acc += clamp(p.g.load<Acc>(p.g.at(ci.b, ci.t0 + i, hv, 0)));
          else if (p.gate == kGatePerHead)
            acc = Acc(i + 1) * gamma;
          a.w.G[(ci.row0 + i) * p.HV + hv] = acc;
        }
      }
    });
  }
};

}  // namespace glr::cuda
