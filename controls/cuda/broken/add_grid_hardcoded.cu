// Broken control, caught by the shapes gate: the grid is sized for the nominal shape the kernel was tuned on
// (65536 elements, 256 blocks of 256) instead of from n. The tail guard keeps it in bounds, so at the
// nominal shape and below it is exact; above it, every element past 65536 is never written.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
constexpr long long kTunedFor = 65536;  // the defect: a constant where n belongs

__global__ void add_kernel(cctl::Vec<const float> x, cctl::Vec<const float> y, cctl::Vec<float> z) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < z.n) z[i] = x[i] + y[i];
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Add a;
  if (int32_t s = cctl::parse_add(call, a)) return s;
  add_kernel<<<static_cast<unsigned>(kTunedFor / 256), 256, 0, cctl::stream_of(call)>>>(a.x, a.y, a.z);
  return cctl::launched(call);
}
