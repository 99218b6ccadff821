// Non-finite and near-overflow values planted at chosen positions of one input.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kgate/inputs.hpp"

namespace kgate {

const char* to_string(Injection k) {
  switch (k) {
    case Injection::nan: return "NaN";
    case Injection::infinity: return "+-Inf";
    case Injection::near_max: return "near-max";
  }
  return "?";
}

bool injectable(const TensorSpec& spec, Injection k) {
  if (!is_float(spec.dtype) || !spec.nonfinite) return false;
  if (spec.domain.kind == DomainKind::offsets || spec.domain.kind == DomainKind::integer) return false;
  return k != Injection::near_max || spec.overflow;
}

std::vector<std::int64_t> injection_positions(std::int64_t n, Stream s, int count) {
  std::vector<std::int64_t> out;
  auto add = [&](std::int64_t p) {
    if (static_cast<int>(out.size()) < count && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  if (n <= 0 || count <= 0) return out;
  // Boundaries first: the first and last element are where tiling and tail code go wrong.
  add(0);
  add(n - 1);
  for (std::uint64_t i = 0; static_cast<int>(out.size()) < std::min<std::int64_t>(count, n) && i < 64; ++i)
    add(s.integer(i, 0, n - 1));
  return out;
}

std::vector<double> injection_values(Injection k, DType t, std::size_t count, Stream s, int sign) {
  std::vector<double> v(count);
  const double inf = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < count; ++i) {
    switch (k) {
      case Injection::nan: v[i] = std::numeric_limits<double>::quiet_NaN(); break;
      case Injection::infinity:
        // Both signs in every case with two or more sites; the rest random.
        v[i] = (i == 0 ? true : i == 1 ? false : (s.bits(i) & 1) != 0) ? inf : -inf;
        break;
      case Injection::near_max: {
        const double mag = round_to(info(t).max_finite * (0.5 + 0.5 * s.uniform(i)), t);
        const bool neg = sign != 0 ? sign < 0 : (s.bits(1000 + i) & 1) != 0;
        v[i] = neg ? -mag : mag;
        break;
      }
    }
  }
  return v;
}

std::string describe_injection(const std::string& what, const TensorSpec& spec, const Shape& shape,
                               const std::vector<std::int64_t>& positions) {
  std::vector<std::string> at;
  for (std::int64_t p : positions) at.push_back(shape_string(unravel(p, shape)));
  return fmt::format("{} in {} at {}", what, spec.name, fmt::join(at, ", "));
}

}  // namespace kgate
