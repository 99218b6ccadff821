// bench/glr/sm90_check_util.cuh: what the forward's and the backward's GPU checks (sm90_fwd_check.cu,
// sm90_bwd_check.cu) share: the CUDA error check, counter-based normal draws, rows of bf16 features, the normwise
// and max error of an output against its float64 reference, and the count of differing 32-bit words (bitwise
// determinism). Included inside each program's anonymous namespace.
#pragma once

#define CK(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e_ = (x);                                                                              \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
      std::printf("FAIL: CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);      \
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
// rows of D (64 or 128): normal, optionally L2-normalised, to bf16. One warp per row.
__global__ void fill_rows(__nv_bfloat16* x, std::int64_t rows, int D, std::uint64_t seed, std::uint64_t stream, bool unit) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31, per = D / 32;
  if (row >= rows) return;
  double val[4], ss = 0;
  for (int u = 0; u < per; ++u) {
    val[u] = normal(seed, stream, row * D + lane + 32 * u);
    ss += val[u] * val[u];
  }
  for (int off = 16; off; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const double f = unit ? 1.0 / sqrt(ss) : 1.0;
  for (int u = 0; u < per; ++u) x[row * D + lane + 32 * u] = __float2bfloat16_rn(static_cast<float>(val[u] * f));
}
// ---- error measures ----------------------------------------------------------------------------------------
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
  if (c) atomicAdd(out, c);  // a count of differing words: the order of the additions does not matter
}

struct Err {
  double rel2 = 0, relmax = 0, bad = 0;
};
template <class X>
Err error_of(const X* x, const double* r, std::int64_t n) {
  if (n == 0) return {};
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
  // an all-zero reference (dg with no state anywhere, T = 1) needs an exact zero
  return {t.r2 > 0 ? std::sqrt(t.d2 / t.r2) : (t.d2 > 0 ? INFINITY : 0.0), t.rmax > 0 ? t.dmax / t.rmax : 0.0, t.bad};
}
unsigned long long differing_words(const void* a, const void* b, std::size_t bytes) {
  if (bytes == 0) return 0;
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
