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
// wgmmas read them; the threads' own stores (dh', dV_new, y, z) the same. No TMA, no producer warpgroup: the chunk
// step is a dependent chain (dh' in, dh out) whose products are few; what wgmma buys here is fewer instructions
// (no ldmatrix, 4 warps' tiles in one instruction) and registers freed from the B fragments.
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
};
template <int kVT, int kD>
inline constexpr std::size_t dh_wgmma_smem_bytes = sizeof(DhWgSmem<kVT, kD>) + 1024;
static_assert(dh_wgmma_smem_bytes<64, 128> <= 113 * 1024 && dh_wgmma_smem_bytes<32, 128> <= 113 * 1024,
              "two blocks per SM, as dh_kernel");
static_assert((C * 16 * 2) % 1024 == 0, "slice tiles keep the 1024-byte alignment");

// P^T as register-A fragments from 32 columns of K Q^T (pt: the m64n32 accumulator of columns 32 hp .. 32 hp + 31):
// P_ji = scale e^{Gr_j - Gr_i} (K Q^T)_ij for j >= i, else 0 (never the exp of a positive); P^T's k-step kk is pa[kk]
// (n-tiles 2 kk, 2 kk + 1). Phase A of dh_wgmma_kernel and of fused_bwd_kernel (gdn_bwd_fused.cuh).
__device__ __forceinline__ void p_fragments(std::uint32_t (&pa)[4][4], const float (&pt)[16], int hp, const float* Gr,
                                            float scale, int r0, int g8, int t4) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = r0 + g8 + half * 8;
    const float Gri = Gr[i];
#pragma unroll
    for (int nh = 0; nh < 4; ++nh) {
      const int n = 4 * hp + nh;
      float pv[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = n * 8 + 2 * t4 + u;
        pv[u] = j >= i ? scale * expf(Gr[j] - Gri) * pt[4 * nh + half * 2 + u] : 0.f;  // P_ji
      }
      pa[n >> 1][(n & 1) * 2 + half] = pack_bf16x2(pv[0], pv[1]);
    }
  }
}

// kSplit: the split dh pass's pass A' and pass C (launch_state_passes; dh_kernel's arithmetic of the segments, as
// dh_kernel runs them): the block walks its segment's chunks c_end - 1 .. c_begin from dht, 0 (pass A') or the
// reverse combine's Es slot, and leaves dh0, the Es slot of the segment before (pass A') or nothing. kSplit false:
// whole sequences from dht to dh0, no segment arithmetic emitted.
template <int kVT, int kD = gdn::DK, bool kDelta = true, bool kSplit = false>
__global__ void __launch_bounds__(kThreads) dh_wgmma_kernel(const __grid_constant__ GdnBwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(kVT == 16 || kVT == 32 || kVT == 64, "slices of 16, 32 or 64 columns (wgmma N)");
  static_assert(kThreads == 128 && C == 64, "one warpgroup, wgmma's M = 64 rows = the chunk");
  constexpr int NA = kVT / 2, MT = kD / 64;  // accumulators of a (64 x kVT) product; m64 parts of K
  constexpr int NN = kVT / 8;
  extern __shared__ __align__(16) char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  DhWgSmem<kVT, kD>& s = *reinterpret_cast<DhWgSmem<kVT, kD>*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  StateBlock sb;
  if (!state_block<kVT, kD, kDelta, kSplit>(a, sb)) return;  // invalid packed offsets (or a row past the segments)
  __nv_bfloat16* dhg = a.dhc + sb.R * kD * kD + sb.v0;
  __nv_bfloat16* dhlg = a.dhcl + sb.R * kD * kD + sb.v0;
  __nv_bfloat16* dxg = kDelta ? a.dx + sb.R * C * kD + sb.v0 : nullptr;
  float* dbvg = kDelta ? a.dbv + (sb.R * (kD / kVT) + static_cast<std::int64_t>(blockIdx.x) * sb.sq.nch) * C : nullptr;
  const int r0 = warp * 16;

  constexpr bool kDB = kDhQkBuffers<kVT> == 2;
  // The loads form their addresses from opaque(tid) and opaque strides: where they are issued, not as invariants
  // of the chunk loop (kept in registers through every phase, they spilled at kVT = 64, K = 128).
  auto load_qk = [&](int c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0), buf = kDB ? (c & 1) : 0, tl = opaque(tid);
    const std::int64_t rs = opaque(sb.row_stride);
    load_sw128<C, kD>(s.q[buf], a.q + (sb.tokb + static_cast<std::int64_t>(t0) * a.H) * kD, rs, len, tl);
    load_sw128<C, kD>(s.k[buf], a.k + (sb.tokb + static_cast<std::int64_t>(t0) * a.H) * kD, rs, len, tl);
  };
  auto load_small = [&](int c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0), tl = opaque(tid), HV = opaque(sb.HV);
    if constexpr (kDelta) load_sw128<C, C>(s.T, sb.Tw + static_cast<std::int64_t>(c) * C * C, C, C, tl);
    const SlicePieces<kVT> pc(tl);
#pragma unroll
    for (int it = 0; it < C / pc.kRowStep; ++it) {
      const int r = pc.row + it * pc.kRowStep;
      const bool in = r < len;
      const std::int64_t off = (sb.vtokb + static_cast<std::int64_t>(t0 + r) * HV) * kD + sb.v0 + pc.chunk * 8;
      cp_async_16(smem_addr(s.dO) + pc.offset(it), in ? a.dout + off : a.dout, in);
      if constexpr (kDelta)  // v's rows of this chunk (0 past len), read by phase B's epilogue
        cp_async_16(smem_addr(s.v) + pc.offset(it), in ? a.v + off : a.v, in);
    }
    if (tl < C / 4) cp_async_16(smem_addr(s.G + tl * 4), sb.Gg + c * C + tl * 4, true);
    else if (tl < C / 2) {
      if constexpr (kDelta) cp_async_16(smem_addr(s.beta + (tl - C / 4) * 4), sb.Bg + c * C + (tl - C / 4) * 4, true);
    } else if (tl < 3 * C / 4) {
      cp_async_16(smem_addr(s.Gr + (tl - C / 2) * 4), sb.Grg + c * C + (tl - C / 2) * 4, true);
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
  auto write_ds_bf16 = [&]() {
    for_state_pairs<MT, NN>([&](int mt, int n, int half) {
      const float2 x = ds_pair(mt, n, half);
      *sl.word(s.ds, ds_row(mt, half) - g8, n) = pack_bf16x2(x.x, x.y);
    });
  };
  write_ds_bf16();
  const int c_first = kSplit ? sb.c_begin : 0, c_last = kSplit ? sb.c_end - 1 : sb.sq.nch - 1;
  if (c_last >= c_first) {
    load_qk(c_last);
    load_small(c_last);
    cp_async_commit();
    cp_async_wait<0>();
  }
  fence_proxy_async();  // cp.async's and the threads' writes (generic proxy) before the wgmmas read them
  __syncthreads();

  for (int c = c_last; c >= c_first; --c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    // The operands' descriptors, k-step ks, each formed where a wgmma takes it (64-bit values: formed at the top
    // of the chunk they held 20 registers through it, and ptxas 13.0 spilled at kVT = 64, K = 128).
    const std::uint32_t qc = smem_addr(s.q[kDB ? (c & 1) : 0]), kc = smem_addr(s.k[kDB ? (c & 1) : 0]);
    const auto dK = [&](int ks) { return desc_kmajor<C>(kc, 0, ks); };
    const auto dQt = [&](int ks, int mt) { return desc_mnmajor<C>(qc, 64 * mt, ks); };
    const auto dKt = [&](int ks, int mt) { return desc_mnmajor<C>(kc, 64 * mt, ks); };
    const auto dTt = [&](int ks) { return desc_mnmajor<C>(smem_addr(s.T), 0, ks); };
    const auto dSlice = [&](const __nv_bfloat16* t, int ks) { return slice_desc<kVT, C>(smem_addr(t), ks); };
    if constexpr (kDB) {
      if (c > c_first) load_qk(c - 1);  // the other buffer (last read by chunk c + 1's wgmmas, retired before its barrier)
      cp_async_commit();
    } else if (c > c_first) {  // as dh_kernel: chunk c - 1's q and k to L2 now, loaded after phase C
      const int row = tid >> 1;
      const std::int64_t off = (sb.tokb + static_cast<std::int64_t>(t0 - C + row) * a.H) * kD + (tid & 1) * (kD / 2);
      prefetch_l2(a.q + off);
      prefetch_l2(a.k + off);
    }
    {  // dh_{c+1} as bf16 (from the slice tile, 16 bytes a piece) and its bf16 residual (from the registers)
      __nv_bfloat16* dst = dhg + static_cast<std::int64_t>(c) * kD * kD;
      const SlicePieces<kVT> pc(tid);
#pragma unroll
      for (int it = 0; it < kD / pc.kRowStep; ++it)
        *reinterpret_cast<uint4*>(dst + (pc.row + it * pc.kRowStep) * kD + pc.chunk * 8) =
            *reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(s.ds) + pc.offset(it));
      store_state_residual<kD, MT, NN>(dhlg + static_cast<std::int64_t>(c) * kD * kD, t4, ds_row, ds_pair);
    }
    // Phase A, in three groups so that K Q^T's accumulators are dead before K dh''s are live (register pressure):
    // pt = K Q^T (C x C; dh_kernel's upper column tiles are the ones read), P^T from it as register-A fragments;
    // acc = K dh' (C x kVT, inner K), y = scale e^G dO meanwhile; acc = e^{Gr_L - Gr_i} acc + P^T dO.
    std::uint32_t pa[4][4];  // P^T as register-A fragments of k-step kk (n-tiles 2kk, 2kk+1)
#pragma unroll
    for (int hp = 0; hp < 2; ++hp) {  // K Q^T's columns 32 hp .. 32 hp + 31 (P^T's k-steps 2 hp, 2 hp + 1) at a time
      float pt[16];  // (C, 32)
#pragma unroll
      for (int e = 0; e < 16; ++e) pt[e] = 0.f;
      wgmma_fence_operand(pt);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) wgmma_ss_n<32, 0, 0>(pt, dK(ks), desc_kmajor<C>(qc, 32 * hp, ks), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(pt);
      p_fragments(pa, pt, hp, s.Gr, a.scale, r0, g8, t4);
    }
    float acc[NA];  // (C, kVT)
#pragma unroll
    for (int e = 0; e < NA; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma_ss_n<kVT, 0, 1>(acc, dK(ks), slice_desc<kVT, kD>(smem_addr(s.ds), ks), 1);
    wgmma_commit();
    const float GL = s.G[C - 1], GrL = s.Gr[C - 1];
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // y while K dh' runs
      const int i = r0 + g8 + half * 8;
      const float ey = a.scale * expf(s.G[i]);
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        const float2 dof = unpack_bf16x2(*sl.word(s.dO, i - g8, n));
        *sl.word(s.y, i - g8, n) = pack_bf16x2(ey * dof.x, ey * dof.y);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float ed = expf(GrL - s.Gr[r0 + g8 + half * 8]);  // decays between two tokens from Gr, as dh_kernel
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
    const auto accp = [&](int n, int half) { return make_float2(acc[4 * n + 2 * half], acc[4 * n + 2 * half + 1]); };
    const auto tile_word = [&](__nv_bfloat16* t, int i, int n) { return sl.word(t, i - g8, n); };
    if constexpr (!kDelta) {
      store_dv_rows<kD, NN>(a, sb, t0, len, r0, g8, t4, accp);  // dv = dX = dV_new; no dX, z or dbeta partials
      fence_proxy_async();
      __syncthreads();  // y visible; every warp is done with dO, G, Gr, dh'
      if (c > c_first) load_small(c - 1);
      cp_async_commit();
    } else {
      store_pairs_bf16<NN>(r0, g8, accp, [&](int i, int n) { return tile_word(s.dvn, i, n); });
      fence_proxy_async();
      __syncthreads();  // dV_new visible

      // Phase B: acc = T^T dV_new (A = T^T: T's tile read MN-major).
#pragma unroll
      for (int e = 0; e < NA; ++e) acc[e] = 0.f;
      wgmma_fence_operand(acc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_ss_n<kVT, 1, 1>(acc, dTt(ks), dSlice(s.dvn, ks), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(acc);
      dx_epilogue<kD, NN>(s, a, sb, dxg, t0, len, r0, g8, t4, accp,
                          [&](int n, int half) { return *tile_word(s.v, r0 + g8 + half * 8, n); },
                          [&](int i, int n) { return tile_word(s.z, i, n); });
      fence_proxy_async();
      __syncthreads();  // y, z, red visible; every warp is done with dV_new, T, dO, G, beta, dh'
      if (c > c_first) load_small(c - 1);
      cp_async_commit();
      store_dbeta_partials(s.red, dbvg, t0, tid);
    }

    // Phase C: dh = e^{G_L} dh' + Q^T y + K^T z (no delta rule: no K^T z), per k-step Q^T y then K^T z.
    const float decay = expf(GL);
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
    write_ds_bf16();  // dh' was last read by phase A's wgmmas (retired)
    if constexpr (!kDB) {
      __syncthreads();  // every warp is past phase C's wgmmas on q, k
      if (c > c_first) load_qk(c - 1);
      cp_async_commit();
    }
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();  // chunk c - 1's tiles and dh' visible; every warp is done with y, z, red
  }

  // The gradient entering the segment: dh0 from segment 0 (unsplit: the sequence), the Es slot of the segment
  // before from pass A' (dh_kernel's dh_out).
  float* dh_out = !kSplit || sb.seg == 0 ? (a.dh0 ? a.dh0 + sb.hoff : nullptr)
                  : a.dh_ends           ? a.Es + sb.soff + (sb.seg - 1) * sb.slot_states
                                        : nullptr;
  if (dh_out)
    for_state_pairs<MT, NN>([&](int mt, int n, int half) {
      *reinterpret_cast<float2*>(dh_out + state_at(mt, n, half)) = ds_pair(mt, n, half);
    });
}

}  // namespace glr::cuda::sm90::gdn_bwd

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn_bwd {
// The wgmma dh kernel's launch (grid as dh_kernel's; its shared-memory limit: launch_kernel's).
template <int kVT, int kD, bool kDelta, bool kSplit>
inline cudaError_t launch_dh_wgmma(const GdnBwdArgs& a, dim3 grid, cudaStream_t stream, char* emu_smem) {
  return launch_kernel(&dh_wgmma_kernel<kVT, kD, kDelta, kSplit>, grid, kThreads, dh_wgmma_smem_bytes<kVT, kD>, stream,
                       a, emu_smem);
}
}  // namespace glr::cuda::sm90::gdn_bwd
#endif
