// Float64 oracle of C = A B on the GPU (kgate_device() = kDLCUDA): a CPU double matmul at 4096^3 takes
// minutes, this takes tens of milliseconds. A plain shared-memory tiled kernel, every product and sum in
// IEEE double with no FMA contraction (-fmad=false for this file), the sum over k in order 0..K-1 like the
// CPU oracle, any strides. Non-finite values follow IEEE arithmetic (Inf * 0 = NaN).
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
constexpr int kTile = 16;

__global__ void matmul_f64_kernel(cctl::Mat<const double> a, cctl::Mat<const double> b, cctl::Mat<double> c) {
  __shared__ double as[kTile][kTile];
  __shared__ double bs[kTile][kTile + 1];
  const long long m = a.rows, k = a.cols, n = b.cols;
  const long long i = static_cast<long long>(blockIdx.y) * kTile + threadIdx.y;
  const long long j = static_cast<long long>(blockIdx.x) * kTile + threadIdx.x;
  double acc = 0.0;
  for (long long k0 = 0; k0 < k; k0 += kTile) {
    const long long ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (i < m && ka < k) ? a(i, ka) : 0.0;
    bs[threadIdx.y][threadIdx.x] = (kb < k && j < n) ? b(kb, j) : 0.0;
    __syncthreads();
    const int steps = k - k0 < kTile ? static_cast<int>(k - k0) : kTile;  // no padded terms: 0 * Inf is NaN
    for (int t = 0; t < steps; ++t) acc += as[threadIdx.y][t] * bs[t][threadIdx.x];
    __syncthreads();
  }
  if (i < m && j < n) c(i, j) = acc;
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  cctl::Matmul<double, double> p;
  if (int32_t s = cctl::parse_matmul(call, cctl::Elem::f64, cctl::Elem::f64, p)) return s;
  const long long m = p.a.rows, n = p.b.cols;
  if (m == 0 || n == 0) return KGATE_OK;
  if ((m + kTile - 1) / kTile > 65535) return cctl::fail(call, KGATE_ERROR, "M = %lld is too large", m);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  matmul_f64_kernel<<<grid, dim3(kTile, kTile), 0, cctl::stream_of(call)>>>(p.a, p.b, p.c);
  return cctl::launched(call);
}
