// Broken control, caught by the oracle gate's magnitude sweep: row softmax as exp(x) / sum exp(x), without
// subtracting the row maximum. Exact enough at the contract's draws (|x| of a few units), but exp overflows
// f32 above about 88: the nominal draw scaled by 100 gives Inf / Inf = NaN where the true answer is finite.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_run(const kgate_call* call) {
  ctl::Rows<float> a;
  if (int32_t s = ctl::parse_rows(call, ctl::Elem::f32, a)) return s;
  for (int64_t i = 0; i < a.x.rows; ++i) {
    double sum = 0.0;  // a wide sum: the defect is the overflow of exp, not the accumulation
    for (int64_t j = 0; j < a.x.cols; ++j) {
      const float e = std::exp(a.x(i, j));
      a.y(i, j) = e;
      sum += e;
    }
    const float s = static_cast<float>(sum);
    for (int64_t j = 0; j < a.x.cols; ++j) a.y(i, j) = a.y(i, j) / s;
  }
  return KGATE_OK;
}
