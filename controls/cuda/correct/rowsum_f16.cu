// Correct control: y_i = sum_j x_ij, f16 inputs accumulated in f32 as the contract promises, one block per
// row: each thread sums its strided share in a fixed order, then a fixed-order tree. Deterministic. Must
// pass every gate; the broken rowsum controls change the accumulator or the order.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void rowsum_kernel(cctl::Mat<const __half> x, cctl::Vec<float> y) {
  __shared__ float scratch[cctl::kThreads];
  for (long long i = blockIdx.x; i < x.rows; i += gridDim.x) {
    float acc = 0.0f;
    for (long long j = threadIdx.x; j < x.cols; j += cctl::kThreads) acc += __half2float(x(i, j));
    const float total = cctl::block_reduce(acc, scratch, [](float a, float b) { return a + b; });
    if (threadIdx.x == 0) y[i] = total;
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::RowSum a;
  if (int32_t s = cctl::parse_rowsum(call, a)) return s;
  if (a.x.rows == 0) return KGATE_OK;
  rowsum_kernel<<<cctl::grid_for(a.x.rows, 1, 65535), cctl::kThreads, 0, cctl::stream_of(call)>>>(a.x, a.y);
  return cctl::launched(call);
}
