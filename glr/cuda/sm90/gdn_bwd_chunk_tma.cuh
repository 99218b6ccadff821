// glr/cuda/sm90/gdn_bwd_chunk_tma.cuh: chunk_tma_kernel, the backward's chunk kernel on wgmma with its loads off
// the critical path: chunk_wgmma_kernel's products, epilogues and phase 3 (the same code: gdn_bwd_wgmma.cuh's
// ChunkWgCore, phases 1 and 2, which both kernels call with their own loads as hooks, and chunk_phase3; the same
// wgmmas in the same k-order on the same accumulators, so the same words), on a persistent grid whose blocks walk the chunk
// items, every tile arriving by TMA (cp.async.bulk.tensor.2d, 128B swizzle) on an mbarrier, and each tile of the
// block's NEXT item issued as soon as the current item's last reader of that buffer is past. Opt-in,
// GLR_BWD_CHUNK_TMA=1 (env_switch.hpp; unset: chunk_wgmma_kernel; GLR_BWD_WGMMA=0 chunk_kernel): on an H100 (2026-12-05,
// docs/perf.md) its words equalled chunk_wgmma_kernel's at production shapes, and it ran 0.88x its speed (1.056 ms
// against 0.931 at B8 T4096 H16). Built by helper hAR, checked on the host emulator (tests/glr_sm90/emu_wgmma.hpp models TMA landing late, on
// the mbarrier wait) word for word against chunk_wgmma_kernel and against the float64 backward.
//
// Why: chunk_wgmma_kernel (one chunk a block, one block an SM at ~215 KB shared) loads its ~190 KB with cp.async
// and waits before its first product; the next block on the SM starts only when this one has ended. On the H200 at
// B8 T4096 H16 that is 62 waves of 14.8 us (0.916 ms), of which the loads (~5 us at a 1/132 share of the HBM, plus
// the latency) are exposed in every wave.
//
// The item walk: the old grid's slots (ncol chunk columns x rows, chunk_at's (bx, by)) numbered w = by ncol + bx;
// block b takes w = b, b + gridDim.x, ... (those chunk_at accepts; packed sequences leave some slots empty), so the
// blocks resident at once work on neighbouring chunks as the old grid's waves did. gridDim.x = min(items, SMs).
//
// Buffers and their refill points (thread 0 issues every TMA, after a block barrier that every reader of the
// buffer has passed; each full barrier completes once per item, parity = the block's item count & 1):
//   QK0  q, k features 0..63             refilled at P0 (kD = 128: the start of phase 2's second part, after part
//                                         0, the only reader of those slabs in phase 2, retired) / P2 (kD = 64)
//   QK1  q, k features 64..127 (kD 128)  P2: the barrier before phase 3 (every dq / dk product retired); waited
//                                         for halfway through the next item's Q K^T, dO V_new^T (features 0..63
//                                         issued as their own commit group before the wait: the same k-order)
//   H0   h, dh' rows 0..63 of K          P0 (kD 128) / P1 (kD 64); <h, dh'> (hdot) is formed in phase 2's first
//                                         part, while its products run, so h and dh' are free once read by wgmma
//   H1   h, dh' rows 64..127 (kD 128)    P1
//   V    dO, V_new (v without delta)     P1: the last part's barrier after its three row products (V_new dh'^T,
//                                         dX h^T, dO h^T) retired, the dq / dk products of E, dA in flight
//   X    dX (delta rule)                 P1
//   L    V_new's residual, dh''s residual rows 0..63   P1
//   D    dh''s residual rows 64..127 (kD 128): the current item's, after part 0's V_new dh'^T retired (as before)
//   S0,1 G, Gr, beta, the dbeta partials (1-D bulk copies), double buffered: item i + 2's into item i's buffer,
//        inside phase 3 (its barrier between the per-row sums, the last readers, and warp 0's scan)
// Rows past a chunk's tokens (its last chunk): the token tiles' TMA boxes (q, k, dO; v without the delta rule) read
// the next tokens (or zeros past the matrix), which the threads overwrite with zeros before the first product, as
// the old loads' zero fill: the same bytes.
// Shared memory: chunk_wgmma_kernel's layout with the scalars twice and 10 mbarriers: 221,888 B + 1,024 slack at
// kD = 128 (limit 232,448), one block an SM.
#pragma once

#include <type_traits>

#include "wgmma.cuh"

namespace glr::cuda::sm90::gdn_bwd {

// The full barriers (ChunkTmaSmem::bar).
enum : int { kTbQK0, kTbQK1, kTbH0, kTbH1, kTbV, kTbX, kTbL, kTbD, kTbS0, kTbS1, kTbCount };

template <int kD = gdn::DK>
struct ChunkTmaSmem {  // tiles as ChunkWgSmem (sw128_offset, 1024-byte aligned)
  __nv_bfloat16 q[C * kD];
  __nv_bfloat16 k[C * kD];
  __nv_bfloat16 dO[C * kD];
  __nv_bfloat16 vn[C * kD];
  __nv_bfloat16 vnl[C * kD];
  __nv_bfloat16 dx[C * kD];
  __nv_bfloat16 h[kD * kD];
  __nv_bfloat16 dh[kD * kD];
  __nv_bfloat16 dhl[C * kD];
  __nv_bfloat16 dA[C * C];
  __nv_bfloat16 E[C * C];
  float G[2][C];  // the scalars, two items' (item i in buffer i & 1)
  float Gr[2][C];
  float beta[2][C];
  float dbv[2][8][C];
  RowPartials<8> rowp;
  ColPartials colp;
  float hdot[kD];
  float dG[C];
  float t3[C];
  std::uint64_t bar[kTbCount];
};
template <int kD>
inline constexpr std::size_t chunk_tma_smem_bytes = sizeof(ChunkTmaSmem<kD>) + 1024;
static_assert(chunk_tma_smem_bytes<128> <= 227 * 1024, "the TMA chunk kernel's shared memory fits one block per SM");

// What the shared epilogues and phase 3 (gdn_bwd_mma.cuh: phase1_epilogue, ..., chunk_phase3) read by field name,
// with the scalars of one buffer.
template <int kD>
struct ChunkTmaView {
  float (&G)[C];
  float (&Gr)[C];
  float (&beta)[C];
  float (&dbv)[8][C];
  RowPartials<8>& rowp;
  ColPartials& colp;
  float (&hdot)[kD];
  float (&dG)[C];
  float (&t3)[C];
  __nv_bfloat16 (&dA)[C * C];
  __nv_bfloat16 (&E)[C * C];
  __nv_bfloat16 (&h)[kD * kD];
  __nv_bfloat16 (&dh)[kD * kD];
};

// The kernel's parameter: the backward's arguments, the tensor maps of its tiles (boxes of 64 features x 64 rows,
// 128B swizzle; launch_chunk_tma), the item walk.
struct ChunkTmaArgs {
  GdnBwdArgs a;
  TmaMap2d q, k;  // (B T, H K): token rows, head h's features at columns h K ..
  TmaMap2d dO;    // (B T, HV V)
  TmaMap2d vn;    // delta rule: (S C, V) V_new, slot s's rows at s C; without it v, (B T, HV V)
  TmaMap2d vnl, dx;  // (S C, V) (delta rule)
  TmaMap2d h, dh, dhl;  // (S K, V): slot s's (K x V) at rows s K
  int ncol = 0;   // chunk columns of the item numbering (chunk_at's bx range)
  int items = 0;  // ncol x rows
};

template <int kD = gdn::DK, bool kDelta = true>
__global__ void __launch_bounds__(kChunkWgThreads, 1) chunk_tma_kernel(const __grid_constant__ ChunkTmaArgs p) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(kChunkWgThreads == 256 && C == 64, "two warpgroups, wgmma's M = 64 rows = the chunk");
  const GdnBwdArgs& a = p.a;
  constexpr int KH = kD / 64;  // 64-column parts of K (phase 2)
  constexpr int NT_ = kChunkWgThreads;
  constexpr std::uint32_t kBox = 64 * 64 * 2;  // bytes of one TMA box
  extern __shared__ __align__(16) char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  ChunkTmaSmem<kD>& s = *reinterpret_cast<ChunkTmaSmem<kD>*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  const ChunkWgCore<kD, kDelta> core(s);  // the thread geometry, the tiles' addresses, phases 1 and 2
  const int tid = core.tid;
  const std::uint32_t sq_ = core.sq, sk = core.sk, sdO = core.sdO, svn = core.svn, svnl = core.svnl, sdx = core.sdx,
                      sh = core.sh, sdh = core.sdh, sdhl = core.sdhl;
  const std::uint32_t bar0 = smem_addr(s.bar);
  auto bar = [bar0](int i) { return bar0 + 8u * static_cast<std::uint32_t>(i); };
  const int stride = static_cast<int>(gridDim.x);
  // The first item at or after w (stepping by the grid) that has a chunk; p.items if none.
  auto next_item = [&](int w) {
    ChunkAt t;
    for (; w < p.items; w += stride)
      if (chunk_at(a, w % p.ncol, w / p.ncol, t)) break;
    return w < p.items ? w : p.items;
  };
  auto item_at = [&](int w, ChunkAt& t) { chunk_at(a, w % p.ncol, w / p.ncol, t); };

  // ---- the loads (thread 0): group G of item t (one phase of barrier G: its bytes, then its boxes)
  // One box: features f0 .. f0 + 63 (columns c0_) of rows c1_ .. c1_ + 63 to shared address dst.
  auto box = [&](std::uint32_t dst, const TmaMap2d& m, int col, std::int64_t row, int b) {
    tma_load_2d(dst, m, col, static_cast<int>(row), bar(b));
  };
  // A (C x kD) token tile (q, k: head h; dO, v: value head hv), slabs sl0_ .. sl1_ - 1.
  auto token_tile = [&](std::uint32_t dst, const TmaMap2d& m, int head, const ChunkAt& t, int sl_lo, int sl_hi, int b) {
    for (int sl = sl_lo; sl < sl_hi; ++sl) box(dst + sl * C * 128, m, head * kD + sl * 64, t.trow, b);
  };
  // A (C x kD) workspace tile of slot t.sl0 (V_new, its residual, dX), all slabs.
  auto slot_tile = [&](std::uint32_t dst, const TmaMap2d& m, const ChunkAt& t, int b) {
    for (int sl = 0; sl < KH; ++sl) box(dst + sl * C * 128, m, sl * 64, t.sl0 * C, b);
  };
  // Rows 64 pt .. 64 pt + 63 of a (kD x kD) slot tile (h, dh'), every slab, into a (kD x kD) tile.
  auto state_rows = [&](std::uint32_t dst, const TmaMap2d& m, const ChunkAt& t, int pt, int b) {
    for (int sl = 0; sl < KH; ++sl) box(dst + sl * kD * 128 + pt * 64 * 128, m, sl * 64, t.sl0 * kD + pt * 64, b);
  };
  // dh''s residual rows 64 pt .. 64 pt + 63 into the (64 x kD) tile.
  auto resid_rows = [&](const ChunkAt& t, int pt, int b) {
    for (int sl = 0; sl < KH; ++sl) box(sdhl + sl * C * 128, p.dhl, sl * 64, t.sl0 * kD + pt * 64, b);
  };
  auto issue = [&](int g, const ChunkAt& t) {
    switch (g) {
      case kTbQK0:  // q, k slab 0 (kD = 64: the whole tiles)
        mbarrier_arrive_expect_tx(bar(g), 2 * kBox);
        token_tile(sq_, p.q, t.h, t, 0, 1, g);
        token_tile(sk, p.k, t.h, t, 0, 1, g);
        break;
      case kTbQK1:
        mbarrier_arrive_expect_tx(bar(g), 2 * kBox);
        token_tile(sq_, p.q, t.h, t, 1, 2, g);
        token_tile(sk, p.k, t.h, t, 1, 2, g);
        break;
      case kTbH0:
      case kTbH1:
        mbarrier_arrive_expect_tx(bar(g), 2 * KH * kBox);
        state_rows(sh, p.h, t, g - kTbH0, g);
        state_rows(sdh, p.dh, t, g - kTbH0, g);
        break;
      case kTbV:
        mbarrier_arrive_expect_tx(bar(g), 2 * KH * kBox);
        token_tile(sdO, p.dO, t.hv, t, 0, KH, g);
        if constexpr (kDelta)
          slot_tile(svn, p.vn, t, g);
        else
          token_tile(svn, p.vn, t.hv, t, 0, KH, g);
        break;
      case kTbX:
        mbarrier_arrive_expect_tx(bar(g), KH * kBox);
        slot_tile(sdx, p.dx, t, g);
        break;
      case kTbL:
        mbarrier_arrive_expect_tx(bar(g), (kDelta ? 2 : 1) * KH * kBox);
        if constexpr (kDelta) slot_tile(svnl, p.vnl, t, g);
        resid_rows(t, 0, g);
        break;
      case kTbD:
        mbarrier_arrive_expect_tx(bar(g), KH * kBox);
        resid_rows(t, 1, g);
        break;
      default: {  // kTbS0, kTbS1: buffer g - kTbS0
        const int b = g - kTbS0, nsl = kD / a.vt;
        const std::int64_t o = t.sl0 * C;
        mbarrier_arrive_expect_tx(bar(g), (kDelta ? 3 + nsl : 2) * C * 4);
        bulk_copy_g2s(smem_addr(s.G[b]), a.G + o, C * 4, bar(g));
        bulk_copy_g2s(smem_addr(s.Gr[b]), a.Gr + o, C * 4, bar(g));
        if constexpr (kDelta) {
          bulk_copy_g2s(smem_addr(s.beta[b]), a.Bc + o, C * 4, bar(g));
          for (int sl = 0; sl < nsl; ++sl)
            bulk_copy_g2s(smem_addr(s.dbv[b][sl]), a.dbv + (t.R * nsl + static_cast<std::int64_t>(sl) * t.NT) * C + t.t0,
                          C * 4, bar(g));
        }
      }
    }
  };
  // The groups of one item that the previous item refills (all but D and the scalars).
  auto issue_item = [&](const ChunkAt& t) {
    issue(kTbQK0, t);
    if constexpr (KH == 2) issue(kTbQK1, t);
    issue(kTbV, t);
    if constexpr (kDelta) issue(kTbX, t);
    issue(kTbH0, t);
    if constexpr (KH == 2) issue(kTbH1, t);
    issue(kTbL, t);
  };

  int w = next_item(static_cast<int>(blockIdx.x));
  if (tid == 0) {
    for (int i = 0; i < kTbCount; ++i) mbarrier_init(bar(i), 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (tid == 0 && w < p.items) {  // the prologue: the first item's tiles and scalars, the second's scalars
    ChunkAt t;
    item_at(w, t);
    issue_item(t);
    issue(kTbS0, t);
    const int w1 = next_item(w + stride);
    if (w1 < p.items) {
      item_at(w1, t);
      issue(kTbS1, t);
    }
  }

#pragma unroll 1
  for (int it = 0; w < p.items; ++it) {
    const int nxt = next_item(w + stride);  // the block's next item (p.items: none)
    ChunkAt at;
    item_at(w, at);
    const int HV = at.HV, len = at.len;
    const std::int64_t sl0 = at.sl0, qtok0 = at.qtok0, tok0 = at.tok0;
    const std::uint32_t ph = static_cast<std::uint32_t>(it & 1);
    const int buf = it & 1;
    ChunkTmaView<kD> v{s.G[buf], s.Gr[buf], s.beta[buf], s.dbv[buf], s.rowp, s.colp, s.hdot,
                       s.dG,     s.t3,     s.dA,        s.E,        s.h,    s.dh};
    // the next item's group g, by thread 0 (after the barrier that frees its buffers)
    auto refill = [&](int g) {
      if (tid == 0 && nxt < p.items) {
        ChunkAt t;
        item_at(nxt, t);
        issue(g, t);
      }
    };

    mbarrier_wait_parity(bar(kTbQK0), ph);
    mbarrier_wait_parity(bar(kTbV), ph);
    mbarrier_wait_parity(bar(kTbS0 + buf), static_cast<std::uint32_t>((it >> 1) & 1));
    // q, k features 64..127 (QK1, the last tiles to land) are waited for in pass 0, after its first half
    if (len < C) {  // the token tiles' rows past the chunk's tokens to zero (block-uniform), every slab
      if constexpr (KH == 2) mbarrier_wait_parity(bar(kTbQK1), ph);
      auto zero_rows = [&](__nv_bfloat16* t) {
        const int per = (C - len) * 8;  // 16-byte pieces a slab
        for (int e = tid; e < per * KH; e += NT_) {
          const int sl = e / per, r = len + (e % per) / 8, cc = e % 8;
          *reinterpret_cast<uint4*>(reinterpret_cast<char*>(t) + sl * C * 128 + r * 128 + cc * 16) = make_uint4(0u, 0u, 0u, 0u);
        }
      };
      zero_rows(s.q);
      zero_rows(s.k);
      zero_rows(s.dO);
      if constexpr (!kDelta) zero_rows(s.vn);
      fence_proxy_async();
      __syncthreads();
    }

    const float GL = v.G[C - 1], GrL = v.Gr[C - 1];
    // Phase 1 (ChunkWgCore::phase1). Pass 0 at kD = 128: features 0..63 (q, k slab 0, in place since P0) as one
    // commit group, then the wait for slab 1 (the last tiles to land: P2) and features 64..127 as a second group.
    core.template phase1<true>(v, a, len, [&] { mbarrier_wait_parity(bar(kTbQK1), ph); },
                               [&] { mbarrier_wait_parity(bar(kTbX), ph); });  // dX before pass 1
    fence_proxy_async();  // dA, E (st.shared) before the wgmmas
    __syncthreads();
    mbarrier_wait_parity(bar(kTbH0), ph);
    if constexpr (KH == 2) mbarrier_wait_parity(bar(kTbH1), ph);
    mbarrier_wait_parity(bar(kTbL), ph);

    // Phase 2 (ChunkWgCore::phase2), with the refills P0 and P1; its row dots to their slots (hdot is in place).
    core.phase2(
        s, v, a, len, HV, qtok0, tok0, GrL,
        [&](int kh) {
          if (kh == 1) {
            __syncthreads();  // both warpgroups are past part 0 (all its products retired): P0
            refill(kTbQK0);   // q, k features 0..63: read in phase 1 and part 0 only
            refill(kTbH0);    // h, dh' rows 0..63: read in part 0 (and by hdot, formed there)
            mbarrier_wait_parity(bar(kTbD), ph);  // dh''s residual, rows 64..127
          }
        },
        [](int) {},  // (<h, dh'> is formed in part 0 by ChunkWgCore::phase2)
        [&](int) {
          __syncthreads();  // both warpgroups are past the wgmmas that read rows 0..63 of the residual (retired)
          if (tid == 0) issue(kTbD, at);  // dh''s residual rows 64..127 into the freed tile
        },
        [&](int kh) {
          if (kh == KH - 1) {
            __syncthreads();  // both warpgroups' row products retired (dk's and dq's last products in flight): P1
            refill(kTbV);
            if constexpr (kDelta) refill(kTbX);
            refill(kTbL);
            refill(KH == 2 ? kTbH1 : kTbH0);
          }
        });
    __syncthreads();  // every product of the item retired: P2
    refill(KH == 2 ? kTbQK1 : kTbQK0);
    const int nsl = kD / a.vt;
    // Phase 3; at its barrier (the per-row sums, the scalars' last readers, done) the item after next's scalars
    // into this item's buffer.
    chunk_phase3<kD, kDelta>(v, a, tid, len, nsl, HV, tok0, sl0, GL, GrL, [&] {
      __syncthreads();
      if (tid == 0 && nxt < p.items) {
        const int nn = next_item(nxt + stride);
        if (nn < p.items) {
          ChunkAt t;
          item_at(nn, t);
          issue(kTbS0 + buf, t);
        }
      }
    });
    w = nxt;
  }
}

}  // namespace glr::cuda::sm90::gdn_bwd

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn_bwd {
// The persistent grid's blocks: the multiprocessors of the current device (one block each: the shared memory), 2
// on the host emulator (so each emulated block walks several items).
inline int chunk_tma_blocks() {
#if defined(GLR_SM90_HOST_EMU)
  return 2;
#else
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1)
    return 132;
  return sms;
#endif
}
// The TMA chunk kernel over the chunk grid (ncol x rows, chunk_at's slots). Returns false (nothing launched, e
// untouched) where it does not take a: a coordinate past int32 (B T or S K rows), or a tensor map the driver
// refuses; the caller then runs chunk_wgmma_kernel.
template <int kD, bool kDelta>
inline bool launch_chunk_tma(const GdnBwdArgs& a, int ncol, int rows, cudaStream_t stream, char* emu_smem,
                             cudaError_t& e) {
  const long long S = a.chunk_slots() * a.value_heads();
  const long long tokens = static_cast<long long>(a.B) * a.T;
  const long long items = static_cast<long long>(ncol) * rows;
  constexpr long long kMax = 0x7fffffffLL;
  if (S * kD > kMax || tokens + C > kMax || items > kMax || items < 1) return false;
  ChunkTmaArgs p;
  p.a = a;
  p.ncol = ncol;
  p.items = static_cast<int>(items);
  const int HV = a.value_heads();
  auto map = [](TmaMap2d& m, const void* g, long long r, long long cols) {
    return make_tma_map_2d(m, g, static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(cols),
                           static_cast<std::uint64_t>(cols) * 2, 64, 64, Swizzle::B128);
  };
  bool ok = map(p.q, a.q, tokens, static_cast<long long>(a.H) * kD) && map(p.k, a.k, tokens, static_cast<long long>(a.H) * kD) &&
            map(p.dO, a.dout, tokens, static_cast<long long>(HV) * kD) && map(p.h, a.hc, S * kD, kD) &&
            map(p.dh, a.dhc, S * kD, kD) && map(p.dhl, a.dhcl, S * kD, kD);
  if constexpr (kDelta)
    ok = ok && map(p.vn, a.vn, S * C, kD) && map(p.vnl, a.vnl, S * C, kD) && map(p.dx, a.dx, S * C, kD);
  else
    ok = ok && map(p.vn, a.v, tokens, static_cast<long long>(HV) * kD);
  if (!ok) return false;
  // (its shared-memory limit: launch_kernel, per kernel pointer and device)
  const int blocks = static_cast<int>(items < chunk_tma_blocks() ? items : chunk_tma_blocks());
  e = launch_kernel(&chunk_tma_kernel<kD, kDelta>, dim3(static_cast<unsigned>(blocks)), kChunkWgThreads,
                    chunk_tma_smem_bytes<kD>, stream, p, emu_smem);
#if defined(GLR_SM90_HOST_EMU)
  // every TMA load the kernel issued was waited for (a load nobody waited on never lands on the emulator)
  if (e == cudaSuccess && tma_drop_pending() != 0) e = cudaErrorLaunchFailure;
#endif
  return true;
}
}  // namespace glr::cuda::sm90::gdn_bwd
#endif
