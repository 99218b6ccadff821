// glr/cuda/sm90/gdn_bwd_wgmma.cuh: the backward's chunk kernel on wgmma (warpgroup MMA, sm_90a): chunk_wgmma_kernel,
// the same inputs, outputs, workspace and algebra as chunk_kernel (gdn_bwd_mma.cuh, whose comments carry the
// derivation: bench/glr/sm90_bwd_notes.md), its matmuls as m64n32k16 wgmmas on shared-memory operands instead of
// mma.sync m16n8k16 on ldmatrix fragments, by two warpgroups (256 threads) a block. The chunk kernel by
// default (GLR_BWD_CHUNK_TMA=1: chunk_tma_kernel, gdn_bwd_chunk_tma.cuh, runs these products and epilogues on a
// persistent grid fed by TMA, 0.88x on an H100; GLR_BWD_WGMMA=0 selects chunk_kernel instead: env_switch.hpp): on an H200 (2026-12-05,
// docs/perf.md) it passed every check against the float64 backward and ran 1.29x chunk_kernel (as one warpgroup of
// m64n64 wgmmas; the two-warpgroup split of 2026-12-05, helper hAN, is not yet run on a GPU); on the host emulator (tests/glr_sm90/emu_wgmma.hpp: wgmma from the PTX ISA's
// descriptor and layout definitions) it is checked against the float64 recurrence and word for word against
// chunk_kernel (dq, dk word for word; dg, dbeta up to the order of their row sums, below).
//
// Why it maps one to one: C = 64 rows is wgmma's M; each warpgroup w (threads 128w..128w+127) computes columns
// 32w..32w+31 of every 64-column part of every product (m64n32), all 64 rows, from the same shared tiles. The
// wgmma accumulator layout (wgmma.cuh) gives warp v of a warpgroup rows 16v..16v+15 and, per 8-column block n,
// the mma.m16n8 C fragment, i.e. chunk_kernel's acc[4w + n][e] is warpgroup w's d[4n + e], so every epilogue
// (phase 1's dA / E / partials, phase 2's row dots and stores, phase 3) is chunk_kernel's device function, called
// on 4 column blocks from column 32w, reading accumulators at the same (row, column). Per-column results (dA, E,
// dq, dk, the column partials of M) are chunk_kernel's words. Row sums over a 64-column part (phase 1's M and D
// partials, phase 2's row dots) are split between the warpgroups: each thread's partial covers its warpgroup's
// columns only, 8 partials per row (4 lanes x 2 warpgroups, in shared memory) that chunk_phase3 adds in a fixed
// order, so dg and dbeta are bitwise deterministic but not chunk_kernel's words (rounding-level: the notes).
//
// Shared-memory operands: every tile is K-major with the 128-byte swizzle (CanonTile(B128, false, R, kD)): kD / 64
// slabs of R rows x 128 bytes, row r of a slab at r * 128, its 16-byte chunk c at (c ^ r % 8) * 16 (sw128_offset).
// One layout serves both uses of a tile: rows = tokens (or h's / dh''s K index), the feature index contiguous, which
// is K-major where the features are the reduction index (Q K^T, dO V_new^T, dX h^T, V_new dh'^T, ...) and
// MN-major where the tokens are (E K, dA K: B MN-major; E^T K, dA^T Q: A = E^T MN-major), the same bytes
// (CanonTile(B128, true, kD, C, 0) has LBO = kslab = C * 128, SBO = 1024).
//
// Matmuls on wgmma: all of them (phase 1: Q K^T, dO V_new^T, K K^T, dX V_new^T; phase 2: V_new dh'^T with its two
// residual products, dX h^T, dO h^T, E K, E^T K, dA^T Q, dA K). None remains on mma.sync. Each product is issued
// as chunk_kernel orders its mma.syncs per element (k-steps ascending; V_new dh'^T's three pieces per k-step), with
// the accumulators zeroed by the threads and scale-d = 1, so on the emulator (one rounding per k16 step for both
// instructions) the results equal chunk_kernel's except where it skips tiles that are zero (the causal tiles of
// phase 1, unread here too; the zero blocks of E, dA in phase 2, which here add +-0 products: a -0 sum may become
// +0). On a GPU the two instructions' accumulation order inside a k-step may differ: rounding-level differences.
// A non-finite q or k at token j > i meets E_ij = dA_ij = 0 in dq_i, dk_i (0 x Inf = NaN) over the whole chunk
// here, over the 16-row diagonal block only in chunk_kernel (the exact gradients do not depend on them).
//
// Loads: cp.async (as chunk_kernel) by all 256 threads into the swizzled layout, then fence.proxy.async + a
// barrier before the wgmmas read them; no TMA / mbarrier pipeline, no producer warpgroup (one block per SM, as
// chunk_kernel). Commit groups: phase 1 one per pass, pass 1's issued before pass 0's epilogue (wait_group 1);
// phase 2 per 64-column part V_new dh'^T, dX h^T and dO h^T issued together and each epilogue run once its group
// is done (wait_group 2, 1), then dk's E K + E^T K + dA^T Q (one group: wgmmas on one accumulator run in issue
// order) in flight through dq's row dot and scaling, dq's dA K through dk's store.
// Included by gdn_bwd_mma.cuh after chunk_kernel (its helpers: Seq, chunk_of, first_slot, store_scalar, ..., and
// the epilogues and phase 3 both chunk kernels call: load_chunk_scalars, phase1_epilogue, ..., chunk_phase3).
// Phases 1 and 2 on wgmma are ChunkWgCore's, below, which chunk_tma_kernel (gdn_bwd_chunk_tma.cuh) calls too.
#pragma once

#include <cstdlib>
#include <type_traits>

#include "wgmma.cuh"

namespace glr::cuda::sm90::gdn_bwd {

// The tiles: wgmma.cuh's sw128_offset layout (load_sw128, desc_kmajor, desc_mnmajor).
template <int kD = gdn::DK>
struct ChunkWgSmem {  // every tile 1024-byte aligned (the struct's base is aligned at run time, sizes are multiples)
  __nv_bfloat16 q[C * kD];    // (C, K)
  __nv_bfloat16 k[C * kD];    // (C, K)
  __nv_bfloat16 dO[C * kD];   // (C, V)
  __nv_bfloat16 vn[C * kD];   // (C, V) V_new
  __nv_bfloat16 vnl[C * kD];  // (C, V) V_new - bf16(V_new)
  __nv_bfloat16 dx[C * kD];   // (C, V) dX
  __nv_bfloat16 h[kD * kD];   // (K, V) state entering the chunk
  __nv_bfloat16 dh[kD * kD];  // (K, V) gradient of the state leaving it
  __nv_bfloat16 dhl[C * kD];  // (64, V) dh''s bf16 residual, one 64-row part of K at a time
  __nv_bfloat16 dA[C * C];    // (C, C) scale tril(Gamma . dP)
  __nv_bfloat16 E[C * C];     // (C, C) strictly_lower(beta . Gamma . dL)
  float G[C];
  float Gr[C];
  float beta[C];
  float dbv[8][C];
  RowPartials<8> rowp;  // row partials per row: warpgroup 0's quad lanes, then warpgroup 1's (chunk_phase3)
  ColPartials colp;
  float hdot[kD];
  float dG[C];
  float t3[C];
};
// The block: two warpgroups (consumers both), on the same tiles.
inline constexpr int kChunkWgThreads = 256;
// The launch's dynamic shared memory: the struct plus the slack to align it to 1024 bytes.
template <int kD>
inline constexpr std::size_t chunk_wgmma_smem_bytes = sizeof(ChunkWgSmem<kD>) + 1024;
static_assert(chunk_wgmma_smem_bytes<128> <= 227 * 1024, "the wgmma chunk kernel's shared memory fits one block per SM");
static_assert((C * 128 * 2) % 1024 == 0 && (C * 64 * 2) % 1024 == 0, "tile sizes keep the 1024-byte alignment");

// v, which is the same in every lane of a warp, as the compiler can see it is: lane 0's by shfl, so that what is
// formed from it (the warpgroup's column c0 in the wgmma descriptors) can live in uniform registers, not be formed
// per thread and moved over by R2UR at every wgmma (CUTLASS's canonical_warp_group_idx does the same). The emulator
// runs the identity.
__device__ __forceinline__ int warp_uniform(int v) {
#if defined(GLR_SM90_HOST_EMU)
  return v;
#else
  return __shfl_sync(0xffffffffu, v, 0);
#endif
}

// What h_x_epilogue (gdn_state_wgmma.cuh) reads and sets, for one 16-column block of X in ChunkWgCore::form_vnew:
// the chunk's beta and G rows and the block's nonfinite flag.
struct VnewRows {
  const float* beta;
  const float* G;
  int& nonfinite;
};
// h_kernel's non-finite flag is per block of a.vt columns (its slice): a 16-column block's is the OR of its slice's.
template <class Flags>
__device__ __forceinline__ bool slice_nonfinite(const Flags& nonfinite, int col0, int vt) {
  const int first = col0 / vt * (vt / 16);
  bool f = false;
  for (int j = first; j < first + vt / 16; ++j) f = f || nonfinite[j] != 0;
  return f;
}

// The compute both wgmma chunk kernels run (chunk_wgmma_kernel here, chunk_tma_kernel in gdn_bwd_chunk_tma.cuh):
// phases 1 and 2's wgmmas and epilogues and the thread geometry, written once; each kernel keeps its own loads and
// passes the points where they differ as hooks (cp.async waits and the second residual load here; mbarrier waits,
// TMA refills and hdot there), called in the same place of the same order of instructions, so both kernels issue
// what they issued before. Smem: ChunkWgSmem or ChunkTmaSmem (the tiles by field name); S: what the epilogues read
// (the struct itself, or ChunkTmaView with one buffer's scalars). kWgs: the warpgroups that split each product's
// columns (2: the chunk kernels, m64n32 wgmmas, 8 row partials a row; 1: the fused sweep's W warpgroup,
// gdn_bwd_fused.cuh, which runs every column itself, m64n64, 4 row partials a row, and composes the pieces of
// phases 1 and 2 below in its own order around the dh chain's hand-offs).
template <int kD, bool kDelta, int kWgs = 2>
struct ChunkWgCore {
  static_assert(kWgs == 1 || kWgs == 2, "one or two warpgroups split the columns");
  static constexpr int KH = kD / 64;  // 64-column parts of K (phase 2)
  static constexpr int kN = 64 / kWgs;  // a warpgroup's columns of a 64-column part: the wgmmas are m64n<kN>
  using RowsC = std::integral_constant<int, C>;
  int tid, wg, warp, g8, t4, r0;
  int c0;    // the warpgroup's first column of each 64-column part (warpgroup-uniform; 0 if kWgs = 1)
  int slot;  // the thread's slot among a row's 4 kWgs row partials (chunk_phase3 sums them in order)
  std::uint32_t sq, sk, sdO, svn, svnl, sdx, sh, sdh, sdhl, sdA, sE;  // the tiles' shared addresses

  template <class Smem>
  __device__ __forceinline__ explicit ChunkWgCore(Smem& s)
      : tid(static_cast<int>(threadIdx.x)), wg(warp_uniform(tid >> 7) & 1), warp((tid >> 5) & 3), g8((tid & 31) >> 2), t4(tid & 3),
        r0(warp * 16), c0(kWgs == 2 ? kN * wg : 0), slot(kWgs == 2 ? 4 * wg + t4 : t4), sq(smem_addr(s.q)), sk(smem_addr(s.k)), sdO(smem_addr(s.dO)),
        svn(smem_addr(s.vn)), svnl(smem_addr(s.vnl)), sdx(smem_addr(s.dx)), sh(smem_addr(s.h)), sdh(smem_addr(s.dh)),
        sdhl(smem_addr(s.dhl)), sdA(smem_addr(s.dA)), sE(smem_addr(s.E)) {}

  // desc_kmajor<kRows>(base, r0, s) and desc_mnmajor<kRows>(base, f0, s) (wgmma.cuh), the same 64 bits, as the
  // tile's descriptor advanced by the operand's byte offset (desc_advance, wgmma.cuh): the tile's word is formed once
  // and each descriptor is one 32-bit add (~6 instructions a descriptor before, two descriptors a wgmma). The
  // emulator checks each against wgmma.cuh's.
  __device__ __forceinline__ static std::uint64_t desc_off(std::uint32_t base, std::uint32_t off, std::uint32_t lbo) {
    return desc_advance(make_desc(base, lbo, 1024, Swizzle::B128), off);
  }
  template <int kRows>
  __device__ __forceinline__ static std::uint64_t dk(std::uint32_t base, int r0, int s) {
    const std::uint64_t d = desc_off(base, sw128_offset<kRows>(r0, 16 * s), 16);
#if defined(GLR_SM90_HOST_EMU)
    if (d != desc_kmajor<kRows>(base, r0, s)) std::abort();
#endif
    return d;
  }
  template <int kRows>
  __device__ __forceinline__ static std::uint64_t dm(std::uint32_t base, int f0, int s) {
    const std::uint64_t d = desc_off(base, sw128_offset<kRows>(16 * s, f0), kRows * 128);
#if defined(GLR_SM90_HOST_EMU)
    if (d != desc_mnmajor<kRows>(base, f0, s)) std::abort();
#endif
    return d;
  }

  // A bf16 pair (columns col, col + 1: one 16-byte chunk) of a swizzled tile of C rows.
  __device__ __forceinline__ static std::uint32_t* pair_at(const __nv_bfloat16* t, int r, int col) {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(const_cast<__nv_bfloat16*>(t)) + sw128_offset<C>(r, col));
  }
  // The 16-byte chunk cc (columns 8cc..8cc+7) of row r of a swizzled (K x V) tile.
  __device__ __forceinline__ static const uint4* state_chunk(const __nv_bfloat16* t, int r, int cc) {
    return reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(t) + sw128_offset<kD>(r, cc * 8));
  }

  // V_new = T X and its bf16 residual (the delta rule), formed as the h pass forms them (h_kernel's phases A and B,
  // gdn_bwd_mma.cuh), into the tiles vn, vnl (every column, every row). Its one caller is the fused sweep's W
  // warpgroup (kWgs = 1, gdn_bwd_fused.cuh), so the h pass stores V_new only where the chunk kernels run
  // (vnew_stored, gdn_bwd_mma.cuh); they read it (formed in them too, branch hBT, with kWgs = 2: chunk_wgmma_kernel
  // took 0.887 ms for 0.700 on an H100: 2246644, reverted; that geometry is not kept here). In place: k, h
  // (the bf16 h_c the h pass multiplied, from a.hc), v (the slice's rows, zeros past the sequence) in the tile at v,
  // T (K-major) at T, the chunk's beta and G in s; s.nonfinite[] zeroed before a barrier. The same products in the
  // same k-order and the same epilogues as h_kernel, so on the emulator the same words:
  //   K h: wgmmas over K's k-steps ascending from a zero accumulator (h_kernel: mma.sync per k-step, the same sums);
  //   X = beta V - beta e^G (K h) to vn (bf16) and vnl (its residual) by h_x_epilogue itself, one 16-column block at
  //     a time (its nonfinite flag: h_kernel's flag is per block of a.vt columns, its slice, so the slice's flag
  //     here is the OR of its 16-column blocks');
  //   V_new = T X: per k-step X's residual then X (h_kernel's order), from a zero accumulator. h_kernel sums the k
  //     tiles ks <= warp (T is lower triangular); in a slice whose X is finite the tiles past the diagonal add
  //     0 x finite = +-0 to a sum that is never -0 (it starts at +0), which leaves every word as it was. In a slice
  //     whose X is not finite h_kernel sums the tiles ks < warp on the tensor cores and the diagonal tile over
  //     m <= i alone in FMAs (h_tx_rows; a NaN or Inf of X_m must stay out of V_new_i, i < m): here, if any of the
  //     warpgroup's columns are in such a slice, one k-step at a time with the accumulator kept where h_kernel
  //     does not add that tile (ks > warp; ks = warp in those columns, then h_tx_rows), which is its sum exactly;
  //   bf16(V_new) and bf16(V_new - bf16(V_new)) as h_vnew_epilogue's, over X (every reader of this warpgroup's X
  //     columns is this warpgroup: its named barrier between).
  // Returns after the stores; the caller fences (fence.proxy.async) and syncs the block before any wgmma reads them.
  // sync: the warpgroup's barrier (the fused sweep's W: its named barrier), between X and V_new and after V_new's
  // reads of X.
  template <class S, class Sync>
  __device__ __forceinline__ void form_vnew(S& s, const __nv_bfloat16* v, const __nv_bfloat16* T, int vt,
                                            Sync sync) const {
    static_assert(kWgs == 1, "V_new formed by one warpgroup on every column (the fused sweep's W)");
    constexpr int kB = kN / 16;  // 16-column blocks of the warpgroup's part
    const std::uint32_t sT = smem_addr(T);
    float acc[KH][kN / 2];
    auto block = [](float (&x)[kN / 2], int b) -> float (&)[2][4] { return *reinterpret_cast<float(*)[2][4]>(x + 8 * b); };
    auto pair_in = [](int col0) {
      return [col0](__nv_bfloat16* t, int i, int col) { return pair_at(t, i, col0 + col); };
    };
    // K h (B = h MN-major, this warpgroup's columns)
#pragma unroll
    for (int kh = 0; kh < KH; ++kh)
#pragma unroll
      for (int e = 0; e < kN / 2; ++e) acc[kh][e] = 0.f;
    wgmma_group_sync(acc, [&] {
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks)
#pragma unroll
        for (int kh = 0; kh < KH; ++kh) wgmma_ss_n<kN, 0, 1>(acc[kh], dk<C>(sk, 0, ks), dm<kD>(sh, 64 * kh + c0, ks), 1);
    });
    // X and its residual over K h, in the vn and vnl tiles
#pragma unroll
    for (int kh = 0; kh < KH; ++kh)
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int col0 = 64 * kh + c0 + 16 * b;
        std::uint32_t vr[2][2];
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int n = 0; n < 2; ++n) vr[n][half] = *pair_at(v, r0 + g8 + half * 8, col0 + 8 * n + 2 * t4);
        VnewRows rows{s.beta, s.G, s.nonfinite[col0 / 16]};
        h_x_epilogue(rows, r0, g8, t4, vr, block(acc[kh], b), s.vn, s.vnl, pair_in(col0));
      }
    fence_proxy_async();  // X before the wgmmas
    sync();               // X and the flags visible (a slice's flag is the OR of its 16-column blocks')
    // Some 16-column block of the warpgroup's (every block: kWgs = 1) has X not finite: the flags ORed, 8 reads;
    // which slices (slice_nonfinite: vt divided at run time and a loop of flag reads a block, ~550 SASS
    // instructions on W's serial path when it ran here for every chunk) only on the rare path below.
    static_assert(kWgs == 1, "any: every flag is the warpgroup's");
    int anyf = 0;
#pragma unroll
    for (int j = 0; j < kD / 16; ++j) anyf |= s.nonfinite[j];
    const bool any = anyf != 0;
    // V_new = T X (B = X MN-major: its residual in vnl, then X in vn, per k-step)
#pragma unroll
    for (int kh = 0; kh < KH; ++kh)
#pragma unroll
      for (int e = 0; e < kN / 2; ++e) acc[kh][e] = 0.f;
    auto tx_step = [&](int ks) {
#pragma unroll
      for (int kh = 0; kh < KH; ++kh) {
        wgmma_ss_n<kN, 0, 1>(acc[kh], dk<C>(sT, 0, ks), dm<C>(svnl, 64 * kh + c0, ks), 1);
        wgmma_ss_n<kN, 0, 1>(acc[kh], dk<C>(sT, 0, ks), dm<C>(svn, 64 * kh + c0, ks), 1);
      }
    };
    if (!any) {
      wgmma_group_sync(acc, [&] {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) tx_step(ks);
      });
    } else {  // (rare: a NaN or Inf in the chunk's v or k) one k-step a group, h_kernel's tiles kept alone
      bool nf[KH][kB];  // the 16-column block's slice (h_kernel's block) has X not finite
#pragma unroll
      for (int kh = 0; kh < KH; ++kh)
#pragma unroll
        for (int b = 0; b < kB; ++b) nf[kh][b] = slice_nonfinite(s.nonfinite, 64 * kh + c0 + 16 * b, vt);
#pragma unroll 1
      for (int ks = 0; ks < 4; ++ks) {
        float keep[KH][kN / 2];
#pragma unroll
        for (int kh = 0; kh < KH; ++kh)
#pragma unroll
          for (int e = 0; e < kN / 2; ++e) keep[kh][e] = acc[kh][e];
        wgmma_group_sync(acc, [&] { tx_step(ks); });
#pragma unroll
        for (int kh = 0; kh < KH; ++kh)
#pragma unroll
          for (int e = 0; e < kN / 2; ++e)
            if (!(ks < warp || (ks == warp && !nf[kh][e >> 3]))) acc[kh][e] = keep[kh][e];
      }
      auto t_at = [T](int i, int m) {
        return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<const char*>(T) + sw128_offset<C>(i, m)));
      };
#pragma unroll
      for (int kh = 0; kh < KH; ++kh)
#pragma unroll
        for (int b = 0; b < kB; ++b)
          if (nf[kh][b]) h_tx_rows(block(acc[kh], b), r0, r0, g8, t4, t_at, s.vn, s.vnl, pair_in(64 * kh + c0 + 16 * b));
    }
    sync();  // the warpgroup's reads of X done (wgmmas retired, h_tx_rows)
#pragma unroll
    for (int kh = 0; kh < KH; ++kh)
#pragma unroll
      for (int n = 0; n < kN / 8; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = r0 + g8 + half * 8, col = 64 * kh + c0 + 8 * n + 2 * t4;
          const float x0 = acc[kh][4 * n + 2 * half], x1 = acc[kh][4 * n + 2 * half + 1];
          const std::uint32_t hi = pack_bf16x2(x0, x1);
          *pair_at(s.vn, i, col) = hi;
          *pair_at(s.vnl, i, col) = bf16x2_residual(x0, x1, hi);
        }
  }

  // x = X Y^T, y = Z V_new^T over the features, this warpgroup's columns: one commit group; kSplit (kD = 128 only):
  // features 0..63 as one group, then mid() (chunk_tma_kernel: the wait for q, k's second slab) and features
  // 64..127 as a second group on the same accumulators (in issue order: the same k-order).
  template <bool kSplit, class Mid>
  __device__ __forceinline__ void phase1_issue(float (&x)[kN / 2], float (&y)[kN / 2], std::uint32_t xa,
                                               std::uint32_t ya, Mid mid) const {
#pragma unroll
    for (int e = 0; e < kN / 2; ++e) x[e] = y[e] = 0.f;
    wgmma_fence_operand(x);
    wgmma_fence_operand(y);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      if (kSplit && KH == 2 && ks == 4) {
        wgmma_commit();
        mid();
        wgmma_fence();
      }
      wgmma_ss_n<kN, 0, 0>(x, dk<C>(xa, 0, ks), dk<C>(sk, c0, ks), 1);
      wgmma_ss_n<kN, 0, 0>(y, dk<C>(ya, 0, ks), dk<C>(svn, c0, ks), 1);
    }
    wgmma_commit();
  }
  template <class S>
  __device__ __forceinline__ void phase1_finish(S& s, const GdnBwdArgs& a, int pass, int len, float (&x)[kN / 2],
                                                float (&y)[kN / 2], Phase1Partials& p1) const {
    wgmma_fence_operand(x);
    wgmma_fence_operand(y);
    phase1_epilogue(s, a, pass, len, r0, g8, t4, x, y, p1, [&](__nv_bfloat16* t, int i, int col) {
      return pair_at(t, i, col);
    }, c0);
  }
  // Phase 1 (chunk_kernel's, the products on wgmma: every column tile, the causal ones unread), the warpgroup's 32
  // columns of the (C x C) products, through the partials in shared memory. Pass 1's wgmmas (the delta rule) are
  // issued before pass 0's epilogue runs; dx_ready() (the delta rule) before them: dX in place. kSplit0, mid: pass
  // 0's issue (phase1_issue).
  template <bool kSplit0, class S, class Mid, class DxReady>
  __device__ __forceinline__ void phase1(S& s, const GdnBwdArgs& a, int len, Mid mid, DxReady dx_ready) const {
    Phase1Partials p1;
    float x0[kN / 2], y0[kN / 2];  // Q K^T, dO V_new^T
    phase1_issue<kSplit0>(x0, y0, sq, sdO, mid);
    if constexpr (kDelta) {
      float x1[kN / 2], y1[kN / 2];  // K K^T, dX V_new^T
      dx_ready();
      phase1_issue<false>(x1, y1, sk, sdx, [] {});
      wgmma_wait<1>();
      phase1_finish(s, a, 0, len, x0, y0, p1);
      wgmma_wait<0>();
      phase1_finish(s, a, 1, len, x1, y1, p1);
    } else {
      wgmma_wait<0>();
      phase1_finish(s, a, 0, len, x0, y0, p1);
    }
    store_phase1(s, p1);
  }
  // Phase 1's partials to their slots and columns, and back (the fused sweep: S continues W's pass-0 partials).
  template <class S>
  __device__ __forceinline__ void store_phase1(S& s, const Phase1Partials& p1) const {
    store_phase1_partials<kN / 8>(s, p1, warp, g8, t4, c0, slot);
  }
  template <class S>
  __device__ __forceinline__ void load_phase1(const S& s, Phase1Partials& p1) const {
    load_phase1_partials<kN / 8>(s, p1, warp, g8, t4, c0, slot);
  }

  // acc = A2 Bs^T + A B2^T + A Bs^T over the features (per k-step in that order, as chunk_kernel), Bs rows
  // n0 + c0 .. of a (kD x kD) tile, B2 rows c0 .. of a (64 x kD) one; A2 used if kA2, B2 if kB2. One commit group.
  template <bool kA2, bool kB2>
  __device__ __forceinline__ void rows_issue(float (&acc)[kN / 2], std::uint32_t A, std::uint32_t Bs, int n0,
                                             std::uint32_t A2, std::uint32_t B2) const {
#pragma unroll
    for (int e = 0; e < kN / 2; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      if constexpr (kA2) wgmma_ss_n<kN, 0, 0>(acc, dk<C>(A2, 0, ks), dk<kD>(Bs, n0 + c0, ks), 1);
      if constexpr (kB2) wgmma_ss_n<kN, 0, 0>(acc, dk<C>(A, 0, ks), dk<C>(B2, c0, ks), 1);
      wgmma_ss_n<kN, 0, 0>(acc, dk<C>(A, 0, ks), dk<kD>(Bs, n0 + c0, ks), 1);
    }
    wgmma_commit();
  }
  // Issues acc += (A or A^T) Bm[:, n0 + c0 ..] over the C tokens, A a (C x C) tile, Bm a (C x kD) one (MN-major B:
  // its start 64 bytes into the 128-byte swizzle row for warpgroup 1; A^T MN-major A). Several in a row accumulate
  // in issue order (wgmmas on one accumulator are ordered): the caller fences before the first and commits after
  // the last.
  __device__ __forceinline__ void cc_times(float (&acc)[kN / 2], std::uint32_t A, bool trans, std::uint32_t Bm,
                                           int n0) const {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if (trans)
        wgmma_ss_n<kN, 1, 1>(acc, dm<C>(A, 0, ks), dm<C>(Bm, n0 + c0, ks), 1);
      else
        wgmma_ss_n<kN, 0, 1>(acc, dk<C>(A, 0, ks), dm<C>(Bm, n0 + c0, ks), 1);
    }
  }
  __device__ __forceinline__ void row_dot(float (&r)[2], const float (&acc)[kN / 2], const __nv_bfloat16* X,
                                          int n0) const {
    add_row_dot(r, acc, r0, g8, t4, n0 + c0, [&](int i, int col) { return pair_at(X, i, col); });
  }

  // Phase 2's pieces (phase2 below composes them; the fused sweep's W warpgroup too, in its own order): the row
  // factors e^{G_i}, beta_i, e^{G_L - G_i} of the thread's two rows; the epilogues of dk's and dq's row products
  // (row dots, scalings), the issue of their (C x C) products, the stores. The caller waits for the group whose
  // accumulator a piece reads.
  struct RowFactors {
    float eg[2], bi[2], el[2];
  };
  template <class S>
  __device__ __forceinline__ RowFactors row_factors(const S& s, float GrL) const {
    RowFactors f;
    phase2_row_factors<kDelta>(s, r0, g8, GrL, f.eg, f.bi, f.el);
    return f;
  }
  // dk's V_new dh'^T (three pieces, retired): its row dot with K, then e^{G_L - G_i} times it.
  __device__ __forceinline__ void dk_rows_epilogue(float (&ak)[kN / 2], float (&rd)[3][2], const RowFactors& f,
                                                   const __nv_bfloat16* k, int n0) const {
    wgmma_fence_operand(ak);
    row_dot(rd[2], ak, k, n0);
#pragma unroll
    for (int e = 0; e < kN / 2; ++e) ak[e] = f.el[(e >> 1) & 1] * ak[e];
  }
  // dk's dX h^T (the delta rule, retired): its row dot with K, then dk -= beta e^G times it.
  __device__ __forceinline__ void dk_dx_epilogue(float (&ak)[kN / 2], float (&ax)[kN / 2], float (&rd)[3][2],
                                                 const RowFactors& f, const __nv_bfloat16* k, int n0) const {
    wgmma_fence_operand(ax);
    row_dot(rd[1], ax, k, n0);
#pragma unroll
    for (int e = 0; e < kN / 2; ++e) ak[e] = fmaf(-f.bi[(e >> 1) & 1] * f.eg[(e >> 1) & 1], ax[e], ak[e]);
  }
  // dk += E K + E^T K (the delta rule) + dA^T Q: one commit group.
  __device__ __forceinline__ void dk_cc_issue(float (&ak)[kN / 2], int n0) const {
    wgmma_fence_operand(ak);  // written by the threads
    wgmma_fence();
    if constexpr (kDelta) {
      cc_times(ak, sE, false, sk, n0);
      cc_times(ak, sE, true, sk, n0);
    }
    cc_times(ak, sdA, true, sq, n0);
    wgmma_commit();
  }
  // dq's dO h^T (retired): its row dot with Q, scale e^G times it, then dq += dA K issued (one commit group).
  __device__ __forceinline__ void dq_epilogue_issue(float (&aq)[kN / 2], float (&rd)[3][2], const RowFactors& f,
                                                    const __nv_bfloat16* q, float scale, int n0) const {
    wgmma_fence_operand(aq);
    row_dot(rd[0], aq, q, n0);
#pragma unroll
    for (int e = 0; e < kN / 2; ++e) aq[e] = scale * f.eg[(e >> 1) & 1] * aq[e];
    wgmma_fence_operand(aq);
    wgmma_fence();
    cc_times(aq, sdA, false, sk, n0);
    wgmma_commit();
  }
  // dq's or dk's part (retired) to global memory.
  __device__ __forceinline__ void store_rows(const GdnBwdArgs& a, __nv_bfloat16* dst, float* dst32, float (&acc)[kN / 2],
                                             int n0, int len, int HV, std::int64_t qtok0, std::int64_t tok0) const {
    wgmma_fence_operand(acc);
    store_qk_rows<kD>(a, dst, dst32, acc, n0 + c0, len, HV, qtok0, tok0, r0, g8, t4);
  }
  // <h, dh'> of row tid - 128 of K by the second warpgroup (hdot_row, one row a thread; the fused sweep's W
  // warpgroup is the second), where `when`. (phase2 passes its kh == 0 as `when`: with the test around the call
  // instead, ptxas gave chunk_tma_kernel<128, true> 217 registers, not 168, for the same instructions.)
  template <class Smem, class S>
  __device__ __forceinline__ void form_hdot(const Smem& t, S& s, bool when = true) const {
    if (when && wg == 1 && tid - 128 < kD)
      s.hdot[tid - 128] = hdot_row<kD>(t.h, t.dh, tid - 128, [](const __nv_bfloat16* u, int r, int cc) {
        return state_chunk(u, r, cc);
      });
  }

  // Phase 2, per 64-column part of K (the warpgroup's columns n0 + c0 .. n0 + c0 + 31; t: the tiles q, k, h, dh', s:
  // as phase 1's), then its row dots to their slots. <h, dh'> of row tid - 128 of K (hdot_row, the second warpgroup,
  // one row a thread) is formed in part 0 once its products are issued, while they run: at the end of phase 2 it
  // was a serial chain of 128 fmas a thread that the first warpgroup waited for at the barrier before phase 3
  // (bench/glr/sm90_bwd_notes.md, helper hBQ). The kernels' hooks, each given the part kh:
  // part_start at the part's start; rows_issued once its three row products are issued; resid_free(kh) (kh + 1 <
  // KH) once the calling warpgroup's products reading dh''s residual rows have retired (warpgroup w's read rows
  // 32w..32w+31 of it, B2 = rows c0 ..: the hook's barrier orders the refill after the readers it refills for);
  // rows_retired once dq's last product is
  // issued (every row product of the part retired, dk's and dq's last products in flight).
  template <class Smem, class S, class PartStart, class RowsIssued, class ResidFree, class RowsRetired>
  __device__ __forceinline__ void phase2(const Smem& t, S& s, const GdnBwdArgs& a, int len, int HV, std::int64_t qtok0,
                                         std::int64_t tok0, float GrL, PartStart part_start,
                                         RowsIssued rows_issued, ResidFree resid_free, RowsRetired rows_retired) const {
    float rd[3][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};
    const RowFactors f = row_factors(s, GrL);
#pragma unroll 1
    for (int kh = 0; kh < KH; ++kh) {
      const int n0 = kh * 64;
      // dk: V_new dh'^T (three pieces; then dk's accumulator), dX h^T (the delta rule); dq: dO h^T. Issued as three
      // groups at once, each epilogue as soon as its group is done, dq's dO h^T in flight through dk's epilogue.
      float ak[kN / 2], ax[kN / 2], aq[kN / 2];
      part_start(kh);
      // (A2 = V_new's residual with the delta rule only: V is exact in bf16 without it)
      rows_issue<kDelta, true>(ak, svn, sdh, n0, svnl, sdhl);
      if constexpr (kDelta) rows_issue<false, false>(ax, sdx, sh, n0, 0u, 0u);
      rows_issue<false, false>(aq, sdO, sh, n0, 0u, 0u);
      rows_issued(kh);
      form_hdot(t, s, kh == 0);  // (above, part 0); h, dh' are in place through phase 2
      wgmma_wait<kDelta ? 2 : 1>();
      dk_rows_epilogue(ak, rd, f, t.k, n0);
      if (kh + 1 < KH) resid_free(kh);  // this warpgroup is past its wgmmas that read the residual (retired above)
      if constexpr (kDelta) {
        wgmma_wait<1>();
        dk_dx_epilogue(ak, ax, rd, f, t.k, n0);
      }
      dk_cc_issue(ak, n0);
      wgmma_wait<1>();  // dO h^T (dk's E K + E^T K + dA^T Q stay in flight)
      dq_epilogue_issue(aq, rd, f, t.q, a.scale, n0);
      rows_retired(kh);
      wgmma_wait<1>();  // dk
      store_rows(a, a.dk, a.dkp, ak, n0, len, HV, qtok0, tok0);
      wgmma_wait<0>();  // dq
      store_rows(a, a.dq, a.dqp, aq, n0, len, HV, qtok0, tok0);
    }
    store_phase2_rows(s, rd, r0, g8, slot);  // (<h, dh'>: formed in part 0)
  }
};

// Kernel chunk on wgmma: grid and phases as chunk_kernel; the block two warpgroups (kChunkWgThreads = 256) on the
// same tiles, warpgroup w computing columns 32w..32w+31 of every 64-column part of every product (m64n32 wgmmas),
// warp (w, v) rows 16v..16v+15 of them.
template <int kD = gdn::DK, bool kDelta = true>
__global__ void __launch_bounds__(kChunkWgThreads, 1) chunk_wgmma_kernel(const __grid_constant__ GdnBwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(kChunkWgThreads == 256 && C == 64, "two warpgroups, wgmma's M = 64 rows = the chunk");
  constexpr int NT_ = kChunkWgThreads;
  extern __shared__ __align__(16) char smem_raw[];  // (declared so by the other kernels; aligned below)
  // the struct at the first 1024-byte aligned shared address (the swizzle acts on address bits)
  const std::uint32_t raw = smem_addr(smem_raw);
  ChunkWgSmem<kD>& s = *reinterpret_cast<ChunkWgSmem<kD>*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  ChunkAt at;
  if (!chunk_at_grouped(a, at)) return;
  const ChunkWgCore<kD, kDelta> core(s);
  const int tid = core.tid;
  const int HV = at.HV, NT = at.NT, t0 = at.t0, len = at.len;
  const std::int64_t R = at.R, sl0 = at.sl0, qtok0 = at.qtok0, tok0 = at.tok0;
  const std::int64_t row_stride = static_cast<std::int64_t>(a.H) * kD;

  // Group 1: q, k, dO, V_new, G, beta, the dbeta partials. Group 2: dX. Group 3: h, dh', the residuals. The tiles
  // by all 256 threads.
  load_sw128<C, kD, NT_>(s.q, a.q + qtok0 * kD, row_stride, len, tid);
  load_sw128<C, kD, NT_>(s.k, a.k + qtok0 * kD, row_stride, len, tid);
  load_sw128<C, kD, NT_>(s.dO, a.dout + tok0 * kD, static_cast<std::int64_t>(HV) * kD, len, tid);
  if constexpr (kDelta)
    load_sw128<C, kD, NT_>(s.vn, a.vn + sl0 * C * kD, kD, C, tid);
  else
    load_sw128<C, kD, NT_>(s.vn, a.v + tok0 * kD, static_cast<std::int64_t>(HV) * kD, len, tid);
  const int nsl = kD / a.vt;
  load_chunk_scalars<kDelta>(s, a, tid, R, sl0, nsl, NT, t0);  // (threads 0..127: nsl * 16 <= 128 pieces)
  cp_async_commit();
  if constexpr (kDelta) load_sw128<C, kD, NT_>(s.dx, a.dx + sl0 * C * kD, kD, C, tid);
  cp_async_commit();
  {
    const std::int64_t o = sl0 * kD * kD;
    load_sw128<kD, kD, NT_>(s.h, a.hc + o, kD, kD, tid);
    load_sw128<kD, kD, NT_>(s.dh, a.dhc + o, kD, kD, tid);
    if constexpr (kDelta) load_sw128<C, kD, NT_>(s.vnl, a.vnl + sl0 * C * kD, kD, C, tid);
    load_sw128<C, kD, NT_>(s.dhl, a.dhcl + o, kD, C, tid);  // rows 0..63; 64..127 (kD = 128) after phase 2's first part
  }
  cp_async_commit();
  cp_async_wait<2>();
  fence_proxy_async();  // cp.async's writes (generic proxy) before the wgmmas (async proxy) read them
  __syncthreads();

  const float GL = s.G[C - 1], GrL = s.Gr[C - 1];
  // Phase 1 (ChunkWgCore::phase1); dX by cp.async (group 2) before pass 1.
  core.template phase1<false>(s, a, len, [] {}, [] {
    cp_async_wait<1>();  // dX
    fence_proxy_async();
    __syncthreads();
  });
  cp_async_wait<0>();
  fence_proxy_async();  // dA, E (st.shared) and h, dh' (cp.async) before the wgmmas
  __syncthreads();

  // Phase 2 (ChunkWgCore::phase2): dh''s residual rows 64..127 (kD = 128) by cp.async into the freed tile after part
  // 0, waited for at part 1's start; <h, dh'> per row of K by the second warpgroup in part 0 (phase2). Only
  // warpgroup w's wgmmas read the tile's rows 32w..32w+31 (the B2 rows of its columns), so each warpgroup refills
  // its own band, between two barriers of its own 128 threads (named barrier 1 + w), not of the block.
  auto no_hook = [](int) {};
  const int band = C / 2 * core.wg;  // the warpgroup's first row of the residual tile
  core.phase2(
      s, s, a, len, HV, qtok0, tok0, GrL,
      [&](int kh) {
        if (kh == 1) {
          cp_async_wait<0>();
          fence_proxy_async();
          named_barrier_sync(1 + core.wg, 128);  // the warpgroup's band of rows 64..127 of the residual visible
        }
      },
      no_hook,
      [&](int) {
        named_barrier_sync(1 + core.wg, 128);  // the warpgroup's 4 warps past their wgmmas that read its band
        load_sw128<C / 2, kD, 128, C>(s.dhl + band * 64, a.dhcl + sl0 * kD * kD + (C + band) * kD, kD, C / 2, tid & 127);
        cp_async_commit();
      },
      no_hook);
  __syncthreads();
  chunk_phase3<kD, kDelta>(s, a, tid, len, nsl, HV, tok0, sl0, GL, GrL);
  // GVA: the group's last block sums its dq, dk (gdn_bwd_mma.cuh group_sum_last; t3 is free past its first barrier)
  if (a.qkt != nullptr) group_sum_last<kD, NT_>(a, tid, reinterpret_cast<std::uint32_t*>(s.t3));
}

}  // namespace glr::cuda::sm90::gdn_bwd

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn_bwd {
// The wgmma chunk kernel's launch (grid as chunk_kernel's; its shared-memory limit: launch_kernel's).
template <int kD, bool kDelta>
inline cudaError_t launch_chunk_wgmma(const GdnBwdArgs& a, dim3 grid, cudaStream_t stream, char* emu_smem) {
  return launch_kernel(&chunk_wgmma_kernel<kD, kDelta>, grid, kChunkWgThreads, chunk_wgmma_smem_bytes<kD>, stream, a,
                       emu_smem);
}
}  // namespace glr::cuda::sm90::gdn_bwd
#endif
