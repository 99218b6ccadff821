// Broken control, caught by the stream gate: the kernel is launched with <<<grid, block>>> on the legacy
// default stream instead of call->stream. It does not wait for work the caller queued on its stream (the
// inputs written just before the call), so it reads inputs that have not arrived yet, and the caller's
// stream completing says nothing about it having finished.
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
  add_kernel<<<cctl::grid_for(a.z.n, 256), 256>>>(a.x, a.y, a.z);  // the defect: no stream argument
  return cctl::launched(call);
}
