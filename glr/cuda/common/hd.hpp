// glr/cuda/common/hd.hpp: what every glr CUDA stage is written in, so the same source runs as a CUDA kernel
// and, phase by phase, on the host (the emulator in glr/cuda/emu).
//
// - GLR_HD marks a function callable on both sides. Under g++ it is empty; under nvcc it is
//   __host__ __device__, and __CUDA_ARCH__ selects the device intrinsics inside.
// - Elements are loaded and stored through a runtime dtype code, one uniform branch per access: the
//   reference kernels take any mix of bf16, fp16, fp32 (and fp64, for the host emulation in double)
//   without a template per dtype combination.
// - Conversions round to nearest even, as the CUDA intrinsics do, so the emulator's rounding of a stored
//   value is the GPU's (NaN payloads aside).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GLR_HD __host__ __device__
#define GLR_INLINE __forceinline__
#define GLR_UNROLL _Pragma("unroll")
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#define GLR_HD
#define GLR_INLINE inline
#define GLR_UNROLL
#endif

#include "glr/glr_cuda.hpp"  // DType

namespace glr::cuda {

GLR_HD GLR_INLINE int dtype_size(DType t) {
  return t == DType::f64 ? 8 : t == DType::f32 ? 4 : 2;
}

namespace detail {

GLR_HD GLR_INLINE std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
GLR_HD GLR_INLINE float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Host twins of __float2bfloat16_rn / __float2half_rn: round to nearest, ties to even, overflow to Inf,
// fp16 subnormals kept. NaN becomes a quiet NaN of the same sign.
inline std::uint16_t host_f32_to_bf16(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline std::uint16_t host_f32_to_f16(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  const std::uint32_t e = a >> 23;
  if (e >= 143) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16: Inf (and Inf itself)
  if (e >= 113) {  // a normal half, possibly rounding up into the next binade or to Inf
    std::uint32_t r = ((e - 112) << 10) | ((a >> 13) & 0x3ffu);
    const std::uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  if (a <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: rounds to (signed) zero
  // A half subnormal: value = m * 2^(e-150), in units of 2^-24 that is m >> (126 - e).
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t s = 126 - e;  // 14..24
  std::uint32_t r = m >> s;
  const std::uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}
inline float host_f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e != 0) return bits_float(sign | ((e + 112) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  // subnormal: m * 2^-24, exact in float
  const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

}  // namespace detail

GLR_HD GLR_INLINE float bf16_to_f32(std::uint16_t b) {
  return detail::bits_float(static_cast<std::uint32_t>(b) << 16);
}
GLR_HD GLR_INLINE std::uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return detail::host_f32_to_bf16(f);
#endif
}
GLR_HD GLR_INLINE float f16_to_f32(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return detail::host_f16_to_f32(h);
#endif
}
GLR_HD GLR_INLINE std::uint16_t f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return detail::host_f32_to_f16(f);
#endif
}

// exp in the working type: expf on the device (full precision, no fast-math), std::exp on the host.
GLR_HD GLR_INLINE float ex(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}
GLR_HD GLR_INLINE double ex(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}

template <class T>
GLR_HD GLR_INLINE T min_of(T a, T b) {
  return a < b ? a : b;
}

// One element at element offset `off` of a typed buffer, widened to Acc.
template <class Acc>
GLR_HD GLR_INLINE Acc load_elem(const void* p, DType t, std::int64_t off) {
  switch (t) {
    case DType::f32: return static_cast<Acc>(static_cast<const float*>(p)[off]);
    case DType::bf16: return static_cast<Acc>(bf16_to_f32(static_cast<const std::uint16_t*>(p)[off]));
    case DType::f16: return static_cast<Acc>(f16_to_f32(static_cast<const std::uint16_t*>(p)[off]));
    case DType::f64: return static_cast<Acc>(static_cast<const double*>(p)[off]);
  }
  return Acc(0);
}

// Store x at element offset `off`, rounding to the buffer's dtype (through float for 16-bit types).
template <class Acc>
GLR_HD GLR_INLINE void store_elem(void* p, DType t, std::int64_t off, Acc x) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[off] = static_cast<float>(x); return;
    case DType::bf16: static_cast<std::uint16_t*>(p)[off] = f32_to_bf16(static_cast<float>(x)); return;
    case DType::f16: static_cast<std::uint16_t*>(p)[off] = f32_to_f16(static_cast<float>(x)); return;
    case DType::f64: static_cast<double*>(p)[off] = static_cast<double>(x); return;
  }
}

// A quiet NaN of the working type (for poisoning outputs of a refused packed batch).
template <class Acc>
GLR_HD GLR_INLINE Acc quiet_nan() {
  return static_cast<Acc>(detail::bits_float(0x7fc00000u));
}

}  // namespace glr::cuda
