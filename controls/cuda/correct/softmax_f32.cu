// Correct control: row softmax in f32, one block per row, any strides. The row maximum keeps NaN (fmaxf
// would drop it) and the sums run in a fixed order, so NaN and Inf spread exactly as the float64 oracle's
// formula says and every run gives the same bits. Must pass every gate.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void softmax_kernel(cctl::Mat<const float> x, cctl::Mat<float> y) {
  __shared__ float scratch[cctl::kThreads];
  for (long long i = blockIdx.x; i < x.rows; i += gridDim.x) {
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) m = cctl::max_keep_nan(m, x(i, j));
    m = cctl::block_reduce(m, scratch, cctl::max_keep_nan);
    float sum = 0.0f;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) sum += expf(x(i, j) - m);
    sum = cctl::block_reduce(sum, scratch, [](float a, float b) { return a + b; });
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) y(i, j) = expf(x(i, j) - m) / sum;
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Rows a;
  if (int32_t s = cctl::parse_rows(call, a)) return s;
  if (a.x.rows == 0 || a.x.cols == 0) return KGATE_OK;
  softmax_kernel<<<cctl::grid_for(a.x.rows, 1, 65535), cctl::kThreads, 0, cctl::stream_of(call)>>>(a.x, a.y);
  return cctl::launched(call);
}
