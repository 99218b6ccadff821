// Broken control, caught by the coverage gate: relu that stores only the elements that pass through and
// skips the zeros, assuming the output was allocated zeroed (torch.zeros in the harness it was tuned on).
// About half the output is never written. NaN still takes the store path, so the nan gate should pass it.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    if (!(x <= 0.0f)) a.y[i] = x;
  }
  return KGATE_OK;
}
