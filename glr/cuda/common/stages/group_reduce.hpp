// Backward stage 6: dq and dk of a query/key head are the sums of the per-value-head partials of its
// group, added in ascending value-head order (fixed, so bitwise deterministic; no atomics).
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc>
struct GroupReduce {
  static constexpr int kThreads = 256;
  static constexpr int kPerThread = 8;
  static constexpr std::int64_t kPerBlock = kThreads * kPerThread;
  static constexpr const char* kName = "group_reduce";
  using Args = StageArgs<Acc>;
  static std::size_t smem_bytes() { return 0; }
  static std::int64_t blocks(const Problem& p) { return (p.rows * p.H * p.K + kPerBlock - 1) / kPerBlock; }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx bi, char*, Blk& blk) {
    const Problem& p = a.p;
    if (*a.w.status != 0) return;
    const std::int64_t total = p.rows * p.H * p.K;
    blk.each([&](int tid) {
      for (int r = 0; r < kPerThread; ++r) {
        const std::int64_t e = bi.x * kPerBlock + r * kThreads + tid;  // (row, h, d) flat
        if (e >= total) return;
        const std::int64_t d = e % p.K, h = (e / p.K) % p.H, row = e / (p.K * p.H);
        const std::int64_t b = row / p.T, t = row % p.T;
        Acc q = Acc(0), k = Acc(0);
        for (std::int64_t gi = 0; gi < p.group; ++gi) {
          const std::int64_t wo = (row * p.HV + h * p.group + gi) * p.K + d;
          q += a.w.dqp[wo];
          k += a.w.dkp[wo];
        }
        p.dq.store<Acc>(p.dq.at(b, t, h, d), q);
        p.dk.store<Acc>(p.dk.at(b, t, h, d), k);
      }
    });
  }
};

}  // namespace glr::cuda
