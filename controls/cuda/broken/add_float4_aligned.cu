// Broken control, caught by the layout gate: x, y and z are read and written as float4, which assumes every
// base address is 16-byte aligned (true of a fresh cudaMalloc, not of a view one element in). A misaligned
// view makes the vector access fault (cudaErrorMisalignedAddress), which ends the call as a crash; the
// tail past the last whole float4 is handled, so every aligned shape is exact.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void add_kernel(const float* x, const float* y, float* z, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const auto* x4 = reinterpret_cast<const float4*>(x);  // the defect: alignment assumed, never checked
  const auto* y4 = reinterpret_cast<const float4*>(y);
  auto* z4 = reinterpret_cast<float4*>(z);
  for (long long i = first; i < n / 4; i += stride) {
    const float4 a = x4[i], b = y4[i];
    z4[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
  for (long long i = n / 4 * 4 + first; i < n; i += stride) z[i] = x[i] + y[i];
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Add a;
  if (int32_t s = cctl::parse_add(call, a)) return s;
  if (a.z.n == 0) return KGATE_OK;
  if (a.x.s != 1 || a.y.s != 1 || a.z.s != 1) return cctl::fail(call, KGATE_REFUSED, "contiguous tensors only");
  add_kernel<<<cctl::grid_for(a.z.n / 4 + 1, 256), 256, 0, cctl::stream_of(call)>>>(a.x.p, a.y.p, a.z.p, a.z.n);
  return cctl::launched(call);
}
