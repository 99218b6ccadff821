// bench/glr/sm90_bwd_reference.cuh: the float64 sequential Gated DeltaNet backward on the GPU, the judge of
// bench/glr/sm90_bwd_check.cu. Kept apart so that tests/glr_sm90/emu_bwd_check.cpp runs it on the host emulator
// against its own host float64 backward (the checker checked).
//
// One block per (b, h), 128 threads (thread = value column or key row): the forward walks the tokens keeping the
// state at every 64th step (global memory), then the backward walks the blocks of 64 steps last to first,
// recomputing the states of the block, with the reverse-time step of glr/reference/recurrent.cpp:
//   P = e^{g} S_{t-1}, r = P^T k, u = beta (v - r), S_t = P + k u^T;  dS += scale q dO^T; dq = scale S_t dO;
//   du = dS^T k; dk = dS u - beta P du; dv = beta du; dbeta = du . (v - r); dP = dS - beta k du^T;
//   dg = <P, dP>; dS = e^{g} dP.
#pragma once

#include "../../glr/cuda/sm90/gdn_bwd_mma.cuh"

namespace glr::sm90_bwd_reference {

using glr::cuda::sm90::GdnBwdArgs;
inline constexpr int KD = 128, VD = 128, KV = KD * VD, LDS = VD + 1;
inline constexpr std::size_t kSmemBytes = (KD * LDS + 9 * 128) * sizeof(double);

struct RefOut {
  double *dq, *dk, *dv, *dg, *dbeta, *dh0;
  double* ckpt;  // (B H, NT + 1, K, V) states entering every 64th step
  double* blk;   // (B H, 65, K, V) the states of one block of 64 steps
};

__device__ __forceinline__ double bfd(__nv_bfloat16 x) { return static_cast<double>(__bfloat162float(x)); }
// g or beta at token i, fp32 or bf16 as the arguments say (GdnBwdArgs::g_bf16, beta_bf16).
__device__ __forceinline__ double scal(const void* p, bool bf16, std::int64_t i) {
  return bf16 ? bfd(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<double>(static_cast<const float*>(p)[i]);
}

// One forward step on column c: S_t[:, c] from S_{t-1}[:, c] (in and out may alias).
__device__ __forceinline__ void ref_step(const double* Sin, double* Sout, const double* ks, double e, double bt,
                                         double vc, int c) {
  double p0 = 0, p1 = 0;
  for (int d = 0; d < KD; d += 2) {
    p0 += ks[d] * Sin[d * VD + c];
    p1 += ks[d + 1] * Sin[(d + 1) * VD + c];
  }
  const double u = bt * (vc - e * (p0 + p1));
  for (int d = 0; d < KD; ++d) Sout[d * VD + c] = e * Sin[d * VD + c] + ks[d] * u;
}

__global__ void __launch_bounds__(128) reference(GdnBwdArgs a, RefOut r) {
  // All shared arrays in the dynamic block (so the host emulator, which has no static __shared__, runs it too).
  extern __shared__ __align__(16) double ref_smem[];
  double* dS = ref_smem;  // (K, V + 1)
  double *qs = dS + KD * LDS, *ks = qs + KD, *vs = ks + KD, *dos = vs + VD, *us = dos + VD, *dus = us + VD,
         *vr = dus + VD, *red = vr + VD, *red2 = red + 128;
  const int bh = blockIdx.x, b = bh / a.H, h = bh % a.H, c = threadIdx.x;
  const int NT = (a.T + 63) / 64;
  double* ck = r.ckpt + static_cast<std::int64_t>(bh) * (NT + 1) * KV;
  double* bl = r.blk + static_cast<std::int64_t>(bh) * 65 * KV;
  auto tok = [&](int t) { return (static_cast<std::int64_t>(b) * a.T + t) * a.H + h; };
  auto load_tok = [&](int t) {
    __syncthreads();
    const std::int64_t tk = tok(t);
    qs[c] = bfd(a.q[tk * KD + c]);
    ks[c] = bfd(a.k[tk * KD + c]);
    vs[c] = bfd(a.v[tk * VD + c]);
    dos[c] = bfd(a.dout[tk * VD + c]);
    __syncthreads();
  };
  for (int d = 0; d < KD; ++d)
    ck[d * VD + c] = a.h0 ? static_cast<double>(a.h0[static_cast<std::int64_t>(bh) * KV + d * VD + c]) : 0.0;
  for (int t = 0; t < a.T; ++t) {
    load_tok(t);
    const int cb = t / 64;
    double* Sin = ck + static_cast<std::int64_t>(cb) * KV;
    double* Sout = ck + static_cast<std::int64_t>(cb + 1) * KV;
    // within a block, step in place in the next checkpoint slot (its column c is this thread's alone)
    if (t % 64 == 0)
      for (int d = 0; d < KD; ++d) Sout[d * VD + c] = Sin[d * VD + c];
    ref_step(Sout, Sout, ks, exp(scal(a.g, a.g_bf16, tok(t))), scal(a.beta, a.beta_bf16, tok(t)), vs[c], c);
  }
  for (int d = 0; d < KD; ++d)
    dS[d * LDS + c] = a.dht ? static_cast<double>(a.dht[static_cast<std::int64_t>(bh) * KV + d * VD + c]) : 0.0;
  for (int cb = NT - 1; cb >= 0; --cb) {
    const int b0 = cb * 64, b1 = min(a.T, b0 + 64);
    for (int d = 0; d < KD; ++d) bl[d * VD + c] = ck[static_cast<std::int64_t>(cb) * KV + d * VD + c];
    for (int t = b0; t < b1; ++t) {
      load_tok(t);
      ref_step(bl + static_cast<std::int64_t>(t - b0) * KV, bl + static_cast<std::int64_t>(t - b0 + 1) * KV, ks,
               exp(scal(a.g, a.g_bf16, tok(t))), scal(a.beta, a.beta_bf16, tok(t)), vs[c], c);
    }
    for (int t = b1 - 1; t >= b0; --t) {
      load_tok(t);
      const std::int64_t tk = tok(t);
      const double e = exp(scal(a.g, a.g_bf16, tk)), bt = scal(a.beta, a.beta_bf16, tk);
      const double* Sp = bl + static_cast<std::int64_t>(t - b0) * KV;      // S_{t-1}
      const double* St = bl + static_cast<std::int64_t>(t - b0 + 1) * KV;  // S_t
      // thread = column c
      double p0 = 0;
      for (int d = 0; d < KD; ++d) p0 += e * Sp[d * VD + c] * ks[d];
      us[c] = bt * (vs[c] - p0);
      vr[c] = vs[c] - p0;
      double du = 0;
      for (int d = 0; d < KD; ++d) {
        dS[d * LDS + c] += a.scale * qs[d] * dos[c];
        du += dS[d * LDS + c] * ks[d];
      }
      dus[c] = du;
      r.dv[tk * VD + c] = bt * du;
      __syncthreads();
      // thread = row d (= c)
      {
        const int d = c;
        double q0 = 0, k0 = 0, k1 = 0;
        for (int j = 0; j < VD; ++j) {
          q0 += St[d * VD + j] * dos[j];
          k0 += dS[d * LDS + j] * us[j];
          k1 += e * Sp[d * VD + j] * dus[j];
        }
        r.dq[tk * KD + d] = a.scale * q0;
        r.dk[tk * KD + d] = k0 - bt * k1;
      }
      __syncthreads();
      // thread = column c: dP, dg, dS
      double gp = 0;
      for (int d = 0; d < KD; ++d) {
        const double dp = dS[d * LDS + c] - bt * ks[d] * dus[c];
        gp += e * Sp[d * VD + c] * dp;
        dS[d * LDS + c] = e * dp;
      }
      red[c] = gp;
      red2[c] = dus[c] * vr[c];
      __syncthreads();
      if (c == 0) {
        double s1 = 0, s2 = 0;
        for (int j = 0; j < 128; ++j) {
          s1 += red[j];
          s2 += red2[j];
        }
        r.dg[tk] = s1;
        r.dbeta[tk] = s2;
      }
    }
  }
  for (int d = 0; d < KD; ++d) r.dh0[static_cast<std::int64_t>(bh) * KV + d * VD + c] = dS[d * LDS + c];
}

}  // namespace glr::sm90_bwd_reference
