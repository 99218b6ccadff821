// Random input tensors inside each input's declared domain, in the four distributions the oracle gate uses.
// Values are drawn as doubles a block at a time and stored straight into the input's dtype.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "kgate/inputs.hpp"
#include "kgate/parallel.hpp"

namespace kgate {
namespace {

constexpr std::int64_t kBlock = 1024;

void store_block(DType t, const double* src, std::int64_t n, std::byte* dst) {
  switch (t) {
    case DType::f64: std::memcpy(dst, src, static_cast<std::size_t>(n) * 8); return;
    case DType::f32:
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(src[i]);
        std::memcpy(dst + 4 * i, &v, 4);
      }
      return;
    default: {
      const std::int64_t es = static_cast<std::int64_t>(size_of(t));
      for (std::int64_t i = 0; i < n; ++i) store_f64(src[i], dst + es * i, t);
    }
  }
}

// Standard normals for elements [start, start+n): Box-Muller over pairs (2k, 2k+1) of the stream, the cosine
// for the even element and the sine for the odd one, each pair's logarithm computed once.
void normals(const Stream& s, std::int64_t start, std::int64_t n, double* out) {
  for (std::int64_t i = start; i < start + n;) {
    const std::uint64_t pair = static_cast<std::uint64_t>(i / 2);
    const double u1 = 1.0 - s.uniform(2 * pair);  // (0, 1]
    const double u2 = s.uniform(2 * pair + 1);
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double th = 6.283185307179586 * u2;
    if (i % 2 == 0) {
      out[i - start] = r * std::cos(th);
      if (++i == start + n) break;
    }
    out[i - start] = r * std::sin(th);
    ++i;
  }
}

double log_uniform(double lo, double hi, double u) { return lo * std::exp(u * std::log(hi / lo)); }

// One value of a bounded real domain [lo, hi) under distribution d, from two uniforms.
double bounded(double lo, double hi, Distribution d, double u, double v) {
  switch (d) {
    case Distribution::contract:
    case Distribution::uniform: return lo + (hi - lo) * u;
    case Distribution::wide: {
      // One sign: log-uniform over the whole domain, every octave as likely as every other.
      if (lo > 0) return log_uniform(lo, hi, u);
      if (hi < 0) return -log_uniform(-hi, -lo, u);
      if (lo == 0 || hi == 0) return (hi > 0 ? hi : lo) * std::exp2(-8.0 * u);
      // Straddles zero: pick a side in proportion to its length, then a magnitude over 8 octaves.
      const bool neg = v * (hi - lo) < -lo;
      const double edge = neg ? -lo : hi;
      const double mag = edge * std::exp2(-8.0 * u);
      return neg ? -mag : mag;
    }
    case Distribution::small: {
      if (lo > 0) return lo + (hi - lo) / 64 * u;
      if (hi < 0) return hi - (hi - lo) / 64 * u;
      return (lo + (hi - lo) * u) / 64;
    }
  }
  return lo;
}

void fill_offsets(HostArray& a, const TensorSpec& spec, const Bindings& b, const Stream& s) {
  if (a.shape().size() != 1 || a.numel() < 1)
    throw std::invalid_argument(fmt::format("input {}: offsets need a shape [S+1], got {}", spec.name,
                                            shape_string(a.shape())));
  auto it = b.find(spec.domain.total);
  if (it == b.end())
    throw std::invalid_argument(
        fmt::format("input {}: offsets total \"{}\" is not a bound dim", spec.name, spec.domain.total));
  const std::int64_t total = it->second;
  const std::int64_t segments = a.numel() - 1;
  std::vector<std::int64_t> o(static_cast<std::size_t>(segments + 1), 0);
  if (segments == 0) {
    if (total != 0)
      throw std::invalid_argument(fmt::format("input {}: zero segments cannot sum to {}={}", spec.name,
                                              spec.domain.total, total));
  } else if (spec.domain.allow_empty) {
    for (std::int64_t k = 1; k < segments; ++k) o[static_cast<std::size_t>(k)] = s.integer(static_cast<std::uint64_t>(k), 0, total);
    std::sort(o.begin() + 1, o.end() - 1);
    // Empty segments are where packed kernels slip: force one whenever there are two or more segments.
    if (segments >= 2) {
      const std::int64_t j = s.integer(0, 1, segments - 1);
      o[static_cast<std::size_t>(j)] = o[static_cast<std::size_t>(j - 1)];
    }
  } else {
    if (total < segments)
      throw std::invalid_argument(fmt::format("input {}: {} non-empty segments cannot sum to {}={}", spec.name,
                                              segments, spec.domain.total, total));
    // Distinct cut points in [1, total-1] (Floyd's sampling), so every segment has at least one element.
    std::set<std::int64_t> cuts;
    const std::int64_t want = segments - 1, span = total - 1;
    for (std::int64_t j = span - want, k = 0; j < span; ++j, ++k) {
      const std::int64_t t = 1 + s.integer(static_cast<std::uint64_t>(k), 0, j);
      if (!cuts.insert(t).second) cuts.insert(j + 1);
    }
    std::size_t k = 1;
    for (std::int64_t c : cuts) o[k++] = c;
  }
  o.back() = total;
  for (std::size_t k = 0; k < o.size(); ++k) a.set(static_cast<std::int64_t>(k), static_cast<double>(o[k]));
}

}  // namespace

const char* to_string(Distribution d) {
  switch (d) {
    case Distribution::contract: return "contract";
    case Distribution::wide: return "wide";
    case Distribution::small: return "small";
    case Distribution::uniform: return "uniform";
  }
  return "?";
}

HostArray generate_input(const TensorSpec& spec, const Shape& shape, const Bindings& b, Stream s, Distribution d) {
  HostArray a(spec.dtype, shape);
  const Domain& dom = spec.domain;
  if (dom.kind == DomainKind::offsets) {
    fill_offsets(a, spec, b, s);
    return a;
  }
  const Stream aux = s.child("aux");
  const std::int64_t es = static_cast<std::int64_t>(size_of(spec.dtype));
  // Every element is a function of its index alone (counter-based streams), so fixed chunks drawn on the
  // host's threads (parallel.hpp) give the same bytes as one pass.
  parallel_chunks(a.numel(), [&](std::int64_t, std::int64_t begin, std::int64_t end) {
    std::array<double, kBlock> buf;
    for (std::int64_t start = begin; start < end; start += kBlock) {
      const std::int64_t n = std::min(kBlock, end - start);
      double* v = buf.data();
      auto u = [&](std::int64_t k) { return s.uniform(static_cast<std::uint64_t>(start + k)); };
      auto w = [&](std::int64_t k) { return aux.uniform(static_cast<std::uint64_t>(start + k)); };
      if (spec.dtype == DType::boolean) {
        for (std::int64_t k = 0; k < n; ++k) v[k] = static_cast<double>(s.bits(static_cast<std::uint64_t>(start + k)) & 1);
      } else {
        switch (dom.kind) {
          case DomainKind::normal: {
            normals(s, start, n, v);
            const double mean = dom.a, sd = dom.b;
            for (std::int64_t k = 0; k < n; ++k) {
              switch (d) {
                case Distribution::contract: v[k] = mean + sd * v[k]; break;
                case Distribution::wide: v[k] = mean + sd * v[k] * std::exp2(8.0 * w(k) - 4.0); break;
                case Distribution::small: v[k] = (mean + sd * v[k]) / 64; break;
                case Distribution::uniform: v[k] = mean + sd * (4.0 * u(k) - 2.0); break;
              }
            }
            break;
          }
          case DomainKind::uniform:
          case DomainKind::positive:
            for (std::int64_t k = 0; k < n; ++k) v[k] = bounded(dom.a, dom.b, d, u(k), w(k));
            break;
          case DomainKind::probability:
            for (std::int64_t k = 0; k < n; ++k) {
              if (d == Distribution::wide) {
                const double p = std::exp2(-16.0 * u(k));  // down to 2^-16 from 0 or from 1
                v[k] = w(k) < 0.5 ? p : 1.0 - p;
              } else {
                v[k] = d == Distribution::small ? u(k) / 64 : u(k);
              }
            }
            break;
          case DomainKind::integer: {
            const auto lo = static_cast<std::int64_t>(std::ceil(dom.a));
            const auto hi = static_cast<std::int64_t>(std::floor(dom.b));
            for (std::int64_t k = 0; k < n; ++k)
              v[k] = static_cast<double>(s.integer(static_cast<std::uint64_t>(start + k), lo, hi));
            break;
          }
          case DomainKind::offsets: break;  // handled above
        }
      }
      store_block(spec.dtype, v, n, a.data() + start * es);
    }
  });
  return a;
}

std::vector<HostArray> generate_inputs(const Contract& c, const Bindings& b, Stream stream, Distribution d) {
  std::vector<HostArray> out;
  out.reserve(c.inputs.size());
  for (const TensorSpec& spec : c.inputs) out.push_back(generate_input(spec, spec.resolve(b), b, stream.child(spec.name), d));
  return out;
}

}  // namespace kgate
