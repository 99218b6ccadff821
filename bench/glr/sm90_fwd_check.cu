// bench/glr/sm90_fwd_check.cu: check and time the tensor-core Gated DeltaNet forward
// (glr/cuda/sm90/gdn_fwd_mma.cuh) against a float64 sequential recurrence on the GPU.
//
// Build and run: bench/glr/sm90_check.sh (one nvcc command, then the program). Exits non-zero when any
// shape's error is over its bound, an output is non-finite or unwritten, or two runs differ in one bit.
//
// Reference: per (b, h) one block walks the tokens in order, S in float64 in shared memory,
//     S_t = e^{g_t} S_{t-1} + k_t (beta_t (v_t - e^{g_t} k_t^T S_{t-1}))^T,   o_t = scale S_t^T q_t
// on the same bf16 inputs (converted exactly to float64).
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
#include <vector>

#include "../../glr/cuda/sm90/gdn_fwd_mma.cuh"

namespace {

using glr::cuda::sm90::GdnFwdArgs;
using glr::cuda::sm90::GdnFwdVariant;
constexpr int KD = 128, VD = 128;

#define CK(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e_ = (x);                                                                              \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
      std::exit(2);                                                                                    \
    }                                                                                                  \
  } while (0)

// Counter-based normal draws: splitmix64 of (seed, stream, index), Box-Muller.
__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ double normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const std::uint64_t r = mix(seed ^ mix(stream * 0x1000003ull + i));
  const double u1 = ((r >> 11) + 1) * (1.0 / 9007199254740993.0);  // (0, 1]
  const double u2 = (mix(r) >> 11) * (1.0 / 9007199254740992.0);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// rows of 128: normal, optionally L2-normalised, to bf16. One warp per row.
__global__ void fill_rows(__nv_bfloat16* x, std::int64_t rows, std::uint64_t seed, std::uint64_t stream, bool unit) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  double val[4], ss = 0;
  for (int u = 0; u < 4; ++u) {
    val[u] = normal(seed, stream, row * 128 + lane + 32 * u);
    ss += val[u] * val[u];
  }
  for (int off = 16; off; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const double f = unit ? 1.0 / sqrt(ss) : 1.0;
  for (int u = 0; u < 4; ++u) x[row * 128 + lane + 32 * u] = __float2bfloat16_rn(static_cast<float>(val[u] * f));
}
// g = logsigmoid(mu + z), beta = sigmoid(z'), h0 = 0.1 z''.
__global__ void fill_scalars(float* g, float* beta, std::int64_t n, std::uint64_t seed, double mu) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double x = mu + normal(seed, 11, i);
  g[i] = static_cast<float>(-log1p(exp(-x)));
  beta[i] = static_cast<float>(1.0 / (1.0 + exp(-normal(seed, 12, i))));
}
__global__ void fill_state(float* h, std::int64_t n, std::uint64_t seed) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) h[i] = static_cast<float>(0.1 * normal(seed, 13, i));
}

// float64 sequential recurrence: one block per (b, h), thread = state column.
__global__ void __launch_bounds__(128) reference(GdnFwdArgs a, double* o, double* ht) {
  extern __shared__ double S[];  // (K, V)
  __shared__ double qs[KD], ks[KD];
  const int bh = blockIdx.x, b = bh / a.H, h = bh % a.H, v = threadIdx.x;
  for (int d = 0; d < KD; ++d)
    S[d * VD + v] = a.h0 ? static_cast<double>(a.h0[(static_cast<std::int64_t>(bh) * KD + d) * VD + v]) : 0.0;
  for (int t = 0; t < a.T; ++t) {
    const std::int64_t tok = (static_cast<std::int64_t>(b) * a.T + t) * a.H + h;
    __syncthreads();
    qs[v] = __bfloat162float(a.q[tok * KD + v]);
    ks[v] = __bfloat162float(a.k[tok * KD + v]);
    __syncthreads();
    const double e = exp(static_cast<double>(a.g[tok])), bt = a.beta[tok];
    double p0 = 0, p1 = 0, p2 = 0, p3 = 0;
    for (int d = 0; d < KD; d += 4) {
      p0 += ks[d] * S[d * VD + v];
      p1 += ks[d + 1] * S[(d + 1) * VD + v];
      p2 += ks[d + 2] * S[(d + 2) * VD + v];
      p3 += ks[d + 3] * S[(d + 3) * VD + v];
    }
    const double kS = (p0 + p1) + (p2 + p3);
    const double dn = bt * (static_cast<double>(__bfloat162float(a.v[tok * VD + v])) - e * kS);
    double o0 = 0, o1 = 0;
    for (int d = 0; d < KD; d += 2) {
      const double s0 = e * S[d * VD + v] + ks[d] * dn, s1 = e * S[(d + 1) * VD + v] + ks[d + 1] * dn;
      S[d * VD + v] = s0;
      S[(d + 1) * VD + v] = s1;
      o0 += qs[d] * s0;
      o1 += qs[d + 1] * s1;
    }
    o[tok * VD + v] = a.scale * (o0 + o1);
  }
  for (int d = 0; d < KD; ++d) ht[(static_cast<std::int64_t>(bh) * KD + d) * VD + v] = S[d * VD + v];
}

// Error partials per block: sum (x - r)^2, sum r^2, max |x - r|, max |r|, non-finite count.
struct Partial {
  double d2, r2, dmax, rmax, bad;
};
template <class X>
__device__ __forceinline__ double as_double(X x) {
  if constexpr (sizeof(X) == 2)
    return __bfloat162float(x);
  else
    return static_cast<double>(x);
}
template <class X>
__global__ void error_partials(const X* x, const double* r, std::int64_t n, Partial* out) {
  __shared__ Partial sh[256];
  Partial p{0, 0, 0, 0, 0};
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double xv = as_double(x[i]), rv = r[i];
    if (!isfinite(xv)) {
      p.bad += 1;
      continue;
    }
    const double d = xv - rv;
    p.d2 += d * d;
    p.r2 += rv * rv;
    p.dmax = fmax(p.dmax, fabs(d));
    p.rmax = fmax(p.rmax, fabs(rv));
  }
  sh[threadIdx.x] = p;
  __syncthreads();
  for (int s = 128; s; s >>= 1) {
    if (threadIdx.x < s) {
      Partial& A = sh[threadIdx.x];
      const Partial& Bp = sh[threadIdx.x + s];
      A.d2 += Bp.d2;
      A.r2 += Bp.r2;
      A.dmax = fmax(A.dmax, Bp.dmax);
      A.rmax = fmax(A.rmax, Bp.rmax);
      A.bad += Bp.bad;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}

__global__ void count_diff(const std::uint32_t* a, const std::uint32_t* b, std::int64_t n, unsigned long long* out) {
  unsigned long long c = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    c += a[i] != b[i];
  if (c) atomicAdd(out, c);
}

struct Err {
  double rel2, relmax, bad;
};
template <class X>
Err error_of(const X* x, const double* r, std::int64_t n) {
  const int blocks = 512;
  Partial* d;
  CK(cudaMalloc(&d, blocks * sizeof(Partial)));
  error_partials<X><<<blocks, 256>>>(x, r, n, d);
  CK(cudaGetLastError());
  std::vector<Partial> h(blocks);
  CK(cudaMemcpy(h.data(), d, blocks * sizeof(Partial), cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  Partial t{0, 0, 0, 0, 0};
  for (const Partial& p : h) {
    t.d2 += p.d2;
    t.r2 += p.r2;
    t.dmax = std::max(t.dmax, p.dmax);
    t.rmax = std::max(t.rmax, p.rmax);
    t.bad += p.bad;
  }
  return {std::sqrt(t.d2 / std::max(t.r2, 1e-300)), t.dmax / std::max(t.rmax, 1e-300), t.bad};
}

unsigned long long differing_words(const void* a, const void* b, std::size_t bytes) {
  unsigned long long* d;
  CK(cudaMalloc(&d, sizeof(unsigned long long)));
  CK(cudaMemset(d, 0, sizeof(unsigned long long)));
  count_diff<<<1024, 256>>>(static_cast<const std::uint32_t*>(a), static_cast<const std::uint32_t*>(b),
                            static_cast<std::int64_t>(bytes / 4), d);
  CK(cudaGetLastError());
  unsigned long long h = 0;
  CK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  return h;
}

struct Problem {
  int B, T, H;
  bool h0;
  double mu;  // g = logsigmoid(mu + z), z ~ N(0, 1): a chunk keeps about e^{-64 E[-g]} of the state: mu -1 and 2
              // forget it within a chunk, 4 keep a third, 8 nearly all (the cross-chunk path matters)
};

struct Buffers {
  GdnFwdArgs a;
  void* ws = nullptr;
  std::size_t o_bytes = 0, h_bytes = 0;
  explicit Buffers(const Problem& p, std::uint64_t seed) {
    a.B = p.B;
    a.T = p.T;
    a.H = p.H;
    a.scale = 1.0f / std::sqrt(static_cast<float>(KD));
    const std::int64_t tok = static_cast<std::int64_t>(p.B) * p.T * p.H;
    const std::int64_t hs = static_cast<std::int64_t>(p.B) * p.H * KD * VD;
    o_bytes = tok * VD * 2;
    h_bytes = hs * 4;
    __nv_bfloat16 *q, *k, *v, *o;
    float *g, *beta, *h0 = nullptr, *ht;
    CK(cudaMalloc(&q, tok * KD * 2));
    CK(cudaMalloc(&k, tok * KD * 2));
    CK(cudaMalloc(&v, tok * VD * 2));
    CK(cudaMalloc(&o, o_bytes));
    CK(cudaMalloc(&g, tok * 4));
    CK(cudaMalloc(&beta, tok * 4));
    CK(cudaMalloc(&ht, h_bytes));
    const unsigned rb = static_cast<unsigned>((tok * 32 + 255) / 256);
    fill_rows<<<rb, 256>>>(q, tok, seed, 1, true);
    fill_rows<<<rb, 256>>>(k, tok, seed, 2, true);
    fill_rows<<<rb, 256>>>(v, tok, seed, 3, false);
    fill_scalars<<<static_cast<unsigned>((tok + 255) / 256), 256>>>(g, beta, tok, seed, p.mu);
    if (p.h0) {
      CK(cudaMalloc(&h0, h_bytes));
      fill_state<<<static_cast<unsigned>((hs + 255) / 256), 256>>>(h0, hs, seed);
    }
    CK(cudaGetLastError());
    a.q = q;
    a.k = k;
    a.v = v;
    a.o = o;
    a.g = g;
    a.beta = beta;
    a.h0 = h0;
    a.ht = ht;
    CK(cudaMalloc(&ws, std::max<std::size_t>(glr::cuda::sm90::gdn_fwd_workspace_bytes(p.B, p.T, p.H, glr::cuda::sm90::GdnFwdVariant::p_in_workspace), 256)));
    glr::cuda::sm90::gdn_fwd_workspace_carve(a, ws, glr::cuda::sm90::GdnFwdVariant::p_in_workspace);
  }
  ~Buffers() {
    cudaFree(const_cast<__nv_bfloat16*>(a.q));
    cudaFree(const_cast<__nv_bfloat16*>(a.k));
    cudaFree(const_cast<__nv_bfloat16*>(a.v));
    cudaFree(a.o);
    cudaFree(const_cast<float*>(a.g));
    cudaFree(const_cast<float*>(a.beta));
    if (a.h0) cudaFree(const_cast<float*>(a.h0));
    cudaFree(a.ht);
    cudaFree(ws);
  }
  // Outputs poisoned with NaN (0xFFFF bf16, 0xFFFFFFFF fp32) first: an unwritten element fails the check.
  void run_poisoned(GdnFwdVariant var) {
    glr::cuda::sm90::gdn_fwd_workspace_carve(a, ws, var);  // rung 3: W = U = null (it must not need them)
    CK(cudaMemset(a.o, 0xFF, o_bytes));
    CK(cudaMemset(a.ht, 0xFF, h_bytes));
    CK(glr::cuda::sm90::gdn_fwd_mma(a, nullptr, var));
    CK(cudaDeviceSynchronize());
  }
};

std::vector<GdnFwdVariant> g_rungs;  // the rungs to check and time (--rung N, default all three)

bool check(const Problem& p, std::uint64_t seed) {
  Buffers buf(p, seed);
  const std::int64_t tok = static_cast<std::int64_t>(p.B) * p.T * p.H;
  const std::int64_t hs = static_cast<std::int64_t>(p.B) * p.H * KD * VD;
  double *ro, *rh;
  CK(cudaMalloc(&ro, tok * VD * 8));
  CK(cudaMalloc(&rh, hs * 8));
  CK(cudaFuncSetAttribute(reference, cudaFuncAttributeMaxDynamicSharedMemorySize, KD * VD * 8));
  reference<<<p.B * p.H, 128, KD * VD * 8>>>(buf.a, ro, rh);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  bool ok = true;
  for (GdnFwdVariant var : g_rungs) {
    buf.run_poisoned(var);
    const Err eo = error_of(buf.a.o, ro, tok * VD);
    const Err eh = error_of(buf.a.ht, rh, hs);
    // Second run, outputs poisoned again: bitwise equal.
    void *o1, *h1;
    CK(cudaMalloc(&o1, buf.o_bytes));
    CK(cudaMalloc(&h1, buf.h_bytes));
    CK(cudaMemcpy(o1, buf.a.o, buf.o_bytes, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(h1, buf.a.ht, buf.h_bytes, cudaMemcpyDeviceToDevice));
    buf.run_poisoned(var);
    const unsigned long long diff =
        differing_words(o1, buf.a.o, buf.o_bytes) + differing_words(h1, buf.a.ht, buf.h_bytes);
    CK(cudaFree(o1));
    CK(cudaFree(h1));

    const double u = std::ldexp(1.0, -9), tol2 = 8 * u, tolmax = 32 * u;
    const bool pass = eo.bad == 0 && eh.bad == 0 && eo.rel2 <= tol2 && eh.rel2 <= tol2 && eo.relmax <= tolmax &&
                      eh.relmax <= tolmax && diff == 0;
    std::printf("v%d B%-2d T%-5d H%-2d h0=%d mu=%+.0f | o: rel2 %.2e relmax %.2e nonfinite %.0f | ht: rel2 %.2e relmax "
                "%.2e nonfinite %.0f | run-to-run differing words %llu | %s\n",
                static_cast<int>(var), p.B, p.T, p.H, p.h0 ? 1 : 0, p.mu, eo.rel2, eo.relmax, eo.bad, eh.rel2, eh.relmax,
                eh.bad, diff, pass ? "PASS" : "FAIL");
    ok = ok && pass;
  }
  CK(cudaFree(ro));
  CK(cudaFree(rh));
  return ok;
}

void timing(int B, int T, int H, GdnFwdVariant var) {
  Buffers buf(Problem{B, T, H, false, 2.0}, 7);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  glr::cuda::sm90::gdn_fwd_workspace_carve(buf.a, buf.ws, var);
  for (int i = 0; i < 3; ++i) CK(glr::cuda::sm90::gdn_fwd_mma(buf.a, st, var));
  CK(cudaStreamSynchronize(st));
  {
    namespace gdn = glr::cuda::sm90::gdn;
    const int r = static_cast<int>(var);
    void (*wyk)(GdnFwdArgs) = r == 1 ? gdn::wy_kernel<1> : r == 2 ? gdn::wy_kernel<2> : gdn::wy_kernel<3>;
    void (*stk)(GdnFwdArgs) = r == 1 ? gdn::state_kernel<false> : r == 2 ? gdn::state_kernel<true> : gdn::state_t_kernel;
    const std::size_t st_smem = r == 1   ? sizeof(gdn::StateSmem<false>)
                                : r == 2 ? sizeof(gdn::StateSmem<true>)
                                         : sizeof(gdn::StateTSmem);
    int wy = 0, state = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&wy, wyk, 128, gdn::wy_smem_bytes(r)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&state, stk, 128, st_smem));
    std::printf("v%d resident blocks per SM: wy %d (%zu B shared), state %d (%zu B shared); workspace %.1f MB\n", r, wy,
                gdn::wy_smem_bytes(r), state, st_smem,
                glr::cuda::sm90::gdn_fwd_workspace_bytes(B, T, H, var) / 1e6);
  }
  std::vector<float> tot, k1;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0, st));
    CK(glr::cuda::sm90::gdn_fwd_mma(buf.a, st, var, e1));  // e1 between the two kernels
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
    CK(glr::cuda::sm90::gdn_fwd_mma(buf.a, st, var));
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
  // DESIGN.md's convention: fwd FLOP per token and value head 2 (3 K V + C (3 K + 2 V)), C = 64.
  const double flop = 2.0 * (3.0 * KD * VD + 64.0 * (3.0 * KD + 2.0 * VD)) * B * static_cast<double>(T) * H;
  const double ms = med(whole);
  std::printf("timing v%d B%d T%d H%d K=V=128 bf16: forward %.3f ms (median of 20; wy %.3f ms, state+output %.3f ms), "
              "%.1f effective TFLOP/s\n",
              static_cast<int>(var), B, T, H, ms, med(k1), med(tot) - med(k1), flop / (ms * 1e-3) / 1e12);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaEventDestroy(e2));
  CK(cudaStreamDestroy(st));
}

}  // namespace

// Usage: sm90_fwd_check [--quick] [--rung 1|2|3]. --quick: small shapes, no timing. --rung: one rung only
// (the script runs each rung in its own process, so a fault in one leaves the others' results).
int main(int argc, char** argv) {
  bool quick = false;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[a], "--rung") == 0 && a + 1 < argc && std::atoi(argv[a + 1]) >= 1 &&
               std::atoi(argv[a + 1]) <= 3) {
      g_rungs.push_back(static_cast<GdnFwdVariant>(std::atoi(argv[++a])));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--rung 1|2|3]\n", argv[0]);
      return 2;
    }
  }
  if (g_rungs.empty()) g_rungs = {GdnFwdVariant::p_in_workspace, GdnFwdVariant::p_in_registers, GdnFwdVariant::t_only};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  const Problem shapes[] = {
      {1, 1, 1, false, 2.0},    {1, 33, 1, true, 2.0},    {1, 64, 2, true, -1.0},   {2, 100, 3, true, 2.0},
      {3, 257, 2, false, -1.0}, {2, 1000, 4, true, 8.0},  {1, 4096, 2, true, 8.0},  {2, 4095, 3, false, 4.0},
      {8, 4096, 16, false, 2.0}, {8, 4096, 16, true, 8.0},
  };
  bool ok = true;
  int i = 0;
  for (const Problem& p : shapes) {
    if (quick && p.T * p.B * p.H > 1 << 16) continue;
    ok = check(p, 1000 + i++) && ok;
  }
  if (!quick) {
    for (GdnFwdVariant var : g_rungs) {
      timing(8, 4096, 16, var);  // the issue's headline shape
      timing(4, 8192, 32, var);
      timing(1, 32768, 16, var);  // long sequence, few heads: the state kernel has 32 blocks (no split-sequence grid)
    }
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
