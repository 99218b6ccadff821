// bench/glr/sm90_fwd_check.cu: check and time the tensor-core forward (glr/cuda/sm90/gdn_fwd_mma.cuh)
// against a float64 sequential recurrence on the GPU: the three rungs on Gated DeltaNet (dense, HV = H), then
// rung 3 (what glr dispatches to) on every feature it takes: grouped value heads, packed sequences (int64 and
// int32 offsets, empty sequences, invalid offsets), bf16 g and beta, and the other four members.
//
// Build and run: bench/glr/sm90_check.sh (one nvcc command, then the program). Exits non-zero when any
// case's error is over its bound, an output is non-finite or unwritten, or two runs differ in one bit.
//
// Reference: per (sequence, value head) one block walks the tokens in order, S in float64 in shared memory,
//     S_t = e^{g_t} S_{t-1} + k_t (beta_t (v_t - e^{g_t} k_t^T S_{t-1}))^T,   o_t = scale S_t^T q_t
// (without the delta rule S_t = e^{g_t} S_{t-1} + k_t v_t^T) on the same bf16 inputs (converted exactly).
//
// Bound: the fast path rounds to bf16 (unit roundoff u = 2^-9) the operands of every tensor-core product
// (T, beta e^G K, beta V, W, U, h, V_new, P) and the output; each rounding perturbs a normwise-relative
// quantity by at most about u, about six roundings lie on any path to o, and the delta rule with |k| = 1,
// 0 < beta < 1 and g <= 0 is non-expansive. Pass: ||x - ref||_2 / ||ref||_2 <= 8u (1.6e-2) for o and ht,
// and max |x - ref| / max |ref| <= 32u. A wrong index, mask or decay gives errors of order 1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../glr/cuda/sm90/gdn_fwd_mma.cuh"

namespace {

using glr::cuda::sm90::GdnFwdArgs;
using glr::cuda::sm90::GdnFwdVariant;
constexpr int KMAX = 128;  // K = V = D, 64 or 128 (Problem::D)

#include "sm90_check_util.cuh"

// g = logsigmoid(mu + z) (gate 1: one per token and value head; gate 2: one per value head), beta = sigmoid(z'),
// each rounded to bf16 when it is passed in bf16 (the values the kernel reads).
__global__ void fill_scalars(float* g, float* beta, __nv_bfloat16* gb, __nv_bfloat16* bb, std::int64_t n,
                             std::int64_t ng, std::uint64_t seed, double mu) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < ng) {
    const float x = static_cast<float>(-log1p(exp(-(mu + normal(seed, 11, i)))));
    g[i] = gb ? __bfloat162float(gb[i] = __float2bfloat16_rn(x)) : x;
  }
  if (i < n) {
    const float y = static_cast<float>(1.0 / (1.0 + exp(-normal(seed, 12, i))));
    beta[i] = bb ? __bfloat162float(bb[i] = __float2bfloat16_rn(y)) : y;
  }
}
__global__ void fill_state(float* h, std::int64_t n, std::uint64_t seed) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) h[i] = static_cast<float>(0.1 * normal(seed, 13, i));
}

// float64 sequential recurrence: one block per (sequence, value head), thread = state column (D threads). g and beta are
// read from the fp32 copies (equal to the bf16 values when the kernel reads bf16). cu: the int64 offsets of
// packed sequences (valid ones), or null.
__global__ void __launch_bounds__(128) reference(GdnFwdArgs a, const float* g, const float* beta,
                                                 const std::int64_t* cu, double* o, double* ht) {
  extern __shared__ double S[];  // (K, V)
  __shared__ double qs[KMAX], ks[KMAX];
  const int KD = a.D, VD = a.D;
  const int n = blockIdx.x / a.HV, hv = blockIdx.x % a.HV, hq = hv / (a.HV / a.H), v = threadIdx.x;
  const std::int64_t nh = static_cast<std::int64_t>(n) * a.HV + hv;
  const std::int64_t begin = cu ? cu[n] : static_cast<std::int64_t>(n) * a.T;
  const std::int64_t len = cu ? cu[n + 1] - cu[n] : a.T;
  for (int d = 0; d < KD; ++d) S[d * VD + v] = a.h0 ? static_cast<double>(a.h0[(nh * KD + d) * VD + v]) : 0.0;
  for (std::int64_t t = 0; t < len; ++t) {
    const std::int64_t tf = begin + t, tq = tf * a.H + hq, tv = tf * a.HV + hv;
    __syncthreads();
    qs[v] = __bfloat162float(a.q[tq * KD + v]);
    ks[v] = __bfloat162float(a.k[tq * KD + v]);
    __syncthreads();
    const double e = a.gate == 0 ? 1.0 : exp(static_cast<double>(g[a.gate == 2 ? hv : tv]));
    const double bt = a.delta ? static_cast<double>(beta[tv]) : 1.0;
    double kS = 0;
    if (a.delta) {
      double p0 = 0, p1 = 0, p2 = 0, p3 = 0;
      for (int d = 0; d < KD; d += 4) {
        p0 += ks[d] * S[d * VD + v];
        p1 += ks[d + 1] * S[(d + 1) * VD + v];
        p2 += ks[d + 2] * S[(d + 2) * VD + v];
        p3 += ks[d + 3] * S[(d + 3) * VD + v];
      }
      kS = (p0 + p1) + (p2 + p3);
    }
    const double dn = bt * (static_cast<double>(__bfloat162float(a.v[tv * VD + v])) - e * kS);
    double o0 = 0, o1 = 0;
    for (int d = 0; d < KD; d += 2) {
      const double s0 = e * S[d * VD + v] + ks[d] * dn, s1 = e * S[(d + 1) * VD + v] + ks[d + 1] * dn;
      S[d * VD + v] = s0;
      S[(d + 1) * VD + v] = s1;
      o0 += qs[d] * s0;
      o1 += qs[d + 1] * s1;
    }
    o[tv * VD + v] = a.scale * (o0 + o1);
  }
  for (int d = 0; d < KD; ++d) ht[(nh * KD + d) * VD + v] = S[d * VD + v];
}

// Rung 3's state slice width: 0 = the launcher's rule (gdn_fwd_slice_width), or 16, 32, 64 (--vt).
int g_vt = 0;
// Rung 3's split-sequence state pass in the checks: every rung 3 check also runs it with kCheckSegs segments
// (forced; the rule splits none of the checked shapes) and holds it to the same bounds, run to run bitwise.
constexpr int kCheckSegs = 4;
// The segments the split rule gives a's shape on this device.
int rule_segs(const GdnFwdArgs& a) {
  return glr::cuda::sm90::gdn_fwd_split_segments(a, glr::cuda::sm90::state_slice_sms());
}

// member: glr::Member's order (0 gated_deltanet, 1 deltanet, 2 mamba2, 3 retnet, 4 linear_attention).
constexpr bool member_delta(int m) { return m <= 1; }
constexpr int member_gate(int m) { return m == 0 || m == 2 ? 1 : m == 3 ? 2 : 0; }
const char* member_name(int m) {
  static const char* n[] = {"gdn", "deltanet", "mamba2", "retnet", "linear"};
  return n[m];
}

struct Problem {
  int B, T, H;
  bool h0;
  double mu;  // g = logsigmoid(mu + z), z ~ N(0, 1): a chunk keeps about e^{-64 E[-g]} of the state: mu -1 and 2
              // forget it within a chunk, 4 keep a third, 8 nearly all (the cross-chunk path matters)
  int HV = 0;             // 0: H
  int member = 0;
  std::vector<int> lens;  // packed sequences (B = 1, T = their sum); empty: dense
  bool i32 = false;       // int32 offsets
  bool bf16_scalars = false;  // g and beta passed in bf16
  bool bad_offsets = false;   // offsets corrupted: every output NaN, status 1
  int D = 128;                // K = V
};

std::string describe(const Problem& p) {
  char b[256];
  std::snprintf(b, sizeof b, "%-8s K=V=%-3d B%-2d T%-5d H%-2d HV%-2d h0=%d mu=%+.0f%s%s%s", member_name(p.member), p.D, p.B,
                p.T, p.H, p.HV, p.h0 ? 1 : 0, p.mu, p.lens.empty() ? "" : (p.i32 ? " varlen32" : " varlen64"),
                p.bf16_scalars ? " g,beta=bf16" : "", p.bad_offsets ? " BAD-OFFSETS" : "");
  std::string s = b;
  if (!p.lens.empty()) s += " N=" + std::to_string(p.lens.size());
  return s;
}

struct Buffers {
  GdnFwdArgs a;
  void* ws = nullptr;
  float *g32 = nullptr, *beta32 = nullptr;
  __nv_bfloat16 *gb = nullptr, *bb = nullptr;
  std::int64_t* cu64 = nullptr;  // valid offsets (the reference reads these)
  std::int32_t* cu32 = nullptr;
  std::int64_t* cu_bad = nullptr;
  std::size_t o_bytes = 0, h_bytes = 0;
  Problem p;
  explicit Buffers(Problem pr, std::uint64_t seed) : p(std::move(pr)) {
    if (p.HV == 0) p.HV = p.H;
    const bool varlen = !p.lens.empty();
    if (varlen) {
      p.B = 1;
      p.T = 0;
      for (int l : p.lens) p.T += l;
    }
    a.B = p.B;
    a.T = p.T;
    a.H = p.H;
    a.HV = p.HV;
    a.D = p.D;
    const int KD = p.D, VD = p.D;
    a.delta = member_delta(p.member);
    a.gate = member_gate(p.member);
    a.scale = 1.0f / std::sqrt(static_cast<float>(KD));
    const std::int64_t tokens = static_cast<std::int64_t>(p.B) * p.T;
    const std::int64_t qrows = tokens * p.H, vrows = tokens * p.HV;
    const std::int64_t N = varlen ? static_cast<std::int64_t>(p.lens.size()) : p.B;
    const std::int64_t hs = N * p.HV * KD * VD;
    const std::int64_t ng = a.gate == 2 ? p.HV : vrows;
    o_bytes = vrows * VD * 2;
    h_bytes = hs * 4;
    __nv_bfloat16 *q, *k, *v, *o;
    float *h0 = nullptr, *ht;
    CK(cudaMalloc(&q, std::max<std::int64_t>(qrows, 1) * KD * 2));
    CK(cudaMalloc(&k, std::max<std::int64_t>(qrows, 1) * KD * 2));
    CK(cudaMalloc(&v, std::max<std::int64_t>(vrows, 1) * VD * 2));
    CK(cudaMalloc(&o, std::max<std::size_t>(o_bytes, 4)));
    CK(cudaMalloc(&g32, std::max<std::int64_t>(ng, 1) * 4));
    CK(cudaMalloc(&beta32, std::max<std::int64_t>(vrows, 1) * 4));
    if (p.bf16_scalars) {
      CK(cudaMalloc(&gb, std::max<std::int64_t>(ng, 1) * 2));
      CK(cudaMalloc(&bb, std::max<std::int64_t>(vrows, 1) * 2));
    }
    CK(cudaMalloc(&ht, h_bytes));
    const unsigned rq = static_cast<unsigned>((qrows * 32 + 255) / 256), rv = static_cast<unsigned>((vrows * 32 + 255) / 256);
    if (qrows > 0) {
      fill_rows<<<rq, 256>>>(q, qrows, KD, seed, 1, true);
      fill_rows<<<rq, 256>>>(k, qrows, KD, seed, 2, true);
    }
    if (vrows > 0) fill_rows<<<rv, 256>>>(v, vrows, VD, seed, 3, false);
    fill_scalars<<<static_cast<unsigned>((std::max(vrows, ng) + 255) / 256 + 1), 256>>>(g32, beta32, gb, bb, vrows, ng, seed, p.mu);
    if (p.h0) {
      CK(cudaMalloc(&h0, h_bytes));
      fill_state<<<static_cast<unsigned>((hs + 255) / 256), 256>>>(h0, hs, seed);
    }
    CK(cudaGetLastError());
    a.q = q;
    a.k = k;
    a.v = v;
    a.o = o;
    a.g = a.gate == 0 ? nullptr : p.bf16_scalars ? static_cast<const void*>(gb) : g32;
    a.beta = !a.delta ? nullptr : p.bf16_scalars ? static_cast<const void*>(bb) : beta32;
    a.g_bf16 = a.beta_bf16 = p.bf16_scalars;
    a.h0 = h0;
    a.ht = ht;
    if (varlen) {
      std::vector<std::int64_t> off(1, 0);
      for (int l : p.lens) off.push_back(off.back() + l);
      std::vector<std::int32_t> off32(off.begin(), off.end());
      CK(cudaMalloc(&cu64, off.size() * 8));
      CK(cudaMemcpy(cu64, off.data(), off.size() * 8, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&cu32, off.size() * 4));
      CK(cudaMemcpy(cu32, off32.data(), off.size() * 4, cudaMemcpyHostToDevice));
      a.N = static_cast<int>(p.lens.size());
      if (p.bad_offsets) {
        off[off.size() / 2] = p.T + 1;
        CK(cudaMalloc(&cu_bad, off.size() * 8));
        CK(cudaMemcpy(cu_bad, off.data(), off.size() * 8, cudaMemcpyHostToDevice));
        a.cu_seqlens = cu_bad;
      } else if (p.i32) {
        a.cu_seqlens32 = cu32;
      } else {
        a.cu_seqlens = cu64;
      }
    }
    {  // room for rungs 1 and 2 and for rung 3 split in up to 16 segments (checks, timings) or the rule's
      GdnFwdArgs sp = a;
      sp.segs = std::max({kCheckSegs, 16, rule_segs(a)});
      CK(cudaMalloc(&ws, std::max(glr::cuda::sm90::gdn_fwd_workspace_bytes(a, GdnFwdVariant::p_in_workspace),
                                  glr::cuda::sm90::gdn_fwd_workspace_bytes(sp, GdnFwdVariant::t_only))));
    }
    glr::cuda::sm90::gdn_fwd_workspace_carve(a, ws, GdnFwdVariant::p_in_workspace);
  }
  ~Buffers() {
    cudaFree(const_cast<__nv_bfloat16*>(a.q));
    cudaFree(const_cast<__nv_bfloat16*>(a.k));
    cudaFree(const_cast<__nv_bfloat16*>(a.v));
    cudaFree(a.o);
    cudaFree(g32);
    cudaFree(beta32);
    cudaFree(gb);
    cudaFree(bb);
    cudaFree(cu64);
    cudaFree(cu32);
    cudaFree(cu_bad);
    if (a.h0) cudaFree(const_cast<float*>(a.h0));
    cudaFree(a.ht);
    cudaFree(ws);
  }
  // Outputs poisoned with NaN (0xFFFF bf16, 0xFFFFFFFF fp32) first: an unwritten element fails the check.
  // vt: rung 3's slice width (-1: g_vt); segs: rung 3's split segments (1: unsplit).
  void run_poisoned(GdnFwdVariant var, int vt = -1, int segs = 1) {
    a.segs = var == GdnFwdVariant::t_only ? segs : 1;
    glr::cuda::sm90::gdn_fwd_workspace_carve(a, ws, var);  // rung 3: W = U = null (it must not need them)
    CK(cudaMemset(a.o, 0xFF, o_bytes));
    CK(cudaMemset(a.ht, 0xFF, h_bytes));
    CK(glr::cuda::sm90::gdn_fwd_mma(a, nullptr, var, nullptr, var == GdnFwdVariant::t_only ? (vt < 0 ? g_vt : vt) : 0));
    CK(cudaDeviceSynchronize());
  }
  std::int32_t status() const {
    std::int32_t s = -1;
    CK(cudaMemcpy(&s, a.status, 4, cudaMemcpyDeviceToHost));
    return s;
  }
};

bool check(const Problem& pr, std::uint64_t seed, const std::vector<GdnFwdVariant>& rungs) {
  Buffers buf(pr, seed);
  const Problem& p = buf.p;
  const int KD = p.D, VD = p.D;
  const std::int64_t vrows = static_cast<std::int64_t>(p.B) * p.T * p.HV;
  const std::int64_t hs = static_cast<std::int64_t>(buf.a.num_seqs()) * p.HV * KD * VD;
  if (p.bad_offsets) {
    buf.run_poisoned(GdnFwdVariant::t_only);
    std::vector<std::uint16_t> o(vrows * VD);
    std::vector<float> ht(hs);
    CK(cudaMemcpy(o.data(), buf.a.o, buf.o_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ht.data(), buf.a.ht, buf.h_bytes, cudaMemcpyDeviceToHost));
    std::size_t finite = 0;
    for (std::uint16_t x : o) finite += (x & 0x7f80u) != 0x7f80u;
    for (float x : ht) finite += std::isfinite(x);
    const std::int32_t st = buf.status();
    const bool pass = finite == 0 && st == 1;
    std::printf("v3 %s | finite outputs %zu (want 0), status %d (want 1) | %s\n", describe(p).c_str(), finite, st,
                pass ? "PASS" : "FAIL");
    return pass;
  }
  double *ro, *rh;
  CK(cudaMalloc(&ro, std::max<std::int64_t>(vrows, 1) * VD * 8));
  CK(cudaMalloc(&rh, hs * 8));
  CK(cudaFuncSetAttribute(reference, cudaFuncAttributeMaxDynamicSharedMemorySize, KMAX * KMAX * 8));
  reference<<<static_cast<unsigned>(buf.a.num_seqs() * p.HV), VD, KD * VD * 8>>>(buf.a, buf.g32, buf.beta32, buf.cu64, ro, rh);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  bool ok = true;
  for (GdnFwdVariant var : rungs) {
    buf.run_poisoned(var);
    const Err eo = error_of(buf.a.o, ro, vrows * VD);
    const Err eh = error_of(buf.a.ht, rh, hs);
    const std::int32_t st = buf.status();
    // Second run, outputs poisoned again: bitwise equal.
    void *o1, *h1;
    CK(cudaMalloc(&o1, std::max<std::size_t>(buf.o_bytes, 4)));
    CK(cudaMalloc(&h1, buf.h_bytes));
    CK(cudaMemcpy(o1, buf.a.o, buf.o_bytes, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(h1, buf.a.ht, buf.h_bytes, cudaMemcpyDeviceToDevice));
    buf.run_poisoned(var);
    const unsigned long long diff =
        differing_words(o1, buf.a.o, buf.o_bytes) + differing_words(h1, buf.a.ht, buf.h_bytes);
    // Rung 3 at each slice width of the state kernel (16, 32, 64 columns), outputs poisoned again: bitwise
    // equal to the first run (the width is the launcher's choice; no output may depend on it).
    // With the state kernel on wgmma (the default; GLR_FWD_WGMMA=0: mma.sync at every width, all three compared) it
    // runs on wgmma at 64 columns only (mma.sync at 16 and 32): those widths' differing words are the two
    // instructions' accumulation orders, printed ("wgmma vs mma.sync"), not failed.
    const bool wg = glr::cuda::sm90::state_wgmma_requested();
    unsigned long long wdiff = 0, xdiff = 0;
    if (var == GdnFwdVariant::t_only)
      for (int vt : {16, 32, 64}) {
        buf.run_poisoned(var, vt);
        (wg && vt != 64 ? xdiff : wdiff) += differing_words(o1, buf.a.o, buf.o_bytes) + differing_words(h1, buf.a.ht, buf.h_bytes);
      }
    // Rung 3 split in kCheckSegs segments (the split-sequence state pass, forced): the same bounds, run to run
    // bitwise, and bitwise the same at slice widths 16 and 64 of pass C.
    Err so{0, 0, 0}, sh{0, 0, 0};
    unsigned long long sdiff = 0;
    if (var == GdnFwdVariant::t_only) {
      buf.run_poisoned(var, 64, kCheckSegs);
      so = error_of(buf.a.o, ro, vrows * VD);
      sh = error_of(buf.a.ht, rh, hs);
      CK(cudaMemcpy(o1, buf.a.o, buf.o_bytes, cudaMemcpyDeviceToDevice));
      CK(cudaMemcpy(h1, buf.a.ht, buf.h_bytes, cudaMemcpyDeviceToDevice));
      for (int vt : {64, 16}) {
        buf.run_poisoned(var, vt, kCheckSegs);
        (wg && vt != 64 ? xdiff : sdiff) += differing_words(o1, buf.a.o, buf.o_bytes) + differing_words(h1, buf.a.ht, buf.h_bytes);
      }
    }
    CK(cudaFree(o1));
    CK(cudaFree(h1));

    const double u = std::ldexp(1.0, -9), tol2 = 8 * u, tolmax = 32 * u;
    const bool split_ok = so.bad == 0 && sh.bad == 0 && so.rel2 <= tol2 && sh.rel2 <= tol2 && so.relmax <= tolmax &&
                          sh.relmax <= tolmax && sdiff == 0;
    const bool pass = eo.bad == 0 && eh.bad == 0 && eo.rel2 <= tol2 && eh.rel2 <= tol2 && eo.relmax <= tolmax &&
                      eh.relmax <= tolmax && diff == 0 && wdiff == 0 && st == 0 && split_ok;
    if (var == GdnFwdVariant::t_only)
      std::printf("  split %d: o rel2 %.2e relmax %.2e | ht rel2 %.2e relmax %.2e | nonfinite %.0f | run-to-run and vt 64/16 "
                  "differing words %llu\n", kCheckSegs, so.rel2, so.relmax, sh.rel2, sh.relmax, so.bad + sh.bad, sdiff);
    std::printf("v%d %s | o: rel2 %.2e relmax %.2e nonfinite %.0f | ht: rel2 %.2e relmax %.2e nonfinite %.0f | "
                "run-to-run differing words %llu%s%s%s | status %d | %s\n",
                static_cast<int>(var), describe(p).c_str(), eo.rel2, eo.relmax, eo.bad, eh.rel2, eh.relmax, eh.bad,
                diff, var == GdnFwdVariant::t_only ? ", vt 16/32/64 differing words " : "",
                var == GdnFwdVariant::t_only ? std::to_string(wdiff).c_str() : "",
                var == GdnFwdVariant::t_only && wg ? (", wgmma vs mma.sync (vt 16/32) differing words " + std::to_string(xdiff)).c_str() : "",
                st, pass ? "PASS" : "FAIL");
    ok = ok && pass;
  }
  CK(cudaFree(ro));
  CK(cudaFree(rh));
  return ok;
}

// segs: rung 3's split segments, 0 = the rule (gdn_fwd_split_segments on this device), 1 = unsplit.
void timing(const Problem& pr, GdnFwdVariant var, int segs = 1) {
  Buffers buf(pr, 7);
  buf.a.segs = var != GdnFwdVariant::t_only ? 1 : segs == 0 ? rule_segs(buf.a) : segs;
  const Problem& p = buf.p;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  glr::cuda::sm90::gdn_fwd_workspace_carve(buf.a, buf.ws, var);
  // Rung 3's slice width: forced (--vt) or the launcher's rule.
  const int vt = var != GdnFwdVariant::t_only ? 64
                 : g_vt != 0                  ? g_vt
                                              : glr::cuda::sm90::gdn_fwd_slice_width(buf.a, glr::cuda::sm90::state_slice_sms());
  const int vt_arg = var == GdnFwdVariant::t_only ? vt : 0;
  for (int i = 0; i < 3; ++i) CK(glr::cuda::sm90::gdn_fwd_mma(buf.a, st, var, nullptr, vt_arg));
  CK(cudaStreamSynchronize(st));
  {
    namespace gdn = glr::cuda::sm90::gdn;
    const int r = static_cast<int>(var);
    void (*wyk)(GdnFwdArgs) = r == 1 ? gdn::wy_kernel<1> : r == 2 ? gdn::wy_kernel<2> : gdn::wy_kernel<3>;
    void (*stk)(GdnFwdArgs) = r == 1 ? gdn::state_kernel<false> : r == 2 ? gdn::state_kernel<true> : gdn::state_t_kernel<true>;
    if (r == 3) {
      if (p.D == 64) wyk = gdn::wy_kernel<3, true, 64>;
      stk = p.D == 64 ? (vt == 64 ? gdn::state_t_kernel<true, 64, 64> : vt == 32 ? gdn::state_t_kernel<true, 64, 32> : gdn::state_t_kernel<true, 64, 16>)
                      : (vt == 64 ? gdn::state_t_kernel<true, 128, 64> : vt == 32 ? gdn::state_t_kernel<true, 128, 32> : gdn::state_t_kernel<true, 128, 16>);
    }
    const std::size_t st_smem = r == 1   ? sizeof(gdn::StateSmem<false>)
                                : r == 2 ? sizeof(gdn::StateSmem<true>)
                                : vt == 64 ? sizeof(gdn::StateTSmem<64>)
                                : vt == 32 ? sizeof(gdn::StateTSmem<32>)
                                           : sizeof(gdn::StateTSmem<16>);
    int wy = 0, state = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&wy, wyk, 128, gdn::wy_smem_bytes(r)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&state, stk, 128, st_smem));
    std::printf("v%d resident blocks per SM: wy %d (%zu B shared), state %d (%zu B shared, %d columns a block, %lld "
                "blocks); workspace %.1f MB\n", r, wy, gdn::wy_smem_bytes(r), state, st_smem, vt,
                static_cast<long long>(p.D / vt) * buf.a.num_seqs() * p.HV * buf.a.segs,
                glr::cuda::sm90::gdn_fwd_workspace_bytes(buf.a, var) / 1e6);
  }
  std::vector<float> tot, k1;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0, st));
    CK(glr::cuda::sm90::gdn_fwd_mma(buf.a, st, var, e1, vt_arg));  // e1 between the wy and the state kernel
    CK(cudaEventRecord(e2, st));
    CK(cudaEventSynchronize(e2));
    float a = 0, b = 0;
    CK(cudaEventElapsedTime(&a, e0, e1));
    CK(cudaEventElapsedTime(&b, e0, e2));
    k1.push_back(a);
    tot.push_back(b);
  }
  std::vector<float> whole;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0, st));
    CK(glr::cuda::sm90::gdn_fwd_mma(buf.a, st, var, nullptr, vt_arg));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float a = 0;
    CK(cudaEventElapsedTime(&a, e0, e1));
    whole.push_back(a);
  }
  auto med = [](std::vector<float> x) {
    std::sort(x.begin(), x.end());
    return 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
  };
  // Rung 3's wy kernel alone on a dense batch (the launcher's grid; the forward above left the workspace as it reads
  // it): what the forward and, again, the backward spend on it (bench/glr/sm90_notes.md, 2026-12-05 hAM).
  double wy_alone = -1;
  if (var == GdnFwdVariant::t_only && p.lens.empty()) {
    namespace gdn = glr::cuda::sm90::gdn;
    const bool delta = buf.a.delta;
    void (*wyk)(GdnFwdArgs) = p.D == 64 ? (delta ? gdn::wy_kernel<3, true, 64> : gdn::wy_kernel<3, false, 64>)
                                        : (delta ? gdn::wy_kernel<3, true, 128> : gdn::wy_kernel<3, false, 128>);
    const dim3 grid(static_cast<unsigned>((p.T + 63) / 64), static_cast<unsigned>(p.B * buf.a.HV));
    std::vector<float> w;
    for (int i = 0; i < 23; ++i) {
      CK(cudaEventRecord(e0, st));
      CK(glr::cuda::sm90::launch_kernel(wyk, grid, gdn::kThreads, gdn::wy_smem_bytes(3), st, buf.a, nullptr));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float a = 0;
      CK(cudaEventElapsedTime(&a, e0, e1));
      if (i >= 3) w.push_back(a);
    }
    wy_alone = med(w);
  }
  // DESIGN.md's convention: fwd FLOP per token and value head 2 (3 K V + C (3 K + 2 V)), C = 64.
  const double KD = p.D, VD = p.D;
  const double flop = 2.0 * (3.0 * KD * VD + 64.0 * (3.0 * KD + 2.0 * VD)) * p.B * static_cast<double>(p.T) * p.HV;
  const double ms = med(whole);
  std::printf("timing v%d %s bf16 vt %d%s: forward %.3f ms (median of 20; table+wy %.3f ms, state+output %.3f ms), "
              "%.1f effective TFLOP/s\n",
              static_cast<int>(var), describe(p).c_str(), vt,
              buf.a.segs > 1 ? (" split " + std::to_string(buf.a.segs)).c_str() : "", ms, med(k1), med(tot) - med(k1),
              flop / (ms * 1e-3) / 1e12);
  if (wy_alone >= 0)
    std::printf("timing v3 %s: wy kernel alone %.3f ms (median of 20, %lld blocks)\n", describe(p).c_str(), wy_alone,
                static_cast<long long>((p.T + 63) / 64) * p.B * buf.a.HV);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaEventDestroy(e2));
  CK(cudaStreamDestroy(st));
}

// Mixed lengths summing to about `total`: a fixed pattern of short, chunk-edge and long sequences, with an
// empty one (deterministic, so every run checks and times the same batch).
std::vector<int> mixed_lengths(int total) {
  const int pattern[] = {1, 63, 64, 65, 0, 1000, 4096, 127, 2048, 300, 5000, 129, 777, 8191, 31, 64 * 37};
  std::vector<int> lens;
  int sum = 0;
  for (int i = 0; sum < total; ++i) {
    const int l = std::min(pattern[i % 16], total - sum);
    lens.push_back(l);
    sum += l;
  }
  return lens;
}

}  // namespace

// Usage: sm90_fwd_check [--quick | --timing] [--rung 1|2|3] [--features] [--vt 16|32|64]. --timing: the timings
// alone, no checks (rung 3's lines include the wy kernel alone at each dense shape). --vt: rung 3's state slice width
// for the checks' first runs and the timings (default: the launcher's rule; every rung 3 check also compares all
// three widths bit for bit). Default: the three rungs' Gated DeltaNet shapes,
// then (unless --rung excludes 3) rung 3's features, then timings. --quick: small shapes, no timing. --rung N:
// rung N's checks and timings only (the script runs each rung in its own process, so a fault in one leaves the
// others' results). --features: rung 3's feature checks and timings only.
int main(int argc, char** argv) {
  bool quick = false, features_only = false, timing_only = false;
  std::vector<GdnFwdVariant> rungs;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[a], "--features") == 0) {
      features_only = true;
    } else if (std::strcmp(argv[a], "--timing") == 0) {
      timing_only = true;
    } else if (std::strcmp(argv[a], "--rung") == 0 && a + 1 < argc && std::atoi(argv[a + 1]) >= 1 &&
               std::atoi(argv[a + 1]) <= 3) {
      rungs.push_back(static_cast<GdnFwdVariant>(std::atoi(argv[++a])));
    } else if (std::strcmp(argv[a], "--vt") == 0 && a + 1 < argc &&
               (std::atoi(argv[a + 1]) == 16 || std::atoi(argv[a + 1]) == 32 || std::atoi(argv[a + 1]) == 64)) {
      g_vt = std::atoi(argv[++a]);
    } else {
      std::fprintf(stderr, "usage: %s [--quick | --timing] [--rung 1|2|3] [--features] [--vt 16|32|64]\n", argv[0]);
      return 2;
    }
  }
  if (rungs.empty()) rungs = {GdnFwdVariant::p_in_workspace, GdnFwdVariant::p_in_registers, GdnFwdVariant::t_only};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  bool ok = true;
  int i = 0;
  if (!features_only && !timing_only) {
    const Problem shapes[] = {
        {1, 1, 1, false, 2.0},    {1, 33, 1, true, 2.0},    {1, 64, 2, true, -1.0},   {2, 100, 3, true, 2.0},
        {3, 257, 2, false, -1.0}, {2, 1000, 4, true, 8.0},  {1, 4096, 2, true, 8.0},  {2, 4095, 3, false, 4.0},
        {8, 4096, 16, false, 2.0}, {8, 4096, 16, true, 8.0},
    };
    for (const Problem& p : shapes) {
      if (quick && p.T * p.B * p.H > 1 << 16) continue;
      ok = check(p, 1000 + i++, rungs) && ok;
    }
  }
  const bool rung3 = std::find(rungs.begin(), rungs.end(), GdnFwdVariant::t_only) != rungs.end();
  if ((rung3 || features_only) && !timing_only) {
    // Rung 3's features (what glr's dispatch sends it): GVA, packed sequences, bf16 scalars, the members.
    std::vector<Problem> feats;
    auto add = [&](Problem p) { feats.push_back(std::move(p)); };
    add({2, 1000, 2, true, 8.0, 8});                      // GVA, 4 value heads per q/k head
    add({1, 4096, 4, false, 4.0, 8});                     // GVA x2
    {
      Problem p{1, 0, 2, true, 8.0, 4};                   // packed: mixed lengths summing to 32k, GVA
      p.lens = mixed_lengths(32768);
      add(p);
      Problem q{1, 0, 1, true, 4.0, 1};                   // packed, int32 offsets, edges and empties
      q.lens = {0, 1, 63, 64, 65, 0, 128, 129, 1000};
      q.i32 = true;
      add(q);
      Problem r{1, 0, 2, true, 2.0, 2};                   // invalid offsets: NaN outputs, status 1
      r.lens = {100, 200, 300};
      r.bad_offsets = true;
      add(r);
    }
    {
      Problem p{2, 2000, 4, true, 4.0};                   // bf16 g and beta
      p.bf16_scalars = true;
      add(p);
    }
    for (int m = 1; m <= 4; ++m) {
      add({2, 2048, 2, true, 4.0, 4, m});                 // each member, GVA x2
      Problem p{1, 0, 2, false, 8.0, 2, m};               // each member, packed
      p.lens = {500, 0, 64, 1500, 1};
      add(p);
    }
    {
      Problem p{1, 0, 2, true, 6.0, 4, 2};                // Mamba2 packed, bf16 g
      p.lens = mixed_lengths(8192);
      p.bf16_scalars = true;
      add(p);
    }
    {
      Problem p{2, 1000, 2, true, 4.0, 4};               // K = V = 64: GVA
      p.D = 64;
      add(p);
      Problem q{1, 0, 2, true, 8.0, 2};                  // K = V = 64: packed, mixed lengths
      q.lens = mixed_lengths(8192);
      q.D = 64;
      add(q);
      Problem r{2, 1000, 2, false, 4.0, 2, 2};           // K = V = 64: Mamba2
      r.D = 64;
      add(r);
    }
    for (const Problem& p : feats) {
      if (quick && p.T * p.B * std::max(p.HV, p.H) > 1 << 16 && p.lens.empty()) continue;
      ok = check(p, 2000 + i++, {GdnFwdVariant::t_only}) && ok;
    }
  }
  if (!quick) {
    if (!features_only)
      for (GdnFwdVariant var : rungs) {
        timing({8, 4096, 16, false, 2.0}, var);  // the issue's headline shape
        timing({4, 8192, 32, false, 2.0}, var);
        timing({1, 32768, 16, false, 2.0}, var);  // long sequence, few heads: the state kernel has 32 blocks
      }
    if (rung3 || features_only) {
      timing({1, 32768, 16, false, 2.0, 32}, GdnFwdVariant::t_only);  // DESIGN.md's GVA shape (unsplit)
      // The split-sequence state pass (issue 16, few long sequences) against the unsplit lines above: 4, 8 and 16
      // segments (the rule: 8 at HV 16, none at HV 32, on 132 SMs).
      for (int hv : {16, 32})
        for (int sg : {4, 8, 16}) timing({1, 32768, 16, false, 2.0, hv}, GdnFwdVariant::t_only, sg);
      Problem p{1, 0, 16, false, 2.0, 16};
      p.lens = mixed_lengths(32768);
      timing(p, GdnFwdVariant::t_only);  // packed, mixed lengths summing to 32k
      for (int m = 1; m <= 4; ++m) timing({8, 4096, 16, false, 2.0, 16, m}, GdnFwdVariant::t_only);
      Problem k64{16, 2048, 32, false, 2.0, 32};
      k64.D = 64;
      timing(k64, GdnFwdVariant::t_only);  // DESIGN.md's K = V = 64 shape
    }
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
