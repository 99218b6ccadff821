// Broken control, caught by the bounds gate: the grid is rounded up to whole blocks of 256 but the kernel
// has no `if (i < n)`, so whenever n is not a multiple of 256 the last block reads past x and y and writes
// up to 255 floats past the end of z. Exact at the nominal shape (a multiple of 256).
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void add_kernel(cctl::Vec<const float> x, cctl::Vec<const float> y, cctl::Vec<float> z) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  z[i] = x[i] + y[i];  // the defect: no tail guard
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Add a;
  if (int32_t s = cctl::parse_add(call, a)) return s;
  if (a.z.n == 0) return KGATE_OK;
  add_kernel<<<static_cast<unsigned>((a.z.n + 255) / 256), 256, 0, cctl::stream_of(call)>>>(a.x, a.y, a.z);
  return cctl::launched(call);
}
