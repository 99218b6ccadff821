// Block decoding to double: the one place the comparison core looks at dtypes, one switch per block.
// f16 and bf16 go through 65536-entry tables built once, so decoding costs a load per element.
#include <array>
#include <cstring>
#include <memory>

#include "kgate/compare.hpp"

namespace kgate {
namespace {

using Table = std::array<double, 65536>;

std::unique_ptr<Table> build(double (*decode)(std::uint16_t)) {
  auto t = std::make_unique<Table>();
  for (std::uint32_t b = 0; b < 65536; ++b) (*t)[b] = decode(static_cast<std::uint16_t>(b));
  return t;
}

const Table& half_table() {
  static const std::unique_ptr<Table> t = build(f16_bits_to_f64);
  return *t;
}
const Table& bfloat_table() {
  static const std::unique_ptr<Table> t = build(bf16_bits_to_f64);
  return *t;
}

template <class T>
void widen(const std::byte* src, std::int64_t n, double* dst) {
  for (std::int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    dst[i] = static_cast<double>(v);
  }
}

void lookup(const Table& t, const std::byte* src, std::int64_t n, double* dst) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);
    dst[i] = t[v];
  }
}

}  // namespace

void decode_elements(DType t, const std::byte* src, std::int64_t n, double* dst) {
  switch (t) {
    case DType::f64: std::memcpy(dst, src, static_cast<std::size_t>(n) * 8); return;
    case DType::f32: widen<float>(src, n, dst); return;
    case DType::f16: lookup(half_table(), src, n, dst); return;
    case DType::bf16: lookup(bfloat_table(), src, n, dst); return;
    case DType::i32: widen<std::int32_t>(src, n, dst); return;
    case DType::i64: widen<std::int64_t>(src, n, dst); return;
    case DType::boolean:
      for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i] != std::byte{0} ? 1.0 : 0.0;
      return;
  }
}

}  // namespace kgate
