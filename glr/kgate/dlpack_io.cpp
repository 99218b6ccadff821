#include "dlpack_io.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "glr/params.hpp"
#include "glr/reference/dense.hpp"

namespace glr::kgate_export {

namespace {

// x rounded to a binary format with p significant bits and smallest normal exponent emin, ties to even,
// in one step; magnitudes at or past 2^(emax+1) become Inf. Same method as glr::reference::round_bf16.
double round_binary(double x, int p, int emin, int emax) {
  if (!std::isfinite(x) || x == 0) return x;
  const int q = std::max(std::ilogb(x), emin) - (p - 1);
  const double y = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  if (std::fabs(y) >= std::ldexp(1.0, emax + 1)) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return y;
}

std::uint16_t f16_bits(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7E00);
  const double y = round_binary(x, 11, -14, 15);
  if (std::isinf(y)) return static_cast<std::uint16_t>(sign | 0x7C00);
  const double a = std::fabs(y);
  if (a == 0) return sign;
  const int e = std::ilogb(a);
  if (e < -14) return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::ldexp(a, 24)));  // subnormal
  const auto frac = static_cast<std::uint16_t>(std::ldexp(a, 10 - e) - 1024);
  return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | frac);
}

double from_f16_bits(std::uint16_t b) {
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  const int e = (b >> 10) & 0x1F, f = b & 0x3FF;
  if (e == 0x1F) return f ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(f, -24);
  return sign * std::ldexp(1024 + f, e - 25);
}

std::uint16_t bf16_bits(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xFFC0 : 0x7FC0;
  const float f = static_cast<float>(reference::round_bf16(x));  // exact: the value has 8 significant bits
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

double from_bf16_bits(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::size_t size_of(Elem e) {
  switch (e) {
    case Elem::f64: case Elem::i64: return 8;
    case Elem::f32: case Elem::i32: return 4;
    case Elem::f16: case Elem::bf16: return 2;
  }
  return 0;
}

// Calls fn(row-major index, element pointer) for every element of t.
template <class Fn>
void for_each(const DLTensor& t, Elem e, Fn fn) {
  const int nd = t.ndim;
  std::int64_t n = 1;
  for (int d = 0; d < nd; ++d) n *= t.shape[d];
  if (n == 0) return;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(nd), 0);
  char* base = static_cast<char*>(t.data) + t.byte_offset;
  const std::size_t es = size_of(e);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[static_cast<std::size_t>(d)] * (t.strides ? t.strides[d] : 0);
    if (!t.strides) off = i;  // DLPack: null strides mean row-major contiguous
    fn(i, base + off * static_cast<std::int64_t>(es));
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < t.shape[d]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
}

}  // namespace

Elem elem_of(const DLTensor& t, const std::string& name) {
  const DLDataType d = t.dtype;
  if (d.lanes != 1) throw InvalidArgument(name, "vector dtypes (lanes != 1) are not supported");
  if (d.code == kDLFloat && d.bits == 64) return Elem::f64;
  if (d.code == kDLFloat && d.bits == 32) return Elem::f32;
  if (d.code == kDLFloat && d.bits == 16) return Elem::f16;
  if (d.code == kDLBfloat && d.bits == 16) return Elem::bf16;
  if (d.code == kDLInt && d.bits == 32) return Elem::i32;
  if (d.code == kDLInt && d.bits == 64) return Elem::i64;
  throw InvalidArgument(name, "unsupported dtype (code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
                                 " bits)");
}

bool is_float(Elem e) { return e != Elem::i32 && e != Elem::i64; }

const char* name_of(Elem e) {
  switch (e) {
    case Elem::f64: return "f64";
    case Elem::f32: return "f32";
    case Elem::f16: return "f16";
    case Elem::bf16: return "bf16";
    case Elem::i32: return "i32";
    case Elem::i64: return "i64";
  }
  return "?";
}

double load(const void* p, Elem e) {
  switch (e) {
    case Elem::f64: { double x; std::memcpy(&x, p, 8); return x; }
    case Elem::f32: { float x; std::memcpy(&x, p, 4); return x; }
    case Elem::f16: { std::uint16_t b; std::memcpy(&b, p, 2); return from_f16_bits(b); }
    case Elem::bf16: { std::uint16_t b; std::memcpy(&b, p, 2); return from_bf16_bits(b); }
    case Elem::i32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
    case Elem::i64: { std::int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
  }
  return 0;
}

void store(double x, void* p, Elem e) {
  switch (e) {
    case Elem::f64: std::memcpy(p, &x, 8); return;
    case Elem::f32: { const float f = static_cast<float>(x); std::memcpy(p, &f, 4); return; }
    case Elem::f16: { const std::uint16_t b = f16_bits(x); std::memcpy(p, &b, 2); return; }
    case Elem::bf16: { const std::uint16_t b = bf16_bits(x); std::memcpy(p, &b, 2); return; }
    case Elem::i32: { const auto v = static_cast<std::int32_t>(x); std::memcpy(p, &v, 4); return; }
    case Elem::i64: { const auto v = static_cast<std::int64_t>(x); std::memcpy(p, &v, 8); return; }
  }
}

template <class Real>
std::vector<Real> gather(const DLTensor& t, Elem e) {
  std::int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  std::vector<Real> out(static_cast<std::size_t>(n));
  for_each(t, e, [&](std::int64_t i, const char* p) { out[static_cast<std::size_t>(i)] = static_cast<Real>(load(p, e)); });
  return out;
}

template <class Real>
void scatter(const std::vector<Real>& values, const DLTensor& t, Elem e) {
  for_each(t, e, [&](std::int64_t i, char* p) { store(static_cast<double>(values[static_cast<std::size_t>(i)]), p, e); });
}

template std::vector<float> gather<float>(const DLTensor&, Elem);
template std::vector<double> gather<double>(const DLTensor&, Elem);
template void scatter<float>(const std::vector<float>&, const DLTensor&, Elem);
template void scatter<double>(const std::vector<double>&, const DLTensor&, Elem);

}  // namespace glr::kgate_export
