// Correct control: C = A B with bf16 A (M x K) and B (K x N), f32 accumulation on the tensor cores (wmma
// 16x16x16 bf16 -> f32, HMMA in the SASS) and an f32 C; any shape and any strides. Tiles are staged through
// shared memory with zero padding, so a ragged edge multiplies zeros and every element of C is written
// exactly once. Must pass every gate; the benchmark verifies it at 4096 x 4096 x 4096.
#include <mma.h>

#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {

using namespace nvcuda;

constexpr int kBM = 64, kBN = 64, kBK = 32;  // block tile (BLK_M, BLK_N, BLK_K)
constexpr int kWarps = 4;                    // each warp owns a 32 x 32 quarter: 2 x 2 fragments of 16 x 16
constexpr int kPadAB = 8;                    // bf16 rows padded to keep ldm a multiple of 8 elements
constexpr int kPadC = 4;                     // f32 rows: ldm a multiple of 4

__global__ void __launch_bounds__(kWarps * 32)
    matmul_kernel(cctl::Mat<const __nv_bfloat16> a, cctl::Mat<const __nv_bfloat16> b, cctl::Mat<float> c) {
  // wmma loads and stores need 256-bit aligned tile bases: rows of 80, 144 and 272 bytes at multiples of
  // 16 rows, and column offsets of 16 elements, all land on 32-byte boundaries of these aligned arrays.
  __shared__ __align__(32) __nv_bfloat16 as[kBM][kBK + kPadAB];  // (BLK_M, BLK_K)
  __shared__ __align__(32) __nv_bfloat16 bs[kBK][kBN + kPadAB];  // (BLK_K, BLK_N)
  __shared__ __align__(32) float cs[kBM][kBN + kPadC];           // (BLK_M, BLK_N)
  const long long m = a.rows, k = a.cols, n = b.cols;
  const long long row0 = static_cast<long long>(blockIdx.y) * kBM, col0 = static_cast<long long>(blockIdx.x) * kBN;
  const int warp = threadIdx.x / 32, wr = warp / 2, wc = warp % 2;
  const __nv_bfloat16 zero = __float2bfloat16(0.0f);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (long long k0 = 0; k0 < k; k0 += kBK) {
    for (int e = threadIdx.x; e < kBM * kBK; e += kWarps * 32) {
      const int r = e / kBK, kk = e % kBK;
      as[r][kk] = (row0 + r < m && k0 + kk < k) ? a(row0 + r, k0 + kk) : zero;
    }
    for (int e = threadIdx.x; e < kBK * kBN; e += kWarps * 32) {
      const int kk = e / kBN, cc = e % kBN;
      bs[kk][cc] = (k0 + kk < k && col0 + cc < n) ? b(k0 + kk, col0 + cc) : zero;
    }
    __syncthreads();
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &as[wr * 32 + i * 16][kk], kBK + kPadAB);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &bs[kk][wc * 32 + j * 16], kBN + kPadAB);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wr * 32 + i * 16][wc * 32 + j * 16], acc[i][j], kBN + kPadC, wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < kBM * kBN; e += kWarps * 32) {
    const int r = e / kBN, cc = e % kBN;
    if (row0 + r < m && col0 + cc < n) c(row0 + r, col0 + cc) = cs[r][cc];
  }
}

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Matmul<__nv_bfloat16, float> p;
  if (int32_t s = cctl::parse_matmul(call, cctl::Elem::bf16, cctl::Elem::f32, p)) return s;
  const long long m = p.a.rows, n = p.b.cols;
  if (m == 0 || n == 0) return KGATE_OK;
  if ((m + kBM - 1) / kBM > 65535) return cctl::fail(call, KGATE_REFUSED, "M = %lld needs more than 65535 row tiles", m);
  const dim3 grid(static_cast<unsigned>((n + kBN - 1) / kBN), static_cast<unsigned>((m + kBM - 1) / kBM));
  matmul_kernel<<<grid, kWarps * 32, 0, cctl::stream_of(call)>>>(p.a, p.b, p.c);
  return cctl::launched(call);
}
