// Broken control, caught by the immutability gate: the softmax subtracts the row maximum from x in place
// (casting away const to "save a temporary"), then exponentiates the shifted input. softmax is shift
// invariant and a second call on the shifted row recomputes the very same bits, so every output is right;
// only the caller's input has changed.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void softmax_kernel(cctl::Mat<float> x, cctl::Mat<float> y) {
  __shared__ float scratch[cctl::kThreads];
  for (long long i = blockIdx.x; i < x.rows; i += gridDim.x) {
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) m = cctl::max_keep_nan(m, x(i, j));
    m = cctl::block_reduce(m, scratch, cctl::max_keep_nan);
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) x(i, j) = x(i, j) - m;  // the defect
    float sum = 0.0f;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) sum += expf(x(i, j));
    sum = cctl::block_reduce(sum, scratch, [](float a, float b) { return a + b; });
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) y(i, j) = expf(x(i, j)) / sum;
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Rows a;
  if (int32_t s = cctl::parse_rows(call, a)) return s;
  if (a.x.rows == 0 || a.x.cols == 0) return KGATE_OK;
  cctl::Mat<float> writable{const_cast<float*>(a.x.p), a.x.rows, a.x.cols, a.x.rs, a.x.cs};
  softmax_kernel<<<cctl::grid_for(a.x.rows, 1, 65535), cctl::kThreads, 0, cctl::stream_of(call)>>>(writable, a.y);
  return cctl::launched(call);
}
