// Broken control, caught by the inf gate: silu on bf16 whose store converts with saturation (as
// cvt.rn.satfinite and "safe" fp8/bf16 casts do), so +Inf and any result rounding past the largest bf16
// come out as +-3.39e38 instead of Inf. NaN is kept, so the nan gate should pass it.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {

uint16_t f32_to_bf16_satfinite(float f) {
  const uint16_t b = ctl::f32_to_bf16(f);
  if ((b & 0x7fffu) == 0x7f80u) return static_cast<uint16_t>((b & 0x8000u) | 0x7f7fu);  // Inf -> +-max
  return b;
}

}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<uint16_t, uint16_t> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::bf16, ctl::Elem::bf16, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = ctl::bf16_to_f32(a.x[i]);
    a.y[i] = f32_to_bf16_satfinite(x / (1.0f + std::exp(-x)));
  }
  return KGATE_OK;
}
