// Correct control: z = x + y in f32, a grid-stride loop on the caller's stream with a tail guard, any
// alignment and stride. Must pass every gate. (The benchmark verifies it at 16M elements.)
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void add_kernel(cctl::Vec<const float> x, cctl::Vec<const float> y, cctl::Vec<float> z) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < z.n; i += stride)
    z[i] = x[i] + y[i];
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Add a;
  if (int32_t s = cctl::parse_add(call, a)) return s;
  if (a.z.n == 0) return KGATE_OK;
  add_kernel<<<cctl::grid_for(a.z.n, 256), 256, 0, cctl::stream_of(call)>>>(a.x, a.y, a.z);
  return cctl::launched(call);
}
