// glr/cuda/sm90/gdn_state_wgmma.cuh: rung 3's forward state kernel on wgmma (warpgroup MMA, sm_90a):
// state_t_wgmma_kernel, the same grid, inputs, outputs, workspace and algebra as state_t_kernel (gdn_fwd_mma.cuh,
// whose comment carries the recurrence), its products as m64nNk16 wgmmas on 128B-swizzled shared tiles instead of
// mma.sync m16n8k16 on ldmatrix fragments. Opt-in (GLR_FWD_WGMMA=1, state_wgmma_requested in env_switch.hpp): NOT YET RUN ON A
// GPU (no GPU in the session that wrote it); checked on the host emulator (tests/glr_sm90/emu_wgmma.hpp: wgmma from
// the PTX ISA's descriptor and layout definitions) against the float64 recurrence and word for word against
// state_t_kernel (tests/glr_sm90/emu_check.cpp "wgmma").
//
// Why it maps one to one: the block is one warpgroup (128 threads) and C = 64 tokens is wgmma's M, so the
// accumulator layout (wgmma.cuh) gives warp w tokens 16w..16w+15 and, per 8-column block n, the mma.m16n8 C
// fragment: state_t_kernel's acc[n][e] is d[4n + e] here (the same array, reinterpreted), and the epilogues between
// the products are state_t_kernel's own (state_phase_a_epilogue, state_scale_o, state_phase_b_epilogue), and so are
// the block's set-up, the v and o rows and the G / beta loads (StateTBlock, load_v_rows, store_o_rows, load_g_beta).
// The state slice (K x 64, fp32) is the accumulator of the update h = e^{G_last} h + K^T (e^{G_last - G} V_new),
// M = K: one m64 half (K = 64) or two (K = 128), hs[mt][4n + e] = h(64 mt + 16 w + g (+8), 8 n + 2 t (+1))
// (state_t_kernel gives warp w rows w K / 4 .. instead: another owner, the same arithmetic).
//
// Products (per chunk; every operand a shared tile, K-major 128B-swizzled, rows = tokens or the state's K index):
//   phase A: K h (B = h MN-major), Q K^T (B = K K-major), Q h (without the delta rule; with it in phase B);
//   phase B: V_new = T X (B = X MN-major);
//   phase C: O += P V_new (A = P from registers: state_t_kernel's pa fragments are wgmma's register-A layout),
//   h += K^T (e^{G_last - G} V_new) (A = K^T, the k tile read MN-major), with the lo and mid pieces first where
//   state_t_kernel splits (no delta rule, a gate).
// Each product is issued in state_t_kernel's order per element (k-steps ascending; lo, mid, hi per k-step) with
// the accumulators set by the threads and scale-d = 1, so on the emulator (one rounding per k16 step for both
// instructions) every output equals state_t_kernel's, except where state_t_kernel skips tiles that are zero (T's
// and P's upper 16-row blocks, Q K^T's causal tiles): here they add 0 x finite = +-0 (a -0 sum may become +0) and,
// for a non-finite v or k at token j, 0 x Inf = NaN into V_new and o rows i < j of that chunk (state_t_kernel: only
// within j's 16-row block; the exact outputs do not depend on them). On a GPU the two instructions' accumulation
// order inside a k-step may differ: rounding-level differences.
//
// Slice width 64 only: wgmma.cuh has N = 64 and 128 wrappers, and the launcher picks 64 whenever the grid fills
// the GPU (B8 T4096 H16: 256 blocks); at 32 and 16 (few heads) launch_state_t keeps state_t_kernel. The split
// pass's pass A (kStateOnly, always 64) and pass C at 64 run here.
// Loads: cp.async into the swizzled layout, then fence.proxy.async + a barrier before the wgmmas read them (no TMA,
// no producer warpgroup: one chunk step is a chain of dependent products). Every commit group is waited for at once.
// The backward's h pass (gdn_bwd_mma.cuh h_kernel's outputs: h_c, V_new and its residual per chunk) is this kernel's
// kHPass mode (GLR_H_WGMMA=1, bwd_h_wgmma in env_switch.hpp; not yet run on a GPU): the same chain and products, its
// own epilogues (h_x_epilogue, h_vd_epilogue, h_tx_rows, h_vnew_epilogue, below), which h_kernel runs too.
// Included by gdn_fwd_mma.cuh after state_t_kernel (Seq, sequence, slot, the epilogues).
#pragma once

#include <cstdlib>
#include <type_traits>

#include "wgmma.cuh"

namespace glr::cuda::sm90::gdn {

// Every shared tile is wgmma.cuh's 128B-swizzled K-major tile (sw128_offset, load_sw128, desc_kmajor,
// desc_mnmajor), rows = tokens or the state's K index, 64 or 128 columns.
template <int kD = DK>
struct StateWgSmem {  // every tile 1024-byte aligned (the struct's base is aligned at run time, sizes are multiples)
  __nv_bfloat16 q[C * kD];     // (C, K)
  __nv_bfloat16 k[2][C * kD];  // (C, K) per buffer (chunk c in buffer c % 2)
  __nv_bfloat16 h[kD * 64];    // (K, 64) bf16 copy of the state slice
  __nv_bfloat16 T[C * C];      // (C, C) (I + L)^-1; without the delta rule the (C, 64) lo piece
  __nv_bfloat16 x[C * 64];     // (C, 64) X; without the delta rule the mid piece
  __nv_bfloat16 vn[C * 64];    // (C, 64) V_new
  __nv_bfloat16 vnd[C * 64];   // (C, 64) e^{G_last - G} V_new (hi piece)
  float G[C];
  float beta[C];
  float Gr[C];    // the backward's h pass (kHPass): Gr, the decays between two tokens (h_vnew_epilogue)
  int nonfinite;  // the h pass: this chunk's X holds a NaN or Inf (h_x_epilogue)
};
// The prefetching schedule's tiles (kPrefetch, GLR_FWD_PREFETCH=1: the delta rule's forward passes; the kernel's
// comment, "Prefetch", says when each is loaded and read). Chunk c's q and, once phase B has read q, its V_new and
// e^{G_last - G} V_new share slot c % 2, so q of chunk c + 1 loads into the other slot during all of chunk c at the
// plain layout's size but for v's tile: the block still fits twice in an SM (static_assert below).
template <int kD = DK>
struct StateWgPipeSmem {
  static constexpr int kSlot = C * kD > 2 * C * 64 ? C * kD : 2 * C * 64;
  __nv_bfloat16 qv[2][kSlot];  // slot c % 2: (C, K) q of chunk c, then (C, 64) V_new and (C, 64) e^{G_last - G} V_new
  __nv_bfloat16 k[2][C * kD];  // (C, K) per buffer (chunk c in buffer c % 2)
  __nv_bfloat16 h[kD * 64];    // (K, 64) bf16 copy of the state slice
  __nv_bfloat16 T[C * C];      // (C, C) (I + L)^-1
  __nv_bfloat16 x[C * 64];     // (C, 64) X
  __nv_bfloat16 v[C * 64];     // (C, 64) the slice's v rows (zeros past the sequence)
  float G[2][C];               // chunk c's in row c % 2
  float beta[2][C];
};
// Chunk c's tiles and rows under the names the shared epilogues read (state_phase_a_epilogue, state_scale_o,
// state_phase_b_epilogue: s.G, s.beta, s.x, s.vn, s.vnd, s.T): the plain layout is its own; the prefetching one's
// rotate with c.
struct StateChunkTiles {
  float* G;
  float* beta;
  __nv_bfloat16 *x, *vn, *vnd, *T;
};
template <int kD>
__device__ __forceinline__ StateWgSmem<kD>& chunk_tiles(StateWgSmem<kD>& s, int) {
  return s;
}
template <int kD>
__device__ __forceinline__ StateChunkTiles chunk_tiles(StateWgPipeSmem<kD>& s, int c) {
  return {s.G[c & 1], s.beta[c & 1], s.x, s.qv[c & 1], s.qv[c & 1] + C * 64, s.T};
}
template <int kD, bool kPrefetch = false>
inline constexpr std::size_t state_wgmma_smem_bytes =
    sizeof(std::conditional_t<kPrefetch, StateWgPipeSmem<kD>, StateWgSmem<kD>>) + 1024;
static_assert(state_wgmma_smem_bytes<128> <= 227 * 1024, "one block per SM at least");
static_assert((C * 64 * 2) % 1024 == 0, "tile sizes keep the 1024-byte alignment");
// Two blocks an SM (228 KB, 1 KB of it reserved per block), as the plain kernel's 2 x 100,100 B: ncu counted 2 blocks an
// SM for it on the H100 (launch__occupancy_limit_shared_mem 2, results/glr/sm90/h100-2026-12-05d).
static_assert(2 * (state_wgmma_smem_bytes<128, true> + 1024) <= 228 * 1024, "the prefetching kernel keeps 2 blocks an SM");

// The accumulators of state_t_kernel's layout, (8 n-tiles, 4), as wgmma's flat d[32] (d[4n + e]).
__device__ __forceinline__ float (&acc_flat(float (&x)[8][4]))[32] { return reinterpret_cast<float(&)[32]>(x); }

// ---- The backward's h pass (gdn_bwd_mma.cuh: h_kernel, and this file's kernel with kHPass), the pieces both run.
// The h pass is this chain without q, P and o that leaves, per chunk c of a sequence and value head (chunk slot R + c,
// the forward's numbering; the backward's workspace, GdnBwdArgs): h_c, the state entering the chunk, bf16 (K x V),
// the copy the tensor cores read; with the delta rule V_new = T X in two bf16 words, vn = bf16(V_new) and vnl =
// bf16(V_new - vn) (C x V; padding rows included), from X in two pieces too (x = bf16(X), xl = bf16(X - x):
// V_new = T xl + T x, so its residual carries none of X's rounding; h_kernel's phase B says why). No end state: the
// split pass's later segments start from Es (passes A and B). Its decays between two tokens come from Gr (e^{Gr_L -
// Gr_i}, never G differences: a NaN first gate only decays the state entering the chunk); without the delta rule the
// update's B operand is bf16(e^{Gr_L - Gr} V), one piece (h_c is rounded to bf16 anyway).
// The h pass's arguments on this kernel: the forward's (gdn_bwd::wy_args) and where it leaves h_c, V_new, vnl.
struct StateHArgs : GdnFwdArgs {
  __nv_bfloat16* hc = nullptr;   // (slots, K, V) h_c
  __nv_bfloat16* vn = nullptr;   // (slots, C, V) bf16(V_new) (delta rule only; null: not stored, vnew_stored in gdn_bwd_mma.cuh)
  __nv_bfloat16* vnl = nullptr;  // (slots, C, V) bf16(V_new - vn)
};

// (bf16x2_residual, the bf16 residual pair: mma_sync.cuh.)

// The h pass's epilogues, rows i = r0 + g8 (+8), the accumulators in mma.m16n8 C layout (acc[n][e], wgmma's
// d[4n + e]); pair(tile, i, col) the bf16 pair (i, col..col+1) of a (C x 64-or-fewer) shared tile in the kernel's
// own layout. Phase A, delta rule: X = beta . V - (beta e^G) . (K h) to x and its residual to xl; s.nonfinite set
// if a rounded X is a NaN or Inf (every writer writes 1: the value does not depend on the order). Their decays
// are one ex2.approx of the exponent times log2 e each, as every decay of the forward and the dh passes (-Inf gives
// 0, NaN stays NaN).
template <int NN, class Smem, class Pair>
__device__ __forceinline__ void h_x_epilogue(Smem& s, int r0, int g8, int t4, const std::uint32_t (&vr)[NN][2],
                                             const float (&ax)[NN][4], __nv_bfloat16* x, __nv_bfloat16* xl, Pair pair) {
  bool bad = false;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float bi = s.beta[i], bgi = bi * exp_approx(s.G[i]);
#pragma unroll
    for (int n = 0; n < NN; ++n) {
      const float2 vf = unpack_bf16x2(vr[n][half]);
      const float x0 = bi * vf.x - bgi * ax[n][half * 2], x1 = bi * vf.y - bgi * ax[n][half * 2 + 1];
      const std::uint32_t xp = pack_bf16x2(x0, x1);
      bad = bad || (xp & 0x7f80u) == 0x7f80u || (xp & 0x7f800000u) == 0x7f800000u;  // a bf16 NaN or Inf (after rounding)
      *pair(x, i, n * 8 + 2 * t4) = xp;
      *pair(xl, i, n * 8 + 2 * t4) = bf16x2_residual(x0, x1, xp);
    }
  }
  if (bad) s.nonfinite = 1;
}
// Phase A without the delta rule (V_new = V): e^{Gr_L - Gr} V, one bf16 piece, to s.vnd (phase C's B operand).
template <int NN, class Smem, class Pair>
__device__ __forceinline__ void h_vd_epilogue(Smem& s, int r0, int g8, int t4, const std::uint32_t (&vr)[NN][2], Pair pair) {
  const float GrL = s.Gr[C - 1];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float ed = exp_approx(GrL - s.Gr[i]);  // between two tokens: Gr, never G
#pragma unroll
    for (int n = 0; n < NN; ++n) {
      const float2 vf = unpack_bf16x2(vr[n][half]);
      *pair(s.vnd, i, n * 8 + 2 * t4) = pack_bf16x2(ed * vf.x, ed * vf.y);
    }
  }
}
// Phase B's V_new = T X where X is not finite (s.nonfinite): rows i summed over the tokens m = m0 .. i alone (T_im =
// 0 for m > i), xl then x per m, in FMAs (m ascending) onto an. The exact V_new_i, and so the exact dg of every
// token up to m, does not depend on v_m: a tensor-core tile would form 0 x NaN there. t_at(i, m): T_im as a float.
template <int NN, class TAt, class Pair>
__device__ __forceinline__ void h_tx_rows(float (&an)[NN][4], int m0, int r0, int g8, int t4, TAt t_at,
                                          __nv_bfloat16* x, __nv_bfloat16* xl, Pair pair) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    for (int m = m0; m <= i; ++m) {
      const float tim = t_at(i, m);
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        const float2 xf = unpack_bf16x2(*pair(x, m, n * 8 + 2 * t4));
        const float2 xr = unpack_bf16x2(*pair(xl, m, n * 8 + 2 * t4));
        an[n][half * 2] = fmaf(tim, xf.x, fmaf(tim, xr.x, an[n][half * 2]));
        an[n][half * 2 + 1] = fmaf(tim, xf.y, fmaf(tim, xr.y, an[n][half * 2 + 1]));
      }
    }
  }
}
// Phase B's epilogue, delta rule: V_new (an) as store(i, col, bf16(V_new), its residual) and e^{Gr_L - Gr} V_new
// to s.vnd.
template <int NN, class Smem, class Pair, class Store>
__device__ __forceinline__ void h_vnew_epilogue(Smem& s, int r0, int g8, int t4, const float (&an)[NN][4], Pair pair,
                                                Store store) {
  const float GrL = s.Gr[C - 1];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float ed = exp_approx(GrL - s.Gr[i]);  // between two tokens: Gr, never G (g_0 NaN would give NaN - NaN)
#pragma unroll
    for (int n = 0; n < NN; ++n) {
      const float x0 = an[n][half * 2], x1 = an[n][half * 2 + 1];
      const std::uint32_t hi = pack_bf16x2(x0, x1);
      store(i, n * 8 + 2 * t4, hi, bf16x2_residual(x0, x1, hi));
      *pair(s.vnd, i, n * 8 + 2 * t4) = pack_bf16x2(ed * x0, ed * x1);
    }
  }
}

// Rung 3's state kernel on wgmma at slice width 64: grid, blocks, segments and pass-A blocks as state_t_kernel's.
// kHPass (with kStateOnly: no q, no o, as pass A): the backward's h pass (above; StateHArgs), grid (kD / 64,
// segs sequences x HV) as pass C's, each segment from h0 or Es (passes A and B), no end state written; every product
// issued in h_kernel's order per element (V_new's k-steps xl then x), so on the emulator its outputs equal
// h_kernel's at 64 columns word for word (a -0 may read +0), but in a chunk whose X is not finite (V_new there by
// h_tx_rows over the whole chunk; h_kernel keeps its tiles left of the diagonal on the tensor cores).
//
// Prefetch (kPrefetch, GLR_FWD_PREFETCH=1; the delta rule's passes: unsplit, and the split's A and C): the same products and
// epilogues in the same order (every output word the same), the loads moved earlier. The plain schedule loads
// chunk c + 1's k after phase A, its q, T, G and beta after phase B and waits for all of them at chunk c's end (phase
// C alone hides them), and reads chunk c's v rows from global memory into registers at chunk c's start (phase A
// hides them). Here, with one cp.async group each (StateWgPipeSmem):
//   at chunk c's start   q, k, G, beta of chunk c + 1 (slots (c + 1) % 2: chunk c - 1's, free since the last barrier)
//   after phase A's      v of chunk c + 1 to s.v (every thread read its v words of chunk c into registers at the
//     epilogue barrier   chunk's start; the barrier says so for all of them)
//   after phase B's      T of chunk c + 1 (read by phase B only)
//     epilogue barrier
// waited for where they are needed: at chunk c's end every group but T(c + 1) (so q, k, G, beta and v had all of
// chunk c, or phases B and C, to land), T(c + 1) before chunk c + 1's phase-A barrier. V_new and its decayed copy
// go to q's slot once phase B (Q h, the last reader of q) has retired in every warp: one barrier more a chunk. Pass A
// (kStateOnly: no q, no o; its M blocks no v) runs the same schedule without q and without that barrier.
// kVnewOut (kHPass with the delta rule): V_new and its residual stored to a.vn, a.vnl; false where no kernel reads
// them (a.vn null: vnew_stored in gdn_bwd_mma.cuh, launch_state_t_wgmma), a separate instantiation so the storing
// one's code stays the one with the stores alone.
template <bool kDelta = true, int kD = DK, bool kStateOnly = false, bool kHPass = false, bool kPrefetch = false,
          bool kVnewOut = kHPass>
__global__ void __launch_bounds__(kThreads, 1)
    state_t_wgmma_kernel(const __grid_constant__ std::conditional_t<kHPass, StateHArgs, GdnFwdArgs> a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(!kHPass || kStateOnly, "the h pass has no q and no o");
  static_assert(!kPrefetch || (kDelta && !kHPass), "the prefetching schedule: the forward's passes with the delta rule");
  static_assert(kThreads == 128 && C == 64, "one warpgroup, wgmma's M = 64 rows = the chunk");
  constexpr int kVT = 64, NN = 8, MT = kD / 64;  // slice width, its n-tiles, m64 halves of the state's K rows
  using Smem = std::conditional_t<kPrefetch, StateWgPipeSmem<kD>, StateWgSmem<kD>>;
  extern __shared__ __align__(16) char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  Smem& s = *reinterpret_cast<Smem*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  const int tid = threadIdx.x;  // (the chunk loop's tid, r0, g8, t4: opaque per chunk, below)
  StateTBlock b;
  if (!state_t_block<kD, kVT, kStateOnly, kStateOnly && !kHPass>(a, tid, b)) return;
  const Seq sq = b.sq;
  const int c_begin = b.c_begin, c_end = b.c_end;
  const std::int64_t qrow = static_cast<std::int64_t>(a.H) * kD;
  // The bf16 pair (i, col..col+1) of a (C x 64) tile, and of the state's (K x 64) bf16 copy.
  auto pair = [](__nv_bfloat16* t, int i, int col) {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(t) + sw128_offset<C>(i, col));
  };
  auto pair_h = [&](int d, int col) {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(s.h) + sw128_offset<kD>(d, col));
  };
  // The tiles' shared addresses (prefetching: q's, V_new's and its decayed copy's those of slot 0, the slots
  // kSlotBytes apart).
  std::uint32_t sq0, svn0, svnd0;
  if constexpr (kPrefetch) {
    sq0 = svn0 = smem_addr(s.qv[0]);
    svnd0 = svn0 + C * 64 * 2;
  } else {
    sq0 = smem_addr(s.q), svn0 = smem_addr(s.vn), svnd0 = smem_addr(s.vnd);
  }
  const std::uint32_t sh0 = smem_addr(s.h), sT0 = smem_addr(s.T), sx0 = smem_addr(s.x);
  constexpr std::uint32_t kSlotBytes = kPrefetch ? sizeof(__nv_bfloat16) * StateWgPipeSmem<kD>::kSlot : 0;

  // Groups Q and S as state_t_kernel's, but for q.
  // With the delta rule q (one buffer) is read until phase B's end (Q h there): its next chunk's copy is issued
  // with group S, after phase B; k (two buffers) and, without the delta rule, q after phase A.
  auto load_q = [&](int c, int tid) {
    const int t0 = c * C, len = min(C, sq.len - t0);
    if constexpr (kStateOnly) return;  // (pass A: no q)
    else if constexpr (kPrefetch) load_sw128<C, kD>(s.qv[c & 1], a.q + b.qk_at<kD>(a, t0), qrow, len, tid);
    else load_sw128<C, kD>(s.q, a.q + b.qk_at<kD>(a, t0), qrow, len, tid);
  };
  auto load_k = [&](int c, int tid) {
    const int t0 = c * C, len = min(C, sq.len - t0);
    load_sw128<C, kD>(s.k[c & 1], a.k + b.qk_at<kD>(a, t0), qrow, len, tid);
  };
  // (prefetching: load_T, load_g_beta_rows and load_v, each at its own point)
  auto load_T = [&](int c, int tid) { load_sw128<C, C>(s.T, b.Tw + static_cast<std::int64_t>(c) * C * C, C, C, tid); };
  auto load_g_beta_rows = [&](int c, int tid) {
    if constexpr (kPrefetch) load_g_beta<kDelta>(s.G[c & 1], s.beta[c & 1], b, c, tid);
  };
  auto load_v = [&](int c, int tid) {  // the slice's v rows, zeros past the sequence and in M blocks (as load_v_rows)
    if constexpr (kPrefetch) {
      const int t0 = c * C, len = b.trans ? 0 : min(C, sq.len - t0);
      load_sw128<C, 64>(s.v, a.v + b.vo_at<kD>(a, t0), static_cast<std::int64_t>(a.HV) * kD, len, tid);
    }
  };
  auto load_small = [&](int c, int tid) {
    if constexpr (kPrefetch) {
      load_T(c, tid);
      load_g_beta_rows(c, tid);
    } else {
      if constexpr (kDelta) load_T(c, tid);
      load_g_beta<kDelta>(s.G, s.beta, b, c, tid);
      if constexpr (kHPass)  // Gr, laid out as G (threads C / 2 .. 3 C / 4 - 1, as h_kernel's)
        if (tid >= C / 2 && tid < 3 * C / 4)
          cp_async_16(smem_addr(s.Gr + (tid - C / 2) * 4), a.Gr + (b.Gg - a.G) + c * C + (tid - C / 2) * 4, true);
    }
  };

  const float* h_in = b.h_in<kD, kStateOnly && !kHPass>(a);  // (the h pass: h0, or Es for a later segment, as pass C)
  float hs[MT][32];  // (K, 64) state slice: hs[mt][i] at row 64 mt + wgmma_acc_coord(tid, i).row
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
      const AccCoord rc = wgmma_acc_coord(tid, i);
      const float2 x = b.h_start<kD>(h_in, 64 * mt + rc.row, rc.col);
      hs[mt][i] = x.x;
      hs[mt][i + 1] = x.y;
    }
  // The state's bf16 pairs to at(d, col) (the shared copy; the h pass's h_c too).
  auto h_bf16_to = [&](int tid, auto at) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 32; i += 2) {
        const AccCoord rc = wgmma_acc_coord(tid, i);
        *at(64 * mt + rc.row, rc.col) = pack_bf16x2(hs[mt][i], hs[mt][i + 1]);
      }
  };
  auto write_h_bf16 = [&](int tid) { h_bf16_to(tid, pair_h); };
  write_h_bf16(tid);
  if (c_begin < c_end) {
    load_q(c_begin, tid);
    load_k(c_begin, tid);
    load_small(c_begin, tid);
    load_v(c_begin, tid);
    cp_async_commit();
    cp_async_wait<0>();
  }
  if constexpr (kHPass)
    if (tid == 0) s.nonfinite = 0;
  fence_proxy_async();  // h (st.shared) and the tiles (cp.async) before the wgmmas read them
  __syncthreads();

  for (int c = c_begin; c < c_end; ++c) {
    const int t0 = c * C, len = min(C, sq.len - t0);
    // The tiles' shared addresses, opaque to the compiler here: otherwise it hoists every k-step's 64-bit descriptor
    // out of the chunk loop (about 60 registers) and spills at K = 128 (264 bytes with the delta rule, ptxas 13.0).
    const std::uint32_t slot = (c & 1) * kSlotBytes;  // (0 in the plain layout)
    std::uint32_t sk = smem_addr(s.k[c & 1]), sq_ = sq0 + slot, sh = sh0, sT = sT0, sx = sx0, svn = svn0 + slot,
                  svnd = svnd0 + slot;
    asm volatile("" : "+r"(sk), "+r"(sq_), "+r"(sh), "+r"(sT), "+r"(sx), "+r"(svn), "+r"(svnd));
    // The thread's index likewise (shadowing the block-scope names): the per-thread addresses of the epilogues'
    // swizzled pairs, the state's bf16 copy and the cp.async pieces are recomputed each chunk, not kept live.
    int tid_opaque = tid;
    asm volatile("" : "+r"(tid_opaque));
    const int tid = tid_opaque, r0 = (tid >> 5) * 16, g8 = (tid & 31) >> 2, t4 = tid & 3;
    decltype(auto) e = chunk_tiles(s, c);  // chunk c's G, beta, x, vn, vnd, T (the plain layout: s itself)
    if constexpr (kPrefetch) {  // chunk c + 1's q, k, G, beta: the slots chunk c - 1 left (its last readers retired)
      if (c + 1 < c_end) {
        load_q(c + 1, tid);
        load_k(c + 1, tid);
        load_g_beta_rows(c + 1, tid);
      }
      cp_async_commit();
    }
    std::uint32_t vr[NN][2];
    if constexpr (kPrefetch) {  // landed by the last chunk's end (or the prologue's wait)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int nn = 0; nn < NN; ++nn) vr[nn][half] = *pair(s.v, r0 + g8 + half * 8, nn * 8 + 2 * t4);
    } else {
      load_v_rows<kD>(vr, a, b, t0, len, r0, g8, t4);
    }
    if constexpr (kHPass) {  // h_c from the registers: the words write_h_bf16 left in s.h
      __nv_bfloat16* hcg = a.hc + (b.slot0 + c) * kD * kD + b.v0;
      h_bf16_to(tid, [hcg](int d, int col) {
        return reinterpret_cast<std::uint32_t*>(hcg + static_cast<std::int64_t>(d) * kD + col);
      });
    }

    // Phase A: K h (delta rule), Q K^T (every key tile; the causal ones unread), and without the delta rule Q h.
    // With it Q h waits for phase B (h is unchanged until the chunk's end): fewer accumulators live at once
    // (ptxas spilled 264 bytes at K = 128 with all three here); the same sums.
    float ax[NN][4], ao[NN][4], sqk[8][4];
    auto q_h = [&]() {  // ao = Q h, issued inside the caller's fence / commit
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks)
        wgmma_ss<64, 0, 1>(acc_flat(ao), desc_kmajor<C>(sq_, 0, ks), desc_mnmajor<kD>(sh, 0, ks), 1);
    };
#pragma unroll
    for (int nn = 0; nn < 8; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) ax[nn][e] = ao[nn][e] = sqk[nn][e] = 0.f;
    if constexpr (kDelta) wgmma_fence_operand(ax);
    if constexpr (!kDelta && !kStateOnly) wgmma_fence_operand(ao);
    if constexpr (!kStateOnly) wgmma_fence_operand(sqk);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      if constexpr (kDelta) wgmma_ss<64, 0, 1>(acc_flat(ax), desc_kmajor<C>(sk, 0, ks), desc_mnmajor<kD>(sh, 0, ks), 1);
      if constexpr (!kStateOnly) wgmma_ss<64, 0, 0>(acc_flat(sqk), desc_kmajor<C>(sq_, 0, ks), desc_kmajor<C>(sk, 0, ks), 1);
    }
    if constexpr (!kDelta && !kStateOnly) q_h();
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(acc_flat(ax));
    wgmma_fence_operand(acc_flat(ao));
    wgmma_fence_operand(acc_flat(sqk));
    const float GL = e.G[C - 1];
    // state_t_kernel's three-piece update (its Phase A comment); the h pass: one piece (h_vd_epilogue)
    const bool split = !kDelta && !kHPass && a.gate != 0;
    std::uint32_t pa[4][4];
    if constexpr (!kHPass)
      state_phase_a_epilogue<kDelta, kStateOnly>(e, a, r0, g8, t4, GL, split, vr, ax, sqk, pa, pair);
    else if constexpr (kDelta)
      h_x_epilogue(s, r0, g8, t4, vr, ax, s.x, s.q, pair);  // X's residual in q's tile (no q in the h pass)
    else
      h_vd_epilogue(s, r0, g8, t4, vr, pair);
    if constexpr (!kDelta && !kStateOnly) state_scale_o(e, a, r0, g8, ao);
    if constexpr (kPrefetch) cp_async_wait<1>();  // T(c), issued after chunk c - 1's phase B (all but q, k, G(c + 1))
    fence_proxy_async();  // X (or V_new and its pieces) before the wgmmas
    __syncthreads();
    if constexpr (kPrefetch) {
      if (c + 1 < c_end) load_v(c + 1, tid);  // every thread has read chunk c's v rows (above)
    } else if (c + 1 < c_end) {
      load_k(c + 1, tid);
      if constexpr (!kDelta) {
        load_q(c + 1, tid);
        load_small(c + 1, tid);
      }
    }
    cp_async_commit();

    if constexpr (kDelta) {
      // Phase B: V_new = T X over all four token k-steps (T's upper blocks are zeros).
      float an[NN][4];
#pragma unroll
      for (int nn = 0; nn < NN; ++nn)
#pragma unroll
        for (int e = 0; e < 4; ++e) an[nn][e] = 0.f;
      wgmma_fence_operand(an);
      if constexpr (!kStateOnly) wgmma_fence_operand(ao);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {  // (the h pass: X's residual, in q's tile, first per k-step, as h_kernel)
        if constexpr (kHPass) wgmma_ss<64, 0, 1>(acc_flat(an), desc_kmajor<C>(sT, 0, ks), desc_mnmajor<C>(sq_, 0, ks), 1);
        wgmma_ss<64, 0, 1>(acc_flat(an), desc_kmajor<C>(sT, 0, ks), desc_mnmajor<C>(sx, 0, ks), 1);
      }
      if constexpr (!kStateOnly) q_h();
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(acc_flat(an));
      wgmma_fence_operand(acc_flat(ao));
      if constexpr (kPrefetch && !kStateOnly) __syncthreads();  // every warp's Q h retired: q's slot takes V_new now
      if constexpr (!kHPass) {
        state_phase_b_epilogue(e, r0, g8, t4, GL, an, pair);
      } else {
        if (s.nonfinite) {  // X not finite: V_new without 0 x NaN (h_tx_rows), the wgmma sums dropped
#pragma unroll
          for (int nn = 0; nn < NN; ++nn)
#pragma unroll
            for (int e = 0; e < 4; ++e) an[nn][e] = 0.f;
          auto t_at = [&](int i, int m) {
            return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<const char*>(s.T) + sw128_offset<C>(i, m)));
          };
          h_tx_rows(an, 0, r0, g8, t4, t_at, s.x, s.q, pair);
        }
        // bf16(V_new) and its residual straight from the registers, every row of the chunk slot (as store_o_rows),
        // where a kernel reads them (kVnewOut)
        const std::int64_t at = (b.slot0 + c) * C * kD + b.v0;
        h_vnew_epilogue(s, r0, g8, t4, an, pair, [&](int i, int col, std::uint32_t hi, std::uint32_t lo) {
          if constexpr (kVnewOut) {
            *reinterpret_cast<std::uint32_t*>(a.vn + at + static_cast<std::int64_t>(i) * kD + col) = hi;
            *reinterpret_cast<std::uint32_t*>(a.vnl + at + static_cast<std::int64_t>(i) * kD + col) = lo;
          }
        });
      }
      if constexpr (!kStateOnly) state_scale_o(e, a, r0, g8, ao);  // s.G is chunk c's until the barrier below
      fence_proxy_async();
      __syncthreads();
      if (c + 1 < c_end) {
        if constexpr (kPrefetch) {
          load_T(c + 1, tid);  // T(c) was read by phase B alone
        } else {
          load_q(c + 1, tid);
          load_small(c + 1, tid);
        }
      }
      cp_async_commit();
      if constexpr (kHPass)
        if (tid == 0) s.nonfinite = 0;  // read above only, set next in chunk c + 1's phase A (past two barriers)
    }

    // Phase C: O += P V_new (P from registers), h = e^{G_last} h + K^T (e^{G_last - G} V_new), one commit group.
    // e^{G_last}: as the forward's epilogues (and state_t_kernel, word for word), and in the h pass as h_kernel's
    // (its outputs equal h_kernel's word for word): one ex2.approx of G_last log2 e, as every decay of both passes.
    const float decay = exp_approx(GL);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < 32; ++e) hs[mt][e] *= decay;
    // The group whole (fence to wait) in two straight-line copies: a run-time branch between wgmma.fence and the
    // wgmmas, or between them and their wait, makes ptxas insert warpgroup.arrive (C7519).
    auto update = [&](auto three_pieces) {
      wgmma_fence_operand(hs);
      if constexpr (!kStateOnly) {  // ao and P written by the epilogues
        wgmma_fence_operand(ao);
        wgmma_fence_operand(pa);
      }
      wgmma_fence();
      if constexpr (!kStateOnly) {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_rs<64, 1>(acc_flat(ao), pa[ks], desc_mnmajor<C>(svn, 0, ks), 1);
      }
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const std::uint64_t kt = desc_mnmajor<C>(sk, 64 * mt, ks);  // K^T: M = K rows 64 mt .., K = the tokens
          if constexpr (decltype(three_pieces)::value) {  // the small pieces first: lo (s.T), then mid (s.x)
            wgmma_ss<64, 1, 1>(hs[mt], kt, desc_mnmajor<C>(sT, 0, ks), 1);
            wgmma_ss<64, 1, 1>(hs[mt], kt, desc_mnmajor<C>(sx, 0, ks), 1);
          }
          wgmma_ss<64, 1, 1>(hs[mt], kt, desc_mnmajor<C>(svnd, 0, ks), 1);
        }
      wgmma_commit();
      wgmma_wait<0>();
    };
    if (!kDelta && split)
      update(std::true_type{});
    else
      update(std::false_type{});
    wgmma_fence_operand(acc_flat(ao));
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_fence_operand(hs[mt]);
    if constexpr (!kStateOnly) store_o_rows<kD>(a, b, ao, t0, len, r0, g8, t4);
    write_h_bf16(tid);   // h was last read by phase A's wgmmas (retired)
    if constexpr (kPrefetch)
      cp_async_wait<1>();  // chunk c + 1: q, k, G, beta, v (T(c + 1) may still be in flight: waited before phase B)
    else
      cp_async_wait<0>();  // chunk c + 1: q, k, T, G, beta
    fence_proxy_async();
    __syncthreads();
  }

  float* h_out = kHPass ? nullptr : b.h_out<kD, kStateOnly>(a);  // (the h pass leaves no end state)
  if (h_out) {
    // The thread's index opaque here too, so its end-state addresses are not computed before the loop and kept
    // across it (ptxas 13.0 spilled 44 bytes so at K = 128 with the delta rule, plain schedule).
    int tid_end = tid;
    asm volatile("" : "+r"(tid_end));
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < 32; i += 2) {
        const AccCoord rc = wgmma_acc_coord(tid_end, i);
        *reinterpret_cast<float2*>(h_out + static_cast<std::int64_t>(64 * mt + rc.row) * kD + rc.col) =
            make_float2(hs[mt][i], hs[mt][i + 1]);
      }
  }
}

}  // namespace glr::cuda::sm90::gdn

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn {
// The wgmma state kernel's launch (grid as launch_state_t's at 64 columns; its shared-memory limit: launch_kernel's).
// kHPass: the backward's h pass (a: StateHArgs; grid as pass C's; a.vn null: without V_new's stores, kVnewOut).
// GLR_FWD_PREFETCH=1 (state_prefetch_requested): the delta rule's forward passes (unsplit, the split's A and C; pass A
// for the backward's split h pass too) in the prefetching schedule.
template <bool kDelta, int kD, bool kStateOnly, bool kHPass = false>
inline cudaError_t launch_state_t_wgmma(const std::conditional_t<kHPass, StateHArgs, GdnFwdArgs>& a, cudaStream_t stream) {
  const dim3 grid = kStateOnly && !kHPass ? dim3((kDelta ? 2 : 1) * kD / 64, static_cast<unsigned>(seg::slots(a)) * a.HV)
                                          : dim3(kD / 64, static_cast<unsigned>(seg::rows(a)) * a.HV);
  if constexpr (kDelta && !kHPass)
    if (state_prefetch_requested())
      return launch_kernel(&state_t_wgmma_kernel<true, kD, kStateOnly, false, true>, grid, kThreads,
                           state_wgmma_smem_bytes<kD, true>, stream, a, emu_smem);
  if constexpr (kDelta && kHPass && kD == 128)
    if (!a.vn)  // (vnew_stored false: the fused sweep's backward, K = V = 128 only) no V_new stores
      return launch_kernel(&state_t_wgmma_kernel<true, kD, kStateOnly, true, false, false>, grid, kThreads,
                           state_wgmma_smem_bytes<kD>, stream, a, emu_smem);
  return launch_kernel(&state_t_wgmma_kernel<kDelta, kD, kStateOnly, kHPass>, grid, kThreads, state_wgmma_smem_bytes<kD>, stream,
                       a, emu_smem);
}
}  // namespace glr::cuda::sm90::gdn
#endif
