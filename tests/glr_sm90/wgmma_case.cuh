// tests/glr_sm90/wgmma_case.cuh: one wgmma test case as a kernel, the same source on the host emulator
// (tests/glr_sm90/wgmma_emu_test.cpp, after emu_wgmma.hpp) and on an H200 (bench/glr/sm90_wgmma_check.cu).
// One block of 128 threads (one warpgroup): thread 0 arms an mbarrier and bulk-copies A (64 x K, row-major) and
// B (K x N, row-major) into a staging area; all wait on the barrier's phase 0, lay A and B out in shared memory
// in the case's canonical layouts (CanonTile, as a kernel would), fence.proxy.async + barrier, then K/16 wgmmas
// accumulate D = A B (the first with scale-d = 0 over NaN accumulators, so a wrong scale-d shows), and D is
// written row-major through the documented accumulator layout.
// Case knobs: swizzle and major-ness of each operand, A from registers, N, K, the layouts' `outer`, B's operand
// row offset `noff` (B laid out as rows noff..noff+N-1 of an (N + noff)-row tile, rows 0..noff-1 NaN, and the
// descriptor's start moved to row noff: at N = 32, noff = 32, MN-major 128B, 64 bytes into the swizzle row, as the
// second warpgroup of chunk_wgmma_kernel reads K and Q), and a deliberate fault (`bad`) that must make the result
// wrong: 1 SBO of B + 16 bytes, 2 B's swizzle mode changed in its descriptor, 3 B's transpose bit flipped (the
// host launches the other instantiation), 4 A's swizzle mode changed (A from shared memory), 7 B's start left at
// row 0 (noff > 0: reads the NaN rows); on the emulator only (racy on a GPU): 5 the accumulators read without
// wgmma_wait, 6 B's tile zeroed after the wgmmas were issued, before the wait.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../glr/cuda/sm90/mma_sync.cuh"
#include "../../glr/cuda/sm90/wgmma.cuh"

namespace glr::wgtest {

using glr::cuda::sm90::CanonTile;
using glr::cuda::sm90::Swizzle;

struct Case {
  int n, k;
  Swizzle sw_a, sw_b;
  bool a_mn, b_mn, a_reg;
  int outer_a, outer_b;
  int bad;
  int noff;                // B's operand rows before the wgmma's first (0: none)
  const __nv_bfloat16* a;  // 64 x k row-major
  const __nv_bfloat16* b;  // k x n row-major
  float* d;                // 64 x n row-major
};

constexpr int kMaxK = 64;
// Shared memory: [1024 alignment slack][staging A 8 KB][staging B 16 KB][A tile region 32 KB][B tile region
// 48 KB][mbarrier]: the tile regions leave room past the tiles so that a faulty descriptor reads inside the
// allocation (garbage, not a fault).
constexpr std::uint32_t kStageA = 0, kStageB = 8192, kTileA = 24576, kTileB = 24576 + 32768,
                        kBar = 24576 + 32768 + 49152, kSmemBytes = kBar + 16 + 1024;

__host__ __device__ constexpr Swizzle next_swizzle(Swizzle s) {
  return s == Swizzle::None ? Swizzle::B32
         : s == Swizzle::B32 ? Swizzle::B64
         : s == Swizzle::B64 ? Swizzle::B128
                             : Swizzle::None;
}

// TA, TB: the transpose bits the wgmma is issued with (normally a_mn, b_mn; bad == 3 flips TB).
template <int N, bool AReg, int TA, int TB>
__global__ void __launch_bounds__(128) wgmma_case_kernel(Case c) {
  namespace s9 = glr::cuda::sm90;
  extern __shared__ __align__(16) char wg_smem_raw[];
  const std::uint32_t raw = s9::smem_addr(wg_smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  char* const sp = wg_smem_raw + (base - raw);  // generic pointer of shared address `base`
  const int tid = static_cast<int>(threadIdx.x);
  const std::uint32_t bytes_a = 64u * static_cast<std::uint32_t>(c.k) * 2u;
  const std::uint32_t bytes_b = static_cast<std::uint32_t>(c.k * c.n) * 2u;
  const std::uint32_t bar = base + kBar;
  if (tid == 0) {
    s9::mbarrier_init(bar, 1);
    s9::fence_mbarrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    s9::mbarrier_arrive_expect_tx(bar, bytes_a + bytes_b);
    s9::bulk_copy_g2s(base + kStageA, c.a, bytes_a, bar);
    s9::bulk_copy_g2s(base + kStageB, c.b, bytes_b, bar);
  }
  s9::mbarrier_wait_parity(bar, 0);

  const auto* sa = reinterpret_cast<const std::uint16_t*>(sp + kStageA);
  const auto* sb = reinterpret_cast<const std::uint16_t*>(sp + kStageB);
  const CanonTile ta(c.sw_a, c.a_mn, 64, c.k, c.outer_a);
  const CanonTile tb(c.sw_b, c.b_mn, c.n + c.noff, c.k, c.outer_b);
  for (int i = tid; i < 64 * c.k; i += 128) {  // A(m, kk): operand row m, k kk
    const int m = i / c.k, kk = i % c.k;
    *reinterpret_cast<std::uint16_t*>(sp + (ta.addr(base + kTileA, m, kk) - base)) = sa[i];
  }
  for (int i = tid; i < c.k * c.n; i += 128) {  // B(kk, nn): operand row noff + nn, k kk
    const int kk = i / c.n, nn = i % c.n;
    *reinterpret_cast<std::uint16_t*>(sp + (tb.addr(base + kTileB, c.noff + nn, kk) - base)) = sb[i];
  }
  for (int i = tid; i < c.k * c.noff; i += 128)  // operand rows 0..noff-1: NaN (read only by a wrong start)
    *reinterpret_cast<std::uint16_t*>(sp + (tb.addr(base + kTileB, i % c.noff, i / c.noff) - base)) = 0x7fc0u;
  s9::fence_proxy_async();
  __syncthreads();

  float d[N / 2];
  float qnan;
  {
    const std::uint32_t u = 0x7fc00000u;
    std::memcpy(&qnan, &u, 4);
  }
  for (int i = 0; i < N / 2; ++i) d[i] = qnan;  // scale-d = 0 on the first k-step must ignore it
  const int r = (tid % 128) / 32, g = (tid % 32) / 4, t = tid % 4;
  for (int st = 0; st < c.k / 16; ++st) {
    std::uint64_t db = s9::make_desc(base + kTileB + tb.offset(c.bad == 7 ? 0 : c.noff, 16 * st), tb.lbo, tb.sbo, tb.sw);
    if (c.bad == 1) db += static_cast<std::uint64_t>(1) << 32;  // SBO + 16 bytes
    if (c.bad == 2)
      db = (db & ~(static_cast<std::uint64_t>(3) << 62)) |
           static_cast<std::uint64_t>(next_swizzle(c.sw_b)) << 62;
    if constexpr (AReg) {
      std::uint32_t a[4];
      const auto at = [&](int m, int kk) { return static_cast<std::uint32_t>(sa[m * c.k + kk]); };
      const int m0 = 16 * r + g, k0 = 16 * st + 2 * t;
      a[0] = at(m0, k0) | at(m0, k0 + 1) << 16;
      a[1] = at(m0 + 8, k0) | at(m0 + 8, k0 + 1) << 16;
      a[2] = at(m0, k0 + 8) | at(m0, k0 + 9) << 16;
      a[3] = at(m0 + 8, k0 + 8) | at(m0 + 8, k0 + 9) << 16;
      s9::wgmma_fence();
      s9::wgmma_rs_n<N, TB>(d, a, db, st > 0 ? 1 : 0);
    } else {
      std::uint64_t da = ta.desc(base + kTileA, st);
      if (c.bad == 4)
        da = (da & ~(static_cast<std::uint64_t>(3) << 62)) |
             static_cast<std::uint64_t>(next_swizzle(c.sw_a)) << 62;
      s9::wgmma_fence();
      s9::wgmma_ss_n<N, TA, TB>(d, da, db, st > 0 ? 1 : 0);
    }
    s9::wgmma_commit();
    s9::wgmma_fence_operand(d);
  }
  if (c.bad == 6) {  // (emulator only) B's tile zeroed while the wgmmas are in flight
    __syncthreads();
    for (std::uint32_t i = static_cast<std::uint32_t>(tid); i < tb.bytes(); i += 128) sp[kTileB + i] = 0;
    s9::fence_proxy_async();
    __syncthreads();
  }
  if (c.bad != 5) s9::wgmma_wait<0>();  // (emulator only) 5: the accumulators read without the wait
  s9::wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) {
    const s9::AccCoord at = s9::wgmma_acc_coord(tid, i);
    c.d[at.row * c.n + at.col] = d[i];
  }
}

}  // namespace glr::wgtest

namespace glr::wgtest {

// mbarrier phases: 128 arrivals a phase, `phases` phases; in phase p each thread writes its slot of buffer p % 2,
// arrives, waits for parity p % 2, then checks all 128 slots of that buffer (a thread cannot reach phase p + 2,
// which reuses the buffer, before every thread has arrived in phase p + 1, i.e. finished reading phase p).
// errors[tid]: the number of wrong slots this thread saw.
struct MbarCase {
  int phases;
  int* errors;  // 128
};
constexpr std::uint32_t kMbarSmemBytes = 16 + 2 * 128 * 4 + 1024;

__global__ void __launch_bounds__(128) mbarrier_phase_kernel(MbarCase c) {
  namespace s9 = glr::cuda::sm90;
  extern __shared__ __align__(16) char wg_smem_raw[];
  const std::uint32_t raw = s9::smem_addr(wg_smem_raw);
  const std::uint32_t base = (raw + 15u) & ~15u;
  char* const sp = wg_smem_raw + (base - raw);
  int* const slot = reinterpret_cast<int*>(sp + 16);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    s9::mbarrier_init(base, 128);
    s9::fence_mbarrier_init();
  }
  __syncthreads();
  int errors = 0;
  for (int p = 0; p < c.phases; ++p) {
    volatile int* buf = slot + 128 * (p % 2);
    buf[tid] = 1000 * p + tid;
    s9::mbarrier_arrive(base);
    s9::mbarrier_wait_parity(base, static_cast<std::uint32_t>(p % 2));
    for (int y = 0; y < 128; ++y) errors += buf[y] != 1000 * p + y;
  }
  c.errors[tid] = errors;
}

// Named barriers: (1) warps 0-1 and warps 2-3 each sync on their own barrier (ids 1, 2; 64 threads), 4 rounds
// of write / sync / check / sync; (2) producer / consumer: warp 0 writes, bar.arrive(3, 64); warp 1 bar.sync(3,
// 64), checks, bar.arrive(4, 64); warp 0 bar.sync(4, 64) before the next of 3 rounds. errors[tid] as above.
__global__ void __launch_bounds__(128) named_barrier_kernel(MbarCase c) {
  namespace s9 = glr::cuda::sm90;
  extern __shared__ __align__(16) char wg_smem_raw[];
  volatile int* const slot = reinterpret_cast<int*>(wg_smem_raw);  // 128 + 32 ints
  const int tid = static_cast<int>(threadIdx.x), grp = tid / 64, lane = tid % 32, warp = tid / 32;
  int errors = 0;
  for (int r = 0; r < 4; ++r) {
    slot[tid] = 100 * r + tid;
    s9::named_barrier_sync(1 + grp, 64);
    for (int y = 64 * grp; y < 64 * grp + 64; ++y) errors += slot[y] != 100 * r + y;
    s9::named_barrier_sync(1 + grp, 64);
  }
  __syncthreads();
  for (int r = 0; r < 3; ++r) {
    if (warp == 0) {
      slot[128 + lane] = 7 * r + lane;
      s9::named_barrier_arrive(3, 64);
      s9::named_barrier_sync(4, 64);
    } else if (warp == 1) {
      s9::named_barrier_sync(3, 64);
      for (int y = 0; y < 32; ++y) errors += slot[128 + y] != 7 * r + y;
      s9::named_barrier_arrive(4, 64);
    }
  }
  c.errors[tid] = errors;
}

// TMA -> wgmma: A (64 x K row-major, the map's rows a_rows <= 64: rows past it must arrive as zeros) by 2-D TMA
// boxes of W/2 columns x 64 rows into K-major W-swizzled slabs (without swizzle: boxes of 8 columns, core-matrix
// columns), B (K x N row-major) by boxes of W/2 columns x K rows into MN-major atoms; every element of both tiles
// checked at its CanonTile address against global memory (mismatch[tid]); then D = A B by K/16 wgmmas (A
// K-major, B MN-major) as in wgmma_case_kernel; and A's tile stored back to a second matrix by TMA stores.
using glr::cuda::sm90::TmaMap2d;
struct TmaCase {
  TmaMap2d ma, mb, mo;  // mo: the map of a_out (a_rows x k), where A's tile is stored back by TMA
  int n, k, a_rows;
  Swizzle sw;
  const __nv_bfloat16* a;
  const __nv_bfloat16* b;
  float* d;
  int* mismatch;  // 128
};

template <int N>
__global__ void __launch_bounds__(128) tma_wgmma_kernel(const __grid_constant__ TmaCase c) {
  namespace s9 = glr::cuda::sm90;
  extern __shared__ __align__(16) char wg_smem_raw[];
  const std::uint32_t raw = s9::smem_addr(wg_smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  char* const sp = wg_smem_raw + (base - raw);
  const int tid = static_cast<int>(threadIdx.x);
  const int wa = c.sw == Swizzle::None ? 8 : static_cast<int>(s9::swizzle_bytes(c.sw) / 2);  // box columns
  const CanonTile ta(c.sw, false, 64, c.k, 1);
  const CanonTile tb(c.sw, true, c.n, c.k, c.sw == Swizzle::None ? 1 : 0);
  const std::uint32_t bar = base + kBar;
  if (tid == 0) {
    s9::mbarrier_init(bar, 1);
    s9::fence_mbarrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    s9::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(64 * c.k * 2 + c.k * c.n * 2));
    for (int s = 0; s < c.k / wa; ++s) s9::tma_load_2d(base + kTileA + ta.offset(0, s * wa), c.ma, s * wa, 0, bar);
    for (int a = 0; a < c.n / wa; ++a) s9::tma_load_2d(base + kTileB + tb.offset(a * wa, 0), c.mb, a * wa, 0, bar);
  }
  s9::mbarrier_wait_parity(bar, 0);
  const auto* ga = reinterpret_cast<const std::uint16_t*>(c.a);
  const auto* gb = reinterpret_cast<const std::uint16_t*>(c.b);
  int mismatch = 0;
  for (int i = tid; i < 64 * c.k; i += 128) {
    const int m = i / c.k, kk = i % c.k;
    const std::uint16_t want = m < c.a_rows ? ga[i] : 0;
    mismatch += *reinterpret_cast<const std::uint16_t*>(sp + (ta.addr(base + kTileA, m, kk) - base)) != want;
  }
  for (int i = tid; i < c.k * c.n; i += 128) {
    const int kk = i / c.n, nn = i % c.n;
    mismatch += *reinterpret_cast<const std::uint16_t*>(sp + (tb.addr(base + kTileB, nn, kk) - base)) != gb[i];
  }
  c.mismatch[tid] = mismatch;
  if (tid == 0) {  // A's tile back to global memory by TMA stores (rows past the map's must stay untouched)
    for (int s = 0; s < c.k / wa; ++s) s9::tma_store_2d(c.mo, s * wa, 0, base + kTileA + ta.offset(0, s * wa));
    s9::bulk_commit();
    s9::bulk_wait<0>();
  }

  float d[N / 2];
  float qnan;
  {
    const std::uint32_t u = 0x7fc00000u;
    std::memcpy(&qnan, &u, 4);
  }
  for (int i = 0; i < N / 2; ++i) d[i] = qnan;
  for (int st = 0; st < c.k / 16; ++st) {
    // The descriptors (a run-time swizzle: a branch) and d's writes (the NaNs) before the fence: a branch or a
    // write of d between wgmma.fence and the wgmma makes ptxas inject a warpgroup.arrive (C7519).
    const std::uint64_t da = ta.desc(base + kTileA, st), db = tb.desc(base + kTileB, st);
    s9::wgmma_fence_operand(d);
    s9::wgmma_fence();
    s9::wgmma_ss<N, 0, 1>(d, da, db, st > 0 ? 1 : 0);
    s9::wgmma_commit();
    s9::wgmma_fence_operand(d);
  }
  s9::wgmma_wait<0>();
  s9::wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) {
    const s9::AccCoord at = s9::wgmma_acc_coord(tid, i);
    c.d[at.row * c.n + at.col] = d[i];
  }
}

}  // namespace glr::wgtest

// ---- host side, shared by the emulator test and the GPU check: the case list, the data, the reference ----
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace glr::wgtest {

struct Spec {
  int n, k;
  Swizzle sw_a, sw_b;
  bool a_mn, b_mn, a_reg;
  int outer;
  int bad;
  int noff = 0;
};

inline const char* swizzle_name(Swizzle s) {
  return s == Swizzle::None ? "none" : s == Swizzle::B32 ? "32B" : s == Swizzle::B64 ? "64B" : "128B";
}
inline std::string name(const Spec& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "N%-3d K%d A:%s B:%s-%s outer%d%s%s", s.n, s.k,
                s.a_reg ? "registers" : (std::string(s.a_mn ? "MN-" : "K-") + swizzle_name(s.sw_a)).c_str(),
                s.b_mn ? "MN" : "K", swizzle_name(s.sw_b), s.outer, s.noff == 32 ? " B rows from 32" : "",
                s.bad == 1   ? "  [fault: B SBO + 16]"
                : s.bad == 2 ? "  [fault: B swizzle mode]"
                : s.bad == 3 ? "  [fault: B transpose bit]"
                : s.bad == 4 ? "  [fault: A swizzle mode]"
                : s.bad == 5 ? "  [fault: no wgmma_wait]"
                : s.bad == 6 ? "  [fault: B overwritten in flight]"
                : s.bad == 7 ? "  [fault: B start not moved]"
                             : "");
  return buf;
}

// Every swizzle x B K-/MN-major x A (K-major smem, MN-major smem, registers) x N 64, 128 x both layout orders,
// K = 64 (4 accumulated k-steps); A's swizzle differs from B's. Then the faults, each of which must fail
// (5 and 6 only when `emulator`).
inline std::vector<Spec> specs(bool emulator) {
  const Swizzle sw[4] = {Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128};
  std::vector<Spec> v;
  for (int n : {64, 128})
    for (int ib = 0; ib < 4; ++ib)
      for (bool b_mn : {false, true})
        for (int am = 0; am < 3; ++am)
          for (int outer = 0; outer < 2; ++outer)
            v.push_back({n, 64, sw[(ib + 1 + outer) % 4], sw[ib], am == 1, b_mn, am == 2, outer, 0});
  for (int ib = 0; ib < 4; ++ib)
    for (bool mn : {false, true}) {
      for (int bad = 1; bad <= 3; ++bad) v.push_back({64, 64, sw[(ib + 2) % 4], sw[ib], false, mn, false, 0, bad});
      v.push_back({64, 64, sw[ib], sw[(ib + 1) % 4], mn, false, false, 1, 4});
    }
  // N = 32 from the second half of a 64-row B tile (chunk_wgmma_kernel's warpgroup 1): 128B, B MN-major (E K,
  // dA K; A MN-major: E^T K, dA^T Q) and K-major (Q K^T's K, h), and the same from row 0; then the start not moved.
  for (int noff : {0, 32})
    for (bool b_mn : {true, false})
      for (bool a_mn : {false, true}) v.push_back({32, 64, Swizzle::B128, Swizzle::B128, a_mn, b_mn, false, 0, 0, noff});
  for (bool b_mn : {true, false}) v.push_back({32, 64, Swizzle::B128, Swizzle::B128, false, b_mn, false, 0, 7, 32});
  if (emulator)
    for (int bad : {5, 6}) {
      v.push_back({64, 64, Swizzle::B128, Swizzle::B128, false, false, false, 0, bad});
      v.push_back({128, 64, Swizzle::B64, Swizzle::B32, false, true, true, 1, bad});
    }
  return v;
}

// bf16 values in [-1, 1) from a fixed-seed generator (truncated float bits: exact bf16 numbers).
inline std::vector<std::uint16_t> random_bf16(std::size_t count, std::uint64_t seed) {
  std::vector<std::uint16_t> v(count);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float f = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    x = static_cast<std::uint16_t>(u >> 16);
  }
  return v;
}
inline double bf16_value(std::uint16_t x) {
  const std::uint32_t u = static_cast<std::uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Bound per element: 2^-16 sum_k |a_ik b_kj| (fp32 accumulation over 4 k-steps of 16 products loses a few
// 2^-23 of that; a layout error is of the order of the sum itself). Returns max |d - ref| / bound (inf when any
// d is not finite).
inline double worst_ratio(const Spec& s, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                          const std::vector<float>& d) {
  double worst = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < s.n; ++j) {
      double ref = 0, abs_sum = 0;
      for (int k = 0; k < s.k; ++k) {
        const double p = bf16_value(a[i * s.k + k]) * bf16_value(b[k * s.n + j]);
        ref += p;
        abs_sum += std::fabs(p);
      }
      const double x = d[i * s.n + j];
      if (!std::isfinite(x)) return INFINITY;
      const double bound = std::ldexp(abs_sum, -16) + 1e-30;
      worst = std::max(worst, std::fabs(x - ref) / bound);
    }
  return worst;
}

// The kernel instantiation of a spec (bad == 3 flips B's transpose bit), handed to f.
template <class F>
void with_kernel(const Spec& s, F&& f) {
  const int tb = s.b_mn != (s.bad == 3);
  const int key = (s.n == 32) << 4 | (s.n == 128) << 3 | s.a_reg << 2 | (s.a_reg ? 0 : s.a_mn) << 1 | tb;
  switch (key) {
    case 16: f(&wgmma_case_kernel<32, false, 0, 0>); break;
    case 17: f(&wgmma_case_kernel<32, false, 0, 1>); break;
    case 18: f(&wgmma_case_kernel<32, false, 1, 0>); break;
    case 19: f(&wgmma_case_kernel<32, false, 1, 1>); break;
    case 0: f(&wgmma_case_kernel<64, false, 0, 0>); break;
    case 1: f(&wgmma_case_kernel<64, false, 0, 1>); break;
    case 2: f(&wgmma_case_kernel<64, false, 1, 0>); break;
    case 3: f(&wgmma_case_kernel<64, false, 1, 1>); break;
    case 4: f(&wgmma_case_kernel<64, true, 0, 0>); break;
    case 5: f(&wgmma_case_kernel<64, true, 0, 1>); break;
    case 8: f(&wgmma_case_kernel<128, false, 0, 0>); break;
    case 9: f(&wgmma_case_kernel<128, false, 0, 1>); break;
    case 10: f(&wgmma_case_kernel<128, false, 1, 0>); break;
    case 11: f(&wgmma_case_kernel<128, false, 1, 1>); break;
    case 12: f(&wgmma_case_kernel<128, true, 0, 0>); break;
    case 13: f(&wgmma_case_kernel<128, true, 0, 1>); break;
    default: break;
  }
}

// Runs every spec through run(spec, case, d) (which launches and leaves 64 x n floats in d), prints one line a
// case, returns the number of failures (a fault case fails when its result is within the bound).
template <class Run>
int run_specs(Run&& run, bool emulator) {
  int failures = 0, positives = 0, faults = 0;
  double worst_ok = 0, least_fault = INFINITY;
  const auto v = specs(emulator);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Spec& s = v[i];
    const auto a = random_bf16(64 * static_cast<std::size_t>(s.k), 2 * i + 1);
    const auto b = random_bf16(static_cast<std::size_t>(s.k) * s.n, 2 * i + 2);
    std::vector<float> d(64 * static_cast<std::size_t>(s.n), 0.0f);
    Case c{s.n, s.k, s.sw_a, s.sw_b, s.a_mn, s.b_mn, s.a_reg, s.outer, s.outer, s.bad, s.noff, nullptr, nullptr, nullptr};
    run(s, c, a, b, d);
    const double w = worst_ratio(s, a, b, d);
    const bool ok = s.bad == 0 ? w <= 1.0 : !(w <= 1.0);
    if (s.bad == 0) {
      ++positives;
      worst_ok = std::max(worst_ok, w);
    } else {
      ++faults;
      least_fault = std::min(least_fault, w);
    }
    failures += !ok;
    std::printf("%-60s max err/bound %10.3g  %s\n", name(s).c_str(), w,
                ok ? (s.bad ? "PASS (wrong, as it must be)" : "PASS") : "FAIL");
    std::fflush(stdout);
  }
  std::printf("wgmma: %d cases within the bound (largest err/bound %.3g), %d faults all outside it (smallest "
              "%.3g): %d failures\n",
              positives, worst_ok, faults, least_fault, failures);
  return failures;
}

// The verdict line of a barrier case (mbarrier_phase_kernel, named_barrier_kernel): errors[t] is thread t's count
// of wrong slots (-1: it never got there). Returns 1 when any thread saw one, else 0.
inline int barrier_verdict(const char* what, const char* saw, const std::vector<int>& errors) {
  int bad = 0;
  for (int e : errors) bad += e != 0;
  std::printf("%s, %d threads saw %s  %s\n", what, bad, saw, bad ? "FAIL" : "PASS");
  return bad != 0;
}

}  // namespace glr::wgtest

namespace glr::wgtest {

// TMA cases: every swizzle x N 64, 128 with the whole A inside its map, then every swizzle at N 64 with A's map
// 57 rows (rows 57-63 must arrive as zeros: the reference uses zeros there).
// run(case, a, b, d, mismatch, a_out): make the maps (ma: a_rows x k, boxes 64 x wa; mb: k x n, boxes k x wa;
// mo like ma on a copy of a_out) on the pointers it holds, launch tma_wgmma_kernel<n>, leave 64 x n floats in d,
// 128 counts in mismatch and the stored-back A in a_out; returns false if a map could not be made.
template <class Run>
int run_tma_specs(Run&& run) {
  const Swizzle sw[4] = {Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128};
  int failures = 0, i = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int n : {64, 128}) {
      if (pass == 1 && n == 128) continue;
      for (Swizzle s : sw) {
        ++i;
        const int k = 64, a_rows = pass == 0 ? 64 : 57;
        auto a = random_bf16(64 * k, 1000 + 2 * i);
        const auto b = random_bf16(static_cast<std::size_t>(k) * n, 1001 + 2 * i);
        std::vector<float> d(64 * static_cast<std::size_t>(n), 0.0f);
        std::vector<int> mismatch(128, -1);
        std::vector<std::uint16_t> a_out(a.size(), 0xFFFF);
        TmaCase c{};
        c.n = n;
        c.k = k;
        c.a_rows = a_rows;
        c.sw = s;
        const bool made = run(c, a, b, d, mismatch, a_out);
        long stored_wrong = 0;  // rows < a_rows: A; the rest untouched (0xFFFF)
        for (std::size_t x = 0; x < a.size(); ++x)
          stored_wrong += a_out[x] != (x < static_cast<std::size_t>(a_rows) * k ? a[x] : 0xFFFF);
        for (std::size_t x = static_cast<std::size_t>(a_rows) * k; x < a.size(); ++x) a[x] = 0;  // the reference
        const Spec sp{n, k, s, s, false, true, false, 0, 0};
        const double w = made ? worst_ratio(sp, a, b, d) : INFINITY;
        long mm = 0;
        for (int x : mismatch) mm += x < 0 ? 1000000 : x;
        const bool ok = made && w <= 1.0 && mm == 0 && stored_wrong == 0;
        failures += !ok;
        std::printf("TMA -> wgmma N%-3d A K-%s (map rows %d) B MN-%s: %s, tile elements misplaced %ld, stored back "
                    "wrong %ld, max err/bound %.3g  %s\n",
                    n, swizzle_name(s), a_rows, swizzle_name(s), made ? "maps made" : "MAP REFUSED", mm,
                    stored_wrong, w, ok ? "PASS" : "FAIL");
        std::fflush(stdout);
      }
    }
  return failures;
}

}  // namespace glr::wgtest

namespace glr::wgtest {

// Pipelined producer/consumer GEMM: C (M x N, fp32, row-major) = A (M x K, bf16, row-major) B (K x N, bf16,
// row-major), M = 64 NC, one block of 128 (NC + 1) threads. Warpgroup 0 is the producer: its thread 0 streams the
// k-tiles (64 k each; the last one zero-filled by TMA past K) into a ring of `stages` shared-memory stages by 2-D
// TMA loads, A as one box of 64 k x M rows into a K-major 128B-swizzled tile, B as N/64 boxes of 64 n x 64 k into
// MN-major 128B-swizzled atoms; each stage has a full mbarrier (1 arrival + the stage's bytes: expect_tx) and an
// empty one (NC arrivals, one a consumer warpgroup); round r of stage s waits for the empty barrier's phase r - 1
// (parity (r - 1) & 1) before re-arming it. Warpgroups 1..NC are consumers: warpgroup w computes rows 64 (w - 1)
// .. + 63: per k-tile it waits on the full barrier (parity r & 1), issues 4 wgmma_ss (m64nNk16, A K-major, B
// MN-major) as one commit group, waits until one group is left in flight (wgmma_wait<1>: the previous k-tile's
// wgmmas have read their stage) and releases the previous k-tile's stage on its empty barrier (thread 0 of the
// warpgroup). With NC = 2 the producer gives registers back (setmaxnreg.dec 40) and the consumers take them
// (setmaxnreg.inc 232): 128 x 40 + 256 x 232 = 384 x 168, the budget of __launch_bounds__(384, 1).
// Faults (`bad`, on the emulator only: a race on a GPU): 1 the consumers skip the full-barrier wait, 2 they wait
// on the wrong parity -- both read a stage before its TMA has landed (emu_wgmma.hpp lands a load only when its
// barrier is next touched, so they deterministically see the poison or an older k-tile); 3 the consumers release
// k-tile kt - 1's stage on its empty barrier before the wgmma_wait that retires its wgmmas, so the producer
// refills it while they may still read it (caught under the emulator's other schedule, emu::wg::tma_early: loads land at
// issue and wgmma reads wait until the block is quiescent, so the refill always comes first). A producer that
// skips the empty-barrier wait is not a case: its full barriers then complete several phases ahead of the
// consumers, whose parity waits alias, and the kernel can hang rather than compute a wrong result.
struct PipeCase {
  TmaMap2d ma, mb;  // ma: A (M rows x K), boxes 64 x M; mb: B (K rows x N), boxes 64 x 64
  int m, n, k, stages, bad;
  float* c;  // M x N
};
constexpr int kPipeMaxStages = 4;
// Stages of at most 24 KB (NC = 2, N = 64 or NC = 1, N = 128), the 2 x 4 barriers, the 1024 alignment slack.
constexpr std::uint32_t kPipeStageMax = 24576, kPipeSmemBytes = kPipeMaxStages * kPipeStageMax + 64 + 1024;

template <int N, int NC>
__global__ void __launch_bounds__(128 * (NC + 1), 1) pipe_gemm_kernel(const __grid_constant__ PipeCase p) {
  namespace s9 = glr::cuda::sm90;
  extern __shared__ __align__(16) char wg_smem_raw[];
  const std::uint32_t raw = s9::smem_addr(wg_smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128;
  constexpr std::uint32_t a_bytes = NC * 64 * 64 * 2, b_bytes = 64 * N * 2, stage_bytes = a_bytes + b_bytes;
  const int S = p.stages, KT = (p.k + 63) / 64;
  const std::uint32_t bars = base + static_cast<std::uint32_t>(S) * stage_bytes;
  const auto full = [&](int s) { return bars + 8u * static_cast<std::uint32_t>(s); };
  const auto empty = [&](int s) { return bars + 8u * static_cast<std::uint32_t>(kPipeMaxStages + s); };
  const CanonTile ta(Swizzle::B128, false, 64, 64, 0);  // one consumer's 64 rows: 8 KB, rows at 128 B
  const CanonTile tb(Swizzle::B128, true, N, 64, 0);    // 64-column atoms at LBO = 8 KB
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      s9::mbarrier_init(full(s), 1);
      s9::mbarrier_init(empty(s), NC);
    }
    s9::fence_mbarrier_init();
  }
  __syncthreads();
  if (wg == 0) {  // producer
    if constexpr (NC == 2) s9::setmaxnreg_dec<40>();
    if (tid == 0)
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % S, r = kt / S;
        if (r > 0) s9::mbarrier_wait_parity(empty(s), static_cast<std::uint32_t>((r - 1) & 1));
        const std::uint32_t sa = base + static_cast<std::uint32_t>(s) * stage_bytes, sb = sa + a_bytes;
        s9::mbarrier_arrive_expect_tx(full(s), stage_bytes);
        s9::tma_load_2d(sa, p.ma, 64 * kt, 0, full(s));
        for (int j = 0; j < N / 64; ++j) s9::tma_load_2d(sb + tb.offset(64 * j, 0), p.mb, 64 * j, 64 * kt, full(s));
      }
    return;
  }
  if constexpr (NC == 2) s9::setmaxnreg_inc<232>();
  const int cw = wg - 1;
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % S, r = kt / S;
    if (p.bad != 1) s9::mbarrier_wait_parity(full(s), static_cast<std::uint32_t>((r & 1) ^ (p.bad == 2 ? 1 : 0)));
    const std::uint32_t sa = base + static_cast<std::uint32_t>(s) * stage_bytes + 8192u * static_cast<std::uint32_t>(cw);
    const std::uint32_t sb = base + static_cast<std::uint32_t>(s) * stage_bytes + a_bytes;
    s9::wgmma_fence();
#pragma unroll
    for (int st = 0; st < 4; ++st)
      s9::wgmma_ss<N, 0, 1>(d, ta.desc(sa, st), tb.desc(sb, st), kt > 0 || st > 0 ? 1 : 0);
    s9::wgmma_commit();
    s9::wgmma_fence_operand(d);
    // Fault 3 from the third k-tile on (by then every consumer thread is past k-tile kt - 1's full wait: the
    // refill cannot complete a phase that a slow thread still polls for, which would hang rather than fail).
    if (p.bad == 3 && kt > 1 && tid % 128 == 0) s9::mbarrier_arrive(empty((kt - 1) % S));
    s9::wgmma_wait<1>();  // k-tile kt - 1's wgmmas have retired: its stage may be refilled
    s9::wgmma_fence_operand(d);
    if ((p.bad != 3 || kt == 1) && kt > 0 && tid % 128 == 0) s9::mbarrier_arrive(empty((kt - 1) % S));
  }
  s9::wgmma_wait<0>();
  s9::wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) {
    const s9::AccCoord at = s9::wgmma_acc_coord(tid, i);
    p.c[(64 * cw + at.row) * N + at.col] = d[i];
  }
}

struct PipeSpec {
  int nc, n, k, stages, bad;
  int early = 0;  // emulator: run under emu::wg::tma_early (ignored on a GPU)
};
// The cases: NC 1 and 2, N 64 and 128, 2-4 stages; K from one k-tile to 9 (the ring wrapped up to 4 times), k-tile
// counts that are not multiples of the stage count, K not a multiple of 64 (the last tile zero-filled past K).
// Then (emulator) the faults.
inline std::vector<PipeSpec> pipe_specs(bool emulator) {
  std::vector<PipeSpec> v = {{1, 64, 64, 2, 0},  {1, 64, 192, 2, 0},  {1, 64, 512, 2, 0},  {1, 128, 320, 3, 0},
                             {1, 128, 80, 3, 0}, {2, 64, 576, 4, 0},  {2, 64, 200, 4, 0},  {2, 64, 448, 2, 0},
                             {2, 64, 1024, 3, 0}};
  if (emulator) {
    const std::size_t good = v.size();
    for (std::size_t i = 0; i < good; ++i) {  // the good cases under the other schedule too
      v.push_back(v[i]);
      v.back().early = 1;
    }
    // Faults 1 and 2 with k-tiles <= stages (the ring not wrapped): consumers that do not wait on the full barriers
    // can run more than a round ahead of the producer and complete an empty barrier's phase twice before it polls
    // it, so a wrapping ring could hang (parity aliasing) instead of failing.
    for (int bad : {1, 2}) {
      v.push_back({1, 64, 192, 3, bad});
      v.push_back({2, 64, 128, 2, bad});
    }
    v.push_back({1, 64, 384, 3, 3, 1});
    v.push_back({2, 64, 256, 2, 3, 1});
    v.push_back({1, 128, 320, 2, 3, 1});
  }
  return v;
}

template <class F>
void with_pipe_kernel(const PipeSpec& s, F&& f) {
  if (s.nc == 1 && s.n == 64) f(&pipe_gemm_kernel<64, 1>);
  if (s.nc == 1 && s.n == 128) f(&pipe_gemm_kernel<128, 1>);
  if (s.nc == 2 && s.n == 64) f(&pipe_gemm_kernel<64, 2>);
}

// run(spec, case, a, b, c): make the maps on its copies of a (M x K) and b (K x N), launch the case's kernel with
// 128 (NC + 1) threads, leave M x N floats in c; returns false if a map could not be made. Same bound as the other
// cases (2^-16 sum_k |a_ik b_kj| per element). Returns the number of failures.
template <class Run>
int run_pipe_specs(Run&& run, bool emulator) {
  int failures = 0, i = 0;
  for (const PipeSpec& s : pipe_specs(emulator)) {
    ++i;
    const int m = 64 * s.nc;
    const auto a = random_bf16(static_cast<std::size_t>(m) * s.k, 3000 + 2 * i);
    const auto b = random_bf16(static_cast<std::size_t>(s.k) * s.n, 3001 + 2 * i);
    std::vector<float> c(static_cast<std::size_t>(m) * s.n, 0.0f);
    PipeCase pc{};
    pc.m = m;
    pc.n = s.n;
    pc.k = s.k;
    pc.stages = s.stages;
    pc.bad = s.bad;
    const bool made = run(s, pc, a, b, c);
    double worst = made ? 0 : INFINITY;
    for (int r = 0; r < m && made; ++r)
      for (int j = 0; j < s.n; ++j) {
        double ref = 0, abs_sum = 0;
        for (int k = 0; k < s.k; ++k) {
          const double x = bf16_value(a[static_cast<std::size_t>(r) * s.k + k]) *
                           bf16_value(b[static_cast<std::size_t>(k) * s.n + j]);
          ref += x;
          abs_sum += std::fabs(x);
        }
        const double x = c[static_cast<std::size_t>(r) * s.n + j];
        if (!std::isfinite(x)) {
          worst = INFINITY;
          break;
        }
        worst = std::max(worst, std::fabs(x - ref) / (std::ldexp(abs_sum, -16) + 1e-30));
      }
    const bool ok = s.bad == 0 ? worst <= 1.0 : !(worst <= 1.0);
    failures += !ok;
    const int kt = (s.k + 63) / 64;
    std::printf("pipeline M%-3d N%-3d K%-4d (%d k-tiles, %d stages, %d consumer warpgroup%s)%s%s: max err/bound %9.3g  %s\n",
                m, s.n, s.k, kt, s.stages, s.nc, s.nc > 1 ? "s" : "", s.early ? " [early TMA, quiescent wgmma reads]" : "",
                s.bad == 1   ? " [fault: no full-barrier wait]"
                : s.bad == 2 ? " [fault: full barrier, wrong parity]"
                : s.bad == 3 ? " [fault: stage released before its wgmmas retired]"
                             : "",
                worst, ok ? (s.bad ? "PASS (wrong, as it must be)" : "PASS") : "FAIL");
    std::fflush(stdout);
  }
  return failures;
}

}  // namespace glr::wgtest
