// What every CPU control shares: the ABI version export, argument checks, strided views and the bf16
// conversions a kernel would otherwise take from its toolkit.
//
// Controls deliberately do not link kgate: a candidate kernel never does, and a control that borrowed the
// verifier's own conversions could not catch a bug in them.
#pragma once

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kgate/abi.h"

#define KGATE_CONTROL_ABI_VERSION \
  extern "C" KGATE_EXPORT int32_t kgate_abi_version(void) { return KGATE_ABI_VERSION; }

namespace ctl {

// Writes a reason for the caller (truncated to the capacity it gave) and returns status.
inline int32_t fail(const kgate_call* c, int32_t status, const char* format, ...) {
  if (c->message && c->message_capacity > 0) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(c->message, c->message_capacity, format, args);
    va_end(args);
  }
  return status;
}

enum class Elem { f32, bf16, f64 };

inline bool has_dtype(const DLTensor& t, Elem e) {
  switch (e) {
    case Elem::f32: return t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1;
    case Elem::f64: return t.dtype.code == kDLFloat && t.dtype.bits == 64 && t.dtype.lanes == 1;
    case Elem::bf16: return t.dtype.code == kDLBfloat && t.dtype.bits == 16 && t.dtype.lanes == 1;
  }
  return false;
}

// Strides are in elements (DLPack), never NULL (abi.h); the base may sit at any element boundary.
template <class T>
struct Vec {
  T* data = nullptr;
  int64_t n = 0, stride = 1;
  T& operator[](int64_t i) const { return data[i * stride]; }
};

template <class T>
struct Mat {
  T* data = nullptr;
  int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 1;
  T& operator()(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
  bool contiguous() const { return col_stride == 1 && (rows <= 1 || row_stride == cols); }
};

template <class T>
Vec<T> vec_of(const DLTensor& t) {
  return {static_cast<T*>(t.data), t.shape[0], t.strides[0]};
}
template <class T>
Mat<T> mat_of(const DLTensor& t) {
  return {static_cast<T*>(t.data), t.shape[0], t.shape[1], t.strides[0], t.strides[1]};
}

// bf16 is the top half of an f32: widening is exact, narrowing rounds to nearest, ties to even, and keeps
// a NaN a (quiet) NaN instead of letting the rounding carry it into Inf.
inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// The same rounding from a double in one step, for emulating a bf16 adder exactly: the sum of two bf16
// or f32 values is exact in a double, and rounding it through f32 first could round twice.
inline uint16_t f64_to_bf16(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000u);
  if (d != d) return static_cast<uint16_t>(sign | 0x7fc0u);
  const double mag = std::fabs(d);
  if (mag < 0x1p-126) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(mag * 0x1p133)));
  u &= 0x7fffffffffffffffull;
  u += (1ull << 44) - 1 + ((u >> 45) & 1u);  // round away the low 45 fraction bits, ties to even
  const int64_t e = static_cast<int64_t>(u >> 52) - 1023;
  if (e > 127) return static_cast<uint16_t>(sign | 0x7f80u);
  return static_cast<uint16_t>(sign | ((e + 127) << 7) | ((u >> 45) & 0x7fu));
}

}  // namespace ctl
