// glr/cuda/sm90/gdn_bwd_dh_wgmma.cuh: the backward's reverse-state kernel on wgmma (warpgroup MMA, sm_90a):
// dh_wgmma_kernel, the same grid, inputs, outputs and algebra as dh_kernel (gdn_bwd_mma.cuh, whose comment carries
// the per-chunk formulas; bench/glr/sm90_bwd_notes.md), its products as m64nNk16 wgmmas (N = the slice width kVT
// = 16, 32 or 64, and 64 for K Q^T) instead of mma.sync m16n8k16 on ldmatrix fragments. Opt-in (GLR_DH_WGMMA=1,
// bwd_dh_wgmma in gdn_bwd_wgmma.cuh): NOT YET RUN ON A GPU; checked on
// the host emulator (tests/glr_sm90/emu_wgmma.hpp) against the float64 recurrence and against dh_kernel.
//
// Why it maps one to one: the block is one warpgroup (128 threads) and C = 64 tokens is wgmma's M, so phases A
// and B (K dh', K Q^T, P^T dO, T^T dV_new: 64 token rows) give warp w rows 16w..16w+15 and, per 8-column block n,
// the mma.m16n8 C fragment: dh_kernel's acc[n][e] is acc[4n + e] here and every epilogue reads the same (row,
// column). P^T, formed in registers as mma.sync A fragments, is wgmma's register-A layout as it stands. Phase C's
// state rows (K = 64 or 128) are one or two m64 accumulators: ds[mt][4n + e] holds row 64 mt + 16w + g (+8),
// dh_kernel's warp w holds rows 32w..32w+31 at K = 128 instead (the same values, another owner).
//
// Shared-memory operands (every tile 1024-byte aligned; the swizzle acts on address bits):
// - q, k, T: K-major 128B-swizzled (sw128_offset, as chunk_wgmma_kernel): q, k rows = tokens; read K-major as K Q^T's
//   A and B and K dh''s A, MN-major (the features as M) as Q^T and K^T of phase C; T rows j, columns i, read
//   MN-major as A = T^T (M = i).
// - the slice tiles dh' (K x kVT), dO, dV_new, y, z, v (C x kVT; v with the delta rule, for dbeta's rowsum): row r
//   at r * 2 kVT bytes, the row's 16-byte chunks swizzled with the swizzle as wide as the row (128B at kVT = 64, 64B
//   at 32, 32B at 16): MN-major B operands (N = the kVT columns, one atom; K = the rows), CanonTile(slice_swizzle,
//   true, kVT, rows, 0).
//
// Registers (no spill in any instantiation, ptxas 13.0; bench/glr/sm90_bwd_notes.md): the loads form their
// addresses from opaque values where they are issued, a thread's slice offsets follow from one (SliceLane), and v
// comes through shared memory (no 2 kVT / 8 registers held through phase A).
//
// Products and order (each element's k-steps ascending, as dh_kernel's mma.syncs; accumulators zeroed by the
// threads, scale-d = 1; every commit group waited for before its accumulators are read):
//   A: pt = K Q^T by 32-column halves (P^T's fragments from each); acc = K dh' (y written meanwhile); acc *=
//      e^{Gr_L - Gr_i}, then acc += P^T dO (A from registers). B: acc = T^T dV_new.
//   C: ds = e^{G_L} ds, then per k-step Q^T y, K^T z (one group).
// dh_kernel skips the 16-token tiles that are zero for its warp (P^T's and T^T's below the diagonal, K Q^T's
// column tiles left of it); a wgmma is warpgroup-wide, so here every warp issues every k-step: the skipped tiles
// add 0 x (a finite value) = +-0 products (a -0 sum may become +0), and K Q^T's unread tiles are computed. So on the
// emulator (one rounding per k16 step for both instructions) the outputs equal dh_kernel's word for word, but where
// dO or dV_new hold a NaN or Inf at token j: 0 x Inf = NaN then reaches dv_i of the chunk's tokens i > j, whose
// exact dv does not depend on it (dh_kernel: those in j's 16-token tile only). On a GPU the two
// instructions' accumulation order inside a k-step may differ: rounding-level differences.
//
// Loads: cp.async as dh_kernel (q, k double-buffered at kVT <= 32), then fence.proxy.async + a barrier before the
// wgmmas read them; the threads' own stores (dh', dV_new, y, z) the same. No TMA loads, no producer warpgroup: the
// chunk step is a dependent chain (dh' in, dh out) whose products are few; what wgmma buys here is fewer instructions
// (no ldmatrix, 4 warps' tiles in one instruction) and registers freed from the B fragments. dh''s bf16 copy leaves
// by one TMA store a chunk from its shared tile (thread 0; DhWgArgs), its residual and the other outputs by the
// threads' stores.
// Included by gdn_bwd_mma.cuh after gdn_bwd_wgmma.cuh (its helpers: StateBlock, state_block, prefetch_l2,
// kDhQkBuffers; mma_sync.cuh's bf16x2_residual; wgmma.cuh's sw128_offset, load_sw128, desc_kmajor, desc_mnmajor).
#pragma once

#include "wgmma.cuh"

namespace glr::cuda::sm90::gdn_bwd {

// The swizzle as wide as a slice row of kVT bf16 (2 kVT bytes).
template <int kVT>
inline constexpr Swizzle kSliceSwizzle = kVT == 64 ? Swizzle::B128 : kVT == 32 ? Swizzle::B64 : Swizzle::B32;
// Byte offset of element (r, col) of a slice tile (rows of kVT bf16) from a 1024-byte aligned base.
template <int kVT>
__host__ __device__ constexpr std::uint32_t slice_offset(int r, int col) {
  return swizzle_addr(static_cast<std::uint32_t>(r * 2 * kVT + col * 2), kSliceSwizzle<kVT>);
}
// The slice tile is CanonTile's MN-major layout with the row-wide swizzle (N = the columns, K = the rows).
template <int kVT, int kRows>
constexpr bool slice_matches_canon() {
  const CanonTile t(kSliceSwizzle<kVT>, true, kVT, kRows, 0);
  for (int r = 0; r < kRows; ++r)
    for (int col = 0; col < kVT; ++col)
      if (t.addr(0, col, r) != slice_offset<kVT>(r, col)) return false;
  return true;
}
static_assert(slice_matches_canon<64, 128>() && slice_matches_canon<32, 128>() && slice_matches_canon<16, 128>() &&
                  slice_matches_canon<16, 64>(),
              "slice_offset is CanonTile's MN-major layout");
// The B descriptor of a slice tile at `base` (kRows rows), k-step s (rows 16 s .. 16 s + 15).
template <int kVT, int kRows>
__device__ __forceinline__ std::uint64_t slice_desc(std::uint32_t base, int s) {
  return CanonTile(kSliceSwizzle<kVT>, true, kVT, kRows, 0).desc(base, s);
}
// A k-step's descriptor from its tile's at k-step 0 (at_base) and the same k-step's at shared address 0 (at0, a
// constant once the k-step and the tile's rows or features are, whose start field is the step's byte offset / 16):
// at_base advanced by that offset (desc_advance, wgmma.cuh). A phase's k-steps then share one descriptor and add a
// constant, where make_desc's add, mask, shift and or were ~5 uniform instructions a descriptor (2 a wgmma).
__device__ __forceinline__ std::uint64_t desc_at(std::uint64_t at_base, std::uint64_t at0) {
  return desc_advance(at_base, static_cast<std::uint32_t>(at0 & 0x3FFFu) << 4);
}

// The swizzle reads a row r only through r % 8 and moves whole 16-byte chunks, so from one offset per thread the
// others follow by an immediate: slice_offset(r + 8 k, col + 8 n) = (slice_offset(r, col) ^ 16 n) + 16 kVT k
// (col < 8). Every thread-side slice access is formed so (SliceLane, the 16-byte pieces below): formed from
// (row, column) directly, each of the 50 to 100 swizzled offsets a thread touches was a separate loop-invariant
// register, and ptxas 13.0 spilled at kVT = 64, K = 128 (bench/glr/sm90_bwd_notes.md, "dh_wgmma_kernel's registers").
template <int kVT, int kRows>
constexpr bool slice_offsets_shift() {
  for (int r = 0; r < 8; ++r)
    for (int col = 0; col < 8; ++col)
      for (int k = 0; 8 * k + r < kRows; ++k)
        for (int n = 0; 8 * n + col < kVT; ++n)
          if (slice_offset<kVT>(r + 8 * k, col + 8 * n) != ((slice_offset<kVT>(r, col) ^ (16u * n)) + 16u * kVT * k))
            return false;
  return true;
}
static_assert(slice_offsets_shift<64, 128>() && slice_offsets_shift<32, 128>() && slice_offsets_shift<16, 128>(),
              "a slice tile's offsets follow from one per thread");
// A thread's words of the slice tiles in the accumulator layout: rows g + 8 k, columns 8 n + 2 t and + 1 (g = lane
// / 4, t = lane % 4), the word of (row g + r8, 8-column block n) at word(tile, r8, n).
template <int kVT>
struct SliceLane {
  std::uint32_t base;  // slice_offset(g, 2 t)
  __device__ __forceinline__ explicit SliceLane(int lane) : base(slice_offset<kVT>(lane >> 2, 2 * (lane & 3))) {}
  __device__ __forceinline__ std::uint32_t offset(int r8, int n) const {
    return (base ^ (16u * static_cast<std::uint32_t>(n))) + static_cast<std::uint32_t>(r8) * (2 * kVT);
  }
  __device__ __forceinline__ std::uint32_t* word(__nv_bfloat16* t, int r8, int n) const {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(t) + offset(r8, n));
  }
};
// The 16-byte pieces of a (kRows x kVT) slice tile that thread tid moves, piece it of kRows kVT / (8 kThreads):
// row tid / (kVT / 8) + it kThreads / (kVT / 8), chunk tid % (kVT / 8); piece_offset(it) its byte offset.
template <int kVT>
struct SlicePieces {
  static constexpr int kPieces = kVT / 8, kRowStep = kThreads / kPieces;  // 16-byte chunks a row; rows per piece step
  static_assert(kRowStep % 8 == 0, "piece rows step by multiples of 8 (one swizzle pattern)");
  int row, chunk;
  std::uint32_t base;  // slice_offset(row, 8 chunk)
  __device__ __forceinline__ explicit SlicePieces(int tid)
      : row(tid / kPieces), chunk(tid % kPieces), base(slice_offset<kVT>(tid / kPieces, 8 * (tid % kPieces))) {}
  __device__ __forceinline__ std::uint32_t offset(int it) const {
    return base + static_cast<std::uint32_t>(it * kRowStep) * (2 * kVT);
  }
};

template <int kVT, int kD = gdn::DK>
struct DhWgSmem {  // every tile a multiple of 1024 bytes, the struct's base aligned to 1024 at run time
  __nv_bfloat16 q[kDhQkBuffers<kVT>][C * kD];  // (C, K) per buffer, sw128
  __nv_bfloat16 k[kDhQkBuffers<kVT>][C * kD];  // (C, K) per buffer, sw128
  __nv_bfloat16 T[C * C];                       // (C, C) sw128
  __nv_bfloat16 ds[kD * kVT];                   // (K, kVT) slice tile: bf16 copy of dh'
  __nv_bfloat16 dO[C * kVT];                    // (C, kVT) slice tile
  __nv_bfloat16 dvn[C * kVT];                   // (C, kVT) slice tile: dV_new
  __nv_bfloat16 y[C * kVT];                     // (C, kVT) slice tile: scale e^G dO
  __nv_bfloat16 z[C * kVT];                     // (C, kVT) slice tile: -beta e^G dX
  __nv_bfloat16 v[C * kVT];                     // (C, kVT) slice tile: v (delta rule: dbeta's rowsum(dX . V))
  float G[C];
  float Gr[C];
  float beta[C];
  float red[C * 4];  // rowsum(dX . V) partials, one per lane of a row's quad
  float* dh_out;     // the block's dh_out, parked through the chunk loop (dh_wgmma_kernel)
};
template <int kVT, int kD>
inline constexpr std::size_t dh_wgmma_smem_bytes = sizeof(DhWgSmem<kVT, kD>) + 1024;
static_assert(dh_wgmma_smem_bytes<64, 128> <= 113 * 1024 && dh_wgmma_smem_bytes<32, 128> <= 113 * 1024,
              "two blocks per SM, as dh_kernel");
static_assert((C * 16 * 2) % 1024 == 0, "slice tiles keep the 1024-byte alignment");

// The prefetching schedule's shared memory (kPrefetch, GLR_DH_PREFETCH=1; 64-column slices, the delta rule): q, k and
// the two tiles that die inside a chunk, dh''s bf16 copy (K x 64, as large as a k tile) and dV_new (C x 64, at most a
// q tile), share two regions of a q and a k slot each. Chunk c (p = c % 2) reads q and k from region p and keeps its
// ds in region 1 - p's k slot and its dV_new in region 1 - p's q slot (its first 64 features' slab), so that chunk
// c - 1's tiles land in region 1 - p while chunk c runs: its q's second slab (K = 128) from the chunk's start, its k
// once phase A is done with ds, its q's first slab once phase B is done with dV_new (dh_wgmma_kernel's comment). 8 KB
// more than DhWgSmem<64, 128> (a q and a k tile for ds, dV_new and DhWgSmem's q, k): still two blocks an SM.
template <int kD>
struct DhWgPipeSmem {
  __nv_bfloat16 qk[2][2][C * kD];  // region, slot (0 q, 1 k): (C, K) sw128 tiles
  __nv_bfloat16 T[C * C];          // (C, C) sw128
  __nv_bfloat16 dO[C * 64];        // (C, 64) slice tiles, as DhWgSmem's
  __nv_bfloat16 y[C * 64];
  __nv_bfloat16 z[C * 64];
  __nv_bfloat16 v[C * 64];
  float G[C];
  float Gr[C];
  float beta[C];
  float red[C * 4];
  float* dh_out;
};
template <int kD>
inline constexpr std::size_t dh_wgmma_pipe_smem_bytes = sizeof(DhWgPipeSmem<kD>) + 1024;
static_assert(sizeof(DhWgPipeSmem<128>) == sizeof(DhWgSmem<64, 128>) + 8192 &&
                  sizeof(DhWgPipeSmem<64>) == sizeof(DhWgSmem<64, 64>),
              "the regions replace q, k, ds, dV_new (plus a spare 8 KB slab at K = 128)");
static_assert(dh_wgmma_pipe_smem_bytes<128> <= 113 * 1024 && dh_wgmma_pipe_smem_bytes<64> <= 113 * 1024,
              "the prefetching dh kernel keeps two blocks per SM");
static_assert(64 * 64 * 2 <= C * 64 * 2 && (C * 64 * 2) % 1024 == 0, "dV_new fits a q slot's first slab");
// Where chunk c's tiles are: q, k (read by phases A and C), ds (dh' of chunk c as bf16: written at chunk c + 1's end,
// read at chunk c's start and by phase A) and dV_new (phase A's epilogue to phase B). DhWgSmem: fixed (q, k double
// buffered at kVT <= 32); DhWgPipeSmem: by c's parity.
template <int kVT, int kD>
struct DhTiles {
  DhWgSmem<kVT, kD>& s;
  __device__ __forceinline__ __nv_bfloat16* q(int c) const { return s.q[kDhQkBuffers<kVT> == 2 ? (c & 1) : 0]; }
  __device__ __forceinline__ __nv_bfloat16* k(int c) const { return s.k[kDhQkBuffers<kVT> == 2 ? (c & 1) : 0]; }
  __device__ __forceinline__ __nv_bfloat16* ds(int) const { return s.ds; }
  __device__ __forceinline__ __nv_bfloat16* dvn(int) const { return s.dvn; }
};
template <int kD>
struct DhPipeTiles {
  DhWgPipeSmem<kD>& s;
  __device__ __forceinline__ __nv_bfloat16* q(int c) const { return s.qk[c & 1][0]; }
  __device__ __forceinline__ __nv_bfloat16* k(int c) const { return s.qk[c & 1][1]; }
  __device__ __forceinline__ __nv_bfloat16* ds(int c) const { return s.qk[(c & 1) ^ 1][1]; }
  __device__ __forceinline__ __nv_bfloat16* dvn(int c) const { return s.qk[(c & 1) ^ 1][0]; }
};
// The cases the prefetching schedule takes (launch_dh_wgmma): 64-column slices (q, k single-buffered in the plain
// schedule, loaded after phase C with nothing to hide them) with the delta rule, K = 64 or 128, split or not.
template <int kVT, int kD, bool kDelta>
inline constexpr bool dh_prefetch_takes = kVT == 64 && kDelta && (kD == 64 || kD == 128);

// The chunk's Gr where a thread's P^T fragments need it: gj[n] = (Gr_j, Gr_j+1) at j = 8 n + 2 t4 (P^T's columns in
// K Q^T's n-tile n), gi2[half] = Gr_i log2 e at i = r0 + g8 + 8 half (its rows). Read before K Q^T's wgmmas are
// issued (p_row), so that the shared loads' latency hides behind them rather than sitting between the wgmma wait
// and P's exponentials (short_scoreboard), and each Gr_j read once for both rows (8 LDS.64 a thread, were 32 LDS).
struct PRow {
  float2 gj[8];
  float gi2[2];
};
__device__ __forceinline__ PRow p_row(const float* Gr, int r0, int g8, int t4) {
  PRow pr;
#pragma unroll
  for (int n = 0; n < 8; ++n) pr.gj[n] = *reinterpret_cast<const float2*>(Gr + n * 8 + 2 * t4);
#pragma unroll
  for (int half = 0; half < 2; ++half) pr.gi2[half] = Gr[r0 + g8 + half * 8] * gdn::kLog2e;
  return pr;
}

// P^T as register-A fragments from 32 columns of K Q^T (pt: the m64n32 accumulator of columns 32 hp .. 32 hp + 31):
// P_ji = scale e^{Gr_j - Gr_i} (K Q^T)_ij for j >= i, else 0 (a select: the exp of a positive, right of the
// diagonal, is formed and dropped, so no branch or predicate an element); P^T's k-step kk is pa[kk] (n-tiles 2 kk,
// 2 kk + 1). Phase A of dh_wgmma_kernel, of fused_bwd_kernel (gdn_bwd_fused.cuh) and of dh2_kernel; dh_kernel's P
// the same words (gdn_bwd_mma.cuh).
__device__ __forceinline__ void p_fragments(std::uint32_t (&pa)[4][4], const float (&pt)[16], int hp, const PRow& pr,
                                            float scale, int r0, int g8, int t4) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
#pragma unroll
    for (int nh = 0; nh < 4; ++nh) {
      const int n = 4 * hp + nh;
      const float grj[2] = {pr.gj[n].x, pr.gj[n].y};
      float pv[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = n * 8 + 2 * t4 + u;
        const float p = scale * dh_exp_pair(grj[u], pr.gi2[half]) * pt[4 * nh + half * 2 + u];
        pv[u] = j >= i ? p : 0.f;  // P_ji
      }
      pa[n >> 1][(n & 1) * 2 + half] = pack_bf16x2(pv[0], pv[1]);
    }
  }
}

// The kernel's parameter: the backward's arguments and the tensor map of dh''s bf16 copy (dhc as an (S K x K)
// matrix, boxes of kVT columns x K rows, the slice tile's swizzle; dh_wgmma_args), so that thread 0 stores a chunk's
// slice tile with one TMA store (store_dh_bf16) where each of the 128 threads moved K kVT / 1024 16-byte pieces
// through its registers (K = 128, 64 columns: 8 LDS.128 + 8 STG.128 a thread and chunk, the LDS through the MIO queue).
struct DhWgArgs {
  GdnBwdArgs a;
  TmaMap2d dh;
};

// kSplit: the split dh pass's pass A' and pass C (launch_state_passes; dh_kernel's arithmetic of the segments, as
// dh_kernel runs them): the block walks its segment's chunks c_end - 1 .. c_begin from dht, 0 (pass A') or the
// reverse combine's Es slot, and leaves dh0, the Es slot of the segment before (pass A') or nothing. kSplit false:
// whole sequences from dht to dh0, no segment arithmetic emitted.
//
// kPrefetch (GLR_DH_PREFETCH=1; dh_prefetch_takes: 64 columns, the delta rule): the same products, epilogues and
// stores in the same order (the same words), chunk c - 1's loads moved into chunk c. The plain schedule at 64 columns
// loads chunk c - 1's T, dO, v, G, Gr, beta after phase B's barrier and its q and k after phase C, waiting for all of
// them at once: q and k (32 KB at K = 128) are then exposed whole. Here (DhWgPipeSmem: q, k, ds, dV_new rotate over
// two regions by chunk parity) one cp.async group each:
//   at chunk c's start      q's features 64..127 of chunk c - 1 (K = 128; the slab of region 1 - p's q slot that
//                           dV_new does not use)
//   after phase A's barrier k and dO of chunk c - 1 (k into region 1 - p's k slot, chunk c's ds, last read by phase
//                           A's K dh'; dO last read by phase A)
//   after phase B's barrier q's features 0..63 of chunk c - 1 (over chunk c's dV_new), its T, v, G, Gr, beta (as the
//                           plain schedule)
// all waited for at chunk c's end, as before; there dh' for chunk c - 1 goes to region p's k slot (chunk c's k) after
// a barrier past phase C's wgmmas (the plain schedule's barrier before its q, k loads). 108,288 + 1,024 bytes of
// shared memory at K = 128 (plain 100,096 + 1,024): two blocks an SM, as the plain kernel.
// The blocks an SM that shared memory allows (228 KB, 1 KB of it reserved a block): 4 at K = 64 with 16 columns, 3
// at K = 64, 2 at K = 128. At K = 64 (both schedules) __launch_bounds__ says so, or ptxas 13.0 took up to 182
// registers (3 blocks need <= 168) and the blocks an SM followed its register choice (the prefetching schedule: 179
// and 181 registers, 2 blocks, once y's and dx_epilogue's reads came first; told 3, 168 and no spill). At K = 128 it
// says nothing (0: no .minnctapersm): registers never cost a block there, and told 2, ptxas spilled 4 to 40 bytes.
template <int kVT, int kD, bool kPrefetch>
inline constexpr int kDhWgBlocks = static_cast<int>(
    (228 * 1024) / ((kPrefetch ? dh_wgmma_pipe_smem_bytes<kD> : dh_wgmma_smem_bytes<kVT, kD>) + 1024));
static_assert(kDhWgBlocks<16, 64, false> == 4 && kDhWgBlocks<32, 64, false> == 3 && kDhWgBlocks<64, 64, false> == 3 &&
                  kDhWgBlocks<16, 128, false> == 2 && kDhWgBlocks<64, 128, false> == 2,
              "the blocks an SM the comment names");
template <int kVT, int kD, bool kPrefetch>
inline constexpr int kDhWgMinBlocks = kD == 64 ? kDhWgBlocks<kVT, kD, kPrefetch> : 0;
//
// kEsOnly (split pass A' under the fused sweep, launch_fused_bwd; launch_dh_ends<.., true>): the block's dh chain as
// above, word for word, but the only store is the Es slot it leaves (s.dh_out): no dh' bf16 copy (TMA store, no map:
// DhWgArgs::dh unset) or residual, no dv, no dX, no dbeta partials, and none of the work that exists only for them
// (v's tile, rowsum(dX . V)): the sweep forms all of them itself and overwrites dv (chunk_inputs_stored, gdn_bwd_mma.cuh:
// the workspace carves no dx, dhc, dhcl, dbv there). Pass A' only (a.dh_ends, kSplit, the delta rule).
template <int kVT, int kD = gdn::DK, bool kDelta = true, bool kSplit = false, bool kPrefetch = false, bool kEsOnly = false>
__global__ void __launch_bounds__(kThreads, (kDhWgMinBlocks<kVT, kD, kPrefetch>)) dh_wgmma_kernel(const __grid_constant__ DhWgArgs p) {
  const GdnBwdArgs& a = p.a;
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(kVT == 16 || kVT == 32 || kVT == 64, "slices of 16, 32 or 64 columns (wgmma N)");
  static_assert(kThreads == 128 && C == 64, "one warpgroup, wgmma's M = 64 rows = the chunk");
  static_assert(!kPrefetch || dh_prefetch_takes<kVT, kD, kDelta>, "the prefetching schedule: 64 columns, delta rule");
  static_assert(!kEsOnly || (kSplit && kDelta), "the Es-only mode: the split pass's pass A' with the delta rule");
  constexpr int NA = kVT / 2, MT = kD / 64;  // accumulators of a (64 x kVT) product; m64 parts of K
  constexpr int NN = kVT / 8;
  extern __shared__ __align__(16) char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  using Smem = std::conditional_t<kPrefetch, DhWgPipeSmem<kD>, DhWgSmem<kVT, kD>>;
  Smem& s = *reinterpret_cast<Smem*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  using Tiles = std::conditional_t<kPrefetch, DhPipeTiles<kD>, DhTiles<kVT, kD>>;
  const Tiles tiles{s};
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  StateBlock sb;
  if (!state_block<kVT, kD, kDelta, kSplit>(a, sb)) return;  // invalid packed offsets (or a row past the segments)
  // (kEsOnly: none of them; the pieces are not carved)
  __nv_bfloat16* dhlg = kEsOnly ? nullptr : a.dhcl + sb.R * kD * kD + sb.v0;
  __nv_bfloat16* dxg = kDelta && !kEsOnly ? a.dx + sb.R * C * kD + sb.v0 : nullptr;
  float* dbvg = kDelta && !kEsOnly
                    ? a.dbv + (sb.R * (kD / kVT) + static_cast<std::int64_t>(blockIdx.x) * sb.sq.nch) * C
                    : nullptr;
  const int r0 = warp * 16;

  constexpr bool kDB = kDhQkBuffers<kVT> == 2;
  // The loads form their addresses from opaque(tid) and opaque strides: where they are issued, not as invariants
  // of the chunk loop (kept in registers through every phase, they spilled at kVT = 64, K = 128).
  // load_qk's parts (kQ0, kQ1: q's slabs of 64 features; kK: k); the plain schedule loads all three at once (kQK).
  constexpr int kQ0 = 1, kQ1 = 2, kK = 4, kQK = kQ0 | kQ1 | kK;
  auto load_qk = [&](int c, int parts) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0), tl = opaque(tid);
    const std::int64_t rs = opaque(sb.row_stride), tok = (sb.tokb + static_cast<std::int64_t>(t0) * a.H) * kD;
    if ((parts & (kQ0 | kQ1)) == (kQ0 | kQ1) || kD == 64) {
      if (parts & (kQ0 | kQ1)) load_sw128<C, kD>(tiles.q(c), a.q + tok, rs, len, tl);
    } else {  // one 64-feature slab of q (K = 128): a 64-wide sw128 tile at the slab's place, as sw128_offset's
#pragma unroll
      for (int sl = 0; sl < 2; ++sl)
        if (parts & (sl == 0 ? kQ0 : kQ1))
          load_sw128<C, 64>(tiles.q(c) + sl * C * 64, a.q + tok + sl * 64, rs, len, tl);
    }
    if (parts & kK) load_sw128<C, kD>(tiles.k(c), a.k + tok, rs, len, tl);
  };
  // load_small's parts: dO (kDO); T, v, G, Gr, beta (kRest). The plain schedule loads both at once (kSmall).
  constexpr int kDO = 1, kRest = 2, kSmall = kDO | kRest;
  auto load_small = [&](int c, int parts) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0), tl = opaque(tid), HV = opaque(sb.HV);
    if constexpr (kDelta)
      if (parts & kRest) load_sw128<C, C>(s.T, sb.Tw + static_cast<std::int64_t>(c) * C * C, C, C, tl);
    const SlicePieces<kVT> pc(tl);
#pragma unroll
    for (int it = 0; it < C / pc.kRowStep; ++it) {
      const int r = pc.row + it * pc.kRowStep;
      const bool in = r < len;
      const std::int64_t off = (sb.vtokb + static_cast<std::int64_t>(t0 + r) * HV) * kD + sb.v0 + pc.chunk * 8;
      if (parts & kDO) cp_async_16(smem_addr(s.dO) + pc.offset(it), in ? a.dout + off : a.dout, in);
      if constexpr (kDelta && !kEsOnly)  // v's rows of this chunk (0 past len), read by phase B's epilogue (dbeta)
        if (parts & kRest) cp_async_16(smem_addr(s.v) + pc.offset(it), in ? a.v + off : a.v, in);
    }
    if (parts & kRest) {
      if (tl < C / 4) cp_async_16(smem_addr(s.G + tl * 4), sb.Gg + c * C + tl * 4, true);
      else if (tl < C / 2) {
        if constexpr (kDelta) cp_async_16(smem_addr(s.beta + (tl - C / 4) * 4), sb.Bg + c * C + (tl - C / 4) * 4, true);
      } else if (tl < 3 * C / 4) {
        cp_async_16(smem_addr(s.Gr + (tl - C / 2) * 4), sb.Grg + c * C + (tl - C / 2) * 4, true);
      }
    }
  };

  // dh' slice in wgmma accumulators: ds[mt][4n + 2 half + u] is row 64 mt + r0 + g8 + 8 half, column 8n + 2 t4 + u.
  float ds[MT][NA];
  auto ds_row = [&](int mt, int half) { return mt * 64 + r0 + g8 + half * 8; };
  // the pair's place in a (K x K) fp32 state slice (row stride kD, from the slice's column v0)
  auto state_at = [&](int mt, int n, int half) {
    return static_cast<std::int64_t>(ds_row(mt, half)) * kD + n * 8 + 2 * t4;
  };
  // The gradient leaving the block's segment, at its slice: dht (or 0) for the last (unsplit: the whole sequence),
  // 0 in pass A', else the Es slot of its segment (dh_kernel's dh_in).
  const float* dh_in = !kSplit || sb.seg == sb.nseg - 1 ? (a.dht ? a.dht + sb.hoff : nullptr)
                       : a.dh_ends                    ? nullptr
                                                      : a.Es + sb.soff + sb.seg * sb.slot_states;
  const SliceLane<kVT> sl(lane);
  for_state_pairs<MT, NN>([&](int mt, int n, int half) {
    const float2 x = dh_in ? *reinterpret_cast<const float2*>(dh_in + state_at(mt, n, half)) : make_float2(0.f, 0.f);
    ds[mt][4 * n + 2 * half] = x.x;
    ds[mt][4 * n + 2 * half + 1] = x.y;
  });
  auto ds_pair = [&](int mt, int n, int half) {
    return make_float2(ds[mt][4 * n + 2 * half], ds[mt][4 * n + 2 * half + 1]);
  };
  auto write_ds_bf16 = [&](__nv_bfloat16* dst) {  // dst: the ds tile of the chunk it is for (tiles.ds)
    for_state_pairs<MT, NN>([&](int mt, int n, int half) {
      const float2 x = ds_pair(mt, n, half);
      *sl.word(dst, ds_row(mt, half) - g8, n) = pack_bf16x2(x.x, x.y);
    });
  };
  // Chunk slot c's dh_{c+1} as bf16: its slice tile tiles.ds(c), at chunk c's start (the threads' writes fenced for the
  // async proxy and visible past the barrier before it), one TMA store by thread 0, which waits for its read of the
  // tile before the barrier after phase A (bulk_wait_read), so before anything overwrites the tile. The map's rows
  // are slots x K: the coordinate (R + c) K < S K (dhc's elements / K, < 2^31 while dhc fits a GPU's memory), R K
  // from dhlg (R K K + v0 elements past dhcl, v0 < K), a pointer the loop holds anyway.
  auto store_dh_bf16 = [&](int c) {
    if constexpr (!kEsOnly) {  // (kEsOnly: no dhc)
      if (tid == 0) {
        const int row = static_cast<int>((dhlg - a.dhcl) / kD) + c * kD;
        tma_store_2d(p.dh, blockIdx.x * kVT, row, smem_addr(tiles.ds(c)));
        bulk_commit();
      }
    }
  };
  // Its bf16 residual, from the registers (dh_{c+1} until phase C of chunk c).
  auto store_dh_residual = [&](int c) {
    if constexpr (!kEsOnly)  // (kEsOnly: no dhcl)
      store_state_residual<kD, MT, NN>(dhlg + static_cast<std::int64_t>(c) * kD * kD, t4, ds_row, ds_pair);
  };
  // kStoreEarly (the plain schedule with q, k single-buffered: 64-column slices): chunk c - 1's residual stores are
  // issued at chunk c's end, between its q, k loads and the wait for them (the wait exposed whole: nothing else was
  // left for the threads to issue there), rather than at chunk c - 1's start. The same words to the same places.
  constexpr bool kStoreEarly = !kPrefetch && !kDB;
  const int c_first = kSplit ? sb.c_begin : 0, c_last = kSplit ? sb.c_end - 1 : sb.sq.nch - 1;
  write_ds_bf16(tiles.ds(c_last));
  // The gradient entering the segment (written after the chunk loop): dh0 from segment 0 (unsplit: the sequence), the
  // Es slot of the segment before from pass A' (dh_kernel's dh_out). Block-uniform, so formed once by thread 0 and
  // parked in shared memory through the loop (visible past the barrier below): held in registers, it (or soff, seg
  // and hoff) spilled 8 bytes at K = 64 in the split pass, whose loop has 168 registers for 3 blocks an SM.
  if (tid == 0)
    s.dh_out = !kSplit || sb.seg == 0 ? (a.dh0 ? a.dh0 + sb.hoff : nullptr)
               : a.dh_ends           ? a.Es + sb.soff + (sb.seg - 1) * sb.slot_states
                                     : nullptr;
  if (c_last >= c_first) {
    load_qk(c_last, kQK);
    load_small(c_last, kSmall);
    cp_async_commit();
    cp_async_wait<0>();
  }
  fence_proxy_async();  // cp.async's and the threads' writes (generic proxy) before the wgmmas read them
  __syncthreads();
  if constexpr (kStoreEarly)
    if (c_last >= c_first) store_dh_residual(c_last);

  for (int c = c_last; c >= c_first; --c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    // The operands' descriptors, k-step ks, each formed where a wgmma takes it (64-bit values: formed at the top
    // of the chunk they held 20 registers through it, and ptxas 13.0 spilled at kVT = 64, K = 128).
    const std::uint32_t qc = smem_addr(tiles.q(c)), kc = smem_addr(tiles.k(c));
    // (desc_at: from the tile's k-step 0 descriptor and a constant)
    const auto dK = [&](int ks) { return desc_at(desc_kmajor<C>(kc, 0, 0), desc_kmajor<C>(0, 0, ks)); };
    const auto dQk = [&](int ks, int hp) { return desc_at(desc_kmajor<C>(qc, 0, 0), desc_kmajor<C>(0, 32 * hp, ks)); };
    const auto dQt = [&](int ks, int mt) { return desc_at(desc_mnmajor<C>(qc, 0, 0), desc_mnmajor<C>(0, 64 * mt, ks)); };
    const auto dKt = [&](int ks, int mt) { return desc_at(desc_mnmajor<C>(kc, 0, 0), desc_mnmajor<C>(0, 64 * mt, ks)); };
    const auto dTt = [&](int ks) { return desc_at(desc_mnmajor<C>(smem_addr(s.T), 0, 0), desc_mnmajor<C>(0, 0, ks)); };
    const auto dSlice = [&](const __nv_bfloat16* t, int ks) {
      return desc_at(slice_desc<kVT, C>(smem_addr(t), 0), slice_desc<kVT, C>(0, ks));
    };
    const auto dDs = [&](int ks) {  // dh''s bf16 slice tile (kD rows)
      return desc_at(slice_desc<kVT, kD>(smem_addr(tiles.ds(c)), 0), slice_desc<kVT, kD>(0, ks));
    };
    if constexpr (kPrefetch) {  // chunk c - 1's q features 64..127: region 1 - p's q slot's slab dV_new leaves free
      if constexpr (kD == 128) {
        if (c > c_first) load_qk(c - 1, kQ1);
        cp_async_commit();
      }
    } else if constexpr (kDB) {
      if (c > c_first) load_qk(c - 1, kQK);  // the other buffer (last read by chunk c + 1's wgmmas, retired before
      cp_async_commit();                      // its barrier)
    } else if (c > c_first) {  // as dh_kernel: chunk c - 1's q and k to L2 now, loaded after phase C
      const int row = tid >> 1;
      const std::int64_t off = (sb.tokb + static_cast<std::int64_t>(t0 - C + row) * a.H) * kD + (tid & 1) * (kD / 2);
      prefetch_l2(a.q + off);
      prefetch_l2(a.k + off);
    }
    store_dh_bf16(c);
    if constexpr (!kStoreEarly) store_dh_residual(c);
    // Phase A, in three groups so that K Q^T's accumulators are dead before K dh''s are live (register pressure):
    // pt = K Q^T (C x C; dh_kernel's upper column tiles are the ones read), P^T from it as register-A fragments;
    // acc = K dh' (C x kVT, inner K), y = scale e^G dO meanwhile; acc = e^{Gr_L - Gr_i} acc + P^T dO.
    std::uint32_t pa[4][4];  // P^T as register-A fragments of k-step kk (n-tiles 2kk, 2kk+1)
    const PRow pr = p_row(s.Gr, r0, g8, t4);
#pragma unroll
    for (int hp = 0; hp < 2; ++hp) {  // K Q^T's columns 32 hp .. 32 hp + 31 (P^T's k-steps 2 hp, 2 hp + 1) at a time
      float pt[16];  // (C, 32)
#pragma unroll
      for (int e = 0; e < 16; ++e) pt[e] = 0.f;
      wgmma_fence_operand(pt);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) wgmma_ss_n<32, 0, 0>(pt, dK(ks), dQk(ks, hp), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(pt);
      p_fragments(pa, pt, hp, pr, a.scale, r0, g8, t4);
    }
    float acc[NA];  // (C, kVT)
#pragma unroll
    for (int e = 0; e < NA; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_ss_n<kVT, 0, 1>(acc, dK(ks), dDs(ks), 1);
    wgmma_commit();
    const float GL = s.G[C - 1], GrL = s.Gr[C - 1];
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // y while K dh' runs
      const int i = r0 + g8 + half * 8;
      const float ey = a.scale * gdn::exp_approx(s.G[i]);
      // the row's dO words read first: to the compiler y's stores may alias later dO reads, so read in the loop below
      // each waited for its own load (short_scoreboard) before the next was issued
      std::uint32_t dow[NN];
#pragma unroll
      for (int n = 0; n < NN; ++n) dow[n] = *sl.word(s.dO, i - g8, n);
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        const float2 dof = unpack_bf16x2(dow[n]);
        *sl.word(s.y, i - g8, n) = pack_bf16x2(ey * dof.x, ey * dof.y);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float ed = gdn::exp_approx(GrL - s.Gr[r0 + g8 + half * 8]);  // decays between two tokens from Gr, as dh_kernel
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        acc[4 * n + half * 2] *= ed;
        acc[4 * n + half * 2 + 1] *= ed;
      }
    }
    wgmma_fence_operand(acc);  // acc and pa written by the threads
    wgmma_fence_operand(pa);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_rs_n<kVT, 1>(acc, pa[ks], dSlice(s.dO, ks), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
    if constexpr (!kEsOnly) bulk_wait_read<0>();  // store_dh_bf16's TMA store has read the ds tile (before the barrier below; thread 0's)
    const auto accp = [&](int n, int half) { return make_float2(acc[4 * n + 2 * half], acc[4 * n + 2 * half + 1]); };
    const auto tile_word = [&](__nv_bfloat16* t, int i, int n) { return sl.word(t, i - g8, n); };
    if constexpr (!kDelta) {
      store_dv_rows<kD, NN>(a, sb, t0, len, r0, g8, t4, accp);  // dv = dX = dV_new; no dX, z or dbeta partials
      fence_proxy_async();
      __syncthreads();  // y visible; every warp is done with dO, G, Gr, dh'
      if (c > c_first) load_small(c - 1, kSmall);
      cp_async_commit();
    } else {
      store_pairs_bf16<NN>(r0, g8, accp, [&](int i, int n) { return tile_word(tiles.dvn(c), i, n); });
      fence_proxy_async();
      __syncthreads();  // dV_new visible
      if constexpr (kPrefetch) {  // every warp is done with dO and ds (phase A's wgmmas retired)
        if (c > c_first) {
          load_qk(c - 1, kK);
          load_small(c - 1, kDO);
        }
        cp_async_commit();
      }

      // Phase B: acc = T^T dV_new (A = T^T: T's tile read MN-major).
#pragma unroll
      for (int e = 0; e < NA; ++e) acc[e] = 0.f;
      wgmma_fence_operand(acc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_ss_n<kVT, 1, 1>(acc, dTt(ks), dSlice(tiles.dvn(c), ks), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(acc);
      if constexpr (kEsOnly)  // z alone (no dv, dX, dbeta partials)
        z_epilogue<NN>(s, r0, g8, accp, [&](int i, int n) { return tile_word(s.z, i, n); });
      else
        dx_epilogue<kD, NN>(s, a, sb, dxg, t0, len, r0, g8, t4, accp,
                            [&](int n, int half) { return *tile_word(s.v, r0 + g8 + half * 8, n); },
                            [&](int i, int n) { return tile_word(s.z, i, n); });
      fence_proxy_async();
      __syncthreads();  // y, z, red visible; every warp is done with dV_new, T, dO, G, beta, dh'
      if constexpr (kPrefetch) {  // q's features 0..63 over chunk c's dV_new; T, v, G, Gr, beta
        if (c > c_first) {
          load_qk(c - 1, kQ0);
          load_small(c - 1, kRest);
        }
      } else if (c > c_first) {
        load_small(c - 1, kSmall);
      }
      cp_async_commit();
      if constexpr (!kEsOnly) store_dbeta_partials(s.red, dbvg, t0, tid);
    }

    // Phase C: dh = e^{G_L} dh' + Q^T y + K^T z (no delta rule: no K^T z), per k-step Q^T y then K^T z.
    const float decay = gdn::exp_approx(GL);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int e = 0; e < NA; ++e) ds[mt][e] *= decay;
    wgmma_fence_operand(ds);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < C / 16; ++ks)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        wgmma_ss_n<kVT, 1, 1>(ds[mt], dQt(ks, mt), dSlice(s.y, ks), 1);
        if constexpr (kDelta) wgmma_ss_n<kVT, 1, 1>(ds[mt], dKt(ks, mt), dSlice(s.z, ks), 1);
      }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_fence_operand(ds[mt]);
    if constexpr (kPrefetch) {
      __syncthreads();  // every warp is past phase C's wgmmas on q, k: chunk c's k slot takes chunk c - 1's ds
      write_ds_bf16(tiles.ds(c - 1));
    } else {
      write_ds_bf16(tiles.ds(c - 1));  // dh' was last read by phase A's wgmmas (retired) and TMA store (waited for)
      if constexpr (!kDB) {
        __syncthreads();  // every warp is past phase C's wgmmas on q, k
        if (c > c_first) load_qk(c - 1, kQK);
        cp_async_commit();
        if (c > c_first) store_dh_residual(c - 1);  // kStoreEarly: while q, k load
      }
    }
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();  // chunk c - 1's tiles and dh' visible; every warp is done with y, z, red
  }

  float* const dh_out = s.dh_out;
  if (dh_out)
    for_state_pairs<MT, NN>([&](int mt, int n, int half) {
      *reinterpret_cast<float2*>(dh_out + state_at(mt, n, half)) = ds_pair(mt, n, half);
    });
}

}  // namespace glr::cuda::sm90::gdn_bwd

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn_bwd {
// The kernel's parameter for a: dhc's tensor map (S K rows of K bf16, boxes of kVT columns x K rows, the slice
// tile's swizzle). False where the driver refuses the map (or a row count past int32).
template <int kVT, int kD>
inline bool dh_wgmma_args(const GdnBwdArgs& a, DhWgArgs& p) {
  const long long rows = a.chunk_slots() * a.value_heads() * kD;
  p.a = a;
  return rows > 0 && rows <= 0x7fffffffLL &&
         make_tma_map_2d(p.dh, a.dhc, static_cast<std::uint64_t>(rows), kD, kD * 2, kD, kVT, kSliceSwizzle<kVT>);
}
// The wgmma dh kernel's launch (grid as dh_kernel's; its shared-memory limit: launch_kernel's).
// prefetch (GLR_DH_PREFETCH=1, bwd_dh_prefetch; the declaration's default): the prefetching schedule where
// dh_prefetch_takes, else the plain one. Where dh_wgmma_args has no map: dh_kernel (the same words).
// kEsOnly (pass A' under the fused sweep: dh_wgmma_kernel's Es-only mode): no dhc map (the mode stores no dh'), so
// no dh_kernel fallback either.
template <int kVT, int kD, bool kDelta, bool kSplit, bool kEsOnly>
inline cudaError_t launch_dh_wgmma(const GdnBwdArgs& a, dim3 grid, cudaStream_t stream, char* emu_smem, bool prefetch) {
  DhWgArgs p;
  if constexpr (kEsOnly) {
    p = DhWgArgs{};
    p.a = a;
  } else if (!dh_wgmma_args<kVT, kD>(a, p)) {
    return launch_kernel(&dh_kernel<kVT, kD, kDelta>, grid, kThreads, sizeof(DhSmem<kVT, kD>), stream, a, emu_smem);
  }
  if constexpr (dh_prefetch_takes<kVT, kD, kDelta>)
    if (prefetch)
      return launch_kernel(&dh_wgmma_kernel<kVT, kD, kDelta, kSplit, true, kEsOnly>, grid, kThreads,
                           dh_wgmma_pipe_smem_bytes<kD>, stream, p, emu_smem);
  return launch_kernel(&dh_wgmma_kernel<kVT, kD, kDelta, kSplit, false, kEsOnly>, grid, kThreads,
                       dh_wgmma_smem_bytes<kVT, kD>, stream, p, emu_smem);
}
}  // namespace glr::cuda::sm90::gdn_bwd
#endif
