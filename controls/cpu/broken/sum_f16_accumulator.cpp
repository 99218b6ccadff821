// Broken control, caught by the accumulation gate: the total of an M x N matrix kept in an fp16-precision
// running sum (each partial sum rounded to 11 significant bits, as a half accumulator would), while the
// contract promises f32. At the accumulation gate's M*N constant ones the sum stalls at 2048; judged as a
// reduction over M*N terms, the rigorous f32 bound is far tighter than that.
#include <cmath>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

namespace {
// Rounds to 11 significant bits (fp16's precision; range is not the point here), ties to even.
float to_half_precision(float v) {
  if (!std::isfinite(v) || v == 0.0f) return v;
  int e;
  std::frexp(v, &e);
  const float scale = std::ldexp(1.0f, 11 - e);
  return std::nearbyint(v * scale) / scale;
}
}  // namespace

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Total<float> a;
  if (int32_t s = ctl::parse_total(call, ctl::Elem::f32, a)) return s;
  float sum = 0.0f;
  for (int64_t i = 0; i < a.x.rows; ++i)
    for (int64_t j = 0; j < a.x.cols; ++j) sum = to_half_precision(sum + a.x(i, j));
  *a.y = sum;
  return KGATE_OK;
}
