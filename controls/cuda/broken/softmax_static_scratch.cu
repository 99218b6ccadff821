// Broken control, caught by the stream gate: a two-kernel softmax that passes each row's maximum and sum
// from the first kernel to the second through a static __device__ scratch array. One call at a time it is
// exact; two calls in flight on two streams overwrite each other's rows, so one normalises with the other's
// statistics. (A generated kernel "saves an allocation" this way.)
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
constexpr long long kMaxRows = 4096;
__device__ float row_max[kMaxRows];  // the defect: state shared by every call in the process
__device__ float row_sum[kMaxRows];

__global__ void stats_kernel(cctl::Mat<const float> x) {
  __shared__ float scratch[cctl::kThreads];
  for (long long i = blockIdx.x; i < x.rows; i += gridDim.x) {
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) m = cctl::max_keep_nan(m, x(i, j));
    m = cctl::block_reduce(m, scratch, cctl::max_keep_nan);
    float sum = 0.0f;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) sum += expf(x(i, j) - m);
    sum = cctl::block_reduce(sum, scratch, [](float a, float b) { return a + b; });
    if (threadIdx.x == 0) row_max[i] = m, row_sum[i] = sum;
  }
}

__global__ void normalise_kernel(cctl::Mat<const float> x, cctl::Mat<float> y) {
  for (long long i = blockIdx.x; i < x.rows; i += gridDim.x) {
    const float m = row_max[i], sum = row_sum[i];
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) y(i, j) = expf(x(i, j) - m) / sum;
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Rows a;
  if (int32_t s = cctl::parse_rows(call, a)) return s;
  if (a.x.rows == 0 || a.x.cols == 0) return KGATE_OK;
  if (a.x.rows > kMaxRows) return cctl::fail(call, KGATE_REFUSED, "at most %lld rows", kMaxRows);
  cudaStream_t s = cctl::stream_of(call);
  const unsigned blocks = cctl::grid_for(a.x.rows, 1, 65535);
  stats_kernel<<<blocks, cctl::kThreads, 0, s>>>(a.x);
  normalise_kernel<<<blocks, cctl::kThreads, 0, s>>>(a.x, a.y);
  return cctl::launched(call);
}
