// Broken control, caught by the oracle gate: silu whose exp is a fast 2^x approximation (exponent bits
// plus a cubic for the fraction), with a relative error near 1e-4, about 400 times what f32 allows.
// allclose(1e-2, 1e-2) accepts it; NaN, Inf and overflow still behave, so only the oracle gate should see it.
#include <limits>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {

float fast_exp(float x) {
  if (x != x) return x;
  const float t = x * 1.44269504f;  // log2(e)
  if (t >= 128.0f) return std::numeric_limits<float>::infinity();
  if (t <= -150.0f) return 0.0f;
  const float n = std::floor(t);
  const float f = t - n;
  // 2^f on [0, 1) by a cubic through the ends: the kind of polynomial "fast math" helpers ship.
  const float p = 1.0f + f * (0.6958f + f * (0.2251f + f * 0.0791f));
  return std::ldexp(p, static_cast<int>(n));
}

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    a.y[i] = x / (1.0f + fast_exp(-x));
  }
  return KGATE_OK;
}
