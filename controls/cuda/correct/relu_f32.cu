// Correct control: y = max(x, 0) in f32 with NaN propagating (torch.relu semantics), on the caller's stream.
// Must pass every gate; the broken relu controls differ from it in one place each.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void relu_kernel(cctl::Vec<const float> x, cctl::Vec<float> y) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < y.n; i += stride) {
    const float v = x[i];
    y[i] = (v > 0.0f || v != v) ? v : 0.0f;
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Unary<float, float> a;
  if (int32_t s = cctl::parse_unary(call, cctl::Elem::f32, cctl::Elem::f32, a)) return s;
  if (a.y.n == 0) return KGATE_OK;
  relu_kernel<<<cctl::grid_for(a.y.n, 256), 256, 0, cctl::stream_of(call)>>>(a.x, a.y);
  return cctl::launched(call);
}
