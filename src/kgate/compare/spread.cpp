// The contract's spread rule: where a non-finite value may appear beyond the float64 oracle's own set.
// A chunked recurrence, for instance, lets a NaN at time t fill t's whole chunk and every later one, but
// never cross into the next sequence of a packed batch.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "kgate/compare.hpp"

namespace kgate {
namespace {

// Segment starts along an axis of length n: the offsets input's values clamped to [0, n], or one segment.
std::vector<std::int64_t> segment_starts(const Contract& c, const std::vector<HostArray>& inputs, std::int64_t n) {
  std::vector<std::int64_t> starts{0};
  if (c.spread.segments.empty()) return starts;
  for (std::size_t i = 0; i < c.inputs.size() && i < inputs.size(); ++i) {
    if (c.inputs[i].name != c.spread.segments) continue;
    const HostArray& o = inputs[i];
    for (std::int64_t k = 0; k < o.numel(); ++k) {
      const auto v = static_cast<std::int64_t>(o.get(k));
      if (v > 0 && v < n && v > starts.back()) starts.push_back(v);
    }
    return starts;
  }
  throw std::invalid_argument(fmt::format("spread rule: segments input {} is not an input", c.spread.segments));
}

}  // namespace

std::vector<std::uint8_t> allowed_spread(const Contract& c, const TensorSpec& output, const Shape& shape,
                                         std::vector<std::uint8_t> seeds, const std::vector<HostArray>& inputs) {
  const SpreadRule& rule = c.spread;
  if (rule.exact || rule.dim.empty()) return seeds;
  const auto at = std::find(output.shape.begin(), output.shape.end(), rule.dim);
  if (at == output.shape.end()) return seeds;  // e.g. a final state: follows the oracle exactly
  const std::size_t axis = static_cast<std::size_t>(at - output.shape.begin());
  const std::int64_t n = shape[axis];
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];

  const std::vector<std::int64_t> starts = segment_starts(c, inputs, n);
  std::vector<std::uint8_t> allowed = seeds;
  std::vector<std::int64_t> block_of(static_cast<std::size_t>(n));
  std::vector<std::size_t> segment_of(static_cast<std::size_t>(n));
  for (std::int64_t t = 0, s = 0; t < n; ++t) {
    while (s + 1 < static_cast<std::int64_t>(starts.size()) && starts[static_cast<std::size_t>(s) + 1] <= t) ++s;
    const std::int64_t rel = t - starts[static_cast<std::size_t>(s)];
    block_of[static_cast<std::size_t>(t)] = rule.block > 0 ? rel / rule.block : rel;
    segment_of[static_cast<std::size_t>(t)] = static_cast<std::size_t>(s);
  }
  constexpr std::int64_t kNone = -1;
  std::vector<std::int64_t> first(starts.size()), last(starts.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) {
      auto flat = [&](std::int64_t t) { return static_cast<std::size_t>((o * n + t) * inner + in); };
      std::fill(first.begin(), first.end(), kNone);
      std::fill(last.begin(), last.end(), kNone);
      for (std::int64_t t = 0; t < n; ++t) {
        if (!seeds[flat(t)]) continue;
        const std::size_t s = segment_of[static_cast<std::size_t>(t)];
        const std::int64_t b = block_of[static_cast<std::size_t>(t)];
        if (first[s] == kNone) first[s] = b;
        last[s] = b;
      }
      for (std::int64_t t = 0; t < n; ++t) {
        const std::size_t s = segment_of[static_cast<std::size_t>(t)];
        if (first[s] == kNone) continue;
        const std::int64_t b = block_of[static_cast<std::size_t>(t)];
        bool ok = false;
        switch (rule.direction) {
          case SpreadRule::Direction::forward: ok = b >= first[s]; break;
          case SpreadRule::Direction::backward: ok = b <= last[s]; break;
          case SpreadRule::Direction::both: ok = true; break;
        }
        if (ok) allowed[flat(t)] = 1;
      }
    }
  }
  return allowed;
}

}  // namespace kgate
