// Float64 oracle of relu: y = max(x, 0), with NaN propagating (as torch.relu does; C's fmax would drop it).
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  ctl::Unary<double, double> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f64, ctl::Elem::f64, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const double x = a.x[i];
    a.y[i] = std::isnan(x) ? x : (x > 0.0 ? x : 0.0);
  }
  return KGATE_OK;
}
