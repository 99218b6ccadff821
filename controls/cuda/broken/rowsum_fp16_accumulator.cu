// Broken control, caught by the accumulation gate: the row sum keeps its running total in __half (one
// thread per row, the naive kernel a generator writes when it "stays in the input dtype"), so a long row of
// ones stops growing at 2048, where fp16's spacing reaches 2, while the contract promises f32 accumulation.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void rowsum_kernel(cctl::Mat<const __half> x, cctl::Vec<float> y) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < x.rows; i += stride) {
    __half acc = __float2half(0.0f);
    for (long long j = 0; j < x.cols; ++j) acc = __hadd(acc, x(i, j));  // the defect: an fp16 accumulator
    y[i] = __half2float(acc);
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::RowSum a;
  if (int32_t s = cctl::parse_rowsum(call, a)) return s;
  if (a.x.rows == 0) return KGATE_OK;
  rowsum_kernel<<<cctl::grid_for(a.x.rows, 64), 64, 0, cctl::stream_of(call)>>>(a.x, a.y);
  return cctl::launched(call);
}
