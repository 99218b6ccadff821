// What every CUDA control shares: the ABI exports (kgate_device() says kDLCUDA), argument checks, and the
// launch check. Like the CPU controls, they link nothing of kgate's: a candidate never does.
//
// Each control links its own static CUDA runtime, as a candidate built by a harness would. A launch error
// inside one therefore sits in that runtime's error state, not the worker's; the kernel simply never ran,
// and the gates see unwritten outputs. Every control checks its own launches and reports KGATE_ERROR.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "kgate/abi.h"

#define KGATE_CUDA_CONTROL                                                                    \
  extern "C" KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }       \
  extern "C" KGATE_EXPORT int32_t kgate_device(void) { return kDLCUDA; }

namespace cctl {

inline int32_t fail(const kgate_call* c, int32_t status, const char* format, ...) {
  if (c->message && c->message_capacity > 0) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(c->message, c->message_capacity, format, args);
    va_end(args);
  }
  return status;
}

enum class Elem { f16, bf16, f32, f64 };

inline bool has(const DLTensor& t, Elem e) {
  if (t.dtype.lanes != 1) return false;
  switch (e) {
    case Elem::f16: return t.dtype.code == kDLFloat && t.dtype.bits == 16;
    case Elem::bf16: return t.dtype.code == kDLBfloat && t.dtype.bits == 16;
    case Elem::f32: return t.dtype.code == kDLFloat && t.dtype.bits == 32;
    case Elem::f64: return t.dtype.code == kDLFloat && t.dtype.bits == 64;
  }
  return false;
}

inline int32_t check_call(const kgate_call* c, int n_in, int n_out) {
  if (c->abi_version != KGATE_ABI_VERSION)
    return fail(c, KGATE_ERROR, "caller ABI %d, built for %d", c->abi_version, KGATE_ABI_VERSION);
  if (c->n_inputs != n_in || c->n_outputs != n_out)
    return fail(c, KGATE_ERROR, "expected %d inputs and %d outputs, got %d and %d", n_in, n_out, c->n_inputs, c->n_outputs);
  for (int i = 0; i < c->n_inputs + c->n_outputs; ++i) {
    const DLTensor& t = i < c->n_inputs ? c->inputs[i] : c->outputs[i - c->n_inputs];
    if (t.device.device_type != kDLCUDA) return fail(c, KGATE_ERROR, "tensor %d is not on a CUDA device", i);
  }
  return KGATE_OK;
}

inline int32_t check_tensor(const kgate_call* c, const DLTensor& t, const char* name, Elem e, int ndim) {
  if (!has(t, e)) return fail(c, KGATE_ERROR, "%s: unexpected dtype (code %d, %d bits)", name, t.dtype.code, t.dtype.bits);
  if (t.ndim != ndim) return fail(c, KGATE_ERROR, "%s: expected %d dims, got %d", name, ndim, t.ndim);
  return KGATE_OK;
}

inline cudaStream_t stream_of(const kgate_call* c) { return static_cast<cudaStream_t>(c->stream); }

inline double attr(const kgate_call* c, const char* name, double fallback) {
  for (int i = 0; i < c->n_attrs; ++i)
    if (std::strcmp(c->attrs[i].name, name) == 0) return c->attrs[i].value;
  return fallback;
}

// After the launches: KGATE_OK, or KGATE_ERROR naming the CUDA error.
inline int32_t launched(const kgate_call* c) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return KGATE_OK;
  return fail(c, KGATE_ERROR, "launch failed: %s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}

// A 1-D tensor as a base pointer and an element stride.
template <class T>
struct Vec {
  T* p;
  long long n, s;
  __device__ T& operator[](long long i) const { return p[i * s]; }
};
template <class T>
Vec<T> vec(const DLTensor& t) {
  return {static_cast<T*>(t.data), static_cast<long long>(t.shape[0]), static_cast<long long>(t.strides[0])};
}

// A 2-D tensor with row and column strides.
template <class T>
struct Mat {
  T* p;
  long long rows, cols, rs, cs;
  __device__ T& operator()(long long i, long long j) const { return p[i * rs + j * cs]; }
};
template <class T>
Mat<T> mat(const DLTensor& t) {
  return {static_cast<T*>(t.data), static_cast<long long>(t.shape[0]), static_cast<long long>(t.shape[1]),
          static_cast<long long>(t.strides[0]), static_cast<long long>(t.strides[1])};
}

// Blocks for n elements at `threads` each, capped (the kernels stride over the grid).
inline unsigned int grid_for(long long n, int threads, unsigned int cap = 4096) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned int>(b < 1 ? 1 : (b > cap ? cap : b));
}

}  // namespace cctl
