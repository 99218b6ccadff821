// Float64 oracle of the total sum of an M x N matrix (rank-0 output). Non-finite values follow IEEE
// addition: any NaN, or +Inf and -Inf together, give NaN.
#include "ops.hpp"

KGATE_CONTROL_ABI_VERSION

extern "C" KGATE_EXPORT int32_t kgate_oracle(const kgate_call* call) {
  ctl::Total<double> a;
  if (int32_t s = ctl::parse_total(call, ctl::Elem::f64, a)) return s;
  double sum = 0.0;
  for (int64_t i = 0; i < a.x.rows; ++i)
    for (int64_t j = 0; j < a.x.cols; ++j) sum += a.x(i, j);
  *a.y = sum;
  return KGATE_OK;
}
