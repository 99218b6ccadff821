// Stage 1: the in-chunk log-decays of every token (per value head), restarting at every chunk, as the CPU
// reference keeps them (glr/reference/chunked.hpp, Decay):
//
//     G_i  = g_0 + g_1 + ... + g_i     the decay from the state entering the chunk to token i
//     Gr_i =       g_1 + ... + g_i     the same without the chunk's first gate
//
// Decays between two tokens of a chunk are exp(Gr_i - Gr_j), never exp(G_i - G_j): equal in exact
// arithmetic, but only the first keeps a non-finite g_0 (where kgate plants one) out of decays that do not
// involve it. Gate none writes 0; a per-head gate gamma writes gamma + i gamma and i gamma.
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
        if (p.gate == kGateNone) {
          for (int i = 0; i < ci.len; ++i) a.w.G[(ci.row0 + i) * p.HV + hv] = a.w.Gr[(ci.row0 + i) * p.HV + hv] = Acc(0);
          continue;
        }
        auto gate = [&](int i) {
          return clamp(p.gate == kGatePerHead ? p.g.load<Acc>(hv * p.g.s[2])
                                              : p.g.load<Acc>(p.g.at(ci.b, ci.t0 + i, hv, 0)));
        };
        // As the CPU reference computes them: Gr by a running sum from token 1 (a per-head gate
        // multiplies instead), G = g_0 + Gr.
        const Acc g0 = gate(0);
        Acc gr = Acc(0);
        for (int i = 0; i < ci.len; ++i) {
          if (i > 0) gr = p.gate == kGatePerHead ? Acc(i) * g0 : gr + gate(i);
          a.w.Gr[(ci.row0 + i) * p.HV + hv] = gr;
          a.w.G[(ci.row0 + i) * p.HV + hv] = g0 + gr;
        }
      }
    });
  }
};

}  // namespace glr::cuda
