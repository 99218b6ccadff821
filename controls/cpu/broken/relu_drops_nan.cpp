// Broken control, caught by the nan gate: relu written as "x > 0 ? x : 0". Every comparison with NaN is
// false, so a NaN input comes out as 0 and the poisoned value vanishes. Inf is still right (+Inf stays,
// -Inf gives 0, as the oracle says), so the inf gate should pass it.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    a.y[i] = x > 0.0f ? x : 0.0f;
  }
  return KGATE_OK;
}
