// Stage 0 (packed batches only): check cu_seqlens on the device and build the chunk table
// chunk_off[n] = sum_{m<n} ceil(len_m / C), with chunk_off[N] the total. One block; no host sync.
//
// An invalid cu_seqlens (cu[0] != 0, a decrease, cu[N] != T) sets status = 1: every later stage then does
// nothing and the poison stage fills every output with NaN, so a bad device-only offset array can never
// give a silent wrong result. (With a host copy in Params the same checks run on the host before launch.)
#pragma once

#include "stage.hpp"

namespace glr::cuda {

template <class Acc>
struct ChunkTable {
  static constexpr int kThreads = 256;
  static constexpr const char* kName = "chunk_table";
  using Args = StageArgs<Acc>;

  struct Smem {
    int* bad;             // (kThreads) one flag per thread, OR-ed by thread 0 in a fixed order
    std::int64_t* part;   // (kThreads + 1) chunks per thread's segment, then exclusive prefix sums
    std::size_t bytes;
    GLR_HD explicit Smem(char* base) {
      Carver c(base);
      bad = c.take<int>(kThreads + 1);
      part = c.take<std::int64_t>(kThreads + 1);
      bytes = c.bytes();
    }
  };
  static std::size_t smem_bytes() { return Smem(nullptr).bytes; }

  template <class Blk>
  GLR_HD static void run(const Args& a, BlockIdx, char* smem, Blk& blk) {
    const Problem& p = a.p;
    Smem s(smem);
    const std::int64_t N = p.N;
    auto cu = [&](std::int64_t i) { return cu_at(p, i); };
    blk.each([&](int tid) {
      int bad = 0;
      for (std::int64_t i = tid; i < N; i += kThreads)
        if (cu(i + 1) < cu(i)) bad = 1;
      if (tid == 0 && (cu(0) != 0 || cu(N) != p.T)) bad = 1;
      s.bad[tid] = bad;
    });
    blk.each([&](int tid) {
      if (tid != 0) return;
      int bad = 0;
      for (int t = 0; t < kThreads; ++t) bad |= s.bad[t];
      s.bad[kThreads] = bad;
      a.w.status[0] = bad;
    });
    if (s.bad[kThreads]) return;  // uniform: every thread reads the same flag after the barrier

    // Each thread owns one contiguous segment of sequences, so the prefix sum is a fixed-order scan.
    const std::int64_t seg = (N + kThreads - 1) / kThreads;
    auto chunks_of = [&](std::int64_t i) { return (cu(i + 1) - cu(i) + kChunk - 1) / kChunk; };
    blk.each([&](int tid) {
      std::int64_t sum = 0;
      const std::int64_t lo = tid * seg, hi = min_of<std::int64_t>(N, lo + seg);
      for (std::int64_t i = lo; i < hi; ++i) sum += chunks_of(i);
      s.part[tid] = sum;
    });
    blk.each([&](int tid) {
      if (tid != 0) return;
      std::int64_t run = 0;
      for (int t = 0; t < kThreads; ++t) {
        const std::int64_t x = s.part[t];
        s.part[t] = run;
        run += x;
      }
      s.part[kThreads] = run;
    });
    blk.each([&](int tid) {
      std::int64_t run = s.part[tid];
      const std::int64_t lo = tid * seg, hi = min_of<std::int64_t>(N, lo + seg);
      for (std::int64_t i = lo; i < hi; ++i) {
        a.w.chunk_off[i] = run;
        run += chunks_of(i);
      }
      if (tid == 0) a.w.chunk_off[N] = s.part[kThreads];
    });
  }
};

}  // namespace glr::cuda
