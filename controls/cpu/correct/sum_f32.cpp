// Correct control: the total of an M x N f32 matrix accumulated in f64 and rounded once. No gate may flag it.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Total<float> a;
  if (int32_t s = ctl::parse_total(call, ctl::Elem::f32, a)) return s;
  double sum = 0.0;
  for (int64_t i = 0; i < a.x.rows; ++i)
    for (int64_t j = 0; j < a.x.cols; ++j) sum += a.x(i, j);
  *a.y = static_cast<float>(sum);
  return KGATE_OK;
}
