// Broken control, caught by the inf gate: y = alpha * x is clamped to +-65504 (fp16's largest finite value)
// before the f16 store, "to avoid Inf", so an Inf input and a product that overflows both come out as
// +-65504 instead of +-Inf. NaN is kept, so only overflow is masked.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void scale_kernel(cctl::Vec<const __half> x, cctl::Vec<__half> y, float alpha) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < y.n; i += stride) {
    float v = alpha * __half2float(x[i]);
    if (v == v) v = fminf(fmaxf(v, -65504.0f), 65504.0f);  // the defect: saturates instead of overflowing
    y[i] = __float2half_rn(v);
  }
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
