// glr/cuda/sm90/gdn_bwd_dh2.cuh: the backward's dh pass with the 2-GEMM chain, warp-specialized (sm_90a, wgmma):
// dh2_kernel, opt-in GLR_DH_2GEMM=1 (bwd_dh_2gemm, env_switch.hpp) for the unsplit pass at 64-column slices with the
// delta rule (K = V = 64 or 128); every other case keeps dh_wgmma_kernel / dh_kernel. NOT YET RUN ON A GPU.
//
// Same grid (one block per (64-column slice, sequence x value head)), same inputs, same outputs as dh_wgmma_kernel
// (dh' bf16 and its residual per chunk, dX, dv, the dbeta partials, dh0), the algebra of the dh update reorganized
// so that only two products depend on dh' (bench/glr/sm90_bwd_notes.md, "The dh pass as a 2-GEMM chain"):
//   dh = e^{G_L} dh' + Q^T y + K^T z0 - W^T u,   u = e^{G_L - G} . (K dh'),   W = T diag(beta e^G) K,
//   y = scale e^G . dO,   z0 = -beta e^G . (T^T (P^T dO))       (Q^T y + K^T z0 = Z: no dh' in it).
// Two warpgroups, 256 threads, one block per SM (the tiles of two chunks: 220 KB shared):
//   C (warpgroup 0) holds dh' (fp32 accumulators) and runs, per chunk c: bf16(dh') -> snapshot tile (its residual
//     to global from the registers); u = K dh'; dh' *= e^{G_L} and Z's 16 wgmmas queued behind it (they do not wait
//     for u); u' = bf16(-e^{G_L - G} . u); dh += W^T u'. Dependent chain: K dh' -> u' -> W^T u'.
//   O (warpgroup 1) runs one chunk ahead and one behind: P(c - 1) = K Q^T -> P^T (register-A), y, P^T dO, z0 = -b .
//     T^T (P^T dO), W = (T diag b) K for chunk c - 1 while C runs chunk c; then E(c) from C's snapshot of chunk c:
//     u again (K dh', the same product), dV_new = e^{Gr_L - Gr} u + P^T dO, dX = T^T dV_new, dv, dX, the dbeta
//     partials, bf16(dh') to global: dh_wgmma_kernel's products and epilogues, in its order, on the same snapshot.
// Tiles of chunk c live in parity c & 1 (q, k, T, dO, G, Gr, beta, W, y, z0, the snapshot); v, O's scratch tile and
// C's u' tile are single. Barriers (named; counts are threads): kBarC (C, 128), kBarO (O, 128), and per parity
// kBarPrep (O arrives after P(c) and chunk c's loads: C may start chunk c), kBarSnap (C arrives after the snapshot of
// chunk c: O may run E(c)), kBarDone (C arrives after chunk c's wgmmas: O may refill parity c & 1). A barrier id
// is reused two chunks later only, after the other side has passed it (each side waits for the other in between).
// Included by gdn_bwd_mma.cuh after gdn_bwd_dh_wgmma.cuh (StateBlock, state_block, slice tiles, p_fragments,
// store_state_residual, store_pairs_bf16, dx_epilogue, store_dbeta_partials).
#pragma once

#include "wgmma.cuh"

namespace glr::cuda::sm90::gdn_bwd {

inline constexpr int kDh2Threads = 256;  // C = warpgroup 0, O = warpgroup 1
inline constexpr int kDh2VT = 64;        // slice width (wgmma N of the chain's products)

template <int kD = gdn::DK>
struct Dh2Smem {  // every tile a multiple of 1024 bytes, the struct's base aligned to 1024 at run time
  __nv_bfloat16 q[2][C * kD];       // (C, K) sw128, chunk parity
  __nv_bfloat16 k[2][C * kD];       // (C, K) sw128
  __nv_bfloat16 W[2][C * kD];       // (C, K) sw128: W = T diag(beta e^G) K (bf16)
  __nv_bfloat16 T[2][C * C];        // (C, C) sw128
  __nv_bfloat16 dO[2][C * kDh2VT];  // (C, 64) slice tiles
  __nv_bfloat16 y[2][C * kDh2VT];   // scale e^G dO
  __nv_bfloat16 z0[2][C * kDh2VT];  // -beta e^G (T^T P^T dO)
  __nv_bfloat16 snap[2][kD * kDh2VT];  // (K, 64) bf16(dh'): C's K dh', O's K dh' and the dhc store
  __nv_bfloat16 v[C * kDh2VT];      // v of the chunk O's E runs on (dbeta's rowsum(dX . V))
  __nv_bfloat16 u[C * kDh2VT];      // C: -e^{G_L - G} K dh' (bf16), W^T's B
  __nv_bfloat16 scr[C * kDh2VT];    // O: P^T dO (P), then dV_new (E)
  float G[2][C];
  float Gr[2][C];
  float beta[2][C];
  float red[C * 4];  // rowsum(dX . V) partials, one per lane of a row's quad
};
template <int kD>
inline constexpr std::size_t dh2_smem_bytes = sizeof(Dh2Smem<kD>) + 1024;
static_assert(dh2_smem_bytes<128> <= 227 * 1024, "one block per SM");

inline constexpr int kDh2BarC = 1, kDh2BarO = 2, kDh2BarPrep = 3, kDh2BarSnap = 5, kDh2BarDone = 7;  // + parity

// (T diag(b)) of chunk tile T as register-A fragments of k-step ks (rows r0 + g8 (+ 8), columns 16 ks + 2 t4 (+ 1)
// (+ 8)), b_j = beta_j e^{G_j}, each product rounded once to bf16: W's A operand.
__device__ __forceinline__ void tb_fragments(std::uint32_t (&ta)[4][4], const __nv_bfloat16* T, const float* G,
                                             const float* beta, int r0, int g8, int t4) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = r0 + g8 + 8 * (e & 1), j = 16 * ks + 2 * t4 + 8 * (e >> 1);
      const float2 t = unpack_bf16x2(
          *reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const char*>(T) + sw128_offset<C>(i, j)));
      ta[ks][e] = pack_bf16x2(t.x * (beta[j] * gdn::exp_approx(G[j])), t.y * (beta[j + 1] * gdn::exp_approx(G[j + 1])));
    }
}

template <int kD = gdn::DK, bool kDelta = true>
__global__ void __launch_bounds__(kDh2Threads, 1) dh2_kernel(const __grid_constant__ GdnBwdArgs a) {
  static_assert(kD == 64 || kD == 128, "K = V = 64 or 128");
  static_assert(kDelta, "the 2-GEMM chain is the delta rule's (without it dh' has no product on its chain)");
  static_assert(C == 64, "wgmma's M = 64 rows = the chunk");
  constexpr int kVT = kDh2VT, NA = kVT / 2, NN = kVT / 8, MT = kD / 64;
  extern __shared__ __align__(16) char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  Dh2Smem<kD>& s = *reinterpret_cast<Dh2Smem<kD>*>(smem_raw + ((1024u - (raw & 1023u)) & 1023u));
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2,
            t4 = lane & 3, r0 = warp * 16;
  StateBlock sb;
  if (!state_block<kVT, kD, kDelta>(a, sb)) return;  // invalid packed offsets: the poison kernel writes every output
  const int NT = sb.sq.nch;
  const SliceLane<kVT> sl(lane);
  const auto dSlice = [&](const __nv_bfloat16* t, int ks) { return slice_desc<kVT, C>(smem_addr(t), ks); };

  if (wg == 0) {
    // ---------------- C: the chain (dh' in registers) ----------------
    __nv_bfloat16* dhlg = a.dhcl + sb.R * kD * kD + sb.v0;
    float ds[MT][NA];  // ds[mt][4n + 2 half + u]: row 64 mt + r0 + g8 + 8 half, column 8n + 2 t4 + u
    auto ds_row = [&](int mt, int half) { return mt * 64 + r0 + g8 + half * 8; };
    auto state_at = [&](int mt, int n, int half) {
      return sb.hoff + static_cast<std::int64_t>(ds_row(mt, half)) * kD + n * 8 + 2 * t4;
    };
    for_state_pairs<MT, NN>([&](int mt, int n, int half) {
      const float2 x = a.dht ? *reinterpret_cast<const float2*>(a.dht + state_at(mt, n, half)) : make_float2(0.f, 0.f);
      ds[mt][4 * n + 2 * half] = x.x;
      ds[mt][4 * n + 2 * half + 1] = x.y;
    });
    auto ds_pair = [&](int mt, int n, int half) {
      return make_float2(ds[mt][4 * n + 2 * half], ds[mt][4 * n + 2 * half + 1]);
    };
    for (int c = NT - 1; c >= 0; --c) {
      const int p = c & 1;
      named_barrier_sync(kDh2BarPrep + p, 256);  // chunk c's tiles, W, y, z0 ready; snap[p] free (O's E(c + 2) done)
      const std::uint32_t kc = smem_addr(s.k[p]), qc = smem_addr(s.q[p]), sp = smem_addr(s.snap[p]);
      for_state_pairs<MT, NN>([&](int mt, int n, int half) {
        const float2 x = ds_pair(mt, n, half);
        *sl.word(s.snap[p], ds_row(mt, half) - g8, n) = pack_bf16x2(x.x, x.y);
      });
      store_state_residual<kD, MT, NN>(dhlg + static_cast<std::int64_t>(c) * kD * kD, t4, ds_row, ds_pair);
      fence_proxy_async();
      named_barrier_sync(kDh2BarC, 128);            // the snapshot visible to C's wgmmas
      named_barrier_arrive(kDh2BarSnap + p, 256);   // ... and to O's E(c)
      float acc[NA];  // u = K dh' (C x 64)
#pragma unroll
      for (int e = 0; e < NA; ++e) acc[e] = 0.f;
      wgmma_fence_operand(acc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks)
        wgmma_ss_n<kVT, 0, 1>(acc, desc_kmajor<C>(kc, 0, ks), slice_desc<kVT, kD>(sp, ks), 1);
      wgmma_commit();
      // dh' e^{G_L} + Z (Q^T y + K^T z0, per k-step as dh_wgmma_kernel's phase C), queued behind u on the tensor pipe
      const float decay = gdn::exp_approx(s.G[p][C - 1]);
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
          wgmma_ss_n<kVT, 1, 1>(ds[mt], desc_mnmajor<C>(qc, 64 * mt, ks), dSlice(s.y[p], ks), 1);
          wgmma_ss_n<kVT, 1, 1>(ds[mt], desc_mnmajor<C>(kc, 64 * mt, ks), dSlice(s.z0[p], ks), 1);
        }
      wgmma_commit();
      wgmma_wait<1>();  // u retired (Z may still run)
      wgmma_fence_operand(acc);
      const float GrL = s.Gr[p][C - 1];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float ed = -gdn::exp_approx(GrL - s.Gr[p][r0 + g8 + half * 8]);  // -e^{Gr_L - Gr_i}, as dh_wgmma_kernel's decay
#pragma unroll
        for (int n = 0; n < NN; ++n)
          *sl.word(s.u, r0 + half * 8, n) = pack_bf16x2(ed * acc[4 * n + 2 * half], ed * acc[4 * n + 2 * half + 1]);
      }
      fence_proxy_async();
      named_barrier_sync(kDh2BarC, 128);  // u' visible
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          wgmma_ss_n<kVT, 1, 1>(ds[mt], desc_mnmajor<C>(smem_addr(s.W[p]), 64 * mt, ks), dSlice(s.u, ks), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operand(ds);
      named_barrier_arrive(kDh2BarDone + p, 256);  // C is done with parity p's q, k, W, y, z0, G, Gr
    }
    if (a.dh0)
      for_state_pairs<MT, NN>([&](int mt, int n, int half) {
        *reinterpret_cast<float2*>(a.dh0 + state_at(mt, n, half)) = ds_pair(mt, n, half);
      });
    return;
  }

  // ---------------- O: the products and outputs off the chain ----------------
  __nv_bfloat16* dhg = a.dhc + sb.R * kD * kD + sb.v0;
  __nv_bfloat16* dxg = a.dx + sb.R * C * kD + sb.v0;
  float* dbvg = a.dbv + (sb.R * (kD / kVT) + static_cast<std::int64_t>(blockIdx.x) * sb.sq.nch) * C;
  // chunk c's tiles into parity c & 1 (cp.async; the caller commits, waits, fences and syncs)
  auto load_chunk = [&](int c) {
    const int p = c & 1, t0 = c * C, len = min(C, sb.sq.len - t0), tl = opaque(tid), HV = opaque(sb.HV);
    const std::int64_t rs = opaque(sb.row_stride), qt = sb.tokb + static_cast<std::int64_t>(t0) * a.H;
    load_sw128<C, kD>(s.q[p], a.q + qt * kD, rs, len, tl);
    load_sw128<C, kD>(s.k[p], a.k + qt * kD, rs, len, tl);
    load_sw128<C, C>(s.T[p], sb.Tw + static_cast<std::int64_t>(c) * C * C, C, C, tl);
    const SlicePieces<kVT> pc(tl);
#pragma unroll
    for (int it = 0; it < C / pc.kRowStep; ++it) {
      const int r = pc.row + it * pc.kRowStep;
      const bool in = r < len;
      const std::int64_t off = (sb.vtokb + static_cast<std::int64_t>(t0 + r) * HV) * kD + sb.v0 + pc.chunk * 8;
      cp_async_16(smem_addr(s.dO[p]) + pc.offset(it), in ? a.dout + off : a.dout, in);
    }
    if (tl < C / 4) cp_async_16(smem_addr(s.G[p] + tl * 4), sb.Gg + c * C + tl * 4, true);
    else if (tl < C / 2) cp_async_16(smem_addr(s.beta[p] + (tl - C / 4) * 4), sb.Bg + c * C + (tl - C / 4) * 4, true);
    else if (tl < 3 * C / 4) cp_async_16(smem_addr(s.Gr[p] + (tl - C / 2) * 4), sb.Grg + c * C + (tl - C / 2) * 4, true);
  };
  auto load_v = [&](int c) {  // v's rows of chunk c (0 past len)
    const int t0 = c * C, len = min(C, sb.sq.len - t0), tl = opaque(tid), HV = opaque(sb.HV);
    const SlicePieces<kVT> pc(tl);
#pragma unroll
    for (int it = 0; it < C / pc.kRowStep; ++it) {
      const int r = pc.row + it * pc.kRowStep;
      const bool in = r < len;
      const std::int64_t off = (sb.vtokb + static_cast<std::int64_t>(t0 + r) * HV) * kD + sb.v0 + pc.chunk * 8;
      cp_async_16(smem_addr(s.v) + pc.offset(it), in ? a.v + off : a.v, in);
    }
  };
  // chunk c's q, k, dO, T, v to L2 (a hint, issued a chunk step before their cp.async; chunk c is whole)
  auto prefetch_chunk = [&](int c) {
    const int tl = opaque(tid), row = tl >> 1, t0 = c * C;
    const std::int64_t qt = sb.tokb + static_cast<std::int64_t>(t0 + row) * a.H, off = (tl & 1) * (kD / 2);
    prefetch_l2(a.q + qt * kD + off);
    prefetch_l2(a.k + qt * kD + off);
    if (tl < C) {
      const std::int64_t vo = (sb.vtokb + static_cast<std::int64_t>(t0 + tl) * sb.HV) * kD + sb.v0;
      prefetch_l2(a.dout + vo);
      prefetch_l2(a.v + vo);
      prefetch_l2(sb.Tw + static_cast<std::int64_t>(c) * C * C + tl * 64);
    }
  };

  std::uint32_t paP[4][4], paE[4][4];  // P^T of the chunk P runs on / of the chunk E runs on (register A)
  // P(c): K Q^T -> P^T; y; P^T dO -> scr; z0 = -b . T^T (P^T dO); W = (T diag b) K. Chunk c's tiles loaded and
  // visible to O; ends with O's writes fenced for the async proxy (the caller arrives kBarPrep).
  auto prep = [&](int c) {
    const int p = c & 1;
    const std::uint32_t kc = smem_addr(s.k[p]), qc = smem_addr(s.q[p]);
    // One group: K Q^T (both 32-column halves) and W = (T diag b) K (both 64-feature halves; A = T diag b from
    // registers, B = K read MN-major), so the two independent products cost one wait; y is formed meanwhile.
    std::uint32_t ta[4][4];
    tb_fragments(ta, s.T[p], s.G[p], s.beta[p], r0, g8, t4);
    const PRow pr = p_row(s.Gr[p], r0, g8, t4);
    float pt[2][16];     // (C, 32) each
    float wacc[MT][NA];  // (C, 64) each: W's features 64 fh ..
#pragma unroll
    for (int hp = 0; hp < 2; ++hp)
#pragma unroll
      for (int e = 0; e < 16; ++e) pt[hp][e] = 0.f;
#pragma unroll
    for (int fh = 0; fh < MT; ++fh)
#pragma unroll
      for (int e = 0; e < NA; ++e) wacc[fh][e] = 0.f;
    wgmma_fence_operand(pt);
    wgmma_fence_operand(wacc);
    wgmma_fence_operand(ta);
    wgmma_fence();
#pragma unroll
    for (int hp = 0; hp < 2; ++hp)
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks)
        wgmma_ss_n<32, 0, 0>(pt[hp], desc_kmajor<C>(kc, 0, ks), desc_kmajor<C>(qc, 32 * hp, ks), 1);
#pragma unroll
    for (int fh = 0; fh < MT; ++fh)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_rs_n<64, 1>(wacc[fh], ta[ks], desc_mnmajor<C>(kc, 64 * fh, ks), 1);
    wgmma_commit();
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // y = scale e^G dO
      const int i = r0 + g8 + half * 8;
      const float ey = a.scale * gdn::exp_approx(s.G[p][i]);
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        const float2 dof = unpack_bf16x2(*sl.word(s.dO[p], i - g8, n));
        *sl.word(s.y[p], i - g8, n) = pack_bf16x2(ey * dof.x, ey * dof.y);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_operand(pt);
    wgmma_fence_operand(wacc);
#pragma unroll
    for (int hp = 0; hp < 2; ++hp) p_fragments(paP, pt[hp], hp, pr, a.scale, r0, g8, t4);
#pragma unroll
    for (int fh = 0; fh < MT; ++fh)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = r0 + g8 + half * 8;
#pragma unroll
        for (int n = 0; n < NN; ++n)
          *reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(s.W[p]) +
                                            sw128_offset<C>(i, 64 * fh + 8 * n + 2 * t4)) =
              pack_bf16x2(wacc[fh][4 * n + 2 * half], wacc[fh][4 * n + 2 * half + 1]);
      }
    float acc[NA];
#pragma unroll
    for (int e = 0; e < NA; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence_operand(paP);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_rs_n<kVT, 1>(acc, paP[ks], dSlice(s.dO[p], ks), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
    const auto accp = [&](int n, int half) { return make_float2(acc[4 * n + 2 * half], acc[4 * n + 2 * half + 1]); };
    store_pairs_bf16<NN>(r0, g8, accp, [&](int i, int n) { return sl.word(s.scr, i - g8, n); });
    fence_proxy_async();
    named_barrier_sync(kDh2BarO, 128);  // P^T dO visible
#pragma unroll
    for (int e = 0; e < NA; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_ss_n<kVT, 1, 1>(acc, desc_mnmajor<C>(smem_addr(s.T[p]), 0, ks), dSlice(s.scr, ks), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // z0 = -beta e^G . T^T P^T dO, as dx_epilogue's z
      const int i = r0 + g8 + half * 8;
      const float zi = -s.beta[p][i] * gdn::exp_approx(s.G[p][i]);
#pragma unroll
      for (int n = 0; n < NN; ++n)
        *sl.word(s.z0[p], i - g8, n) = pack_bf16x2(zi * acc[4 * n + 2 * half], zi * acc[4 * n + 2 * half + 1]);
    }
    fence_proxy_async();  // y, z0, W (and the cp.async tiles) for C's wgmmas
  };
  // E(c): dh_wgmma_kernel's phases A (u, dV_new) and B (dX and its epilogue) on C's snapshot of chunk c, and the
  // snapshot to global. snap[p] visible (kBarSnap), v of chunk c loaded.
  auto epilogue = [&](int c) {
    const int p = c & 1, t0 = c * C, len = min(C, sb.sq.len - t0);
    const std::uint32_t kc = smem_addr(s.k[p]), sp = smem_addr(s.snap[p]);
    float acc[NA];
#pragma unroll
    for (int e = 0; e < NA; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_ss_n<kVT, 0, 1>(acc, desc_kmajor<C>(kc, 0, ks), slice_desc<kVT, kD>(sp, ks), 1);
    wgmma_commit();
    {  // bf16(dh') of chunk c to global, 16 bytes a piece, while K dh' runs
      __nv_bfloat16* dst = dhg + static_cast<std::int64_t>(c) * kD * kD;
      const SlicePieces<kVT> pc(tid);
#pragma unroll
      for (int it = 0; it < kD / pc.kRowStep; ++it)
        *reinterpret_cast<uint4*>(dst + (pc.row + it * pc.kRowStep) * kD + pc.chunk * 8) =
            *reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(s.snap[p]) + pc.offset(it));
    }
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
    const float GrL = s.Gr[p][C - 1];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float ed = gdn::exp_approx(GrL - s.Gr[p][r0 + g8 + half * 8]);
#pragma unroll
      for (int n = 0; n < NN; ++n) {
        acc[4 * n + half * 2] *= ed;
        acc[4 * n + half * 2 + 1] *= ed;
      }
    }
    wgmma_fence_operand(acc);
    wgmma_fence_operand(paE);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_rs_n<kVT, 1>(acc, paE[ks], dSlice(s.dO[p], ks), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
    const auto accp = [&](int n, int half) { return make_float2(acc[4 * n + 2 * half], acc[4 * n + 2 * half + 1]); };
    store_pairs_bf16<NN>(r0, g8, accp, [&](int i, int n) { return sl.word(s.scr, i - g8, n); });
    fence_proxy_async();
    named_barrier_sync(kDh2BarO, 128);  // dV_new visible
#pragma unroll
    for (int e = 0; e < NA; ++e) acc[e] = 0.f;
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_ss_n<kVT, 1, 1>(acc, desc_mnmajor<C>(smem_addr(s.T[p]), 0, ks), dSlice(s.scr, ks), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
    struct EpilogueView {  // dx_epilogue's view of this chunk's G, beta and the partials' tile
      const float* G;
      const float* beta;
      float* red;
    } ev{s.G[p], s.beta[p], s.red};
    dx_epilogue<kD, NN>(ev, a, sb, dxg, t0, len, r0, g8, t4, accp,
                        [&](int n, int half) { return *sl.word(s.v, r0 + half * 8, n); }, nullptr);  // no z here
    named_barrier_sync(kDh2BarO, 128);  // red visible
    store_dbeta_partials(s.red, dbvg, t0, tid);
  };

  if (NT > 0) {
    load_chunk(NT - 1);
    load_v(NT - 1);
    if (NT > 1) load_chunk(NT - 2);
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    named_barrier_sync(kDh2BarO, 128);
    prep(NT - 1);
    named_barrier_arrive(kDh2BarPrep + ((NT - 1) & 1), 256);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) paE[kk][e] = paP[kk][e];
  }
  for (int c = NT - 1; c >= 0; --c) {
    const int p = c & 1;
    cp_async_wait<0>();  // chunk c - 1's tiles and chunk c's v (issued at the end of chunk c + 1)
    fence_proxy_async();
    named_barrier_sync(kDh2BarO, 128);
    if (c >= 2) prefetch_chunk(c - 2);
    if (c > 0) {
      prep(c - 1);
      named_barrier_arrive(kDh2BarPrep + (p ^ 1), 256);
    }
    named_barrier_sync(kDh2BarSnap + p, 256);  // C's snapshot of chunk c
    epilogue(c);
    named_barrier_sync(kDh2BarDone + p, 256);  // C is done with parity p (O's own reads: the barriers in E(c))
    if (c >= 2) load_chunk(c - 2);
    if (c >= 1) load_v(c - 1);
    cp_async_commit();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int e = 0; e < 4; ++e) paE[kk][e] = paP[kk][e];
  }
}

}  // namespace glr::cuda::sm90::gdn_bwd

#if defined(__CUDACC__) || defined(GLR_SM90_EMU_LAUNCHERS)
namespace glr::cuda::sm90::gdn_bwd {
// (dh2_takes, the cases it runs, and the declaration: gdn_bwd_mma.cuh, beside launch_dh_wgmma's.)
// Its shared-memory limit is set by launch_kernel (ensure_dynamic_smem, per kernel pointer and device), on a GPU and
// on the emulator alike.
template <int kD>
inline cudaError_t launch_dh2(const GdnBwdArgs& a, dim3 grid, cudaStream_t stream, char* emu_smem) {
  return launch_kernel(&dh2_kernel<kD, true>, grid, kDh2Threads, dh2_smem_bytes<kD>, stream, a, emu_smem);
}
}  // namespace glr::cuda::sm90::gdn_bwd
#endif
