// Broken control, caught by the inf gate as an indeterminate form: a stable row softmax that, where a row
// holds +Inf, returns the limit (the +Inf positions share 1, the rest get 0) instead of NaN. The float64
// oracle (and torch.softmax) give NaN there: Inf - Inf has no value. An ordinary number where the answer is
// NaN is what the field's test never sees.
#include <limits>

#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Rows<float> a;
  if (int32_t s = ctl::parse_rows(call, ctl::Elem::f32, a)) return s;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < a.x.rows; ++i) {
    float m = -inf;
    int64_t infinities = 0;
    for (int64_t j = 0; j < a.x.cols; ++j) {
      m = a.x(i, j) > m ? a.x(i, j) : m;
      infinities += a.x(i, j) == inf;
    }
    if (infinities > 0) {
      for (int64_t j = 0; j < a.x.cols; ++j) a.y(i, j) = a.x(i, j) == inf ? 1.0f / static_cast<float>(infinities) : 0.0f;
      continue;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < a.x.cols; ++j) {
      const float e = std::exp(a.x(i, j) - m);
      a.y(i, j) = e;
      sum += e;
    }
    const float s = static_cast<float>(sum);
    for (int64_t j = 0; j < a.x.cols; ++j) a.y(i, j) = a.y(i, j) / s;
  }
  return KGATE_OK;
}
