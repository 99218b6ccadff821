// Evidence text: values as their dtype prints them, raw bits where bits matter, and the neighbourhood of the
// first offending element so a reader sees whether it is one element, a tail, or a whole row.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "kgate/compare.hpp"

namespace kgate {

std::string format_value(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  switch (t) {
    case DType::f64: return fmt::format("{}", v);
    case DType::f32: return fmt::format("{}", static_cast<float>(v));
    case DType::f16:
    case DType::bf16:
      // The shortest decimal that rounds back to the same 16-bit value.
      for (int p = 3; p < 9; ++p) {
        const std::string s = fmt::format("{:.{}g}", v, p);
        if (round_to(std::strtod(s.c_str(), nullptr), t) == v) return s;
      }
      return fmt::format("{}", v);
    case DType::i32:
    case DType::i64: return fmt::format("{}", static_cast<long long>(v));
    case DType::boolean: return v != 0 ? "true" : "false";
  }
  return fmt::format("{}", v);
}

std::string format_bits(std::uint64_t bits, DType t) {
  return fmt::format("0x{:0{}x}", bits, static_cast<int>(2 * size_of(t)));
}

std::string format_element(const HostArray& a, std::int64_t flat, bool with_bits) {
  const std::string v = format_value(a.get(flat), a.dtype());
  if (!with_bits) return v;
  return fmt::format("{} ({} {})", v, name_of(a.dtype()), format_bits(a.bits(flat), a.dtype()));
}

std::string format_index(const Shape& index) { return shape_string(index); }

std::string neighbourhood(const HostArray& got, const Reference* expected, const HostArray* expected_bits,
                          std::int64_t at, int radius, bool with_bits) {
  if (got.numel() == 0 || at < 0 || at >= got.numel()) return "";
  const std::int64_t row = got.shape().empty() ? 1 : std::max<std::int64_t>(got.shape().back(), 1);
  const std::int64_t row_start = at - at % row;
  const std::int64_t lo = std::max(row_start, at - radius);
  const std::int64_t hi = std::min(row_start + row, at + radius + 1);
  std::string s = fmt::format("{} elements around the first offending one ({}):\n", name_of(got.dtype()),
                              expected || expected_bits ? "index  expected  got" : "index  got");
  for (std::int64_t i = lo; i < hi; ++i) {
    std::string exp;
    if (expected_bits) {
      exp = format_element(*expected_bits, i, with_bits);
    } else if (expected) {
      exp = format_value(expected->rounded[static_cast<std::size_t>(i)], expected->dtype);
    }
    s += fmt::format("{} {}  {}{}\n", i == at ? ">" : " ", format_index(unravel(i, got.shape())),
                     exp.empty() ? "" : exp + "  ", format_element(got, i, with_bits));
  }
  return s;
}

}  // namespace kgate
