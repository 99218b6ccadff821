// Broken control, caught by the bounds gate: silu in vectors of eight whose last vector is stored whole,
// so when N is not a multiple of 8 up to seven elements past the end of y are overwritten (and as many
// read past the end of x). Every element inside y is right: only the guard zone behind it shows the harm.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i0 = 0; i0 < a.x.n; i0 += 8)
    for (int64_t i = i0; i < i0 + 8; ++i) {  // no "i < n": the tail vector runs to its end
      const float x = a.x[i];
      a.y[i] = x / (1.0f + std::exp(-x));
    }
  return KGATE_OK;
}
