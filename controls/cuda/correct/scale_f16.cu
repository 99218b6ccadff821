// Correct control: y = alpha * x in f16 (alpha an attr, 4 in the contract), computed in f32 and rounded
// once to f16, so overflow becomes Inf exactly as IEEE says. Must pass every gate.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void scale_kernel(cctl::Vec<const __half> x, cctl::Vec<__half> y, float alpha) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < y.n; i += stride)
    y[i] = __float2half_rn(alpha * __half2float(x[i]));
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Unary<__half, __half> a;
  if (int32_t s = cctl::parse_unary(call, cctl::Elem::f16, cctl::Elem::f16, a)) return s;
  if (a.y.n == 0) return KGATE_OK;
  const float alpha = static_cast<float>(cctl::attr(call, "alpha", 1.0));
  scale_kernel<<<cctl::grid_for(a.y.n, 256), 256, 0, cctl::stream_of(call)>>>(a.x, a.y, alpha);
  return cctl::launched(call);
}
