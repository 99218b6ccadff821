// Broken control, caught by the determinism gate: each row is split over many one-warp blocks (32 elements
// each) whose partial sums are combined with atomicAdd into y. The order in which the atomics land depends
// on scheduling, float addition is not associative, so the same input gives different low bits from run
// to run, while the contract promises bitwise determinism. Accurate to f32, so the oracle gate passes it.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
constexpr int kChunk = 32;

__global__ void zero_kernel(cctl::Vec<float> y) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < y.n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = 0.0f;
}

// grid (chunks of a row, rows)
__global__ void partial_kernel(cctl::Mat<const __half> x, cctl::Vec<float> y) {
  for (long long i = blockIdx.y; i < x.rows; i += gridDim.y) {
    for (long long c = blockIdx.x; c * kChunk < x.cols; c += gridDim.x) {
      const long long j = c * kChunk + threadIdx.x;
      float v = j < x.cols ? __half2float(x(i, j)) : 0.0f;
      for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
      if (threadIdx.x == 0) atomicAdd(&y[i], v);  // the defect: the order of these adds varies
    }
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::RowSum a;
  if (int32_t s = cctl::parse_rowsum(call, a)) return s;
  if (a.x.rows == 0) return KGATE_OK;
  cudaStream_t s = cctl::stream_of(call);
  zero_kernel<<<cctl::grid_for(a.y.n, 256), 256, 0, s>>>(a.y);
  const long long chunks = (a.x.cols + kChunk - 1) / kChunk;
  const dim3 grid(static_cast<unsigned>(chunks < 1 ? 1 : (chunks > 4096 ? 4096 : chunks)),
                  static_cast<unsigned>(a.x.rows > 65535 ? 65535 : a.x.rows));
  partial_kernel<<<grid, kChunk, 0, s>>>(a.x, a.y);
  return cctl::launched(call);
}
