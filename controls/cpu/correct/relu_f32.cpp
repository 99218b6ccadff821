// Correct control: relu in f32. No gate may flag it. The test is written as "x < 0" so that NaN, for
// which every comparison is false, takes the pass-through branch and stays NaN.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    a.y[i] = x < 0.0f ? 0.0f : x;
  }
  return KGATE_OK;
}
