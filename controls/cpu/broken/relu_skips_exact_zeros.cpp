// Broken control, caught by the coverage gate: relu that skips the store where the input is exactly zero,
// relying on a zero-filled output (a "sparsity" shortcut). Every element of a random draw is written, so
// only inputs holding exact zeros (coverage's special-values case) leave the poison in place.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    if (x == 0.0f) continue;
    a.y[i] = x > 0.0f || x != x ? x : 0.0f;
  }
  return KGATE_OK;
}
