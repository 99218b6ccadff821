// Correct control: silu on bf16 tensors, computed in f32 and rounded to nearest even once at the store.
// No gate may flag it.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Unary<uint16_t, uint16_t> a;
  if (int32_t s = ctl::parse_unary(call, ctl::Elem::bf16, ctl::Elem::bf16, a)) return s;
  for (int64_t i = 0; i < a.x.n; ++i) {
    const float x = ctl::bf16_to_f32(a.x[i]);
    a.y[i] = ctl::f32_to_bf16(x / (1.0f + std::exp(-x)));
  }
  return KGATE_OK;
}
