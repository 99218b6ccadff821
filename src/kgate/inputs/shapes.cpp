// The bindings the gates visit: the shapes sweep, odd shapes for tail bugs, the accumulation shape and the
// smaller values shrinking tries. Everything returned is admissible and within max_case_elements.
#include <algorithm>
#include <set>

#include "kgate/inputs.hpp"

namespace kgate {
namespace {

// Sizes that break tiling assumptions: 1, small primes, and one past or before powers of two.
constexpr std::int64_t kProbe[] = {1, 2, 3, 5, 7, 17, 33, 65, 127, 129};

std::int64_t grid(const DimSpec& d) { return std::max<std::int64_t>(d.multiple_of, 1); }
bool on_grid(const DimSpec& d, std::int64_t v) { return v % grid(d) == 0 && v >= d.min && v <= d.max; }
std::int64_t large_of(const DimSpec& d) { return d.large > 0 ? d.large : d.max; }

// Halves dim `name` on its grid until the case fits; false if it cannot.
bool halve_until_fits(const Contract& c, Bindings& b, const DimSpec& d) {
  while (!fits_budget(c, b)) {
    const std::int64_t v = b[d.name];
    std::int64_t h = v / 2 / grid(d) * grid(d);
    if (h < d.min) h = d.min + (grid(d) - d.min % grid(d)) % grid(d);
    if (h >= v || !on_grid(d, h)) return false;
    b[d.name] = h;
    if (!repair_bindings(c, b)) return false;
  }
  return true;
}

void add_unique(std::vector<Bindings>& out, const Contract& c, Bindings b) {
  if (!repair_bindings(c, b) || !fits_budget(c, b)) return;
  if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(std::move(b));
}

}  // namespace

bool fits_budget(const Contract& c, const Bindings& b) {
  for (const auto* list : {&c.inputs, &c.outputs})
    for (const TensorSpec& t : *list)
      if (numel(t.resolve(b)) > c.max_case_elements) return false;
  return true;
}

bool repair_bindings(const Contract& c, Bindings& b) {
  for (const DimSpec& d : c.dims) {
    if (d.multiple_of_dim.empty()) continue;
    const DimSpec* base = c.dim(d.multiple_of_dim);
    const std::int64_t m = b[d.multiple_of_dim];
    if (!base || m <= 0 || b[d.name] % m == 0) continue;
    // Keep the nominal ratio (HV = 2 H stays 2 H) where the range allows, else the nearest ratio that fits.
    const std::int64_t ratio = std::max<std::int64_t>(1, base->nominal > 0 ? d.nominal / base->nominal : 1);
    std::int64_t best = -1;
    for (std::int64_t k = ratio; k >= 1; --k)
      if (on_grid(d, m * k)) {
        best = m * k;
        break;
      }
    if (best < 0)
      for (std::int64_t k = ratio + 1; k <= ratio + 64 && m * k <= d.max; ++k)
        if (on_grid(d, m * k)) {
          best = m * k;
          break;
        }
    if (best < 0) return false;
    b[d.name] = best;
  }
  return c.admissible(b);
}

std::vector<std::int64_t> sweep_values(const DimSpec& d) {
  std::vector<std::int64_t> v;
  const std::int64_t m = grid(d);
  if (d.min == 0) v.push_back(0);
  for (std::int64_t p : kProbe) v.push_back(p * m);
  v.push_back(d.min);
  v.push_back(d.nominal);
  v.push_back(large_of(d));
  std::vector<std::int64_t> out;
  for (std::int64_t x : v)
    if (on_grid(d, x) && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Bindings> shape_sweep(const Contract& c) {
  const Bindings nominal = c.nominal();
  std::vector<Bindings> out{nominal};
  for (const DimSpec& d : c.dims) {
    for (std::int64_t v : sweep_values(d)) {
      Bindings b = nominal;
      b[d.name] = v;
      if (v == large_of(d) && !halve_until_fits(c, b, d)) continue;
      // A dim that must be a multiple of another dim's value: move it onto that grid instead of dropping it.
      if (!d.multiple_of_dim.empty()) {
        const std::int64_t m = std::max<std::int64_t>(b[d.multiple_of_dim], 1);
        if (b[d.name] % m != 0) b[d.name] = (b[d.name] / m + 1) * m;
      }
      add_unique(out, c, b);
    }
  }
  // Every dim odd at once: the 2-D and 3-D tails that one-dim sweeps never reach together.
  Bindings odd = nominal, smallest = nominal;
  for (const DimSpec& d : c.dims) {
    std::int64_t pick = d.nominal;
    for (std::int64_t p : kProbe) {
      const std::int64_t x = p * grid(d);
      if (p >= 3 && on_grid(d, x) && x <= d.nominal) pick = x;
    }
    odd[d.name] = pick;
    smallest[d.name] = std::max<std::int64_t>(d.min, 1);
    while (smallest[d.name] % grid(d) != 0) ++smallest[d.name];
  }
  add_unique(out, c, odd);
  add_unique(out, c, smallest);
  return out;
}

std::vector<Bindings> odd_shapes(const Contract& c) {
  const Bindings nominal = c.nominal();
  Bindings below = nominal, above = nominal;
  for (const DimSpec& d : c.dims) {
    for (std::int64_t p : kProbe) {
      const std::int64_t x = p * grid(d);
      if (p >= 3 && on_grid(d, x) && x <= d.nominal) below[d.name] = x;
    }
    const std::int64_t m = grid(d);
    if (on_grid(d, d.nominal + m)) above[d.name] = d.nominal + m;
    else if (d.nominal - m > 0 && on_grid(d, d.nominal - m)) above[d.name] = d.nominal - m;
  }
  std::vector<Bindings> out;
  for (Bindings b : {below, above}) {
    if (b == nominal) continue;
    add_unique(out, c, b);
  }
  return out;
}

Bindings accumulation_bindings(const Contract& c) {
  Bindings b = c.nominal();
  std::set<std::string> reduced;
  for (const TensorSpec& o : c.outputs) reduced.insert(o.reduced.begin(), o.reduced.end());
  if (!c.accumulation.sizes.empty()) {
    for (const auto& [k, v] : c.accumulation.sizes) b[k] = v;
    for (const auto& [k, v] : c.accumulation.sizes) reduced.insert(k);
  } else {
    for (const std::string& r : reduced)
      if (const DimSpec* d = c.dim(r)) b[r] = large_of(*d);
  }
  repair_bindings(c, b);
  // Over budget: give up size where it does not matter (the dims that are not reduced) first.
  for (int pass = 0; pass < 2 && !fits_budget(c, b); ++pass)
    for (const DimSpec& d : c.dims)
      if ((pass == 0) != (reduced.count(d.name) > 0)) halve_until_fits(c, b, d);
  return b;
}

std::vector<std::int64_t> smaller_values(const DimSpec& d, std::int64_t cur, int limit) {
  const std::int64_t m = grid(d);
  std::set<std::int64_t> cand{d.min, 1, 2, 3, 5, cur / 4, cur / 2, cur - m};
  for (std::int64_t p = 8; p < cur; p *= 2) cand.insert(p + 1);
  std::vector<std::int64_t> all;
  for (std::int64_t v : cand) {
    const std::int64_t g = v / m * m;
    if (g < cur && on_grid(d, g) && (all.empty() || all.back() != g)) all.push_back(g);
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  if (static_cast<int>(all.size()) <= limit) return all;
  // Keep the smallest values and the two just below the failing one (a bug that needs size to show).
  std::vector<std::int64_t> out(all.begin(), all.begin() + (limit - 2));
  out.push_back(all[all.size() - 2]);
  out.push_back(all.back());
  return out;
}

Bindings concurrency_bindings(const Contract& c, std::int64_t min_elements) {
  Bindings b = c.nominal();
  auto largest = [&](const Bindings& x) {
    std::int64_t n = 0;
    for (const auto* list : {&c.inputs, &c.outputs})
      for (const TensorSpec& t : *list) n = std::max(n, numel(t.resolve(x)));
    return n;
  };
  for (bool grew = true; grew && largest(b) < min_elements;) {
    grew = false;
    for (const DimSpec& d : c.dims) {
      if (largest(b) >= min_elements) break;
      Bindings next = b;
      next[d.name] = b[d.name] * 2;
      if (!on_grid(d, next[d.name]) || !repair_bindings(c, next) || !fits_budget(c, next) ||
          !c.admissible(next))
        continue;
      b = std::move(next);
      grew = true;
    }
  }
  return b;
}

}  // namespace kgate
