// Structure shared by every draw of an input (kgate/structure.hpp): inferred from draws, checked on
// perturbations.
#include "kgate/structure.hpp"

#include <cmath>

#include <fmt/format.h>

namespace kgate {
namespace {

bool square_tail(const Shape& s) { return s.size() >= 2 && s[s.size() - 1] == s[s.size() - 2] && s.back() >= 2; }

// Calls fn(i, j) for every pair of flat indices that are each other's transpose (i < j), over the last two dims.
template <class Fn>
bool all_pairs(const Shape& s, Fn&& fn) {
  const std::int64_t n = s.back();
  const std::int64_t mats = numel(s) / (n * n);
  for (std::int64_t m = 0; m < mats; ++m)
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = r + 1; c < n; ++c)
        if (!fn(m * n * n + r * n + c, m * n * n + c * n + r)) return false;
  return true;
}

}  // namespace

InputStructure infer_structure(const std::vector<const HostArray*>& draws) {
  InputStructure s;
  if (draws.empty() || !is_float(draws[0]->dtype())) return s;
  s.is_float = true;
  const HostArray& first = *draws[0];
  const std::int64_t n = first.numel();
  if (n == 0) return s;
  std::vector<std::vector<double>> v;
  for (const HostArray* d : draws) v.push_back(d->to_f64());

  // Zeros: the same non-empty set in every draw.
  if (draws.size() >= 2) {
    std::vector<std::uint8_t> z(static_cast<std::size_t>(n));
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      z[static_cast<std::size_t>(i)] = v[0][static_cast<std::size_t>(i)] == 0.0;
      count += z[static_cast<std::size_t>(i)];
    }
    bool same = count > 0 && count < n;
    for (std::size_t d = 1; d < v.size() && same; ++d)
      for (std::int64_t i = 0; i < n && same; ++i)
        same = (v[d][static_cast<std::size_t>(i)] == 0.0) == (z[static_cast<std::size_t>(i)] != 0);
    if (same) {
      s.zeros = std::move(z);
      s.zero_count = count;
    }
  }
  if (square_tail(first.shape())) {
    s.symmetric = true;
    for (std::size_t d = 0; d < draws.size() && s.symmetric; ++d)
      s.symmetric = all_pairs(first.shape(), [&](std::int64_t i, std::int64_t j) { return draws[d]->bits(i) == draws[d]->bits(j); });
  }
  bool nonneg = true, pos = true, nonpos = true, neg = true, integral = true, any_nonzero = false;
  for (const auto& a : v)
    for (double x : a) {
      if (std::isnan(x)) continue;
      nonneg = nonneg && x >= 0;
      pos = pos && x > 0;
      nonpos = nonpos && x <= 0;
      neg = neg && x < 0;
      integral = integral && std::isfinite(x) && x == std::floor(x);
      any_nonzero = any_nonzero || x != 0;
    }
  s.sign = pos ? SignStructure::positive : neg ? SignStructure::negative : nonneg ? SignStructure::nonnegative
         : nonpos ? SignStructure::nonpositive : SignStructure::any;
  s.integral = integral && any_nonzero;
  return s;
}

std::string structure_violation(const InputStructure& s, const HostArray& a) {
  if (!s.is_float) return {};
  const std::vector<double> v = a.to_f64();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    if (!s.zeros.empty() && i < s.zeros.size() && s.zeros[i] && !(x == 0.0))
      return fmt::format("{} at {}, a structural zero", x, shape_string(unravel(static_cast<std::int64_t>(i), a.shape())));
    if (std::isnan(x)) continue;
    const bool bad_sign = (s.sign == SignStructure::positive && !(x > 0)) ||
                          (s.sign == SignStructure::nonnegative && !(x >= 0)) ||
                          (s.sign == SignStructure::negative && !(x < 0)) ||
                          (s.sign == SignStructure::nonpositive && !(x <= 0));
    if (bad_sign)
      return fmt::format("{} at {}, where every draw is {}", x, shape_string(unravel(static_cast<std::int64_t>(i), a.shape())),
                         s.sign == SignStructure::positive ? "positive" : s.sign == SignStructure::nonnegative ? "non-negative"
                         : s.sign == SignStructure::negative ? "negative" : "non-positive");
    if (s.integral && std::isfinite(x) && x != std::floor(x))
      return fmt::format("{} at {}, where every draw is integral", x, shape_string(unravel(static_cast<std::int64_t>(i), a.shape())));
  }
  if (s.symmetric && square_tail(a.shape())) {
    std::int64_t bad = -1;
    all_pairs(a.shape(), [&](std::int64_t i, std::int64_t j) {
      if (a.bits(i) == a.bits(j)) return true;
      bad = i;
      return false;
    });
    if (bad >= 0) return fmt::format("asymmetric at {}, where every draw is symmetric", shape_string(unravel(bad, a.shape())));
  }
  return {};
}

std::string describe(const InputStructure& s) {
  std::vector<std::string> parts;
  if (s.zero_count > 0) parts.push_back(fmt::format("structural zeros at {} positions", s.zero_count));
  if (s.symmetric) parts.push_back("symmetric");
  switch (s.sign) {
    case SignStructure::positive: parts.push_back("positive"); break;
    case SignStructure::nonnegative: parts.push_back("non-negative"); break;
    case SignStructure::negative: parts.push_back("negative"); break;
    case SignStructure::nonpositive: parts.push_back("non-positive"); break;
    case SignStructure::any: break;
  }
  if (s.integral) parts.push_back("integral");
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace kgate
