// Correct control: silu in f32, y = x / (1 + exp(-x)). No gate may flag it.
// Honours any stride and base alignment, writes each output element once, and lets NaN and Inf through
// the same formula as the float64 oracle (silu(+Inf) = +Inf, silu(-Inf) = NaN).
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<float, float> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::f32, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = a.x[i];
    a.y[i] = x / (1.0f + std::exp(-x));
  }
  return KGATE_OK;
}
