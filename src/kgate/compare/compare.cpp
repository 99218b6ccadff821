// Bitwise, tolerance and non-finite pattern comparisons. Each walks the arrays once, decoding the candidate's
// elements a block at a time, and keeps only the first offending element of the most serious kind, the counts
// and the worst ratio.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kgate/compare.hpp"
#include "kgate/parallel.hpp"

namespace kgate {
namespace {

constexpr std::int64_t kBlock = 2048;
constexpr double kInf = std::numeric_limits<double>::infinity();

// One chunk's part of a comparison: its counts and first offence in `c`, and what the worst ratio needs to be
// merged in chunk order exactly as one serial pass would find it (note_ratio's rule: the first ratio seen is
// kept, then only a strictly larger one replaces it; a NaN ratio therefore wins only as the very first).
struct Partial {
  Comparison c;
  bool has_first = false;
  double first_ratio = 0.0;
  std::int64_t first_at = -1;
  bool has_max = false;  // the first largest non-NaN ratio
  double max_ratio = 0.0;
  std::int64_t max_at = -1;
};

// A violation_only kind ranks below every other: a comparison reports the first element of the most serious
// kind present.
int rank(Mismatch m) { return violation_only(m) ? 0 : 1; }

// Whether an offence of kind `kind` replaces the one `c` reports (which was found at an earlier element).
bool outranks(const Comparison& c, Mismatch kind) { return c.ok || rank(kind) > rank(c.kind); }

void note(Comparison& c, std::int64_t i, Mismatch kind) {
  if (outranks(c, kind)) {
    c.ok = false;
    c.first = i;
    c.kind = kind;
  }
  ++c.bad;
  ++c.by_kind[static_cast<std::size_t>(kind)];
}

void note_ratio(Partial& p, std::int64_t i, double ratio) {
  if (!p.has_first) {
    p.has_first = true;
    p.first_ratio = ratio;
    p.first_at = i;
  }
  if (!std::isnan(ratio) && (!p.has_max || ratio > p.max_ratio)) {
    p.has_max = true;
    p.max_ratio = ratio;
    p.max_at = i;
  }
}

// Calls judge(part, i, got_i) for every element, got decoded in blocks, the array cut into fixed chunks that
// run on the host's threads (parallel.hpp); the chunks' parts merged in order into `out`: the same result as
// one pass from the first element to the last, bit for bit, whatever the thread count.
template <class Judge>
void for_each_decoded(const HostArray& got, Comparison& out, Judge&& judge) {
  const std::int64_t n = got.numel();
  std::vector<Partial> parts(static_cast<std::size_t>(chunk_count(n)));
  const std::size_t es = size_of(got.dtype());
  parallel_chunks(n, [&](std::int64_t chunk, std::int64_t begin, std::int64_t end) {
    Partial& part = parts[static_cast<std::size_t>(chunk)];
    std::array<double, kBlock> buf;
    for (std::int64_t start = begin; start < end; start += kBlock) {
      const std::int64_t m = std::min(kBlock, end - start);
      decode_elements(got.dtype(), got.data() + start * static_cast<std::int64_t>(es), m, buf.data());
      for (std::int64_t k = 0; k < m; ++k) judge(part, start + k, buf[static_cast<std::size_t>(k)]);
    }
  });
  const Partial* first = nullptr;
  for (const Partial& p : parts) {
    if (!p.c.ok && outranks(out, p.c.kind)) {
      out.ok = false;
      out.first = p.c.first;
      out.kind = p.c.kind;
    }
    out.bad += p.c.bad;
    for (std::size_t k = 0; k < kMismatchKinds; ++k) out.by_kind[k] += p.c.by_kind[k];
    out.judged += p.c.judged;
    for (std::size_t e = 0; e < kExcuseKinds; ++e) out.excused[e] += p.c.excused[e];
    if (!first && p.has_first) first = &p;
  }
  if (!first) return;
  if (std::isnan(first->first_ratio)) {
    out.max_ratio = first->first_ratio;
    out.worst = first->first_at;
    return;
  }
  for (const Partial& p : parts) {
    if (p.has_max && (out.worst < 0 || p.max_ratio > out.max_ratio)) {
      out.max_ratio = p.max_ratio;
      out.worst = p.max_at;
    }
  }
}

// Whether a non-finite kernel value g is of the class a reference run's nonfinite byte rc records there
// (ReferenceRunResult::nonfinite: 1 NaN, 2 +Inf, 3 -Inf; 0 where the run is finite).
bool same_nonfinite_class(std::uint8_t rc, double g) { return rc != 0 && rc == (std::isnan(g) ? 1 : std::signbit(g) ? 3 : 2); }

bool same_form(const HostArray& got, const Reference& ref, Comparison& c) {
  if (got.dtype() == ref.dtype && got.shape() == ref.shape) return true;
  c.ok = false;
  c.kind = Mismatch::shape;
  c.max_ratio = kInf;
  return false;
}

}  // namespace

const char* to_string(Mismatch m) {
  switch (m) {
    case Mismatch::none: return "none";
    case Mismatch::bits: return "bits differ";
    case Mismatch::value: return "error beyond the bound";
    case Mismatch::nan_masked: return "NaN masked";
    case Mismatch::inf_mismatch: return "Inf not reproduced";
    case Mismatch::unexpected_nonfinite: return "unexpected non-finite value";
    case Mismatch::indeterminate: return "indeterminate form";
    case Mismatch::shape: return "dtype or shape differs";
    case Mismatch::spread: return "non-finite value past the oracle's spread";
  }
  return "?";
}

bool violation_only(Mismatch m) { return m == Mismatch::indeterminate || m == Mismatch::spread; }

const char* to_string(Excuse e) {
  switch (e) {
    case Excuse::spread: return "non-finite where the contract's spread rule allows it";
    case Excuse::near_overflow: return "oracle between max/2 and 2 max of the dtype (rounding order decides)";
    case Excuse::order_nonfinite: return "oracle NaN under injected Inf and the kernel non-finite too (evaluation order)";
    case Excuse::reference_nonfinite: return "the working-precision reference run is non-finite there too";
    case Excuse::structural_zero: return "oracle NaN only through a structural zero of the source (0 * NaN, 0 * Inf)";
    case Excuse::inf_sign_undetermined:
      return "sign of Inf not determined within tolerance (the oracle's sign flips with the finite inputs moved by the "
             "output's rtol)";
  }
  return "?";
}

Comparison compare_bitwise(const HostArray& expected, const HostArray& got) {
  Comparison c;
  if (expected.dtype() != got.dtype() || expected.shape() != got.shape()) {
    c.ok = false;
    c.kind = Mismatch::shape;
    return c;
  }
  c.judged = got.numel();
  const std::size_t es = size_of(got.dtype());
  const std::byte* a = expected.data();
  const std::byte* b = got.data();
  // memcmp over large blocks first: the common case (equal) costs one pass at memory speed.
  constexpr std::size_t kChunk = 1 << 16;
  for (std::size_t off = 0; off < got.nbytes(); off += kChunk) {
    const std::size_t len = std::min(kChunk, got.nbytes() - off);
    if (std::memcmp(a + off, b + off, len) == 0) continue;
    for (std::size_t e = off / es; e < (off + len) / es; ++e)
      if (std::memcmp(a + e * es, b + e * es, es) != 0) note(c, static_cast<std::int64_t>(e), Mismatch::bits);
  }
  return c;
}

Comparison compare_within(const HostArray& got, const Reference& ref, const Tolerance& tol,
                          std::span<const std::uint8_t> reference_nonfinite) {
  Comparison c;
  if (!same_form(got, ref, c)) return c;
  c.judged = got.numel();
  if (!is_float(got.dtype())) {
    for_each_decoded(got, c, [&](Partial& part, std::int64_t i, double g) {
      Comparison& c = part.c;
      if (g != ref.rounded[static_cast<std::size_t>(i)]) {
        note(c, i, Mismatch::value);
        note_ratio(part, i, kInf);
      }
    });
    return c;
  }
  const double max_finite = info(got.dtype()).max_finite;
  for_each_decoded(got, c, [&](Partial& part, std::int64_t i, double g) {
    Comparison& c = part.c;
    const double e = ref.exact[static_cast<std::size_t>(i)];
    const double r = ref.rounded[static_cast<std::size_t>(i)];
    if (std::isnan(e)) {
      if (!std::isnan(g)) {
        note(c, i, Mismatch::nan_masked);
        note_ratio(part, i, kInf);
      }
      return;
    }
    const double b = tol.bound(e, ref.rms);
    if (std::isinf(r)) {
      // The oracle overflows the output dtype. A finite result within the bound of a finite oracle value
      // just past max is still a correct rounding of a slightly different computation.
      if (g == r) return;
      if (std::isfinite(e) && std::isfinite(g) && std::fabs(g - e) <= b) {
        note_ratio(part, i, std::fabs(g - e) / b);
        return;
      }
      note(c, i, Mismatch::inf_mismatch);
      note_ratio(part, i, kInf);
      return;
    }
    if (!std::isfinite(g)) {
      // Overflow is acceptable only where the oracle, moved by the bound, reaches past max with that sign.
      if (std::isinf(g) && std::signbit(g) == std::signbit(e) && std::fabs(e) + b > max_finite) return;
      if (!reference_nonfinite.empty() && same_nonfinite_class(reference_nonfinite[static_cast<std::size_t>(i)], g)) {
        ++c.excused[static_cast<std::size_t>(Excuse::reference_nonfinite)];
        return;
      }
      note(c, i, Mismatch::unexpected_nonfinite);
      note_ratio(part, i, kInf);
      return;
    }
    const double err = std::fabs(g - r);
    const double ratio = b > 0 ? err / b : (err == 0 ? 0.0 : kInf);
    note_ratio(part, i, ratio);
    if (err > b) note(c, i, Mismatch::value);
  });
  return c;
}

Comparison compare_allclose(const HostArray& got, const Reference& ref, double rtol, double atol) {
  Comparison c;
  if (!same_form(got, ref, c)) return c;
  c.judged = got.numel();
  for_each_decoded(got, c, [&](Partial& part, std::int64_t i, double g) {
    Comparison& c = part.c;
    const double r = ref.rounded[static_cast<std::size_t>(i)];
    if (std::isnan(g) || std::isnan(r)) {  // equal_nan=False: NaN is never close, not even to NaN
      note(c, i, std::isnan(r) ? Mismatch::nan_masked : Mismatch::unexpected_nonfinite);
      return;
    }
    if (std::isinf(g) || std::isinf(r)) {  // isclose: infinities are close only to themselves
      if (g != r) note(c, i, std::isinf(r) ? Mismatch::inf_mismatch : Mismatch::unexpected_nonfinite);
      return;
    }
    const double bound = atol + rtol * std::fabs(r);
    const double err = std::fabs(g - r);
    note_ratio(part, i, bound > 0 ? err / bound : (err == 0 ? 0.0 : kInf));
    if (err > bound) note(c, i, Mismatch::value);
  });
  return c;
}

std::vector<std::uint8_t> nonfinite_seeds(const Reference& ref, NonfiniteMode mode) {
  std::vector<std::uint8_t> seeds(ref.exact.size(), 0);
  const double half_max = info(ref.dtype).max_finite / 2;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const double r = ref.rounded[i];
    seeds[i] = !std::isfinite(r) || (mode == NonfiniteMode::inf && std::fabs(ref.exact[i]) >= half_max);
  }
  return seeds;
}

Comparison check_nonfinite(const HostArray& got, const Reference& ref, std::span<const std::uint8_t> allowed,
                           NonfiniteMode mode, bool inf_may_become_nan, std::span<const std::uint8_t> structural,
                           std::span<const std::uint8_t> sign_free, std::span<const std::uint8_t> reference_nonfinite) {
  Comparison c;
  if (!same_form(got, ref, c)) return c;
  if (!is_float(got.dtype())) return c;  // integers cannot carry NaN or Inf
  const double max_finite = info(got.dtype()).max_finite;
  auto is_allowed = [&](std::int64_t i) { return !allowed.empty() && allowed[static_cast<std::size_t>(i)] != 0; };
  // The working-precision reference run is non-finite here, in the kernel's class (NaN, +Inf, -Inf).
  auto reference_shares = [&](std::int64_t i, double g) {
    return !reference_nonfinite.empty() && same_nonfinite_class(reference_nonfinite[static_cast<std::size_t>(i)], g);
  };
  for_each_decoded(got, c, [&](Partial& part, std::int64_t i, double g) {
    Comparison& c = part.c;
    const double e = ref.exact[static_cast<std::size_t>(i)];
    const double r = ref.rounded[static_cast<std::size_t>(i)];
    if (std::isnan(e)) {
      ++c.judged;
      // A dense evaluation carries the planted value into this element only through a zero every draw of
      // the source holds (0 * NaN); on the source's domain the operator has a finite value here, and a
      // kernel that skips the structural zeros returns it.
      if (std::isfinite(g) && !structural.empty() && structural[static_cast<std::size_t>(i)]) {
        ++c.excused[static_cast<std::size_t>(Excuse::structural_zero)];
        return;
      }
      if (mode == NonfiniteMode::nan) {
        if (!std::isnan(g)) note(c, i, Mismatch::nan_masked);
        return;
      }
      // Under injected Inf the oracle's NaN comes from Inf - Inf, 0 * Inf or Inf / Inf: the operator has no
      // value there. Which non-finite value an evaluation gives depends on its order (a chunked sum meets
      // the infinities in another grouping and returns a signed Inf): excused and counted. A finite value
      // is an ordinary number where the true answer is NaN, the field's blind spot: its own class.
      if (std::isfinite(g)) {
        note(c, i, Mismatch::indeterminate);
      } else if (!std::isnan(g)) {
        ++c.excused[static_cast<std::size_t>(Excuse::order_nonfinite)];
      }
      return;
    }
    // Judged on the exact oracle value: between max and 2 max rounding order decides, so only beyond.
    if (mode == NonfiniteMode::inf && (std::isinf(e) || std::fabs(e) > 2 * max_finite)) {
      ++c.judged;
      const double want = std::signbit(e) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      if (g == want) return;
      if (std::isnan(g) && inf_may_become_nan) return;
      // The other Inf where the operator's sign hangs on a factor within rounding of zero (dv = beta dX with
      // beta = Inf and dX ~ 0): a kernel that rounds cannot be held to it.
      if (g == -want && !sign_free.empty() && sign_free[static_cast<std::size_t>(i)]) {
        ++c.excused[static_cast<std::size_t>(Excuse::inf_sign_undetermined)];
        return;
      }
      note(c, i, Mismatch::inf_mismatch);
      return;
    }
    if (std::isfinite(g)) {
      if (std::isfinite(r)) ++c.judged;
      return;
    }
    if (is_allowed(i)) {
      if (std::isfinite(r)) ++c.excused[static_cast<std::size_t>(Excuse::spread)];
      return;
    }
    // The kernel made a non-finite value the oracle does not have, outside the allowed spread: excused where
    // the working-precision reference run makes the same (the operator overflows at that precision).
    // Judged in nan mode where the rounded oracle is finite, in inf mode where |oracle| < max / 2.
    if (mode == NonfiniteMode::nan && !std::isfinite(r)) return;
    if (mode == NonfiniteMode::inf && std::fabs(e) >= max_finite / 2) {
      ++c.excused[static_cast<std::size_t>(Excuse::near_overflow)];
      return;
    }
    ++c.judged;
    if (reference_shares(i, g)) {
      ++c.excused[static_cast<std::size_t>(Excuse::reference_nonfinite)];
    } else {
      note(c, i, mode == NonfiniteMode::nan ? Mismatch::spread : Mismatch::unexpected_nonfinite);
    }
  });
  return c;
}

}  // namespace kgate
