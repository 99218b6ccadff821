// glr/cuda/sm90/gdn_bwd_fused.cuh: the backward's fused reverse sweep (sm_90a, wgmma): fused_bwd_kernel, ONE block
// per (sequence, value head) (split: per (segment, sequence, value head), from the gradient pass A' and the reverse
// combine leave in Es: launch_fused_bwd) that walks the chunks last to first and does, per chunk, what dh_wgmma_kernel<64>
// (gdn_bwd_dh_wgmma.cuh, over both 64-column halves of V) and chunk_wgmma_kernel (gdn_bwd_wgmma.cuh) do today, with
// dh' in fp32 registers of one warpgroup for the whole sweep: dh', its bf16 residual and dX never go through global
// memory; q, k, T, dO are read once per chunk-head. FlashQLA's fused_bwd structure on glr's algebra (design, budget,
// barriers: bench/glr/sm90_bwd_notes.md, "The fused reverse sweep"). Opt-in GLR_FUSED_BWD=1 (bwd_fused,
// env_switch.hpp), K = V = 128 with the delta rule (gate 0 or 1); NOT YET RUN ON A GPU.
//
// First form (correctness first): two warpgroups, 256 threads, one block per SM (232,432 B shared of 232,448):
//   S (warpgroup 0) holds dh' (128 x 128 fp32: ds[half v][row tile mt][32]) and runs the dh chain: phase A (P^T from
//     K Q^T once, then per half K dh' and P^T dO -> dV_new), phase B (T^T dV_new -> dX epilogue: dv, dX and z to
//     shared memory, the dbeta partials of both halves), phase C (dh = e^{G_L} dh' + Q^T y + K^T z); and, after
//     the hand-off (1), two of the chunk phases' pieces (ChunkWgCore<128, true, 1>'s, with W's thread geometry):
//     phase 1's second pass (K K^T, dX V_new^T -> E) and all of dq.
//   W (warpgroup 1) runs the rest of the chunk kernels' phases (ChunkWgCore<128, true, 1>'s pieces,
//     gdn_bwd_wgmma.cuh, on every column; chunk_phase3) for the same chunk on the tiles S left in shared memory,
//     after forming V_new and its residual from k, h, v and T as the chunk kernels do (ChunkWgCore::form_vnew: the
//     h pass stores them for the chunk kernels only): phase 1's first pass (dA), dk, phase 3.
// Within a chunk: S's A, B run beside W's work that needs nothing from S (V_new, phase 1's first pass: dA); then,
// after the hand-off (1), W's dk and phase 3 beside S's phase 1 second pass (E: W waits for it only before dk's
// (C x C) products), dq and C (S hands dh''s residual rows 64..127 over between W's two dk parts before it updates
// dh'). The two halves of the chunk step carry about the same tensor work on each side (bench/glr/sm90_bwd_notes.md,
// "The fused sweep's two warpgroups balanced"). No overlap of compute across chunks yet.
// Loads: the block's first chunk (c_last, the only one that can be short) by cp.async from every thread, rows past
// the sequence zero-filled, before (0). Every later chunk c - 1 is whole and arrives by TMA (cp.async.bulk.tensor.2d,
// 128B swizzle: FusedBwdArgs' tensor maps, one 64 x 64 box a tile slab; G, Gr, beta by 1-D bulk copies) into the
// same single buffers, on five full mbarriers (kFbKS, kFbQ, kFbO, kFbT, kFbHV: one phase a chunk), each group
// issued by one thread as soon as the group's tiles have no reader left in chunk c: h, v (in vnl) and T (in E) by
// W's thread 0 right after kBarRows, beside W's phase 3 and S's phase C; k with G, Gr, beta, then q, then dO by S's
// thread 0 right after (2). No block barrier after the loads: each reader waits on its groups' mbarriers (parity
// by chunk) before its first read in chunk c - 1 (S: k, scalars, q before phase A, dO before P^T dO, T before
// phase B; W: k, scalars, h, v, T before V_new, q and dO before phase 1; S reads h only after (1), which W passes
// after its wait), so S writes dh' for chunk c - 1 and W starts K h while q and dO still land.
// (bench/glr/sm90_bwd_notes.md, "The fused sweep's loads by TMA".) Every
// product is issued as in today's kernels, per element in the same k-step order, accumulators zeroed by the threads,
// every row and column partial summed in the same order (handed between the warpgroups as fp32 words in shared
// memory): on the host emulator the outputs equal today's path (GLR_DH_WGMMA=1 at 64-column slices) word for word
// but where noted in the notes.
// Included by gdn_bwd_mma.cuh after gdn_bwd_dh_wgmma.cuh (its helpers: StateBlock, state_block, SliceLane,
// slice_desc, for_state_pairs, store_pairs_bf16, the chunk kernels' epilogues and chunk_phase3).
#pragma once

#include <cstddef>
#include <type_traits>

#include "wgmma.cuh"

namespace glr::cuda::sm90::gdn_bwd {

inline constexpr int kFusedThreads = 256;  // S = warpgroup 0, W = warpgroup 1

// The full barriers (FusedSmem::bar) of the loads of chunk c - 1, issued during chunk c by TMA (fused_bwd_kernel's
// header): k with G, Gr, beta (W's first product, K h, and its epilogue); q; dO; T (in the E tile); h with v (in the
// vnl tile). Each completes one phase a chunk, chunk c's of parity c & 1: the prologue completes c_last & 1 phases,
// then the block's first chunk's (c_last's, loaded by cp.async: its phase an arrival without bytes), so every wait
// is unconditional.
enum : int { kFbKS, kFbQ, kFbO, kFbT, kFbHV, kFbCount };

// Every tile 1024-byte aligned (the struct's base aligned at run time; sizes are multiples of 1024). sw128 tiles
// (sw128_offset): a (R x 128) tile is two (R x 64) slabs, each slab the dh kernel's 64-column slice tile (the same
// bytes: slice_offset<64> is sw128_offset within a slab), so S reads half v of a tile at base + v R 128 bytes.
template <int kD = gdn::DK>
struct FusedSmem {
  __nv_bfloat16 q[C * kD];    // (C, K)
  __nv_bfloat16 k[C * kD];    // (C, K)
  __nv_bfloat16 dO[C * kD];   // (C, V); after the hand-off: y = scale e^G dO (phase C)
  __nv_bfloat16 vn[C * kD];   // (C, V) V_new (formed by W at the chunk's start: ChunkWgCore::form_vnew, X first)
  __nv_bfloat16 vnl[C * kD];  // (C, V) V_new - bf16(V_new) (v as loaded, then X's residual, then V_new's)
  __nv_bfloat16 dx[C * kD];   // (C, V) phases A, B: dV_new, then dX (half v over half v once read)
  __nv_bfloat16 h[kD * kD];   // (K, V) state entering the chunk
  __nv_bfloat16 dh[kD * kD];  // (K, V) bf16(dh'), dh' the gradient of the state leaving the chunk
  __nv_bfloat16 dhl[C * kD];  // (64, V) dh''s bf16 residual, rows 0..63 of K, then 64..127
  __nv_bfloat16 dA[C * C];    // (C, C)
  __nv_bfloat16 E[C * C];     // (C, C) E; first T (W's V_new = T X, S's phase B; dead at (1), before S's phase 1 second pass writes E)
  __nv_bfloat16 z[C * kD];    // (C, V) -beta e^G dX
  float G[C];
  float Gr[C];
  float beta[C];
  float dbv[kD / 64][C];  // the dbeta partials rowsum(dX . V) of each 64-column half (chunk_phase3's slices)
  RowPartials<4> rowp;
  ColPartials colp;
  float hdot[kD];
  float dG[C];
  float t3[C];
  float red[C * 4];  // S: rowsum(dX . V) partials of one half, one per lane of a row's quad
  int nonfinite[kD / 16];  // W: X of 16-column block b holds a NaN or Inf (ChunkWgCore::form_vnew)
  float* dh_out;  // dh0 at the block's state offset (segment 0 of its sequence, a.dh0 set), else null: parked through the sweep
  const float* dh_in;  // the gradient leaving the block's segment (dht, an Es slot, or null: 0), parked before the sweep
  std::uint64_t bar[kFbCount];  // the full barriers of chunk c - 1's TMA loads (kFbKS, ...)
  // The block's TMA origin (written before the sweep, read by the issuing threads: in registers through the sweep
  // it spilled): its first token's row, q / k's column h K, dO / v's column hv V, chunk 0's slot.
  alignas(16) int org[4];
};
template <int kD>
inline constexpr std::size_t fused_bwd_smem_bytes = sizeof(FusedSmem<kD>) + 1024;
static_assert(fused_bwd_smem_bytes<128> <= 227 * 1024, "the fused kernel's shared memory fits one block per SM");

// The kernel's parameter: the backward's arguments and the tensor maps of the tiles chunk c - 1 loads (boxes of 64
// features x 64 rows, 128B swizzle: one box is one (64 x 64) slab of a FusedSmem tile; fused_bwd_args).
struct FusedBwdArgs {
  GdnBwdArgs a;
  TmaMap2d q, k;   // (B T, H K): token rows, head h's features at columns h K ..
  TmaMap2d dO, v;  // (B T, HV V)
  TmaMap2d h;      // (S K, V): chunk slot s's state at rows s K
  TmaMap2d T;      // (S C, C): chunk slot s's T at rows s C
};

// The barriers: bar 0 (__syncthreads, both warpgroups) at the hand-offs; named ones below (kBarE: S's E, then W's
// dk products; kBarRows: S's phase-1 partials and dq row dots, then W's phase 3; S arrives, W syncs).
inline constexpr int kBarS = 1, kBarW = 2, kBarDhlFree = 3, kBarDhlReady = 4, kBarRows = 5, kBarE = 6;

// A word of global memory at a global address held in a register (global_addr: opaque, so that ptxas keeps it and
// offsets it by immediates, not forms it again from the kernel parameter at each use): ld.global / st.global, not the
// generic ld / st a pointer formed from an integer would get. (Host emulator: plain loads and stores.)
#if !defined(GLR_SM90_HOST_EMU)
__device__ __forceinline__ std::int64_t global_addr(const void* p) {
  return opaque(static_cast<std::int64_t>(__cvta_generic_to_global(p)));
}
__device__ __forceinline__ std::uint32_t ld_global_u32(std::int64_t g) {
  std::uint32_t x;
  asm volatile("ld.global.b32 %0, [%1];" : "=r"(x) : "l"(g));
  return x;
}
__device__ __forceinline__ void st_global_u32(std::int64_t g, std::uint32_t x) {
  asm volatile("st.global.b32 [%0], %1;" ::"l"(g), "r"(x));
}
#else
inline std::int64_t global_addr(const void* p) { return reinterpret_cast<std::int64_t>(p); }
inline std::uint32_t ld_global_u32(std::int64_t g) { return *reinterpret_cast<const std::uint32_t*>(g); }
inline void st_global_u32(std::int64_t g, std::uint32_t x) { *reinterpret_cast<std::uint32_t*>(g) = x; }
#endif

// chunk_phase3's barrier over W only.
struct WSync {
  __device__ __forceinline__ void operator()() const { named_barrier_sync(kBarW, 128); }
};

template <int kD = gdn::DK, bool kDelta = true>
__global__ void __launch_bounds__(kFusedThreads, 1) fused_bwd_kernel(const __grid_constant__ FusedBwdArgs p) {
  static_assert(kD == 128 && kDelta, "first form: K = V = 128 with the delta rule");
  const GdnBwdArgs& a = p.a;
  static_assert(C == 64, "wgmma's M = 64 rows = the chunk");
  constexpr int MT = kD / 64, NH = kD / 64;  // m64 row tiles of K; 64-column halves of V
  constexpr int kSlab = C * 64;              // elements of one (C x 64) slab
  extern __shared__ __align__(16) char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  FusedSmem<kD>& s = *reinterpret_cast<FusedSmem<kD>*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2,
            t4 = lane & 3, r0 = warp * 16;
  StateBlock sb;
  // segment rows (segments.cuh, the split h and dh passes' order; unsplit one segment a sequence): the block walks
  // its segment's chunks c_last .. c_first
  if (!state_block<64, kD, kDelta, true>(a, sb)) return;  // invalid packed offsets: the poison kernel writes every output
  const int HV = sb.HV, c_first = sb.c_begin, c_last = sb.c_end - 1;
  const std::uint32_t sq_ = smem_addr(s.q), sk = smem_addr(s.k), sdO = smem_addr(s.dO), svn = smem_addr(s.vn),
                      svnl = smem_addr(s.vnl), sdx = smem_addr(s.dx), sh = smem_addr(s.h), sdh = smem_addr(s.dh),
                      sdhl = smem_addr(s.dhl), sdA = smem_addr(s.dA), sE = smem_addr(s.E), sz = smem_addr(s.z);
  // The full barriers' addresses, formed at each use from the q tile's (opaque): held in a register of their own
  // through the sweep they cost S a spill.
  auto bar = [sq_](int i) {
    return static_cast<std::uint32_t>(opaque(static_cast<int>(sq_))) +
           static_cast<std::uint32_t>(offsetof(FusedSmem<kD>, bar)) + 8u * static_cast<std::uint32_t>(i);
  };

  // The block's first chunk (c_last, the only one that can be short: rows past len zero-filled) by cp.async: S q, k,
  // dO, T, G, Gr, beta; W h and v (each thread its own cp.async groups; waited, fenced and synced at (0)).
  auto load_s = [&](int c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0), tl = opaque(tid);
    const std::int64_t rs = opaque(sb.row_stride), qt = sb.tokb + static_cast<std::int64_t>(t0) * a.H;
    load_sw128<C, kD>(s.q, a.q + qt * kD, rs, len, tl);
    load_sw128<C, kD>(s.k, a.k + qt * kD, rs, len, tl);
    load_sw128<C, kD>(s.dO, a.dout + (sb.vtokb + static_cast<std::int64_t>(t0) * HV) * kD,
                      static_cast<std::int64_t>(HV) * kD, len, tl);
    load_sw128<C, C>(s.E, sb.Tw + static_cast<std::int64_t>(c) * C * C, C, C, tl);
    if (tl < C / 4) cp_async_16(smem_addr(s.G + tl * 4), sb.Gg + c * C + tl * 4, true);
    else if (tl < C / 2) cp_async_16(smem_addr(s.beta + (tl - C / 4) * 4), sb.Bg + c * C + (tl - C / 4) * 4, true);
    else if (tl < 3 * C / 4) cp_async_16(smem_addr(s.Gr + (tl - C / 2) * 4), sb.Grg + c * C + (tl - C / 2) * 4, true);
    cp_async_commit();
  };
  auto load_w = [&](int c) {
    const int tl = opaque(tid), t0 = c * C, len = min(C, sb.sq.len - t0);
    load_sw128<kD, kD>(s.h, a.hc + (sb.R + c) * kD * kD, kD, kD, tl);
    load_sw128<C, kD>(s.vnl, a.v + (sb.vtokb + static_cast<std::int64_t>(t0) * HV) * kD,  // rows past len zero
                      static_cast<std::int64_t>(HV) * kD, len, tl);
    cp_async_commit();
  };
  // Every later chunk c - 1 (whole: only a sequence's last chunk is short) by TMA, one thread issuing each group on
  // its full barrier once the group's tiles have no reader left in chunk c; the readers wait on the barrier (parity
  // c & 1: kFbKS's comment) before their first read. One box: features 64 sl .. 64 sl + 63 of 64 rows, a tile's slab sl.
  constexpr std::uint32_t kBox = 64 * 64 * 2;
  // S's thread 0 after (2) (the last readers: S's phase C of q, k, y over dO; W's dk of q, k, its phase 3 of G, Gr,
  // beta): k, G, Gr, beta (1-D bulk copies) on kFbKS, q on kFbQ, dO on kFbO, in that order (the TMA unit serves
  // them in order: W's V_new waits for k and the scalars only).
  auto issue_s = [&](int c) {
    const int4 o = *reinterpret_cast<const int4*>(s.org);
    const int row = o.x + c * C;  // the chunk's first token (fused_bwd_args: rows in int)
    const std::int64_t sc = static_cast<std::int64_t>(o.w + c) * C;  // the chunk's scalars (sb.Gg's offset + c C)
    mbarrier_arrive_expect_tx(bar(kFbKS), 2 * kBox + 3 * C * 4);
    bulk_copy_g2s(smem_addr(s.G), a.G + sc, C * 4, bar(kFbKS));
    bulk_copy_g2s(smem_addr(s.Gr), a.Gr + sc, C * 4, bar(kFbKS));
    bulk_copy_g2s(smem_addr(s.beta), a.Bc + sc, C * 4, bar(kFbKS));
#pragma unroll
    for (int sl = 0; sl < kD / 64; ++sl) tma_load_2d(sk + sl * C * 128, p.k, o.y + sl * 64, row, bar(kFbKS));
    mbarrier_arrive_expect_tx(bar(kFbQ), 2 * kBox);
#pragma unroll
    for (int sl = 0; sl < kD / 64; ++sl) tma_load_2d(sq_ + sl * C * 128, p.q, o.y + sl * 64, row, bar(kFbQ));
    mbarrier_arrive_expect_tx(bar(kFbO), 2 * kBox);
#pragma unroll
    for (int sl = 0; sl < kD / 64; ++sl) tma_load_2d(sdO + sl * C * 128, p.dO, o.z + sl * 64, row, bar(kFbO));
  };
  // W's thread 0 right after kBarRows (the last readers: W's dk part 1 of T (as E's tile), v's tile (vnl: V_new's
  // residual) and h, <h, dh'>; S's dq of h, its phase B of T, its E writes): T on kFbT, h and v on kFbHV.
  auto issue_w = [&](int c) {
    const int4 o = *reinterpret_cast<const int4*>(s.org);
    const int srow = o.w + c, row = o.x + c * C;
    mbarrier_arrive_expect_tx(bar(kFbT), kBox);
    tma_load_2d(sE, p.T, 0, srow * C, bar(kFbT));
    mbarrier_arrive_expect_tx(bar(kFbHV), (2 * kD / 64 + kD / 64) * kBox);
#pragma unroll
    for (int sl = 0; sl < kD / 64; ++sl) {
#pragma unroll
      for (int pt = 0; pt < kD / 64; ++pt)  // rows 64 pt .. of slab sl
        tma_load_2d(sh + sl * kD * 128 + pt * 64 * 128, p.h, sl * 64, srow * kD + pt * 64, bar(kFbHV));
      tma_load_2d(svnl + sl * C * 128, p.v, o.z + sl * 64, row, bar(kFbHV));
    }
  };
  // Chunk c's phase of full barrier i (parity c & 1), waited for by every reader thread.
  auto wait_load = [&](int i, int c) { mbarrier_wait_parity(bar(i), static_cast<std::uint32_t>(c) & 1u); };
  // Chunk c - 1's tiles to L2 at the top of chunk c (as dh_kernel's q, k), so that the TMA loads issued later in the
  // chunk hit L2. S: q, k, dO (a row half a thread), T; W: h (128 bytes a line), v (a row half a thread).
  auto prefetch_s = [&](int c) {
    const int tl = opaque(tid), row = tl >> 1, t0 = c * C;
    const std::int64_t qt = sb.tokb + static_cast<std::int64_t>(t0 + row) * a.H, off = (tl & 1) * (kD / 2);
    prefetch_l2(a.q + qt * kD + off);
    prefetch_l2(a.k + qt * kD + off);
    prefetch_l2(a.dout + (sb.vtokb + static_cast<std::int64_t>(t0 + row) * HV) * kD + off);
    if (tl < C) prefetch_l2(sb.Tw + static_cast<std::int64_t>(c) * C * C + tl * 64);
  };
  auto prefetch_w = [&](int c) {
    const int tl = opaque(tid);
    prefetch_l2(a.hc + (sb.R + c) * kD * kD + tl * 64);
    prefetch_l2(a.hc + (sb.R + c) * kD * kD + (tl + 128) * 64);
    prefetch_l2(a.v + (sb.vtokb + static_cast<std::int64_t>(c * C + (tl >> 1)) * HV) * kD + (tl & 1) * (kD / 2));
  };
  if (c_last >= c_first) {
    if (wg == 0) load_s(c_last);
    else load_w(c_last);
    cp_async_wait<0>();
  }
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < kFbCount; ++i) {
      mbarrier_init(bar(i), 1);  // one arrival (the issuing thread's) and its bytes
      // phases without bytes: c_last & 1 of them, then chunk c_last's, so that chunk c's phase has parity c & 1
      for (int j = 0; j <= (c_last & 1); ++j) mbarrier_arrive(bar(i));
    }
    fence_mbarrier_init();
    s.org[0] = static_cast<int>(sb.sq.begin);
    s.org[1] = sb.h * kD;
    s.org[2] = sb.hv * kD;
    s.org[3] = static_cast<int>(sb.R);
  }
  if (wg == 1 && tid < kD / 16) s.nonfinite[tid] = 0;  // (W zeroes them again at each chunk's end)
  // The gradient entering the segment goes to dh0 from segment 0 (written after the sweep). Block-uniform, so formed
  // once and parked in shared memory (as dh_wgmma_kernel's s.dh_out): in registers through the sweep it spilled.
  if (threadIdx.x == 0) {
    s.dh_out = sb.seg == 0 && a.dh0 ? a.dh0 + sb.hoff : nullptr;
    // The gradient leaving the block's segment: dht (or 0) for the last (unsplit: the whole sequence), else the Es
    // slot of its segment (pass A' and the reverse combine's: launch_fused_bwd), as dh_wgmma_kernel's pass C.
    s.dh_in = sb.seg == sb.nseg - 1 ? (a.dht ? a.dht + sb.hoff : nullptr) : a.Es + sb.soff + sb.seg * sb.slot_states;
  }
  fence_proxy_async();
  __syncthreads();  // (0) the last chunk's tiles visible to both warpgroups (W's first pass starts at once)

  if (wg == 0) {
    // ---------------- S: the dh chain (dh_wgmma_kernel<64>'s, both halves in one warpgroup) ----------------
    // dh' in wgmma accumulators: ds[v][mt][4n + 2 half + u] is row 64 mt + r0 + g8 + 8 half, column 64 v + 8n + 2 t4 + u.
    float ds[NH][MT][32];
    auto ds_row = [&](int mt, int half) { return mt * 64 + r0 + g8 + half * 8; };
    auto state_at = [&](int v, int mt, int n, int half) {  // the pair's place in a (K x V) fp32 state
      return static_cast<std::int64_t>(ds_row(mt, half)) * kD + v * 64 + n * 8 + 2 * t4;
    };
    const SliceLane<64> sl(lane);
    const ChunkWgCore<kD, kDelta, 1> core(s);  // dq's pieces (W's geometry: warp, g8, t4, r0 of tid & 127)
    const float* const dh_in = s.dh_in;  // (s.dh_in: formed before (0))
#pragma unroll
    for (int v = 0; v < NH; ++v)
      for_state_pairs<MT, 8>([&](int mt, int n, int half) {
        const float2 x = dh_in ? *reinterpret_cast<const float2*>(dh_in + state_at(v, mt, n, half)) : make_float2(0.f, 0.f);
        ds[v][mt][4 * n + 2 * half] = x.x;
        ds[v][mt][4 * n + 2 * half + 1] = x.y;
      });
    // dh''s bf16 residual rows 64 part .. 64 part + 63 to the dhl tile (as store_state_residual's words)
    auto write_residual = [&](auto part_c) {  // (part a constant: ds indexed by registers only, no stack)
      constexpr int part = decltype(part_c)::value;
#pragma unroll
      for (int v = 0; v < NH; ++v)
        for_state_pairs<1, 8>([&](int, int n, int half) {
          const float x0 = ds[v][part][4 * n + 2 * half], x1 = ds[v][part][4 * n + 2 * half + 1];
          *sl.word(s.dhl + v * kSlab, r0 + half * 8, n) = bf16x2_residual(x0, x1, pack_bf16x2(x0, x1));
        });
    };

    for (int c = c_last; c >= c_first; --c) {
      const int t0 = c * C, len = min(C, sb.sq.len - t0);
      // bf16(dh') (both halves: the state's B operand and W's dh tile) and the residual's first 64 rows
#pragma unroll
      for (int v = 0; v < NH; ++v)
        for_state_pairs<MT, 8>([&](int mt, int n, int half) {
          *sl.word(s.dh + v * kD * 64, ds_row(mt, half) - g8, n) =
              pack_bf16x2(ds[v][mt][4 * n + 2 * half], ds[v][mt][4 * n + 2 * half + 1]);
        });
      write_residual(std::integral_constant<int, 0>{});
      fence_proxy_async();
      named_barrier_sync(kBarS, 128);  // dh' visible to S's wgmmas
      if (c > c_first) prefetch_s(c - 1);
      wait_load(kFbKS, c);  // k, G, Gr, beta
      wait_load(kFbQ, c);   // q

      // Phase A: P^T (register-A fragments) from K Q^T by 32-column halves, as dh_wgmma_kernel.
      std::uint32_t pa[4][4];
      const PRow pr = p_row(s.Gr, r0, g8, t4);
#pragma unroll
      for (int hp = 0; hp < 2; ++hp) {
        float pt[16];
#pragma unroll
        for (int e = 0; e < 16; ++e) pt[e] = 0.f;
        wgmma_fence_operand(pt);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kD / 16; ++ks)
          wgmma_ss_n<32, 0, 0>(pt, desc_kmajor<C>(sk, 0, ks), desc_kmajor<C>(sq_, 32 * hp, ks), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(pt);
        p_fragments(pa, pt, hp, pr, a.scale, r0, g8, t4);
      }
      const float GrL = s.Gr[C - 1];
#pragma unroll 1
      for (int v = 0; v < NH; ++v) {  // dV_new[:, v] = e^{Gr_L - Gr_i} K dh'[:, v] + P^T dO[:, v] -> the dx tile's half v
        float acc[32];
#pragma unroll
        for (int e = 0; e < 32; ++e) acc[e] = 0.f;
        wgmma_fence_operand(acc);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kD / 16; ++ks)
          wgmma_ss_n<64, 0, 1>(acc, desc_kmajor<C>(sk, 0, ks), slice_desc<64, kD>(sdh + v * kD * 128, ks), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(acc);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float ed = gdn::exp_approx(GrL - s.Gr[r0 + g8 + half * 8]);
#pragma unroll
          for (int n = 0; n < 8; ++n) {
            acc[4 * n + half * 2] *= ed;
            acc[4 * n + half * 2 + 1] *= ed;
          }
        }
        wait_load(kFbO, c);  // dO (v = 1: its phase long complete)
        wgmma_fence_operand(acc);
        wgmma_fence_operand(pa);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_rs_n<64, 1>(acc, pa[ks], slice_desc<64, C>(sdO + v * C * 128, ks), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(acc);
        store_pairs_bf16<8>(r0, g8, [&](int n, int half) { return make_float2(acc[4 * n + 2 * half], acc[4 * n + 2 * half + 1]); },
                            [&](int i, int n) { return sl.word(s.dx + v * kSlab, i - g8, n); });
      }
      fence_proxy_async();
      named_barrier_sync(kBarS, 128);  // dV_new visible

      // Phase B per half: dX = T^T dV_new[:, v]; dh_kernel's dX epilogue, dX over dV_new's half v in the dx tile.
      wait_load(kFbT, c);  // T (in the E tile)
#pragma unroll 1
      for (int v = 0; v < NH; ++v) {
        float acc[32];
#pragma unroll
        for (int e = 0; e < 32; ++e) acc[e] = 0.f;
        wgmma_fence_operand(acc);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          wgmma_ss_n<64, 1, 1>(acc, desc_mnmajor<C>(sE, 0, ks), slice_desc<64, C>(sdx + v * C * 128, ks), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(acc);
        named_barrier_sync(kBarS, 128);  // every warp past the wgmmas that read dV_new's half v (and, v = 1, red)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = r0 + g8 + half * 8;
          const float bi = s.beta[i], zi = -bi * gdn::exp_approx(s.G[i]);
          // row i's pair 2 t4 of half v in v and dv, its address formed once a row and held (global_addr): column
          // pair n at 16 n bytes, an immediate offset. (As a.v + vrow + col at each pair, ptxas formed every address
          // again from the parameter at 255 registers: 5 instructions a pair, 160 a trip.)
          const std::int64_t vrow = (sb.vtokb + static_cast<std::int64_t>(t0 + i) * HV) * kD + v * 64 + 2 * t4;
          const std::int64_t vg = global_addr(a.v + vrow), dvg = global_addr(a.dv + vrow);
          float rsum = 0.f;
#pragma unroll
          for (int n = 0; n < 8; ++n) {
            const float x0 = acc[4 * n + 2 * half], x1 = acc[4 * n + 2 * half + 1];
            // v's pair (0 past len, as the dh kernels' zero-filled v tile), read from global: no tile for it
            const float2 vf = i < len ? unpack_bf16x2(ld_global_u32(vg + 16 * n)) : make_float2(0.f, 0.f);
            rsum = fmaf(x0, vf.x, rsum);
            rsum = fmaf(x1, vf.y, rsum);
            if (i < len) st_global_u32(dvg + 16 * n, pack_bf16x2(bi * x0, bi * x1));
            *sl.word(s.dx + v * kSlab, i - g8, n) = pack_bf16x2(x0, x1);
            *sl.word(s.z + v * kSlab, i - g8, n) = pack_bf16x2(zi * x0, zi * x1);
          }
          s.red[i * 4 + t4] = rsum;
        }
        named_barrier_sync(kBarS, 128);  // red visible
        if (tid < C) s.dbv[v][tid] = ((s.red[tid * 4] + s.red[tid * 4 + 1]) + s.red[tid * 4 + 2]) + s.red[tid * 4 + 3];
      }
      fence_proxy_async();  // dX, z (and dh', its residual) before W's and phase C's wgmmas
      __syncthreads();      // (1) hand-off to W: dX, dh', residual rows 0..63, dbv; from W: dA, V_new, h, pass 0's partials
      // Phase 1's second pass beside W's dk (ChunkWgCore's phase1_issue / phase1_finish as W ran them before): K K^T,
      // dX V_new^T -> E (over T: its readers, S's phase B and W's form_vnew, are past (1)), the partials of M and D
      // continuing from pass 0's, which W left in their slots (store_phase1: fp32 words, exact), and back there; W's
      // dk waits for E (kBarE) only before its (C x C) products.
      {
        Phase1Partials p1;
        core.load_phase1(s, p1);
        float x[32], y[32];
        core.template phase1_issue<false>(x, y, core.sk, core.sdx, [] {});
        wgmma_wait<0>();
        core.phase1_finish(s, a, 1, len, x, y, p1);
        core.store_phase1(s, p1);
      }
      fence_proxy_async();  // E (st.shared) before W's wgmmas
      named_barrier_arrive(kBarE, 256);
      // dq beside W's dk (ChunkWgCore<kD, kDelta, 1>'s pieces as W ran them before: the same thread geometry, tid &
      // 127): per 64-column part of K, scale e^G dO h^T, its row dot with Q, + dA K; stored; its row dots (part 0
      // then part 1, as before) to their slot of rowp, read by W's phase 3 after kBarRows. Before y overwrites dO.
      {
        const std::int64_t qtok0 = sb.tokb + static_cast<std::int64_t>(t0) * a.H,
                           tok0 = sb.vtokb + static_cast<std::int64_t>(t0) * HV;
        const auto f = core.row_factors(s, GrL);
        float rd[3][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};  // (rd[0] only: dq's)
        // (h: S reads it only after (1), which W passes after its wait on kFbHV; a wait here cost a spill)
#pragma unroll 1
        for (int kh = 0; kh < kD / 64; ++kh) {
          const int n0 = kh * 64;
          float aq[32];
          core.template rows_issue<false, false>(aq, core.sdO, core.sh, n0, 0u, 0u);
          wgmma_wait<0>();
          core.dq_epilogue_issue(aq, rd, f, s.q, a.scale, n0);
          wgmma_wait<0>();
          core.store_rows(a, a.dq, a.dqp, aq, n0, len, HV, qtok0, tok0);
        }
        store_phase2_rows(s, rd, r0, g8, core.slot, 0, 1);  // dq's row dots (W stores dk's)
      }
      named_barrier_arrive(kBarRows, 256);  // phase 1's partials, dq's row dots (S past its reads of h) for phase 3
      // Phase C beside W's dk: dh''s residual rows 64..127 once W is past rows 0..63, y = scale e^G dO over dO in its
      // own tile (W reads dO no more after the hand-off: dO V_new^T came before it, dq is S's, above), then
      // dh = e^{G_L} dh' + Q^T y + K^T z, per k-step Q^T y then K^T z.
      named_barrier_sync(kBarDhlFree, 256);  // W is past its wgmmas on residual rows 0..63
      write_residual(std::integral_constant<int, 1>{});
      fence_proxy_async();  // the residual before W's wgmmas
      named_barrier_arrive(kBarDhlReady, 256);
      named_barrier_sync(kBarS, 128);  // every S warp's dq wgmmas (reading dO) retired
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = r0 + g8 + half * 8;
        const float ey = a.scale * gdn::exp_approx(s.G[i]);
#pragma unroll
        for (int v = 0; v < NH; ++v)
#pragma unroll
          for (int n = 0; n < 8; ++n) {
            std::uint32_t* w = sl.word(s.dO + v * kSlab, i - g8, n);
            const float2 dof = unpack_bf16x2(*w);
            *w = pack_bf16x2(ey * dof.x, ey * dof.y);
          }
      }
      fence_proxy_async();  // y before S's wgmmas
      named_barrier_sync(kBarS, 128);  // y visible to S
      const float decay = gdn::exp_approx(s.G[C - 1]);
#pragma unroll
      for (int v = 0; v < NH; ++v)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int e = 0; e < 32; ++e) ds[v][mt][e] *= decay;
#pragma unroll
      for (int v = 0; v < NH; ++v) {  // (unrolled: ds indexed by constants only)
        wgmma_fence_operand(ds[v]);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < C / 16; ++ks)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            wgmma_ss_n<64, 1, 1>(ds[v][mt], desc_mnmajor<C>(sq_, 64 * mt, ks), slice_desc<64, C>(sdO + v * C * 128, ks), 1);
            wgmma_ss_n<64, 1, 1>(ds[v][mt], desc_mnmajor<C>(sk, 64 * mt, ks), slice_desc<64, C>(sz + v * C * 128, ks), 1);
          }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(ds[v]);
      }
      __syncthreads();  // (2) W's phases done (its phase 3 read G, Gr, beta), S's phase C too (q, k, y over dO)
      if (c > c_first && tid == 0) issue_s(c - 1);  // k, G, Gr, beta, q, dO of chunk c - 1 (waited for at their reads)
    }
    if (float* const dh_out = s.dh_out) {
#pragma unroll
      for (int v = 0; v < NH; ++v)
        for_state_pairs<MT, 8>([&](int mt, int n, int half) {
          *reinterpret_cast<float2*>(dh_out + state_at(v, mt, n, half)) =
              make_float2(ds[v][mt][4 * n + 2 * half], ds[v][mt][4 * n + 2 * half + 1]);
        });
    }
    return;
  }

  // ---------------- W: the chunk phases (ChunkWgCore's pieces, one warpgroup on every column) on S's tiles ----------------
  // ChunkWgCore<kD, kDelta, 1> (gdn_bwd_wgmma.cuh): the chunk kernels' phase 1 and 2 code with one warpgroup
  // running all 64 columns of each part (m64n64 wgmmas, 4 row partials a row: the slots of FusedSmem::rowp), composed
  // in the sweep's order: what needs nothing from S runs while S forms dV_new and dX (phases A, B): V_new and phase
  // 1's first pass (Q K^T, dO V_new^T -> dA; its partials to their slots, where S's second pass continues them).
  // Then, after the hand-off (1), dk and phase 3, while S runs phase 1's second pass (K K^T, dX V_new^T -> E) and
  // dq (scale e^G dO h^T + dA K, its row dots into rowp's slot 2) with the same pieces. Every product and sum as the
  // chunk kernels' per element. W's barriers are its own (kBarW) or shared with S (kBarE, kBarRows, the residual's),
  // the pieces have none.
  const ChunkWgCore<kD, kDelta, 1> core(s);
  for (int c = c_last; c >= c_first; --c) {
    const int t0 = c * C, len = min(C, sb.sq.len - t0);
    const std::int64_t sl0 = sb.R + c, qtok0 = sb.tokb + static_cast<std::int64_t>(t0) * a.H,
                       tok0 = sb.vtokb + static_cast<std::int64_t>(t0) * HV;
    if (c > c_first) prefetch_w(c - 1);
    // V_new's operands: k, h, v (in vnl), T (in E), beta, G; and Gr (chunk c_last's: cp.async, waited at (0))
    wait_load(kFbKS, c);
    wait_load(kFbHV, c);
    wait_load(kFbT, c);
    const float GL = s.G[C - 1], GrL = s.Gr[C - 1];
    float rd[3][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};

    // V_new and its residual (ChunkWgCore::form_vnew: the h pass's words, which it does not store here) from k, h, v (in
    // vnl), T (in E, which S's phase B reads beside it), beta, G; W's barrier.
    core.form_vnew(s, s.vnl, s.E, a.vt, WSync{});
    fence_proxy_async();  // V_new (st.shared) before the wgmmas
    named_barrier_sync(kBarW, 128);
    // Before the hand-off: phase 1's first pass (dA: S's dq reads it after the hand-off; its partials to their
    // slots, where S's second pass continues them).
    {
      Phase1Partials p1;
      float x[32], y[32];
      wait_load(kFbQ, c);  // q
      wait_load(kFbO, c);  // dO
      core.template phase1_issue<false>(x, y, core.sq, core.sdO, [] {});
      wgmma_wait<0>();
      core.phase1_finish(s, a, 0, len, x, y, p1);
      core.store_phase1(s, p1);
    }
    fence_proxy_async();  // dA (st.shared) before the wgmmas (W's dk, S's dq)
    __syncthreads();      // (1) S's dX, dh', residual rows 0..63, dbv; W's dA, V_new, pass 0's partials to S

    // After it: dk per part (E from S's phase 1 second pass, waited for before dk's (C x C) products).
    const auto f = core.row_factors(s, GrL);
#pragma unroll 1
    for (int kh = 0; kh < kD / 64; ++kh) {
      const int n0 = kh * 64;
      float ak[32], ax[32];
      if (kh == 1) named_barrier_sync(kBarDhlReady, 256);  // S has written residual rows 64..127
      core.template rows_issue<true, true>(ak, core.svn, core.sdh, n0, core.svnl, core.sdhl);
      core.template rows_issue<false, false>(ax, core.sdx, core.sh, n0, 0u, 0u);
      wgmma_wait<1>();
      if (kh == 0) named_barrier_arrive(kBarDhlFree, 256);  // this thread is past the wgmmas on rows 0..63
      core.dk_rows_epilogue(ak, rd, f, s.k, n0);
      wgmma_wait<0>();
      core.dk_dx_epilogue(ak, ax, rd, f, s.k, n0);
      if (kh == 0) named_barrier_sync(kBarE, 256);  // S's E visible
      core.dk_cc_issue(ak, n0);
      wgmma_wait<0>();
      core.store_rows(a, a.dk, a.dkp, ak, n0, len, HV, qtok0, tok0);
    }
    store_phase2_rows(s, rd, core.r0, core.g8, core.slot, 1, 3);  // dk's row dots (S stores dq's)
    core.form_hdot(s, s);
    named_barrier_sync(kBarRows, 256);  // W's row dots and hdot, and S's dq row dots
    // h, the vnl tile (v, then X's and V_new's residuals) and the E tile (T, then E) have no reader left in this
    // chunk: S arrived at kBarRows after dq (its last read of h; its phase B read T and its phase 1 second pass wrote
    // E before), W's last reads (dk's pieces, E's included, and <h, dh'>) came before it, and phase 3 reads none of
    // them, so chunk c - 1's h, v and T load beside phase 3 and S's phase C.
    if (c > c_first && tid == 0) issue_w(c - 1);
    chunk_phase3<kD, kDelta>(s, a, tid, len, NH, HV, tok0, sl0, GL, GrL, WSync{});
    named_barrier_sync(kBarW, 128);  // every W thread past phase 3 (its reads of G, Gr, beta, dbv)
    if (tid < kD / 16) s.nonfinite[tid] = 0;  // (read by this chunk's form_vnew only, before W's barriers above)
    __syncthreads();           // (2) W done with the chunk (then waits at chunk c - 1's form_vnew for its loads)
  }
}

}  // namespace glr::cuda::sm90::gdn_bwd

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn_bwd {
// Whether the fused reverse sweep takes this backward: GLR_FUSED_BWD=1, K = V = 128 with the delta rule, split or
// not (launch_fused_bwd below).
template <int kD, bool kDelta>
inline bool fused_bwd_takes(const GdnBwdArgs& a) {
  return kD == 128 && kDelta && fused_sweep_takes(a);  // (gdn_bwd_mma.cuh: the rule, for the workspace too)
}
// The fused kernel's parameter: d and the tensor maps of its TMA loads (FusedBwdArgs). False where a row
// coordinate would pass int32 (token rows B T, state rows S K: fused_sweep_takes leaves those backwards to the
// separate kernels, so this is a guard) or the driver refuses a map (gdn_bwd_mma_refusal already asks for 16-byte
// aligned q, k, v, dout and workspace).
template <int kD>
inline bool fused_bwd_args(const GdnBwdArgs& d, FusedBwdArgs& p) {
  const long long S = d.chunk_slots() * d.value_heads(), tokens = static_cast<long long>(d.B) * d.T;
  if (S * kD > 0x7fffffffLL || tokens + C > 0x7fffffffLL) return false;
  p.a = d;
  auto map = [](TmaMap2d& m, const void* g, long long rows, long long cols) {
    return make_tma_map_2d(m, g, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols),
                           static_cast<std::uint64_t>(cols) * 2, 64, 64, Swizzle::B128);
  };
  const long long HK = static_cast<long long>(d.H) * kD, HVK = static_cast<long long>(d.value_heads()) * kD;
  return map(p.q, d.q, tokens, HK) && map(p.k, d.k, tokens, HK) && map(p.dO, d.dout, tokens, HVK) &&
         map(p.v, d.v, tokens, HVK) && map(p.h, d.hc, S * kD, kD) && map(p.T, d.Tm, S * C, C);
}
// The h pass (as launch_state_passes runs it, split or not) then the fused kernel, 256 threads a block. marks[1]
// after the h pass (as today's). h_wgmma: the h pass on wgmma (1) or h_kernel (0); -1 as GLR_H_WGMMA says (the
// emulator check passes its own choice).
// Unsplit dh pass (not split, or the h pass alone: GdnBwdArgs::dh_split false): grid (1, sequences x HV), each block
// one whole sequence from dht. Split (seg::split(a) and a.dh_split; the rule gdn_bwd_split_plan or
// GLR_BACKWARD_SPLIT, few and long sequences: B1 T32768 H16 would be 16 blocks for 132 SMs): the split dh pass's
// pass A' and reverse combine as launch_state_passes runs them (launch_dh_ends, at the h pass's slice width a.vt:
// Es slot s then holds the gradient leaving segment s), then the sweep over every segment at once: grid (1, segment
// rows x HV), the split passes' rows (segments.cuh), each block its segment's chunks from that slot (the last
// segment from dht) and dh0 from segment 0. Pass A' runs in its Es-only mode (launch_dh_ends<.., true>:
// dh_wgmma_kernel's kEsOnly) and stores only the Es slots, the one thing carried over: dv (the sweep writes every
// one), dX, dh', its residual and the dbeta partials the sweep forms in shared memory, and the workspace carves no
// dx, dhc, dhcl, dbv here (chunk_inputs_stored, gdn_bwd_mma.cuh).
template <int kD, bool kDelta>
inline cudaError_t launch_fused_bwd(const GdnBwdArgs& a, cudaStream_t stream, cudaEvent_t* marks, int h_wgmma = -1) {
  if constexpr (kD != 128 || !kDelta) {
    return cudaErrorInvalidValue;
  } else {
    cudaError_t e = cudaSuccess;
    const int NT = (a.T + C - 1) / C;
    if (NT > 0) {
      const bool hw = h_wgmma < 0 ? bwd_h_wgmma() : h_wgmma == 1;
      e = a.vt == 64   ? launch_h_pass<64, kD, kDelta>(a, stream, hw)
          : a.vt == 32 ? launch_h_pass<32, kD, kDelta>(a, stream, hw)
                       : launch_h_pass<16, kD, kDelta>(a, stream, hw);
      if (e != cudaSuccess) return e;
    }
    if (marks && (e = cudaEventRecord(marks[1], stream)) != cudaSuccess) return e;
    GdnBwdArgs d = a;
    unsigned rows = static_cast<unsigned>(a.num_seqs() * a.value_heads());
    if (NT > 0 && seg::split(a) && a.dh_split) {
      const bool pf = bwd_dh_prefetch();
      e = a.vt == 64   ? launch_dh_ends<64, kD, kDelta, true>(a, stream, pf)
          : a.vt == 32 ? launch_dh_ends<32, kD, kDelta, true>(a, stream, pf)
                       : launch_dh_ends<16, kD, kDelta, true>(a, stream, pf);
      if (e != cudaSuccess) return e;
      rows = static_cast<unsigned>(seg::rows(a) * a.value_heads());
    } else {
      d.segs = 1;
    }
    FusedBwdArgs p;
    if (!fused_bwd_args<kD>(d, p)) return cudaErrorInvalidValue;
    e = launch_kernel(&fused_bwd_kernel<kD, kDelta>, dim3(1, rows), kFusedThreads, fused_bwd_smem_bytes<kD>, stream, p,
                      emu_smem);
#if defined(GLR_SM90_HOST_EMU)
    // every TMA load the kernel issued was waited for (a load nobody waited on never lands on the emulator)
    if (e == cudaSuccess && tma_drop_pending() != 0) e = cudaErrorLaunchFailure;
#endif
    return e;
  }
}
}  // namespace glr::cuda::sm90::gdn_bwd
#endif
