// kgate/dtype.hpp: the element types kgate handles and exact conversions between them and float64.
//
// Every float conversion from double rounds to nearest, ties to even, in one step (no double rounding
// through float), keeps subnormals, signed zeros, NaN and Inf; values past the largest finite value round
// to Inf exactly as IEEE 754 says (a value that rounds down to max stays max).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <dlpack/dlpack.h>

namespace kgate {

enum class DType : std::uint8_t { f64, f32, f16, bf16, i32, i64, boolean };

inline constexpr DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::boolean};

struct DTypeInfo {
  const char* name;       // "f64", "f32", "f16", "bf16", "i32", "i64", "bool"
  std::size_t size;       // bytes per element
  bool is_float;
  int mantissa_bits;      // explicit fraction bits (52, 23, 10, 7); 0 for integers
  double unit_roundoff;   // u = 2^-(mantissa_bits+1) for floats, 0 for integers
  double max_finite;      // largest finite value (floats) or largest integer
  double min_normal;      // smallest positive normal (floats), 1 for integers
};

const DTypeInfo& info(DType t);
inline std::size_t size_of(DType t) { return info(t).size; }
inline bool is_float(DType t) { return info(t).is_float; }
inline const char* name_of(DType t) { return info(t).name; }

// Accepts the canonical names and the usual aliases (float32, float, half, bfloat16, int, long, bool...).
std::optional<DType> parse_dtype(std::string_view text);

DLDataType to_dlpack(DType t);
std::optional<DType> from_dlpack(DLDataType t);

// Exact scalar conversions.
std::uint16_t f64_to_f16_bits(double x);
double f16_bits_to_f64(std::uint16_t bits);
std::uint16_t f64_to_bf16_bits(double x);
double bf16_bits_to_f64(std::uint16_t bits);
std::uint16_t f32_to_bf16_bits(float x);  // round to nearest even, NaN kept quiet
float bf16_bits_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(std::uint16_t bits);

// Load one element of type t from p (any alignment) as double. Integers and bool convert exactly
// (int64 beyond 2^53 rounds to nearest double).
double load_f64(const void* p, DType t);
// Store x as one element of type t at p (any alignment). Floats round as above. Integers: NaN stores 0,
// other values round to nearest (ties to even) and saturate at the type's range. bool: x != 0.
void store_f64(double x, void* p, DType t);
// x after a round trip through t.
double round_to(double x, DType t);

}  // namespace kgate
