// Broken control, caught by the freshness gate: the result is cached by the input's address. When called
// again with the same x pointer and length it copies the cached output instead of computing, so new values
// written into the same buffer are ignored. (Generated "memoising" wrappers do this to win benchmarks that
// call the kernel repeatedly on one tensor.)
#include "ops.cuh"

KGATE_CUDA_CONTROL

namespace {
const void* cached_x = nullptr;  // the defect: the cache key is the address, not the contents
long long cached_n = -1;
float* cache = nullptr;
long long cache_capacity = 0;

__global__ void relu_kernel(cctl::Vec<const float> x, cctl::Vec<float> y, float* keep) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < y.n; i += stride) {
    const float v = x[i];
    const float r = (v > 0.0f || v != v) ? v : 0.0f;
    y[i] = r;
    keep[i] = r;
  }
}

__global__ void replay_kernel(const float* keep, cctl::Vec<float> y) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < y.n; i += stride) y[i] = keep[i];
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  cctl::Unary<float, float> a;
  if (int32_t s = cctl::parse_unary(call, cctl::Elem::f32, cctl::Elem::f32, a)) return s;
  if (a.y.n == 0) return KGATE_OK;
  cudaStream_t s = cctl::stream_of(call);
  const unsigned blocks = cctl::grid_for(a.y.n, 256);
  if (a.x.p == cached_x && a.y.n == cached_n) {
    replay_kernel<<<blocks, 256, 0, s>>>(cache, a.y);
    return cctl::launched(call);
  }
  if (a.y.n > cache_capacity) {
    if (cache) cudaFree(cache);
    cache = nullptr;
    cache_capacity = 0;
    cached_x = nullptr;
    if (cudaMalloc(&cache, static_cast<size_t>(a.y.n) * sizeof(float)) != cudaSuccess) return cctl::launched(call);
    cache_capacity = a.y.n;
  }
  relu_kernel<<<blocks, 256, 0, s>>>(a.x, a.y, cache);
  cached_x = a.x.p;
  cached_n = a.y.n;
  return cctl::launched(call);
}
