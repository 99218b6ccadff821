// Exact conversions between float64 and the narrow float formats, written once for any IEEE binary format
// so f16 and bf16 share one rounding path (checked exhaustively in tests/test_dtype.cpp).
#include "kgate/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kgate/abi.h"

namespace kgate {
namespace {

constexpr DTypeInfo kInfo[] = {
    {"f64", 8, true, 52, 0x1p-53, std::numeric_limits<double>::max(), 0x1p-1022},
    {"f32", 4, true, 23, 0x1p-24, static_cast<double>(std::numeric_limits<float>::max()), 0x1p-126},
    {"f16", 2, true, 10, 0x1p-11, 65504.0, 0x1p-14},
    {"bf16", 2, true, 7, 0x1p-8, 0x1.fep127, 0x1p-126},
    {"i32", 4, false, 0, 0.0, 2147483647.0, 1.0},
    {"i64", 8, false, 0, 0.0, 9223372036854775807.0, 1.0},
    {"bool", 1, false, 0, 0.0, 1.0, 1.0},
};

// A binary float format with `frac_bits` fraction bits and `exp_bits` exponent bits.
struct Format {
  int frac_bits;
  int exp_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  int emin() const { return 1 - bias(); }
  int emax() const { return bias(); }
};
constexpr Format kHalf{10, 5};
constexpr Format kBfloat{7, 8};

// v / 2^shift rounded to nearest, ties to even.
std::uint64_t shift_round_even(std::uint64_t v, int shift) {
  if (shift <= 0) return v << -shift;
  if (shift >= 64) return 0;
  const std::uint64_t q = v >> shift;
  const std::uint64_t rem = v & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) return q + 1;
  return q;
}

std::uint32_t encode(double x, Format f) {
  const std::uint32_t sign = std::signbit(x) ? 1u : 0u;
  const std::uint32_t sign_bit = sign << (f.frac_bits + f.exp_bits);
  const std::uint32_t exp_all = (1u << f.exp_bits) - 1;
  if (std::isnan(x)) {
    // Keep the top payload bits and force the quiet bit, as hardware conversions do.
    std::uint64_t raw;
    std::memcpy(&raw, &x, sizeof raw);
    const std::uint32_t payload = static_cast<std::uint32_t>((raw >> (52 - f.frac_bits)) & ((1u << f.frac_bits) - 1));
    return sign_bit | (exp_all << f.frac_bits) | payload | (1u << (f.frac_bits - 1));
  }
  // Fast path, exact: a double whose exponent is in the target's normal range rounds by integer arithmetic
  // on its bits (round half to even at the cut; a carry out of the fraction bumps the exponent, and a carry
  // out of the largest exponent lands exactly on Inf's encoding, as IEEE 754 says it must).
  {
    std::uint64_t raw;
    std::memcpy(&raw, &x, sizeof raw);
    const int e = static_cast<int>((raw >> 52) & 0x7ff) - 1023;
    if (e >= f.emin() && e <= f.emax()) {
      const int shift = 52 - f.frac_bits;
      std::uint64_t v = (static_cast<std::uint64_t>(e + f.bias()) << 52) | (raw & ((std::uint64_t{1} << 52) - 1));
      v += ((std::uint64_t{1} << (shift - 1)) - 1) + ((v >> shift) & 1);
      return sign_bit | static_cast<std::uint32_t>(v >> shift);
    }
  }
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign_bit | (exp_all << f.frac_bits);
  if (a == 0.0) return sign_bit;
  int k;
  const double m = std::frexp(a, &k);  // a = m * 2^k, m in [0.5, 1)
  int e = k - 1;                        // a = (m*2) * 2^e, m*2 in [1, 2)
  const std::uint64_t mant = static_cast<std::uint64_t>(std::ldexp(m, 53));  // 53-bit integer, exact
  if (e >= f.emin()) {
    std::uint64_t q = shift_round_even(mant, 52 - f.frac_bits);
    if (q == (std::uint64_t{1} << (f.frac_bits + 1))) {
      q >>= 1;
      ++e;
    }
    if (e > f.emax()) return sign_bit | (exp_all << f.frac_bits);
    const std::uint32_t biased = static_cast<std::uint32_t>(e + f.bias());
    return sign_bit | (biased << f.frac_bits) | static_cast<std::uint32_t>(q & ((1u << f.frac_bits) - 1));
  }
  // Subnormal in the target: count units of 2^(emin - frac_bits). A carry into 2^frac_bits lands exactly on
  // the smallest normal's encoding.
  const int shift = 52 - f.frac_bits + (f.emin() - e);
  return sign_bit | static_cast<std::uint32_t>(shift_round_even(mant, shift));
}

double decode(std::uint32_t bits, Format f) {
  const bool neg = (bits >> (f.frac_bits + f.exp_bits)) & 1u;
  const std::uint32_t exp_all = (1u << f.exp_bits) - 1;
  const std::uint32_t ex = (bits >> f.frac_bits) & exp_all;
  const std::uint32_t frac = bits & ((1u << f.frac_bits) - 1);
  double v;
  if (ex == exp_all) {
    if (frac == 0) {
      v = std::numeric_limits<double>::infinity();
    } else {
      // Carry the payload into the double so a round trip keeps it.
      std::uint64_t raw = (std::uint64_t{0x7ff} << 52) | (std::uint64_t{frac} << (52 - f.frac_bits));
      std::memcpy(&v, &raw, sizeof v);
    }
  } else if (ex == 0) {
    v = std::ldexp(static_cast<double>(frac), f.emin() - f.frac_bits);
  } else {
    v = std::ldexp(static_cast<double>(frac | (1u << f.frac_bits)), static_cast<int>(ex) - f.bias() - f.frac_bits);
  }
  return neg ? -v : v;
}

template <class Int>
Int saturate_round(double x) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(x);  // default rounding mode: nearest, ties to even
  if (r >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  if (r <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  return static_cast<Int>(r);
}

}  // namespace

const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }

std::optional<DType> parse_dtype(std::string_view s) {
  std::string t(s);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "f64" || t == "float64" || t == "double") return DType::f64;
  if (t == "f32" || t == "float32" || t == "float") return DType::f32;
  if (t == "f16" || t == "float16" || t == "half") return DType::f16;
  if (t == "bf16" || t == "bfloat16") return DType::bf16;
  if (t == "i32" || t == "int32" || t == "int") return DType::i32;
  if (t == "i64" || t == "int64" || t == "long") return DType::i64;
  if (t == "bool" || t == "boolean") return DType::boolean;
  return std::nullopt;
}

DLDataType to_dlpack(DType t) {
  switch (t) {
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::boolean: return {KGATE_DL_BOOL, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

std::optional<DType> from_dlpack(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  for (DType d : kAllDTypes) {
    const DLDataType x = to_dlpack(d);
    if (x.code == t.code && x.bits == t.bits) return d;
  }
  // Frameworks on DLPack < 0.8 export bool as uint8.
  if (t.code == kDLUInt && t.bits == 8) return DType::boolean;
  return std::nullopt;
}

std::uint16_t f64_to_f16_bits(double x) { return static_cast<std::uint16_t>(encode(x, kHalf)); }
double f16_bits_to_f64(std::uint16_t b) { return decode(b, kHalf); }
std::uint16_t f64_to_bf16_bits(double x) { return static_cast<std::uint16_t>(encode(x, kBfloat)); }
double bf16_bits_to_f64(std::uint16_t b) { return decode(b, kBfloat); }
std::uint16_t f32_to_bf16_bits(float x) { return f64_to_bf16_bits(static_cast<double>(x)); }
float bf16_bits_to_f32(std::uint16_t b) { return static_cast<float>(bf16_bits_to_f64(b)); }
std::uint16_t f32_to_f16_bits(float x) { return f64_to_f16_bits(static_cast<double>(x)); }
float f16_bits_to_f32(std::uint16_t b) { return static_cast<float>(f16_bits_to_f64(b)); }

double load_f64(const void* p, DType t) {
  switch (t) {
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::f16: { std::uint16_t v; std::memcpy(&v, p, 2); return f16_bits_to_f64(v); }
    case DType::bf16: { std::uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_f64(v); }
    case DType::i32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::boolean: { std::uint8_t v; std::memcpy(&v, p, 1); return v != 0 ? 1.0 : 0.0; }
  }
  return 0.0;
}

void store_f64(double x, void* p, DType t) {
  switch (t) {
    case DType::f64: std::memcpy(p, &x, 8); return;
    case DType::f32: {
      // The C++ cast rounds to nearest even and overflows to Inf under the default FP environment.
      const float v = static_cast<float>(x);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::f16: { const std::uint16_t v = f64_to_f16_bits(x); std::memcpy(p, &v, 2); return; }
    case DType::bf16: { const std::uint16_t v = f64_to_bf16_bits(x); std::memcpy(p, &v, 2); return; }
    case DType::i32: { const auto v = saturate_round<std::int32_t>(x); std::memcpy(p, &v, 4); return; }
    case DType::i64: { const auto v = saturate_round<std::int64_t>(x); std::memcpy(p, &v, 8); return; }
    case DType::boolean: {
      const std::uint8_t v = x != 0.0 ? 1 : 0;  // NaN != 0, as C++'s bool conversion says
      std::memcpy(p, &v, 1);
      return;
    }
  }
}

double round_to(double x, DType t) {
  unsigned char buf[8];
  store_f64(x, buf, t);
  return load_f64(buf, t);
}

}  // namespace kgate
