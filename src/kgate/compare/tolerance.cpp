// References and bounds: what a perfect kernel returns, and how far a correct one may stray from it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "kgate/compare.hpp"
#include "kgate/parallel.hpp"

namespace kgate {

Reference make_reference(const HostArray& oracle_output, DType output_dtype) {
  Reference r;
  r.dtype = output_dtype;
  r.shape = oracle_output.shape();
  const std::int64_t n = oracle_output.numel();
  r.exact.resize(static_cast<std::size_t>(n));
  r.rounded.resize(r.exact.size());
  // Decoding and rounding per element on the host's threads (fixed chunks; the largest magnitude is exact in
  // any order); the sum of squares stays one pass in index order, so rms has the same bits as ever.
  const std::size_t es = size_of(oracle_output.dtype());
  std::vector<double> chunk_max(static_cast<std::size_t>(chunk_count(n)), 0.0);
  parallel_chunks(n, [&](std::int64_t chunk, std::int64_t begin, std::int64_t end) {
    double* exact = r.exact.data() + begin;
    double* rounded = r.rounded.data() + begin;
    decode_elements(oracle_output.dtype(), oracle_output.data() + static_cast<std::size_t>(begin) * es, end - begin,
                    exact);
    double m = 0.0;
    for (std::int64_t i = 0; i < end - begin; ++i) {
      const double e = exact[i];
      if (output_dtype == DType::f64) {
        rounded[i] = e;
      } else if (output_dtype == DType::f32) {
        rounded[i] = static_cast<double>(static_cast<float>(e));
      } else {
        rounded[i] = round_to(e, output_dtype);
      }
      if (std::isfinite(e)) m = std::max(m, std::fabs(e));
    }
    chunk_max[static_cast<std::size_t>(chunk)] = m;
  });
  double sum_sq = 0.0, max_abs = 0.0;
  std::int64_t finite = 0;
  for (const double e : r.exact) {
    if (std::isfinite(e)) {
      sum_sq += e * e;
      ++finite;
    }
  }
  for (const double m : chunk_max) max_abs = std::max(max_abs, m);
  r.rms = finite > 0 ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0.0;
  r.max_abs = max_abs;
  return r;
}

double largest_finite_magnitude(const Reference& ref) {
  if (ref.max_abs >= 0) return ref.max_abs;
  double mag = 0.0;
  for (double x : ref.exact)
    if (std::isfinite(x)) mag = std::max(mag, std::fabs(x));
  return mag;
}

double reference_error(const HostArray& run, const Reference& ref) {
  if (run.shape() != ref.shape)
    throw std::invalid_argument(fmt::format("reference run output has shape {}; the oracle's is {}",
                                            shape_string(run.shape()), shape_string(ref.shape)));
  return reference_error(run.to_f64(), ref);
}

double reference_error(std::span<const double> v, const Reference& ref) {
  if (v.size() != ref.exact.size())
    throw std::invalid_argument(fmt::format("reference run output has {} elements; the oracle's has {}", v.size(),
                                            ref.exact.size()));
  double worst = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::isfinite(v[i]) && std::isfinite(ref.exact[i])) worst = std::max(worst, std::fabs(v[i] - ref.exact[i]));
  return worst;
}

double reference_term(double e_ref, const Reference& ref) {
  const double mag = largest_finite_magnitude(ref);
  const DTypeInfo& d = info(ref.dtype);
  return kRefFactor * e_ref + kRefFloorUlps * d.unit_roundoff * std::max(mag, d.is_float ? d.min_normal : 0.0);
}

std::int64_t reduction_size(const TensorSpec& output, const Bindings& b) {
  std::int64_t n = 1;
  for (const std::string& d : output.reduced) {
    auto it = b.find(d);
    if (it == b.end())
      throw std::invalid_argument(fmt::format("output {}: reduced dim {} is not bound", output.name, d));
    n *= std::max<std::int64_t>(it->second, 1);
  }
  return n;
}

Tolerance default_tolerance(const TensorSpec& out, DType working, std::int64_t n, double verify_scale) {
  const DTypeInfo& d = info(out.dtype);
  const DTypeInfo& w = info(working);
  Tolerance t;
  // A perfect kernel is within half an ulp of the oracle; 4 u_d leaves room for the last few roundings.
  t.rel = out.rtol.value_or(4.0 * d.unit_roundoff);
  // A reduction of N terms at precision w typically strays u_w sqrt(N) times the output's magnitude.
  t.abs_rms = out.atol_rms.value_or(8.0 * w.unit_roundoff * std::sqrt(static_cast<double>(std::max<std::int64_t>(n, 1))));
  t.abs = out.atol.value_or(d.is_float ? d.min_normal : 0.0);
  t.scale = out.tolerance_scale * verify_scale;
  return t;
}

Tolerance accumulation_tolerance(DType output, DType working, std::int64_t n, double verify_scale, DType operands,
                                 int operand_roundings) {
  const DTypeInfo& d = info(output);
  // gamma_k(u) = k u / (1 - k u) >= (1 + u)^k - 1; +Inf where k u >= 1 (no such bound).
  auto gamma = [](double k, double u) {
    const double ku = k * u;
    return ku >= 1.0 ? std::numeric_limits<double>::infinity() : ku / (1.0 - ku);
  };
  const double g_w = gamma(static_cast<double>(n + 4), info(working).unit_roundoff);
  // Each term carries r operand roundings and N + 4 working-precision ones, all of one sign on a term of one
  // sign: (1 + u_op)^r (1 + u_w)^(N+4) - 1 <= (1 + g_op)(1 + g_w) - 1 = g_op + g_w + g_op g_w. With r = 0 this
  // is g_w exactly, the bound for exact operands.
  const double g_op = operand_roundings > 0 ? gamma(operand_roundings, info(operands).unit_roundoff) : 0.0;
  Tolerance t;
  t.rel = std::isinf(g_w) || std::isinf(g_op) ? std::numeric_limits<double>::infinity()
                                               : g_w + g_op + g_op * g_w + 8.0 * d.unit_roundoff;
  t.abs = d.is_float ? d.min_normal : 0.0;
  t.scale = verify_scale;
  return t;
}

std::string describe(const Tolerance& t) {
  if (t.ref_term > 0)
    return fmt::format("{:.3g} * max({:.3g} |ref| + {:.3g} rms + {:.3g}, reference term {:.3g})", t.scale, t.rel,
                       t.abs_rms, t.abs, t.ref_term);
  return fmt::format("{:.3g} * ({:.3g} |ref| + {:.3g} rms + {:.3g})", t.scale, t.rel, t.abs_rms, t.abs);
}

}  // namespace kgate
