// Broken control, caught by the coverage gate: the grid is n / 256 blocks, rounded down, with no grid-stride
// loop, so the last n % 256 outputs are never written (and for n < 256 nothing is). Exact at the nominal
// shape, a multiple of 256; at any other length the tail keeps whatever the buffer held.
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
__global__ void relu_kernel(cctl::Vec<const float> x, cctl::Vec<float> y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < y.n) {
    const float v = x[i];
    y[i] = (v > 0.0f || v != v) ? v : 0.0f;
  }
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Unary<float, float> a;
  if (int32_t s = cctl::parse_unary(call, cctl::Elem::f32, cctl::Elem::f32, a)) return s;
  const long long blocks = a.y.n / 256;  // the defect: rounds down
  if (blocks == 0) return KGATE_OK;
  relu_kernel<<<static_cast<unsigned>(blocks), 256, 0, cctl::stream_of(call)>>>(a.x, a.y);
  return cctl::launched(call);
}
