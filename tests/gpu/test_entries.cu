// Test entry points for the CUDA backend tests (see test_entries.hpp).
#include "test_entries.hpp"

#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

namespace kgate::gputest {
namespace {

double attr(const kgate_call& c, const char* name, double fallback) {
  for (int i = 0; i < c.n_attrs; ++i)
    if (std::strcmp(c.attrs[i].name, name) == 0) return c.attrs[i].value;
  return fallback;
}

long long numel(const DLTensor& t) {
  long long n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}

std::int32_t status_of(const kgate_call& c, cudaError_t e) {
  if (e == cudaSuccess) return KGATE_OK;
  std::snprintf(c.message, c.message_capacity, "%s", cudaGetErrorName(e));
  return KGATE_ERROR;
}

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void copy_kernel(const float* x, float* y, long long n, unsigned long long spin_ns) {
  if (spin_ns && blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long start = now_ns();
    while (now_ns() - start < spin_ns) __nanosleep(1000);
  }
  if (spin_ns) __syncthreads();  // only block 0 spins; with one block that is the whole kernel
  for (long long i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i];
}

__global__ void store_byte(unsigned char* p, unsigned char v) { *p = v; }

__global__ void store_wild(float* p) { *p = 1.0f; }

__global__ void noop() {}

__device__ int rendezvous_flags[2];

__global__ void rendezvous_kernel(float* y, int slot, int round) {
  atomicExch(&rendezvous_flags[slot], round);
  const unsigned long long start = now_ns();
  float seen = 0.0f;
  while (now_ns() - start < 2000000000ull) {
    if (atomicAdd(&rendezvous_flags[1 - slot], 0) == round) {
      seen = 1.0f;
      break;
    }
    __nanosleep(1000);
  }
  y[0] = seen;
}

std::int32_t copy_with(const kgate_call& c, cudaStream_t s, unsigned long long spin_ns) {
  copy_kernel<<<1, 256, 0, s>>>(static_cast<const float*>(c.inputs[0].data), static_cast<float*>(c.outputs[0].data),
                                numel(c.inputs[0]), spin_ns);
  return status_of(c, cudaGetLastError());
}

}  // namespace

std::int32_t copy_on_stream(const kgate_call& c) { return copy_with(c, static_cast<cudaStream_t>(c.stream), 0); }

std::int32_t copy_on_legacy(const kgate_call& c) { return copy_with(c, nullptr, 0); }

std::int32_t copy_on_stray(const kgate_call& c) {
  static cudaStream_t stray = [] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  return copy_with(c, stray, 100000000ull);
}

std::int32_t write_before(const kgate_call& c) {
  auto* p = static_cast<unsigned char*>(c.outputs[0].data) - 1;
  store_byte<<<1, 1, 0, static_cast<cudaStream_t>(c.stream)>>>(p, static_cast<unsigned char>(attr(c, "byte", 0)));
  return status_of(c, cudaGetLastError());
}

std::int32_t write_after(const kgate_call& c) {
  auto* p = static_cast<unsigned char*>(c.outputs[0].data) + numel(c.outputs[0]) * (c.outputs[0].dtype.bits / 8);
  store_byte<<<1, 1, 0, static_cast<cudaStream_t>(c.stream)>>>(p, static_cast<unsigned char>(attr(c, "byte", 0)));
  return status_of(c, cudaGetLastError());
}

std::int32_t write_nothing(const kgate_call&) { return KGATE_OK; }

std::int32_t report_stream(const kgate_call& c) {
  const char* what = "null";
  if (c.stream) {
    unsigned int flags = 0;
    if (cudaStreamGetFlags(static_cast<cudaStream_t>(c.stream), &flags) != cudaSuccess) return status_of(c, cudaGetLastError());
    what = (flags & cudaStreamNonBlocking) ? "nonblocking" : "blocking";
  }
  std::snprintf(c.message, c.message_capacity, "%s", what);
  return KGATE_OK;
}

std::int32_t bad_launch(const kgate_call& c) {
  noop<<<1, 4096, 0, static_cast<cudaStream_t>(c.stream)>>>();
  return KGATE_OK;  // the error stays pending, as in a candidate that never checks its launches
}

std::int32_t illegal_address(const kgate_call& c) {
  store_wild<<<1, 1, 0, static_cast<cudaStream_t>(c.stream)>>>(reinterpret_cast<float*>(0x10));
  return KGATE_OK;
}

std::int32_t rendezvous(const kgate_call& c) {
  rendezvous_kernel<<<1, 1, 0, static_cast<cudaStream_t>(c.stream)>>>(
      static_cast<float*>(c.outputs[0].data), static_cast<int>(attr(c, "slot", 0)), static_cast<int>(attr(c, "round", 1)));
  return status_of(c, cudaGetLastError());
}

}  // namespace kgate::gputest
