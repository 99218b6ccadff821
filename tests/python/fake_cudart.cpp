// A stand-in CUDA runtime over host memory: what guard_alloc.cpp calls, with counters the test reads.
#include <cuda_runtime_api.h>
#include <cstdlib>
#include <cstring>
extern "C" {
long fake_mallocs = 0, fake_frees = 0, fake_syncs = 0, fake_live_bytes = 0;
int fake_capturing = 0;
cudaError_t cudaMalloc(void** p, size_t n) {
  size_t* b = static_cast<size_t*>(std::malloc(n + 16));
  if (!b) return cudaErrorMemoryAllocation;
  b[0] = n; *p = b + 2; ++fake_mallocs; fake_live_bytes += (long)n; return cudaSuccess; }
cudaError_t cudaFree(void* p) { if (p) { size_t* b = static_cast<size_t*>(p) - 2; fake_live_bytes -= (long)b[0]; std::free(b); ++fake_frees; } return cudaSuccess; }
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { std::memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { std::memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { std::memset(d, v, n); return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { ++fake_syncs; return cudaSuccess; }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) { *p = std::malloc(n); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFreeHost(void* p) { std::free(p); return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) { *e = reinterpret_cast<cudaEvent_t>(std::malloc(8)); return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* s) {
  *s = fake_capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone; return cudaSuccess; }
}
