// tests/glr_sm90/emu.hpp: run the sm90 tensor-core kernels on the host, one host thread per CUDA thread,
// with ldmatrix / mma.sync / shfl / barriers emulated from their PTX definitions. No GPU needed: it checks
// the kernels' lane and tile arithmetic (fragment layouts, masks, chunk indexing) and their algebra, not
// timing or the asynchrony of cp.async (emulated as an immediate copy).
//
// Include this first, then glr/cuda/sm90/gdn_fwd_mma.cuh (built with -DGLR_SM90_HOST_EMU). Used by the checks here and
// by glr/cuda/sm90/emu (the kernels behind glr's host code for kgate: glr_sm90_emu_kgate_{fwd,bwd}); it redefines
// __device__, threadIdx and friends, so no other header of a caller's translation unit should see it.
#pragma once

#include <cuda_bf16.h>
#include <vector_types.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#undef __device__
#undef __global__
#undef __forceinline__
#undef __launch_bounds__
#undef __grid_constant__
#undef __shared__
#undef __align__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

namespace emu {

struct Warp {
  std::barrier<> bar{32};
  std::uint32_t addr[32];
  std::uint32_t a[32][4];
  std::uint32_t b[32][2];
  float c[32][4];
  float f[32];
};
// One block of `threads` threads (a multiple of 32, at most kMaxThreads): the __syncthreads barrier of that count,
// one Warp a 32 threads, and each thread's state for emu_wgmma.hpp's quiescence wait (0 running, 1 ended; other
// values set there).
constexpr int kMaxThreads = 1024;
struct Block {
  explicit Block(int threads)
      : n(threads), bar(threads), warps(new Warp[static_cast<std::size_t>(threads / 32)]),
        state(new std::atomic<std::uint64_t>[static_cast<std::size_t>(threads)]) {
    for (int t = 0; t < threads; ++t) state[t].store(0);
  }
  int n;
  std::barrier<> bar;
  std::unique_ptr<Warp[]> warps;
  std::unique_ptr<std::atomic<std::uint64_t>[]> state;
  std::atomic<unsigned> epoch{0};
};
inline thread_local int tid = 0;
inline thread_local Block* block = nullptr;
inline char* smem = nullptr;  // the block's shared memory (blocks run one after another)

inline Warp& warp() { return block->warps[tid / 32]; }
inline int lane() { return tid % 32; }

inline float bf(std::uint16_t x) {
  std::uint32_t u = static_cast<std::uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void split(std::uint32_t w, float& lo, float& hi) {
  lo = bf(static_cast<std::uint16_t>(w & 0xffffu));
  hi = bf(static_cast<std::uint16_t>(w >> 16));
}

}  // namespace emu

inline thread_local dim3 threadIdx, blockIdx;
inline thread_local dim3 gridDim, blockDim;

inline void __syncthreads() { emu::block->bar.arrive_and_wait(); }
inline void __syncwarp() { emu::warp().bar.arrive_and_wait(); }
inline float __shfl_up_sync(unsigned, float v, int off) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.f[l] = v;
  w.bar.arrive_and_wait();
  const float r = l >= off ? w.f[l - off] : v;
  w.bar.arrive_and_wait();
  return r;
}

namespace glr::cuda::sm90 {

inline std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(static_cast<const char*>(p) - emu::smem);
}

// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of matrix i. Without .trans lane l receives row l/4,
// columns 2(l%4), 2(l%4)+1 of each matrix; with .trans, rows 2(l%4), 2(l%4)+1 of column l/4.
inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.addr[l] = addr;
  w.bar.arrive_and_wait();
  for (int i = 0; i < 4; ++i) std::memcpy(&r[i], emu::smem + w.addr[8 * i + l / 4] + 4 * (l % 4), 4);
  w.bar.arrive_and_wait();
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.addr[l] = addr;
  w.bar.arrive_and_wait();
  for (int i = 0; i < 4; ++i) {
    std::uint16_t lo, hi;
    std::memcpy(&lo, emu::smem + w.addr[8 * i + 2 * (l % 4)] + 2 * (l / 4), 2);
    std::memcpy(&hi, emu::smem + w.addr[8 * i + 2 * (l % 4) + 1] + 2 * (l / 4), 2);
    r[i] = lo | (static_cast<std::uint32_t>(hi) << 16);
  }
  w.bar.arrive_and_wait();
}

// mma.m16n8k16.row.col f32.bf16: the whole tile rebuilt from the 32 lanes' fragments.
inline void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  for (int i = 0; i < 4; ++i) {
    w.a[l][i] = a[i];
    w.c[l][i] = d[i];
  }
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  w.bar.arrive_and_wait();
  float A[16][16], B[16][8], Cm[16][8];
  for (int x = 0; x < 32; ++x) {
    const int g = x / 4, t = x % 4;
    emu::split(w.a[x][0], A[g][2 * t], A[g][2 * t + 1]);
    emu::split(w.a[x][1], A[g + 8][2 * t], A[g + 8][2 * t + 1]);
    emu::split(w.a[x][2], A[g][2 * t + 8], A[g][2 * t + 9]);
    emu::split(w.a[x][3], A[g + 8][2 * t + 8], A[g + 8][2 * t + 9]);
    emu::split(w.b[x][0], B[2 * t][g], B[2 * t + 1][g]);
    emu::split(w.b[x][1], B[2 * t + 8][g], B[2 * t + 9][g]);
    Cm[g][2 * t] = w.c[x][0];
    Cm[g][2 * t + 1] = w.c[x][1];
    Cm[g + 8][2 * t] = w.c[x][2];
    Cm[g + 8][2 * t + 1] = w.c[x][3];
  }
  w.bar.arrive_and_wait();
  const int g = l / 4, t = l % 4;
  // Default: the exact sum of the 16 products and the accumulator, rounded once to fp32. GLR_EMU_MMA_TRUNC=1: a
  // pessimistic model of the tensor cores' fp32 accumulation (products exact; every addend aligned to the largest
  // one's fp32 ulp with its lower bits truncated, no guard bits; the sum normalised toward zero), to see how much
  // a long positive sum loses on hardware (tests/glr_sm90/emu_check.cpp accumulation).
  static const bool trunc = [] {
    const char* e = std::getenv("GLR_EMU_MMA_TRUNC");
    return e != nullptr && *e == '1';
  }();
  auto dot = [&](int i, int j) {
    if (trunc) {
      double term[17];
      int emax = -100000;
      for (int k = 0; k < 16; ++k) term[k] = static_cast<double>(A[i][k]) * B[k][j];
      term[16] = Cm[i][j];
      for (double x : term)
        if (x != 0 && std::isfinite(x)) emax = std::max(emax, std::ilogb(x));
      double s = 0;
      if (emax == -100000) {
        for (double x : term) s += x;
        return static_cast<float>(s);
      }
      const double q = std::ldexp(1.0, emax - 23);  // the fp32 ulp of the largest addend's binade
      for (double x : term) s += std::isfinite(x) ? std::trunc(x / q) * q : x;
      float f = static_cast<float>(s);
      if (std::isfinite(f) && std::fabs(static_cast<double>(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
      return f;
    }
    double s = 0;
    for (int k = 0; k < 16; ++k) s += static_cast<double>(A[i][k]) * B[k][j];
    return static_cast<float>(s + Cm[i][j]);
  };
  d[0] = dot(g, 2 * t);
  d[1] = dot(g, 2 * t + 1);
  d[2] = dot(g + 8, 2 * t);
  d[3] = dot(g + 8, 2 * t + 1);
}

inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  if (valid)
    std::memcpy(emu::smem + dst, src, 16);
  else
    std::memset(emu::smem + dst, 0, 16);
}
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}

}  // namespace glr::cuda::sm90

namespace emu {

// GLR_EMU_BLOCK_ORDER's value where it asks for other than row-major order (launch, below), else null (unset,
// empty or 0).
inline const char* block_order() {
  const char* o = std::getenv("GLR_EMU_BLOCK_ORDER");
  return o != nullptr && *o != '\0' && std::strcmp(o, "0") != 0 ? o : nullptr;
}

// Run kernel(args) over grid (gx, gy) with `threads` threads a block (128 unless given; a multiple of 32 up to
// kMaxThreads, blockDim.x = threads; several warpgroups for producer/consumer kernels); `base` is the kernels'
// `extern __shared__` array (defined by the test), filled with a poison pattern before each block.
template <class Args>
void launch(void (*kernel)(Args), int gx, int gy, char* base, std::size_t smem_bytes, const Args& args,
            int threads = 128) {
  if (threads <= 0 || threads % 32 != 0 || threads > kMaxThreads) {
    std::fprintf(stderr, "emu::launch: %d threads a block (a multiple of 32 up to %d)\n", threads, kMaxThreads);
    std::abort();
  }
  smem = base;
  // The order the blocks run in: GLR_EMU_BLOCK_ORDER unset, empty or 0 row-major (bx fastest); "r" reversed; a
  // number n > 0 a permutation drawn from n (std::mt19937, std::shuffle: the same for the same n and grid). A kernel
  // whose blocks communicate (the chunk kernels' group sums: the last block of a group to finish sums it) must give
  // the same words in every order; the GPU promises none.
  std::vector<long long> order(static_cast<std::size_t>(gx) * static_cast<std::size_t>(gy));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<long long>(i);
  if (const char* o = block_order(); o != nullptr) {
    if (std::strcmp(o, "r") == 0) {
      std::reverse(order.begin(), order.end());
    } else {
      char* end = nullptr;
      const unsigned long seed = std::strtoul(o, &end, 10);
      if (*end != '\0') {
        std::fprintf(stderr, "GLR_EMU_BLOCK_ORDER is '%s': use 0, r or a seed number\n", o);
        std::abort();
      }
      std::mt19937 rng(static_cast<std::uint32_t>(seed));
      std::shuffle(order.begin(), order.end(), rng);
    }
  }
  for (const long long li : order) {
    const int by = static_cast<int>(li / gx), bx = static_cast<int>(li % gx);
    {
      std::memset(base, 0x7f, smem_bytes);  // bf16 0x7f7f ~ 3.4e38: a read before write shows up
      auto blk = std::make_unique<Block>(threads);
      std::vector<std::thread> th;
      th.reserve(static_cast<std::size_t>(threads));
      for (int t = 0; t < threads; ++t)
        th.emplace_back([&, t] {
          tid = t;
          block = blk.get();
          threadIdx = dim3(t, 1, 1);
          blockIdx = dim3(bx, by, 1);
          gridDim = dim3(gx, gy, 1);
          blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
          kernel(args);
          block->state[t].store(1);
        });
      for (auto& x : th) x.join();
    }
  }
}

}  // namespace emu
