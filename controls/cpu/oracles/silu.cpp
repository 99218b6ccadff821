// Float64 oracle of silu: y = x / (1 + exp(-x)). Non-finite values follow IEEE arithmetic through this
// formula, so silu(-Inf) = -Inf / Inf = NaN: that, not the limit 0, is what the contract promises.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  ctl::Unary<double, double> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f64, ctl::Elem::f64, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) a.y[i] = a.x[i] / (1.0 + std::exp(-a.x[i]));
  return KGATE_OK;
}
